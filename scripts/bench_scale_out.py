#!/usr/bin/env python
"""The front-end's overhead: the same load straight at the cluster and through a front-end appliance.

    .venv/bin/python scripts/bench_scale_out.py [--concurrency 1,4] [--requests 4] [--out bench-out/scale-out.json]

Starts a "cluster" (an appliance with the local engine), a `chroma run` vector server and a
front-end appliance with `engine.backend = "openai"`; then, per concurrency, runs the chat workload
directly against the cluster and through the front-end, alternately, in one run. Reports TTFT p50
and tokens/s of both and their ratios (front-end / cluster).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.bench import workloads  # noqa: E402
from appliance.bench.load import Target, run_load, summarise  # noqa: E402
from appliance.bench.report import machine  # noqa: E402
from appliance.bench.server import scale_out_env, start_chroma, start_server  # noqa: E402

BASE = {"APPLIANCE_ENGINE__N_CTX": "8192", "APPLIANCE_ENGINE__N_SEQ_MAX": "8"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--requests", type=int, default=4, help="Requests per user per run.")
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "scale-out.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        work = Path(tmp)
        cluster = start_server(work / "cluster", "--no-ui", env=BASE)
        chroma, chroma_url = start_chroma(work / "chroma" / "store")
        front = start_server(work / "front", "--no-ui", env={**BASE, **scale_out_env(cluster, chroma_url)})
        try:
            rows = measure(cluster, front, [int(c) for c in args.concurrency.split(",")], args.requests,
                           workloads.get(args.workload))
        finally:
            front.stop()
            cluster.stop()
            chroma.terminate()
    report(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"workload": args.workload, "requests_per_user": args.requests,
                                    "machine": machine(), "rows": rows}, indent=2))
    print(f"\nwritten: {args.out}")


def measure(cluster, front, levels: list[int], requests: int, workload) -> list[dict]:
    direct = Target("cluster", cluster.url + "/v1", "smollm2-135m", cluster.key)
    through = Target("front-end", front.url + "/v1", "smollm2-135m", front.key)
    run_load(direct, workload, 1, 1)  # warm both paths (first prompt, connection pools)
    run_load(through, workload, 1, 1)
    rows = []
    for c in levels:
        a = summarise(run_load(direct, workload, c, requests, seed=c))
        b = summarise(run_load(through, workload, c, requests, seed=c))
        rows.append({"concurrency": c, "cluster": a, "front_end": b,
                     "ttft_ratio": _ratio(b["ttft_p50_ms"], a["ttft_p50_ms"]),
                     "tok_s_ratio": _ratio(b["out_tok_s"], a["out_tok_s"]),
                     "ttft_overhead_ms": _diff(b["ttft_p50_ms"], a["ttft_p50_ms"])})
    return rows


def report(rows: list[dict]) -> None:
    print("| users | cluster TTFT p50 ms | front-end TTFT p50 ms | ratio | cluster tok/s | front-end tok/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        a, b = r["cluster"], r["front_end"]
        print(f"| {r['concurrency']} | {a['ttft_p50_ms']} | {b['ttft_p50_ms']} | {r['ttft_ratio']} | "
              f"{a['out_tok_s']} | {b['out_tok_s']} | {r['tok_s_ratio']} |")


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _diff(a, b) -> float | None:
    return round(a - b, 1) if a is not None and b is not None else None


if __name__ == "__main__":
    main()
