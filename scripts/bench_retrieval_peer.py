#!/usr/bin/env python
"""Our retrieval against the simplest peer, on the same files and questions, in one run.

    APPLIANCE_DATA_DIR=/tmp/devdata .venv/bin/python scripts/bench_retrieval_peer.py /tmp/dev \\
        knowledge/data/dev/qa.jsonl [--chars 1000 --overlap 200] [--out bench-out/retrieval-peer.json]

The peer is what a front-end tutorial builds: the text of every file (read with our loaders, so
extraction is not what differs) cut into fixed windows of `--chars` characters with `--overlap`,
embedded with the same all-MiniLM-L6-v2, cosine top-k, nothing else. "Ours" is `appliance eval
retrieval` on the index already built in APPLIANCE_DATA_DIR from the same folder. Both are scored
by `knowledge.eval.evaluate` (recall@1/5/10, MRR, per language).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.cli.common import load_cli_settings  # noqa: E402
from appliance.server.services import open_kb  # noqa: E402
from knowledge.eval.evaluate import evaluate, load_qa  # noqa: E402
from knowledge.eval.peer import DenseWindows  # noqa: E402
from knowledge.retrieve.retriever import Retriever  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("qa", type=Path)
    ap.add_argument("--chars", type=int, default=1000)
    ap.add_argument("--overlap", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "retrieval-peer.json")
    args = ap.parse_args()
    kb = open_kb(load_cli_settings())
    if kb.db.chunk_count(kb.cfg.name) == 0:
        print(f"the index in {kb.data_dir} is empty: run `appliance ingest {args.corpus}` first", file=sys.stderr)
        return 2
    items = load_qa(args.qa)
    peer = DenseWindows(args.corpus.resolve(), kb.embedder, args.chars, args.overlap)
    results = {"ours (hybrid)": evaluate(Retriever(kb), items),
               "ours (dense only)": evaluate(Retriever(kb), items, mode="dense"),
               f"peer: {args.chars}-char windows, dense top-k": evaluate(peer, items)}
    print("| retriever | language | recall@1 | recall@5 | recall@10 | MRR |\n|---|---|---|---|---|---|")
    for name, res in results.items():
        for lang, m in res["by_lang"].items():
            print(f"| {name} | {lang} | {m['recall@1']:.2f} | {m['recall@5']:.2f} | {m['recall@10']:.2f} "
                  f"| {m['mrr']:.3f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"windows": len(peer.windows), **results}, indent=2))
    print(f"\npeer windows: {len(peer.windows)}; written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
