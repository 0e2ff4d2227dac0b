#!/usr/bin/env python
"""Engine benchmark: one request at a time vs continuous batching vs + prefix cache.

Workload (issue #3): 16 concurrent users, 2 rounds each; every prompt is the same ~350-token
system prompt plus ~130 distinct user tokens; exactly 64 output tokens each (ignore_eos).

    .venv/bin/python scripts/bench_engine.py [--users 16] [--rounds 2] [--out bench-out/engine.json] [--json]
    .venv/bin/python scripts/bench_engine.py --modes c --tpot-targets 50,100,200 [--json]
    .venv/bin/python scripts/bench_engine.py --spec [--draft 4] [--repeat 2] [--json]

`--spec` measures speculative decoding (prompt lookup) off and on, one engine each, on three cells:
the rag-quote workload (answers quote their excerpts; greedy) at 1 and at `--users` concurrent
users, and the chat workload with 32-token answers at `--users`; the JSON line then is
{"c1_off", "c1_on", "c16_off", "c16_on", "short_off", "short_on"}, each with out_tok_s,
ttft_p50_ms, tpot_p50_ms and accept_rate (null when off).

In-process, without HTTP; `appliance bench` runs the same shape of workload over the HTTP API.

Modes (one engine switch each, same workload, same config otherwise):
  a  one request at a time, no prefix cache
  b  continuous batching, no prefix cache
  c  continuous batching + prefix cache
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.bench.ceiling import Rates, measure_for  # noqa: E402
from appliance.bench.workloads import SYSTEM, rag_quote, user_text  # noqa: E402
from appliance.config import load_settings  # noqa: E402
from appliance.engine.engine import Engine  # noqa: E402
from appliance.engine.sequence import SamplingParams  # noqa: E402
from appliance.offline import install_guard  # noqa: E402

MODES = {"a": dict(continuous_batching=False, prefix_cache=False),
         "b": dict(continuous_batching=True, prefix_cache=False),
         "c": dict(continuous_batching=True, prefix_cache=True)}

def run_mode(mode: str, users: int, rounds: int, out_tokens: int, rates: Rates, extra: dict | None = None,
             name: str = "") -> dict:
    params = SamplingParams(max_tokens=out_tokens, temperature=0.7, seed=1, ignore_eos=True)
    return run_engine(name or mode, {**MODES[mode], **(extra or {})}, users, rounds, out_tokens, rates,
                      lambda rng: (_chat(rng), params))


def run_engine(name: str, knobs: dict, users: int, rounds: int, out_tokens: int, rates: Rates, request) -> dict:
    """One engine with `knobs`, `users` threads × `rounds` requests; `request(rng)` gives
    (messages, SamplingParams) of each."""
    settings = load_settings()
    settings.engine.n_ctx = 10240
    settings.engine.n_seq_max = users
    settings.engine.gen_reserve = out_tokens
    settings.engine.max_queue = users * rounds
    settings.engine.per_user_queue = users * rounds
    for key, value in knobs.items():
        setattr(settings.engine, key, value)
    engine = Engine.from_config(settings)
    try:
        engine.submit([{"role": "user", "content": "warm up"}], SamplingParams(max_tokens=4)).result(120)
        result = _measure(engine, name, users, rounds, request)
        uncached = round(result["requests"] * (result["prompt_tokens_mean"] - result["cached_prompt_tokens_mean"]))
        result.update(rates.share(uncached, result["out_tokens"], result["peak_running"], result["out_tok_s"]))
        snap = engine.snapshot()
        drafted, accepted = sum(snap["spec_drafted"].values()), sum(snap["spec_accepted"].values())
        cost = engine.scheduler.pacer.cost()
        result.update(drafted=drafted, accepted=accepted,
                      step_cost_ms=None if cost is None else [round(cost[0] * 1000, 2), round(cost[1] * 1000, 3)],
                      accept_rate=round(accepted / drafted, 3) if knobs.get("speculative") and drafted else None)
        return result
    finally:
        engine.shutdown()


def _chat(rng: random.Random) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_text(rng)}]


def run_spec(users: int, rounds: int, draft: int, rates: Rates, repeat: int = 1,
             draft_model: str = "") -> dict[str, dict]:
    """The speculative-decoding cells (see the module doc), off and on, alternating `repeat` times
    (this machine's run-to-run noise is larger than some of the effects); numbers are the means."""
    quote = SamplingParams(max_tokens=128, temperature=0)
    short = SamplingParams(max_tokens=32, temperature=0.7, seed=1, ignore_eos=True)
    cells = {"c1": (1, max(4, rounds), lambda rng: (rag_quote(rng), quote)),
             f"c{users}": (users, rounds, lambda rng: (rag_quote(rng), quote)),
             "short": (users, rounds, lambda rng: (_chat(rng), short))}
    runs: dict[str, list[dict]] = {}
    for cell, (n_users, n_rounds, request) in cells.items():
        for r in range(repeat):
            for state, k in (("off", 0), ("on", draft)):
                name = f"{cell}_{state}"
                print(f"{name} ({r + 1}/{repeat}) ...", file=sys.stderr, flush=True)
                knobs = {"speculative": k, "draft_model": draft_model if k else ""}
                runs.setdefault(name, []).append(run_engine(name, knobs, n_users, n_rounds, 128, rates, request))
    return {name: _mean(results) for name, results in runs.items()}


def _mean(results: list[dict]) -> dict:
    out = dict(results[-1])
    for key, value in out.items():
        values = [r[key] for r in results]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and None not in values:
            out[key] = round(sum(values) / len(values), 3)
    out["repeats"] = len(results)
    return out


def _measure(engine: Engine, name: str, users: int, rounds: int, request) -> dict:
    records: list[dict] = []
    peak = {"kv_cells_used": 0, "kv_cells_live": 0, "running": 0}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            snap = engine.gauges()
            for k in peak:
                peak[k] = max(peak[k], snap[k])
            time.sleep(0.1)

    def user(uid: int) -> None:
        rng = random.Random(uid)
        for r in range(rounds):
            msgs, params = request(rng)
            res = engine.submit(msgs, params).result(timeout=1800)
            records.append({"user": uid, "round": r, **res.stats.__dict__})

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=user, args=(u,)) for u in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done.set()
    watcher.join()
    return summarise(name, records, wall, peak)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def summarise(name: str, records: list[dict], wall: float, peak: dict) -> dict:
    ttft = [r["ttft"] * 1000 for r in records if r["ttft"] is not None]
    tpot = [r["tpot"] * 1000 for r in records if r["tpot"] is not None]
    out = sum(r["generated_tokens"] for r in records)
    return {"mode": name, "requests": len(records), "wall_s": round(wall, 2),
            "out_tokens": out, "out_tok_s": round(out / wall, 2),
            "ttft_p50_ms": round(pct(ttft, 0.5), 1), "ttft_p95_ms": round(pct(ttft, 0.95), 1),
            "tpot_p50_ms": round(pct(tpot, 0.5), 1), "tpot_p95_ms": round(pct(tpot, 0.95), 1),
            "peak_kv_cells": peak["kv_cells_used"], "peak_kv_cells_live": peak["kv_cells_live"],
            "peak_running": peak["running"],
            "prompt_tokens_mean": round(statistics.mean(r["prompt_tokens"] for r in records), 1),
            "cached_prompt_tokens_mean": round(statistics.mean(r["cached_prompt_tokens"] for r in records), 1)}


def table(results: dict[str, dict]) -> str:
    base = results.get("a")
    head = ("| mode | out tok/s | × a | of ceiling | TTFT p50 ms | TTFT p95 ms | TPOT p50 ms | TPOT p95 ms "
            "| peak KV cells | cached prompt tok |")
    lines = [head, "|" + "---|" * 10]
    for k, r in results.items():
        ratio = f"{r['out_tok_s'] / base['out_tok_s']:.2f}" if base else "-"
        lines.append(f"| {k} | {r['out_tok_s']} | {ratio} | {_share(r)} | {r['ttft_p50_ms']} | {r['ttft_p95_ms']} | "
                     f"{r['tpot_p50_ms']} | {r['tpot_p95_ms']} | {r['peak_kv_cells']} | "
                     f"{r['cached_prompt_tokens_mean']}/{r['prompt_tokens_mean']} |")
    if base and "c" in results:
        c = results["c"]
        lines.append(f"\nc vs a: throughput ×{c['out_tok_s'] / base['out_tok_s']:.2f}, "
                     f"TTFT p50 ÷{base['ttft_p50_ms'] / c['ttft_p50_ms']:.1f}")
    return "\n".join(lines)


def _share(r: dict) -> str:
    f = r.get("ceiling_fraction")
    return "-" if f is None else f"{f:.0%} of {r['ceiling_tok_s']}"


def spec_table(results: dict[str, dict]) -> str:
    lines = ["| cell | out tok/s | of ceiling | TTFT p50 ms | TPOT p50 ms | TPOT p95 ms | accept rate | on/off tok/s | "
             "off/on TPOT |", "|" + "---|" * 9]
    for name, r in results.items():
        off = results.get(name.replace("_on", "_off")) if name.endswith("_on") else None
        gain = f"{r['out_tok_s'] / off['out_tok_s']:.2f}" if off else "-"
        tpot = f"{off['tpot_p50_ms'] / r['tpot_p50_ms']:.2f}" if off else "-"
        lines.append(f"| {name} | {r['out_tok_s']} | {_share(r)} | {r['ttft_p50_ms']} | {r['tpot_p50_ms']} | "
                     f"{r['tpot_p95_ms']} | "
                     f"{r['accept_rate'] if r['accept_rate'] is not None else '-'} | {gain} | {tpot} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out-tokens", type=int, default=64)
    ap.add_argument("--modes", default="abc")
    ap.add_argument("--tpot-targets", default="", help="also mode c with engine.tpot_target_ms at each, e.g. 50,100")
    ap.add_argument("--spec", action="store_true", help="speculative decoding off/on (see above)")
    ap.add_argument("--draft", type=int, default=4, help="--spec: draft tokens per step")
    ap.add_argument("--repeat", type=int, default=1, help="--spec: off/on runs per cell, alternating (means)")
    ap.add_argument("--draft-model", default="", help="--spec: a draft GGUF (registry name or path) instead of "
                    "prompt lookup")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "engine.json")
    ap.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = ap.parse_args()
    install_guard()
    rates = measure_for(load_settings())  # this machine's ceiling, measured once per run
    print(f"ceiling rates: prefill {rates.prefill_tok_s:.0f} tok/s, decode "
          + ", ".join(f"b{b} {r:.0f}" for b, r in rates.decode_tok_s.items()) + " tok/s", file=sys.stderr)
    if args.spec:
        results = run_spec(args.users, args.rounds, args.draft, rates, args.repeat, args.draft_model)
        keys = ("out_tok_s", "ttft_p50_ms", "tpot_p50_ms", "tpot_p95_ms", "accept_rate", "ceiling_fraction")
        text = spec_table(results)
    else:
        results = {}
        for mode in args.modes:
            print(f"mode {mode} ...", file=sys.stderr, flush=True)
            results[mode] = run_mode(mode, args.users, args.rounds, args.out_tokens, rates)
        for target in [float(t) for t in args.tpot_targets.split(",") if t]:
            name = f"c-tpot{target:g}"
            print(f"{name} ...", file=sys.stderr, flush=True)
            results[name] = run_mode("c", args.users, args.rounds, args.out_tokens, rates, {"tpot_target_ms": target},
                                     name)
        keys = ("out_tok_s", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "peak_kv_cells",
                "ceiling_fraction")
        text = table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"workload": vars(args) | {"out": str(args.out)}, "rates": rates.to_dict(),
                                    "results": results},
                                   indent=2))
    print(text)
    print(f"\nwritten: {args.out}")
    if args.json:
        print(json.dumps({m: {k: r[k] for k in keys} for m, r in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
