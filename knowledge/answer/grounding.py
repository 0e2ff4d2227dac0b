"""The grounding check: is each sentence of an answer supported by the excerpts it was given?

A sentence is supported when the excerpts hold most of its term weight (Snowball stems for English,
jieba words for Chinese, weighed by IDF over the index). Rare words decide, as in the gate: "stores
its data on AWS" shares "store" and "data" with any storage passage, but "aws" is in none of them.
A word the index has never seen weighs as much as the rarest word it has (BM25's IDF at df 0). No NLI or cross-encoder
model installs offline from the package registries here, so the check is lexical; it catches an
invented name, number or path, not a negation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from knowledge.answer.sentences import units
from knowledge.text.terms import terms, weight_share

SUPPORTED_SHARE = 0.6  # of a sentence's term weight found in the excerpts
MIN_TERMS = 3          # shorter sentences ("Yes.", "See [2].") are not judged
_CITE = re.compile(r"\[\d+\]")
_QUOTE_MARK = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)  # not \s: it would eat the blank line before
_CODE = re.compile(r"`([^`]*)`")

Idf = Callable[[list[str]], dict[str, float]]


@dataclass(frozen=True)
class Checked:
    """One answer sentence and whether the excerpts support it (None: too short to judge)."""

    text: str
    supported: bool | None
    share: float


def check(answer: str, excerpts: list[str], idf: Idf | None = None) -> list[Checked]:
    """Each sentence of `answer`, judged against `excerpts` together."""
    found = {t for text in excerpts for t in terms(text)}
    out = []
    for unit in units(_CODE.sub(r"\1", _QUOTE_MARK.sub("", answer))):
        own = list(dict.fromkeys(terms(_CITE.sub("", unit.text))))
        if len(own) < MIN_TERMS:
            out.append(Checked(unit.text, None, 1.0))
            continue
        share = weight_share(_weights(own, idf), found)
        out.append(Checked(unit.text, share >= SUPPORTED_SHARE, round(share, 3)))
    return out


def cited_numbers(answer: str) -> set[int]:
    """The excerpt numbers that `answer` cites ("… port 8000. [1]" cites 1)."""
    return {int(mark[1:-1]) for mark in _CITE.findall(answer)}


def summary(checked: list[Checked]) -> dict:
    """The API's `grounding` field: sentences judged, supported, and the unsupported ones."""
    judged = [c for c in checked if c.supported is not None]
    return {"sentences": len(judged), "supported": sum(bool(c.supported) for c in judged),
            "unsupported": [c.text for c in judged if not c.supported]}


def mark(answer: str, checked: list[Checked], sign: str = " ⚠") -> str:
    """`answer` with `sign` after each unsupported sentence (where it is found verbatim)."""
    for c in checked:
        if c.supported is False and c.text in answer:
            answer = answer.replace(c.text, c.text + sign, 1)
    return answer


def _weights(words: list[str], idf: Idf | None) -> dict[str, float]:
    if idf is None:
        return dict.fromkeys(words, 1.0)
    known = idf(words)  # a word the index never saw gets the highest weight there is (df 0)
    return {w: known.get(w, 1.0) for w in words}
