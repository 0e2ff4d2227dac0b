"""Is a repack-friendly 4-bit type faster on this CPU at about the same size? (issue: hardware-aware formats)

llama.cpp's CPU backend repacks some tensor types into interleaved layouts with faster kernels
(this build: Q4_0, IQ4_NL, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, depending on the CPU's features) and not
others (Q4_1, Q5_0, Q5_1, Q3_K). This script quantizes one source to each type *without* the
mixed-precision policy (so each file is one type, except where a row size forces llama.cpp's
fallback), then measures prefill and decode rates at batch 1 and 16 through our runner, interleaved
over `--repeat` rounds (medians), so machine noise hits every type alike.

    .venv/bin/python scripts/bench_quant_formats.py SOURCE_F16.gguf [--types Q8_0,Q4_1,Q4_0,IQ4_NL,Q4_K_M]
                                                    [--repeat 3] [--json]

Writes bench-out/quant-formats.json and prints a table; with --json the last line is that JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from appliance.bench.ceiling import measure  # noqa: E402
from appliance.engine.llama import ContextConfig  # noqa: E402
from appliance.models.gguf import read_gguf  # noqa: E402
from appliance.quant.quantize import quantize_file  # noqa: E402
from appliance.quant.types import bits_per_weight, policy_for, repack_share  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", type=Path)
    ap.add_argument("--types", default="Q8_0,Q4_1,Q4_0,IQ4_NL,Q4_K_M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    args = ap.parse_args()
    types = [t.strip().upper() for t in args.types.split(",") if t.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for t in types:
            files[t] = Path(tmp) / f"{t}.gguf"
            quantize_file(args.source, files[t], t, policy_for(t, [], mixed=False), allow_requantize=True)
        samples: dict[str, list] = {t: [] for t in types}
        for _ in range(args.repeat):
            for t in types:
                samples[t].append(measure(ContextConfig(model_path=files[t], n_ctx=2048), batches=(1, 16)))
        rows = [_row(t, files[t], samples[t]) for t in types]
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"source": str(args.source), "repeat": args.repeat, "rows": rows}
    (args.out / "quant-formats.json").write_text(json.dumps(result, indent=2))
    print(f"{'type':8} {'MiB':>7} {'bits/w':>6} {'repack %':>8} {'prefill':>8} {'b1 tok/s':>9} {'b16 tok/s':>9}")
    for r in rows:
        print(f"{r['type']:8} {r['mib']:7.1f} {r['bits_per_weight']:6.2f} {r['repack_pct']:8.0f} "
              f"{r['prefill_tok_s']:8.0f} {r['tok_s_b1']:9.1f} {r['tok_s_b16']:9.1f}")
    if args.json:
        print(json.dumps(result))


def _row(qtype: str, path: Path, rates: list) -> dict:
    info = read_gguf(path)
    return {"type": qtype, "mib": round(path.stat().st_size / 2**20, 1),
            "bits_per_weight": round(bits_per_weight(info), 2),
            "repack_pct": round(100 * repack_share(info)),
            "prefill_tok_s": round(statistics.median(r.prefill_tok_s for r in rates), 1),
            "tok_s_b1": round(statistics.median(r.decode_tok_s[1] for r in rates), 1),
            "tok_s_b16": round(statistics.median(r.decode_tok_s[16] for r in rates), 1)}


if __name__ == "__main__":
    main()
