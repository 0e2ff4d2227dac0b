#!/usr/bin/env python
"""Whole-document answers against the plain RAG answer (top-k chunks of the whole knowledge base), on
the same questions, engine and index, in one run.

    APPLIANCE_DATA_DIR=/tmp/dev-onnx .venv/bin/python scripts/bench_longdoc.py knowledge/data/dev/qa.jsonl \
        [--lang en] [--limit 10] [--out bench-out/longdoc.json]

For each answerable question, the document is its first expected source that is indexed; the
whole-document answer reads every section of it (`appliance ask --doc`). Reports, per method, how
often the answer contains the expected text, and for the whole-document path how often one of the
notes handed to the final answer does (the map stage found the fact), sections read and seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.cli.common import load_cli_settings  # noqa: E402
from appliance.engine.backend import open_backend  # noqa: E402
from appliance.server.longdoc import DocumentError, find_document  # noqa: E402
from appliance.server.services import chat_service, longdoc_service, open_kb  # noqa: E402
from knowledge.eval.evaluate import load_qa, normalise  # noqa: E402
from knowledge.index.access import EVERYTHING  # noqa: E402
from knowledge.retrieve.retriever import Retriever  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("qa", type=Path)
    ap.add_argument("--lang", default="en")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "longdoc.json")
    args = ap.parse_args()
    settings = load_cli_settings(None)
    kb = open_kb(settings)
    items = [i for i in load_qa(args.qa) if i.get("answerable", True) and i.get("lang", "en") == args.lang]
    rows = []
    with open_backend(settings) as engine:
        chat = chat_service(settings, engine, Retriever(kb))
        service = longdoc_service(settings, chat, kb)
        params = chat.answer_params("bench", max_tokens=args.max_tokens, temperature=0.0, seed=1)
        for item in items:
            chunks = _document(kb, item)
            if chunks is None:
                continue
            wanted = [normalise(w) for w in item["answer_contains"]]
            t0 = time.perf_counter()
            prepared = chat.prepare([{"role": "user", "content": item["question"]}], scope=EVERYTHING)
            rag = "".join(chat.stream(prepared, params))
            t1 = time.perf_counter()
            sections = service.split(chunks)
            prepared = service.prepare(sections, item["question"], scope=EVERYTHING)
            doc = "".join(chat.stream(prepared, params))
            t2 = time.perf_counter()
            rows.append({"question": item["question"], "document": chunks[0].source, "sections": len(sections),
                         "rag_contains": _has(rag, wanted), "doc_contains": _has(doc, wanted),
                         "notes_contain": any(_has(n["text"], wanted) for n in prepared.citations),
                         "rag_s": round(t1 - t0, 1), "doc_s": round(t2 - t1, 1), "doc_answer": doc[:300]})
            print(f"{len(rows)}/{args.limit} {rows[-1]['document']}: rag {rows[-1]['rag_contains']}, "
                  f"doc {rows[-1]['doc_contains']}, notes {rows[-1]['notes_contain']}", file=sys.stderr)
            if len(rows) >= args.limit:
                break
    kb.close()
    result = {"questions": len(rows), "lang": args.lang, **{k: _rate(rows, k) for k in
              ("rag_contains", "doc_contains", "notes_contain")},
              "mean_sections": _mean(rows, "sections"), "mean_rag_s": _mean(rows, "rag_s"),
              "mean_doc_s": _mean(rows, "doc_s"), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print("| method | answer contains the expected text | mean seconds |\n|---|---|---|")
    print(f"| top-k RAG over the knowledge base | {result['rag_contains']} | {result['mean_rag_s']} |")
    print(f"| whole document (map-reduce, {result['mean_sections']} sections) | {result['doc_contains']} | "
          f"{result['mean_doc_s']} |")
    print(f"\nnotes handed to the final answer contain it: {result['notes_contain']}\nwritten: {args.out}")
    return 0


def _document(kb, item: dict):
    for source in item.get("source", []):
        try:
            return find_document(kb.db, kb.cfg.name, source, files_on_disk=False, scope=EVERYTHING)
        except DocumentError:
            continue
    return None


def _has(text: str, wanted: list[str]) -> bool:
    return any(w in normalise(text) for w in wanted)


def _rate(rows: list[dict], key: str) -> float | None:
    return round(sum(r[key] for r in rows) / len(rows), 2) if rows else None


def _mean(rows: list[dict], key: str) -> float | None:
    return round(sum(r[key] for r in rows) / len(rows), 1) if rows else None


if __name__ == "__main__":
    sys.exit(main())
