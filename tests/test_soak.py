"""Soak (RELIABILITY.md): mixed traffic against one real server for APPLIANCE_SOAK_SECONDS (90 in
the suite; `scripts/soak.py --seconds 300` for the figures). No 5xx but 503, the engine back to idle
and healthy after, resident memory growth bounded."""

from __future__ import annotations

import os

from appliance.bench.soak import soak

from .server_helpers import start_server


def test_soak_mixed_load_ends_idle_with_bounded_memory(tmp_path):
    seconds = float(os.environ.get("APPLIANCE_SOAK_SECONDS", "90"))
    with start_server(tmp_path, env={"APPLIANCE_ENGINE__MAX_QUEUE": "6"}) as server:
        result = soak(server.url, server.key, server.proc.pid, seconds, workers=6, burst_every=20)
        summary = result.summary()
    assert not result.server_errors, result.server_errors
    kinds = {k.split()[0] for k in summary["outcomes"]}
    assert {"rag-stream", "plain", "embed", "disconnect", "stop-string", "burst"} <= kinds, summary["outcomes"]
    assert summary["outcomes"].get("rag-stream 200", 0) > 0 and summary["outcomes"].get("burst 503", 0) > 0
    assert not any("error" in k for k in summary["outcomes"]), summary["outcomes"]  # no dropped connections
    assert summary["idle_after"]["idle"] and summary["idle_after"]["healthy"], summary["idle_after"]
    # Memory: the first samples include model and cache warm-up; growth after that stays small.
    rss = [mb for _, mb in result.rss_mb]
    warm = rss[min(len(rss) - 1, 15)]
    assert rss[-1] - warm < 150, rss
