#!/usr/bin/env python
"""Quoted answers from our retrieval against quoted answers from the simplest peer, in one run.

    APPLIANCE_DATA_DIR=/tmp/devdata .venv/bin/python scripts/bench_answers_peer.py /tmp/dev \\
        knowledge/data/dev/qa.jsonl [--out bench-out/answers-peer.json]

Both sides answer every answerable question with the same quote picker (`knowledge.answer.quote`: the
excerpts' sentences that answer, verbatim) from 4 excerpts, so only retrieval differs:
- ours: the chat service in quote style on the index in APPLIANCE_DATA_DIR (built from the same
  folder), as shipped (the not-covered gate on) and with the gate off;
- the peer: the text of every file cut into 1,000-character windows (200 overlap), the same
  embedder, dense top-4, no gate.
Scored like `appliance eval answers`: contains = an expected string is in the answer (a declined
answerable question is a miss); cited = an expected file is among the excerpts. No chat model runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.cli.common import NoEngine, load_cli_settings  # noqa: E402
from appliance.errors import ApplianceError  # noqa: E402
from appliance.server.answer_eval import evaluate_answers  # noqa: E402
from appliance.server.services import chat_service, open_kb  # noqa: E402
from knowledge.answer import quote  # noqa: E402
from knowledge.eval.evaluate import answerable, expected_sources, item_lang, load_qa, normalise  # noqa: E402
from knowledge.eval.peer import DenseWindows  # noqa: E402
from knowledge.retrieve.retriever import Retriever  # noqa: E402
from knowledge.text.terms import is_cjk_text, terms  # noqa: E402

EXCERPTS = 4


def peer_answers(peer: DenseWindows, kb, items: list[dict]) -> dict:
    """Per language (grouped like `eval answers`: the item's label first): contains and cited rates of
    the peer's quoted answers, and their mean length. The picker reads the question's own language."""
    rows: dict[str, list[tuple[bool, bool, int]]] = {}
    for item in filter(answerable, items):
        lang = "zh" if is_cjk_text(item["question"]) else "en"
        hits = peer.search(item["question"], k=EXCERPTS)
        picked = quote.pick(item["question"], [(n, h.text) for n, h in enumerate(hits, start=1)], lang,
                            kb.db.idf(terms(item["question"])), kb.embedder.encode)
        text = normalise(quote.render(picked))
        rows.setdefault(item_lang(item), []).append((any(normalise(w) in text for w in item["answer_contains"]),
                                          bool(expected_sources(item) & {h.source for h in hits}), len(text)))
    return {lang: {"contains_answer": _rate([r[0] for r in got]), "cited_source": _rate([r[1] for r in got]),
                   "mean_chars": round(sum(r[2] for r in got) / len(got))} for lang, got in rows.items()}


def ours(settings, kb, items: list[dict], gate: bool) -> dict:
    """Our chat service in quote style; with `gate` off, no question is declined."""
    update = {"answer_style": "quote", "quote_excerpts": EXCERPTS,
              **({} if gate else {"min_relevance_en": 0.0, "min_relevance_zh": 0.0})}
    settings = settings.model_copy(update={"chat": settings.chat.model_copy(update=update)})
    chat = chat_service(settings, NoEngine.for_chat_model(settings), Retriever(kb))
    result = evaluate_answers(chat, [i for i in items if answerable(i)])
    return {lang: {k: m[k] for k in ("contains_answer", "cited_source")} for lang, m in result["by_lang"].items()}


def _rate(flags: list[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("qa", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "answers-peer.json")
    args = ap.parse_args()
    settings = load_cli_settings()
    kb = open_kb(settings)
    if kb.db.chunk_count(kb.cfg.name) == 0:
        print(f"the index in {kb.data_dir} is empty: run `appliance ingest {args.corpus}` first", file=sys.stderr)
        return 2
    items = load_qa(args.qa)
    peer = DenseWindows(args.corpus.resolve(), kb.embedder)
    try:
        results = {"ours (quote, gate on)": ours(settings, kb, items, gate=True),
                   "ours (quote, gate off)": ours(settings, kb, items, gate=False),
                   "peer: 1000-char windows, dense top-4, quoted": peer_answers(peer, kb, items)}
    except ApplianceError as exc:  # a question only a written answer could serve: no model runs here
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("| answers from | language | contains answer | cited file |\n|---|---|---|---|")
    for name, res in results.items():
        for lang, m in sorted(res.items()):
            print(f"| {name} | {lang} | {m['contains_answer']:.2f} | {m['cited_source']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
