"""`appliance eval answers`: the whole chat service (retrieval, prompt, the loaded model) on a QA file.

Per language it reports how often answerable questions are answered in full, in part (passages
under a warning) or declined, cite the expected source and contain an expected string; how often
unanswerable ones get "not covered", a warned partial answer, or an answer with no warning; and how
many answers are degenerate (loops). Questions are submitted together, so the engine batches them.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict, deque
from collections.abc import Callable

from appliance.server.chat import ChatService
from knowledge.eval.evaluate import answerable, expected_sources, item_lang, normalise
from knowledge.index.access import EVERYTHING
from knowledge.text.terms import is_cjk_text

DEGENERATE_RATIO = 0.3  # distinct 4-grams / all 4-grams below this = the answer loops
_MIN_GRAMS = 12         # shorter answers are too short to judge


def distinct_4gram_ratio(text: str) -> float | None:
    """Share of distinct 4-grams among all 4-grams (words; characters for Chinese), or None if short."""
    units = [c for c in text if not c.isspace()] if is_cjk_text(text) else text.lower().split()
    grams = [tuple(units[i:i + 4]) for i in range(len(units) - 3)]
    return len(set(grams)) / len(grams) if len(grams) >= _MIN_GRAMS else None


def is_degenerate(text: str) -> bool:
    ratio = distinct_4gram_ratio(text)
    return ratio is not None and ratio < DEGENERATE_RATIO


def evaluate_answers(chat: ChatService, items: list[dict], max_tokens: int = 256,
                     progress: Callable[[], None] | None = None, window: int = 8) -> dict:
    """The metrics dict printed by `appliance eval answers --json` (plus per-question rows).
    `window` questions are in flight at once; 1 times answers as one user would wait for them."""
    t0 = time.perf_counter()
    rows: list[dict] = []
    in_flight: deque = deque()
    for n, item in enumerate(items):
        started = time.perf_counter()
        prepared = chat.prepare([{"role": "user", "content": item["question"]}], scope=EVERYTHING)
        # The product's sampling, with a fixed seed per question so two runs compare like for like.
        params = chat.answer_params("eval", max_tokens=max_tokens, seed=n)
        in_flight.append((chat, item, prepared, chat.submit(prepared, params), started))
        if len(in_flight) >= window:  # stay under the per-user queue cap, keep the engine batching
            rows.append(_collect(*in_flight.popleft(), progress))
    rows.extend(_collect(*run, progress) for run in in_flight)
    by_lang: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_lang[row["lang"]].append(row)
    style = chat.cfg.answer_style
    return {"n": len(rows), "seconds": round(time.perf_counter() - t0, 2), **_summary(rows, style),
            "by_lang": {lang: _summary(r, style) for lang, r in sorted(by_lang.items())}, "rows": rows}


def _collect(chat: ChatService, item: dict, prepared, req, started: float,
             progress: Callable[[], None] | None) -> dict:
    result = req.result(timeout=600) if req is not None else None
    text = prepared.answer(result.text if result else None)
    checked = [c.supported for c in chat.ground(prepared, text) if c.supported is not None]
    if progress:
        progress()
    return {**_row(item, prepared, text, result), "style": prepared.answered_by,
            "judged": len(checked), "supported": sum(checked), "wall": round(time.perf_counter() - started, 3)}


def _row(item: dict, prepared, text: str, result) -> dict:
    sources = [s for c in prepared.citations for s in [c["source"], *c.get("also_in", [])]] if prepared.covered else []
    wanted = [normalise(s) for s in item.get("answer_contains", [])]
    return {"question": item["question"], "lang": item_lang(item),
            "answerable": answerable(item), "answered": prepared.covered, "partial": prepared.partial,
            "cited_source": bool(expected_sources(item) & set(sources)),
            "contains_answer": any(w in normalise(text) for w in wanted),
            "degenerate": prepared.covered and is_degenerate(text),
            "tokens": result.stats.generated_tokens if result else 0,
            "seconds": round((result.stats.ttft or 0) + (result.stats.tpot or 0) * result.stats.generated_tokens, 3)
            if result else 0.0, "answer": text}


def _rate(rows: list[dict], key: str) -> float | None:
    return _share(rows, lambda r: r[key])


def _share(rows: list[dict], test: Callable[[dict], bool]) -> float | None:
    return round(sum(bool(test(r)) for r in rows) / len(rows), 4) if rows else None


def _summary(rows: list[dict], style: str) -> dict:
    yes = [r for r in rows if r["answerable"]]
    no = [r for r in rows if not r["answerable"]]
    answered = [r for r in rows if r["answered"]]
    judged = sum(r["judged"] for r in answered)
    return {"style": style, "grounded": round(sum(r["supported"] for r in answered) / judged, 4) if judged else None,
            "n_answerable": len(yes), "n_unanswerable": len(no), "answered": _rate(yes, "answered"),
            # answered = full + partial: a partial answer shows passages (under a warning) and counts
            # as containing the answer when its quotes hold it.
            "full": _share(yes, lambda r: r["answered"] and not r["partial"]),
            "partial": _share(yes, lambda r: r["partial"]), "declined": _share(yes, lambda r: not r["answered"]),
            "declined_ok": _share(no, lambda r: not r["answered"]),
            "unanswerable_partial": _share(no, lambda r: r["partial"]),
            "unanswerable_unwarned": _share(no, lambda r: r["answered"] and not r["partial"]),
            "cited_source": _rate(yes, "cited_source"), "contains_answer": _rate(yes, "contains_answer"),
            "degenerate": sum(r["degenerate"] for r in answered),
            "mean_answer_tokens": round(sum(r["tokens"] for r in answered) / len(answered), 1) if answered else 0.0,
            "mean_answer_seconds": round(sum(r["seconds"] for r in answered) / len(answered), 2) if answered else 0.0,
            "median_answer_wall_seconds": round(statistics.median(r["wall"] for r in answered), 3) if answered else 0.0}


def calibrate_gate(chat: ChatService, items: list[dict]) -> dict:
    """Per language: the gate's score for each labelled question, the balanced accuracy of the
    configured threshold, and the threshold that maximises it (answerable should pass, the rest not)."""
    scores: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for item in items:
        question = item["question"]
        lang = "zh" if is_cjk_text(question) else "en"
        hits = chat.retriever.search(question, k=chat.cfg.top_k, scope=EVERYTHING) if chat.retriever else []
        scores[lang].append((chat.relevance(question, hits, lang), answerable(item)))
    out = {}
    for lang, pairs in sorted(scores.items()):
        current = chat.cfg.min_relevance_zh if lang == "zh" else chat.cfg.min_relevance_en
        best = max(sorted({s for s, _ in pairs}), key=lambda t: _balanced(pairs, t), default=current)
        out[lang] = {"n_answerable": sum(a for _, a in pairs), "n_unanswerable": sum(not a for _, a in pairs),
                     "threshold": current, "balanced_accuracy": _balanced(pairs, current),
                     "best_threshold": round(best, 4), "best_balanced_accuracy": _balanced(pairs, best),
                     "scores": [[round(sc, 4), a] for sc, a in sorted(pairs)]}
    return out


def _balanced(pairs: list[tuple[float, bool]], threshold: float) -> float:
    yes = [s >= threshold for s, a in pairs if a]
    no = [s < threshold for s, a in pairs if not a]
    rates = [sum(v) / len(v) for v in (yes, no) if v]
    return round(sum(rates) / len(rates), 4) if rates else 0.0

