#!/usr/bin/env python
"""Batch extraction over the sample guide, sequential (one item at a time) against batched (a window
of items in flight), on one engine, in one run.

    .venv/bin/python scripts/bench_batch.py [--window 8] [--max-tokens 32] [--out bench-out/batch.json]

Reports items/s, generated tokens/s and the prefix cache hit rate of each, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.batch import Template, run_batch, select_items  # noqa: E402
from appliance.config import EngineSettings  # noqa: E402
from appliance.engine.engine import Engine  # noqa: E402
from appliance.engine.llama import ContextConfig  # noqa: E402
from appliance.models.registry import embedded_chat_model_path  # noqa: E402
from appliance.offline import install_guard  # noqa: E402
from knowledge.index.access import EVERYTHING  # noqa: E402
from knowledge.index.kb import KBConfig, KnowledgeBase  # noqa: E402
from knowledge.ingest.folder import ingest  # noqa: E402

SCHEMA = {"type": "object", "properties": {"topic": {"type": "string", "maxLength": 40},
                                           "has_number": {"type": "boolean"}}, "required": ["topic", "has_number"]}
TEMPLATE = Template(instruction="You extract facts from company documents. Reply with JSON only: the topic of the "
                                "section in a few words, and whether it gives a number.",
                    item="Section {heading} of {source}:\n\n{text}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "batch.json")
    ap.add_argument("--no-schema", action="store_true", help="free text: no grammar sampler")
    args = ap.parse_args()
    install_guard()
    TEMPLATE.max_tokens = args.max_tokens
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        kb = KnowledgeBase(Path(tmp) / "data", KBConfig())
        ingest(kb, ROOT / "knowledge" / "data" / "sample" / "docs")
        items = select_items(kb.db, kb.cfg.name, TEMPLATE, [], scope=EVERYTHING)
        kb.close()
        knobs = EngineSettings(n_ctx=8192, n_seq_max=args.window * 2)
        model = embedded_chat_model_path()
        ctx = ContextConfig(model_path=model, n_ctx=knobs.n_ctx, n_seq_max=knobs.n_seq_max)
        rows = {}
        for name, window in (("sequential", 1), ("batched", args.window)):
            with Engine(ctx, knobs, None, "smollm2") as engine:  # a fresh engine: no cache carried over
                s = run_batch(engine, TEMPLATE, items, Path(tmp) / f"{name}.jsonl", None if args.no_schema else SCHEMA,
                              window=window)
            rows[name] = {"window": window, **s.as_dict()}
    seq, bat = rows["sequential"], rows["batched"]
    result = {"items": len(items), "max_tokens": args.max_tokens, "schema": not args.no_schema, **rows,
              "items_per_s_ratio": _ratio(bat["items_per_s"], seq["items_per_s"]),
              "tokens_per_s_ratio": _ratio(bat["tokens_per_s"], seq["tokens_per_s"])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print("| run | window | items | ok | failed | wall s | items/s | tok/s | prefix hit rate |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['window']} | {r['items']} | {r['ok']} | {r['failed']} | {r['wall_s']} | "
              f"{r['items_per_s']} | {r['tokens_per_s']} | {r['prefix_hit_rate']:.0%} |")
    print(f"\nbatched / sequential: {result['items_per_s_ratio']}x items/s, {result['tokens_per_s_ratio']}x tok/s"
          f"\nwritten: {args.out}")
    return 0


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


if __name__ == "__main__":
    sys.exit(main())
