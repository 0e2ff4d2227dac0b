#!/usr/bin/env python
"""The front-end's overhead: the same load straight at the cluster and through a front-end appliance.

    .venv/bin/python scripts/bench_scale_out.py [--concurrency 1,4] [--requests 4] [--rounds 2]
        [--cluster-url http://127.0.0.1:8080 --cluster-model NAME]     # llama-server or vLLM as the cluster

Starts a "cluster" (an appliance with the local engine), a `chroma run` vector server and a
front-end appliance with `engine.backend = "openai"`; then, per concurrency, runs the chat workload
directly against the cluster and through the front-end, alternately, in one run, each run with
prompts of its own (no prefix-cache hits across the two paths). Reports TTFT p50
and tokens/s of both and their ratios (front-end / cluster).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.bench import workloads  # noqa: E402
from appliance.bench.load import RunResult, Target, run_load, summarise  # noqa: E402
from appliance.bench.report import machine  # noqa: E402
from appliance.bench.server import scale_out_env, start_chroma, start_server  # noqa: E402

BASE = {"APPLIANCE_ENGINE__N_CTX": "8192", "APPLIANCE_ENGINE__N_SEQ_MAX": "8"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--requests", type=int, default=4, help="Requests per user per run.")
    ap.add_argument("--workload", default="chat")
    ap.add_argument("--rounds", type=int, default=2, help="Runs per path and concurrency, order alternating.")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "scale-out.json")
    ap.add_argument("--cluster-url", help="An OpenAI-compatible server already running (llama-server, vLLM) "
                                          "to use as the cluster instead of a second appliance.")
    ap.add_argument("--cluster-model", default="smollm2-135m", help="The model id to ask the cluster for.")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="scale-out-") as tmp:
        work = Path(tmp)
        cluster = SimpleNamespace(url=args.cluster_url.rstrip("/").removesuffix("/v1"), key="", stop=lambda: None) \
            if args.cluster_url else start_server(work / "cluster", "--no-ui", env=BASE)
        chroma, chroma_url = start_chroma(work / "chroma" / "store")
        env = {**BASE, **scale_out_env(cluster, chroma_url), "APPLIANCE_ENGINE__REMOTE_MODEL": args.cluster_model}
        front = start_server(work / "front", "--no-ui", env=env)
        try:
            rows = measure(cluster, front, [int(c) for c in args.concurrency.split(",")], args.requests,
                           workloads.get(args.workload), args.rounds, args.cluster_model)
        finally:
            front.stop()
            cluster.stop()
            chroma.terminate()
    report(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"workload": args.workload, "requests_per_user": args.requests, "rounds": args.rounds,
              "machine": machine(), "rows": rows}
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nwritten: {args.out}")


def measure(cluster, front, levels: list[int], requests: int, workload, rounds: int, model: str) -> list[dict]:
    direct = Target("cluster", cluster.url + "/v1", model, cluster.key)
    through = Target("front-end", front.url + "/v1", model, front.key)
    run_load(direct, workload, 1, 1)  # warm both paths (first prompt, connection pools)
    run_load(through, workload, 1, 1)
    rows = []
    for c in levels:
        # Every run gets its own prompts (its own seed): a prompt repeated would hit the cluster's
        # prefix cache on the second path. Rounds alternate the order of the two paths.
        runs: dict[str, list[RunResult]] = {"cluster": [], "front-end": []}
        for r in range(rounds):
            order = (direct, through) if r % 2 == 0 else (through, direct)
            for k, target in enumerate(order):
                runs[target.name].append(run_load(target, workload, c, requests, seed=1000 * c + 10 * r + k))
        a, b = summarise(_merge(runs["cluster"])), summarise(_merge(runs["front-end"]))
        rows.append({"concurrency": c, "cluster": a, "front_end": b,
                     "ttft_ratio": _ratio(b["ttft_p50_ms"], a["ttft_p50_ms"]),
                     "tpot_ratio": _ratio(b["tpot_p50_ms"], a["tpot_p50_ms"]),
                     "tok_s_ratio": _ratio(b["out_tok_s"], a["out_tok_s"]),
                     "ttft_overhead_ms": _diff(b["ttft_p50_ms"], a["ttft_p50_ms"])})
    return rows


def report(rows: list[dict]) -> None:
    print("| users | TTFT p50 ms cluster / front-end | ratio | TPOT p50 ms cluster / front-end | ratio | "
          "tok/s cluster / front-end | ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        a, b = r["cluster"], r["front_end"]
        print(f"| {r['concurrency']} | {a['ttft_p50_ms']} / {b['ttft_p50_ms']} | {r['ttft_ratio']} | "
              f"{a['tpot_p50_ms']} / {b['tpot_p50_ms']} | {r['tpot_ratio']} | "
              f"{a['out_tok_s']} / {b['out_tok_s']} | {r['tok_s_ratio']} |")


def _merge(runs: list[RunResult]) -> RunResult:
    """Several runs of one path as one: all records, summed wall time."""
    return RunResult(runs[0].target, runs[0].workload, runs[0].concurrency, sum(r.wall_s for r in runs),
                     [rec for r in runs for rec in r.records])


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _diff(a, b) -> float | None:
    return round(a - b, 1) if a is not None and b is not None else None


if __name__ == "__main__":
    main()
