"""Real appliance servers for API and browser tests (the same launcher the benchmark uses)."""

from __future__ import annotations

from pathlib import Path

from appliance.bench.server import LocalServer
from appliance.bench.server import start_server as _start

Server = LocalServer
# The embedded model quotes by default (no engine work); tests about generation (Stop, busy,
# batching) ask for written answers.
GENERATE = {"APPLIANCE_CHAT__ANSWER_STYLE": "generate"}
HYBRID = {"APPLIANCE_CHAT__ANSWER_STYLE": "hybrid"}  # a generated lead-in (64 tokens at most), then quotes


def start_server(tmp: Path, *extra: str, env: dict | None = None, timeout: float = 240,
                 data: Path | None = None, port: int | None = None) -> LocalServer:
    """A server with a small engine (4 sequences, 4096 cells) in `tmp` (data in `tmp/data` unless given)."""
    base = {"APPLIANCE_ENGINE__N_CTX": "4096", "APPLIANCE_ENGINE__N_SEQ_MAX": "4"}
    return _start(tmp, *extra, env={**base, **(env or {})}, timeout=timeout, data=data, port=port)
