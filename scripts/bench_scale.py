#!/usr/bin/env python
"""Index at scale: 5,000 small files plus one 7 MB file; re-ingest after changing 10%; remove the 7 MB file.

    .venv/bin/python scripts/bench_scale.py [--files 5000] [--big-mb 7] [--out bench-out/scale.json]

The figures PrivateGPT users reported as hours (deleting a large document, re-ingesting a changed
corpus) are here in seconds, each measured on its own: first ingest, re-ingest with 10% of the
files changed, re-ingest with nothing changed, `docs remove` of the large file.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_ingest import paragraph, sentence  # noqa: E402

from appliance.bench.report import write_metrics  # noqa: E402
from appliance.offline import install_guard  # noqa: E402
from appliance.server.documents import DocumentsService  # noqa: E402
from knowledge.index.kb import KBConfig, KnowledgeBase  # noqa: E402
from knowledge.ingest.folder import ingest  # noqa: E402
from knowledge.ingest.integrity import check  # noqa: E402


def generate(folder: Path, files: int, big_mb: float, rng: random.Random) -> Path:
    for n in range(files):
        path = folder / f"dir{n % 50:02}" / f"note{n:05}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {n}\n\n" + " ".join(sentence(rng) for _ in range(3)) + "\n")
    big = folder / "big-manual.txt"
    with big.open("w") as fh:
        while fh.tell() < big_mb * 2**20:
            fh.write(paragraph(rng) + "\n\n")
    return big


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--big-mb", type=float, default=7.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "scale.json")
    args = ap.parse_args()
    install_guard()
    rng = random.Random(11)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        docs = work / "docs"
        big = generate(docs, args.files, args.big_mb, rng)
        kb = KnowledgeBase(work / "data", KBConfig())
        first = ingest(kb, docs)
        changed = rng.sample(sorted(docs.rglob("note*.md")), args.files // 10)
        for path in changed:
            path.write_text(path.read_text() + "\n" + sentence(rng) + "\n")
        t0 = time.perf_counter()
        second = ingest(kb, docs)
        reingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        third = ingest(kb, docs)
        unchanged_s = time.perf_counter() - t0
        big_chunks = len(kb.db.file(kb.cfg.name, str(big.resolve())).chunk_ids)
        t0 = time.perf_counter()
        DocumentsService(kb, work / "uploads").remove(str(big.resolve()))
        remove_s = time.perf_counter() - t0
        result = {"files": args.files + 1, "chunks": first.chunks, "first_ingest_s": round(first.timings["total"], 1),
                  "changed_files": second.count("changed"), "changed_chunks": second.chunks,
                  "reingest_10pct_s": round(reingest_s, 1),
                  "reingest_10pct_embed_share": round(second.timings["embed"] / reingest_s, 3),
                  "reingest_unchanged_s": round(unchanged_s, 2), "unchanged_files": third.count("unchanged"),
                  "big_file_mb": args.big_mb, "big_file_chunks": big_chunks, "remove_big_s": round(remove_s, 2),
                  "index_whole_after": check(kb).ok}
        write_metrics(args.out, result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
