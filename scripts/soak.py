#!/usr/bin/env python
"""Soak a real server with mixed traffic, then check it is idle and its memory bounded.

    .venv/bin/python scripts/soak.py [--seconds 300] [--workers 6] [--out bench-out/soak.json]

Starts `appliance serve` (embedded model, sample guide) in a temporary folder with a short queue so
bursts overflow it, runs `appliance.bench.soak`, prints a table and writes the numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.bench.server import start_server  # noqa: E402
from appliance.bench.soak import soak  # noqa: E402

SERVER_ENV = {"APPLIANCE_ENGINE__N_CTX": "4096", "APPLIANCE_ENGINE__N_SEQ_MAX": "4",
              "APPLIANCE_ENGINE__MAX_QUEUE": "6"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "soak.json")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="appliance-soak-") as tmp, \
            start_server(Path(tmp), env=SERVER_ENV) as server:
        summary = soak(server.url, server.key, server.proc.pid, opts.seconds, workers=opts.workers).summary()
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(summary, indent=2))
    print(f"{'outcome':<28}{'count':>8}")
    for name, n in summary["outcomes"].items():
        print(f"{name:<28}{n:>8}")
    print(f"\n{summary['requests']} requests in {summary['seconds']} s; 5xx other than 503: "
          f"{summary['server_errors']}; RSS {summary['rss_start_mb']} → peak {summary['rss_peak_mb']} → "
          f"end {summary['rss_end_mb']} MB; after: {summary['idle_after']}\nwritten: {opts.out}")


if __name__ == "__main__":
    main()
