"""Real appliance servers for API and browser tests (the same launcher the benchmark uses)."""

from __future__ import annotations

from pathlib import Path

import httpx

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


def metrics(server: LocalServer, timeout: float = 60) -> dict[str, float]:
    """The server's /metrics samples by name as written there (`appliance_running`,
    `appliance_requests_total{reason="stop"}`). A long timeout: the browser tests read it while
    Chromium and the engine hold CI's two cores."""
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {server.key}"}, timeout=timeout).text
    samples = (line.rsplit(None, 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {name: float(value) for name, value in samples}
