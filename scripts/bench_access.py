#!/usr/bin/env python
"""Retrieval latency with access filtering, against no filtering, on one index, in one run.

    .venv/bin/python scripts/bench_access.py [--chunks 20000] [--collections 4] [--queries 60]
                                             [--out bench-out/access.json]

Builds an index of `--chunks` one-chunk notes spread over `--collections` collections (a real
ingest: loaders, chunking, embeddings, Chroma, SQLite), then times the same questions through
`Retriever.search` for an administrator (every collection: no filter, what every search did before
collections) and for readers of half the collections and of one, interleaved so that machine noise
falls on every side alike. Reports median and p95 per side and the ratios to the unfiltered median.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_ingest import sentence  # noqa: E402

from appliance.bench.load import pct  # noqa: E402
from appliance.bench.report import write_metrics  # noqa: E402
from appliance.offline import install_guard  # noqa: E402
from knowledge.index.access import EVERYTHING, Scope  # noqa: E402
from knowledge.index.kb import KBConfig, KnowledgeBase  # noqa: E402
from knowledge.ingest.folder import ingest  # noqa: E402
from knowledge.retrieve.retriever import Retriever  # noqa: E402


def build(work: Path, chunks: int, collections: int, rng: random.Random) -> tuple[KnowledgeBase, list[str]]:
    """The index, and one question per note drawn at random (a sentence of it, reworded by order)."""
    kb = KnowledgeBase(work / "data", KBConfig())
    notes: list[str] = []
    for c in range(collections):
        folder = work / f"c{c}"
        for n in range(chunks // collections):
            path = folder / f"d{n % 40:02}" / f"note{n:05}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            text = " ".join(sentence(rng) for _ in range(2))
            path.write_text(f"# Note {c}-{n}\n\n{text}\n")
            notes.append(text)
        t0 = time.perf_counter()
        report = ingest(kb, folder, collection=f"c{c}")
        print(f"collection c{c}: {report.chunks} chunks in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return kb, notes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--collections", type=int, default=4)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "access.json")
    args = ap.parse_args()
    install_guard()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory(prefix="bench-access-") as tmp:
        kb, notes = build(Path(tmp), args.chunks, args.collections, rng)
        retriever = Retriever(kb)
        names = [f"c{c}" for c in range(args.collections)]
        sides = {"unfiltered": EVERYTHING, "half": Scope.of(names[: max(1, len(names) // 2)]),
                 "one": Scope.of(names[:1])}
        questions = [" ".join(rng.choice(notes).split()[:12]) for _ in range(args.queries)]
        for q in questions[:5]:  # warm caches (HNSW pages, SQLite, the embedder) on every side
            for scope in sides.values():
                retriever.search(q, k=5, scope=scope)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for q in questions:
            for name, scope in sides.items():
                t0 = time.perf_counter()
                retriever.search(q, k=5, scope=scope)
                times[name].append((time.perf_counter() - t0) * 1000)
        base = statistics.median(times["unfiltered"])
        result = {"chunks": kb.db.chunk_count(kb.cfg.name), "collections": args.collections,
                  "queries": args.queries}
        for name, values in times.items():
            result[f"{name}_median_ms"] = round(statistics.median(values), 2)
            result[f"{name}_p95_ms"] = round(pct(values, 0.95), 2)
            result[f"{name}_ratio"] = round(statistics.median(values) / base, 3)
        kb.close()
    write_metrics(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
