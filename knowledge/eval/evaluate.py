"""Retrieval evaluation: recall@1/5/10 and MRR over a QA file, overall and per language."""

from __future__ import annotations

import json
import re
import unicodedata
from collections import defaultdict
from pathlib import Path

from knowledge.errors import KnowledgeError
from knowledge.index.access import EVERYTHING
from knowledge.retrieve.retriever import Retriever
from knowledge.text.terms import is_cjk_text

KS = (1, 5, 10)


# Typographic quotes are the same quote to a reader: one copy of a manual prints ”server”, another
# "server", and NFKC leaves both as they are.
_QUOTES = str.maketrans({c: '"' for c in "“”„‟«»"} | {c: "'" for c in "‘’‚‛"})


def normalise(text: str) -> str:
    """How expected strings are matched in chunks and answers: compatibility forms folded (a PDF's
    "ﬁ" ligature, full-width letters), typographic quotes made plain, whitespace folded, lower case."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return re.sub(r"\s+", " ", text).strip().lower()


def answerable(item: dict) -> bool:
    return item.get("answerable", True) is not False


def item_lang(item: dict) -> str:
    """The language a QA item is counted under: its `lang` label, else the language its question reads in."""
    return item.get("lang") or ("zh" if is_cjk_text(item["question"]) else "en")


def expected_sources(item: dict) -> set[str]:
    """The sources that count as right: one path, or a list (the same manual as HTML, PDF, TXT…)."""
    source = item.get("source") or []
    return {s.strip("/") for s in ([source] if isinstance(source, str) else source)}


def load_qa(path: Path) -> list[dict]:
    """Lines of {"question", "answer_contains": [...], "source" (path or list), "lang"?, "answerable"?}.

    Unanswerable questions (`"answerable": false`) need only the question; they measure the
    "not covered" gate and are left out of retrieval recall.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise KnowledgeError(f"cannot read the QA file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise KnowledgeError(f"{path}: not UTF-8 text (a QA file is JSON lines)") from None
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item["question"], str):
                raise TypeError
            if answerable(item) and not (isinstance(item["answer_contains"], list)
                                         and isinstance(item["source"], (str, list))):
                raise TypeError
        except (json.JSONDecodeError, KeyError, TypeError):
            raise KnowledgeError(f"{path}:{n}: need question, answer_contains (list) and source "
                                 "(or \"answerable\": false)") from None
        items.append(item)
    return items


def first_hit_rank(hits, item: dict) -> int | None:
    """1-based rank of the first chunk from the expected source containing an expected string."""
    wanted = [normalise(s) for s in item["answer_contains"]]
    sources = expected_sources(item)
    for rank, h in enumerate(hits, start=1):
        if sources & {h.source, *h.also_in} and any(w in normalise(h.text) for w in wanted):
            return rank
    return None


def evaluate(retriever: Retriever, items: list[dict], mode: str = "hybrid") -> dict:
    """The metrics dict printed by `appliance eval retrieval --json` (`mode`: hybrid, dense, lexical)."""
    groups: dict[str, list[int | None]] = defaultdict(list)
    everything: list[int | None] = []
    for item in filter(answerable, items):
        rank = first_hit_rank(retriever.search(item["question"], k=max(KS), mode=mode, scope=EVERYTHING), item)
        everything.append(rank)
        if item.get("lang"):
            groups[item["lang"]].append(rank)
    out = _metrics(everything)
    out["by_lang"] = {lang: _metrics(ranks) for lang, ranks in sorted(groups.items())}
    return out


def _metrics(ranks: list[int | None]) -> dict:
    n = len(ranks)
    out: dict = {"n": n}
    for k in KS:
        out[f"recall@{k}"] = round(sum(1 for r in ranks if r and r <= k) / n, 4) if n else 0.0
    out["mrr"] = round(sum(1 / r for r in ranks if r) / n, 4) if n else 0.0
    return out
