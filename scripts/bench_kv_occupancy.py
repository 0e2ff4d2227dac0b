"""What other sequences' cells in the shared KV cache cost a step (issue 13: the share of the ceiling).

`appliance bench --ceiling` measures prefill on an empty cache. Under load the unified KV cache
holds every running sequence's cells, and llama.cpp's attention walks all of them for every token
(cells of other sequences are masked, not skipped ahead of time), so the same work costs more.
This script measures, through our runner and interleaved over `--repeat` rounds (medians):

- a fresh 256-token chunk (what the ceiling measures);
- 4 sequences × 128 tokens after a shared 367-token prefix (what a burst of chat requests prefills);
- one decode step of those 4 sequences;

each with the cache otherwise empty and with `--filler` cells of other sequences in it.

    .venv/bin/python scripts/bench_kv_occupancy.py [--model PATH] [--filler 3072] [--repeat 3] [--json]

Writes bench-out/kv-occupancy.json and prints a table; with --json the last line is that JSON.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from appliance.bench.ceiling import engine_context  # noqa: E402
from appliance.bench.script import emit, step_parser  # noqa: E402
from appliance.config import load_settings  # noqa: E402
from appliance.engine.llama import LlamaRunner  # noqa: E402
from appliance.engine.sequence import BatchItem  # noqa: E402

PREFIX, OWN, SEQS = 367, 128, 4


def main() -> None:
    ap = step_parser(__doc__)
    ap.add_argument("--filler", type=int, default=3072, help="cells of other sequences in the loaded case")
    args = ap.parse_args()
    cfg = replace(engine_context(load_settings(), args.model), n_ctx=max(8192, args.filler + 4096), n_seq_max=32)
    samples: dict[int, list[dict]] = {0: [], args.filler: []}
    with LlamaRunner(cfg) as runner:
        ids = runner.tokenize("The quick brown fox jumps over the lazy dog. " * 120, add_special=False)
        for _ in range(args.repeat):
            for filler in samples:  # interleaved: machine noise hits both cases alike
                samples[filler].append(_one_round(runner, ids, filler))
    rows = [{"filler_cells": f, **{k: round(statistics.median(s[k] for s in runs), 1) for k in runs[0]}}
            for f, runs in samples.items()]
    result = {"model": str(cfg.model_path), "repeat": args.repeat, "rows": rows}
    emit(args, "kv-occupancy", result,
         [f"{'other cells':>11} {'fresh chunk tok/s':>18} {'4x128 after prefix tok/s':>25} {'decode x4 ms':>13}"] +
         [f"{r['filler_cells']:11d} {r['fresh_tok_s']:18.0f} {r['burst_tok_s']:25.0f} {r['decode_ms']:13.1f}"
          for r in rows])


def _one_round(runner: LlamaRunner, ids: list[int], filler: int) -> dict:
    runner.clear_memory()
    for n, start in enumerate(range(0, filler, 256)):  # other sequences' cells, 256 each
        runner.decode([BatchItem(slot=SEQS + 1 + n, tokens=ids[:min(256, filler - start)], start=0, logits=False)])
    fresh = _timed(runner, [BatchItem(slot=0, tokens=ids[:256], start=0, logits=True)])
    runner.seq_rm(0, 0, -1)
    runner.decode([BatchItem(slot=0, tokens=ids[:PREFIX], start=0, logits=False)])
    for s in range(1, SEQS):
        runner.seq_cp(0, s, 0, PREFIX)
    burst = _timed(runner, [BatchItem(slot=s, tokens=ids[PREFIX:PREFIX + OWN], start=PREFIX, logits=s == SEQS - 1)
                            for s in range(SEQS)])
    steps = [_timed(runner, [BatchItem(slot=s, tokens=[ids[3]], start=PREFIX + OWN + i, logits=True)
                             for s in range(SEQS)]) for i in range(8)]
    return {"fresh_tok_s": 256 / fresh, "burst_tok_s": SEQS * OWN / burst,
            "decode_ms": 1000 * statistics.median(steps)}


def _timed(runner: LlamaRunner, items: list[BatchItem]) -> float:
    t0 = time.perf_counter()
    runner.decode(items)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
