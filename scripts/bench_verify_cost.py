"""What a speculative verify step costs: one sequence's decode step with 1..k+1 rows (issue 13).

Speculative decoding pays only when a step of k+1 tokens (the last token and k drafts, logits on
every row) costs little more than a step of one. This measures it through our runner, one sequence
at `--context` tokens, median of `--repeat` steps per size, the draft rows removed after each.

    .venv/bin/python scripts/bench_verify_cost.py [--model PATH] [--rows 1,2,3,5,9,17] [--context 400]
        [--repeat 15] [--json]

Writes bench-out/verify-cost.json and prints a table; with --json the last line is that JSON.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from appliance.bench.ceiling import engine_context  # noqa: E402
from appliance.bench.script import emit, step_parser  # noqa: E402
from appliance.config import load_settings  # noqa: E402
from appliance.engine.llama import LlamaRunner  # noqa: E402
from appliance.engine.sequence import BatchItem  # noqa: E402


def main() -> None:
    ap = step_parser(__doc__)
    ap.add_argument("--rows", default="1,2,3,5,9,17", help="tokens per step to time")
    ap.add_argument("--context", type=int, default=400, help="tokens the sequence holds before the step")
    ap.set_defaults(repeat=15)
    args = ap.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    cfg = engine_context(load_settings(), args.model)
    with LlamaRunner(cfg) as runner:
        text = "The quick brown fox jumps over the lazy dog. "
        ids = runner.tokenize(text * (1 + (args.context + max(sizes)) // 8), add_special=False)
        runner.decode([BatchItem(slot=0, tokens=ids[:args.context], start=0, logits=False)])
        ms = {n: round(1000 * _median_step(runner, ids, args.context, n, args.repeat), 2) for n in sizes}
    result = {"model": str(cfg.model_path), "context": args.context, "repeat": args.repeat,
              "step_ms": {str(n): v for n, v in ms.items()},
              "relative": {str(n): round(v / ms[sizes[0]], 2) for n, v in ms.items()}}
    emit(args, "verify-cost", result, [f"{'tokens in the step':>18} {'ms':>8} {'x first':>8}"] +
         [f"{n:18d} {ms[n]:8.2f} {ms[n] / ms[sizes[0]]:8.2f}" for n in sizes])


def _median_step(runner: LlamaRunner, ids: list[int], context: int, n: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        runner.decode([BatchItem(slot=0, tokens=ids[context:context + n], start=context, logits=True, every_row=True)])
        times.append(time.perf_counter() - t0)
        runner.seq_rm(0, context, -1)  # back to the context alone, as a refused draft is
    return statistics.median(times)


if __name__ == "__main__":
    main()
