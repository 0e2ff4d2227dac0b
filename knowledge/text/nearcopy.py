"""Near-copies: the same passage extracted from two files (the HTML, PDF and DOCX of one manual).

Their texts differ in chunk boundaries, quotes, hyphenation and page headers, so exact matching
misses them, and three copies of one passage then take three of the five places in a result
list. Two texts are the same passage when most of the shorter one's words recur in the longer one,
in order, and what differs inside the shared span is formatting noise: a word split by hyphenation,
or a few inserted words such as a page header. A difference that changes meaning keeps them apart:
a word replaced by another, or a number or a negation that only one of them has (two versions of a
policy that differ in one figure are two passages, never one).
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

# CJK characters one by one (Chinese has no spaces), other scripts by word, digits as their own tokens.
_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|\d+|[^\W\d_\u3400-\u9fff\uf900-\ufaff]+")
# Words whose presence in only one copy flips a statement ("t" is the tail of don't / can't).
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "t", "without", "neither", "nor",
                        "不", "没", "无", "非", "别", "勿", "未"})
SHINGLE = 3
MIN_SHARED = 0.8      # share of the shorter text's words inside the aligned span
MAX_NOISE = 0.1       # unmatched words inside the span, relative to the shorter text


def tokens(text: str) -> list[str]:
    """Lower-case word/character tokens with punctuation dropped; NFKC folds PDF ligatures (ﬁ → fi)
    and full-width forms."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < SHINGLE:
        return {tuple(words)}
    return {tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


class _Text:
    __slots__ = ("words", "shingles")

    def __init__(self, text: str) -> None:
        self.words = tokens(text)
        self.shingles = _shingles(self.words)


def _same(a: _Text, b: _Text) -> bool:
    short, long = (a, b) if len(a.words) <= len(b.words) else (b, a)
    if not short.words:
        return False
    # Cheap filter first: most pairs share few 3-word runs.
    if len(short.shingles & long.shingles) < MIN_SHARED * len(short.shingles):
        return False
    ops = SequenceMatcher(None, short.words, long.words, autojunk=False).get_opcodes()
    equal = [i for i, op in enumerate(ops) if op[0] == "equal"]
    inner = ops[equal[0]:equal[-1] + 1]  # differences outside this span are chunk boundaries
    matched = sum(i2 - i1 for tag, i1, i2, _, _ in inner if tag == "equal")
    noise: list[str] = []
    for tag, i1, i2, j1, j2 in inner:
        if tag == "replace" and "".join(short.words[i1:i2]) != "".join(long.words[j1:j2]):
            return False  # a word changed ("Berlin" for "Munich"), not just split by hyphenation
        if tag in ("insert", "delete"):
            noise += short.words[i1:i2] + long.words[j1:j2]
    if matched < MIN_SHARED * len(short.words) or len(noise) > MAX_NOISE * len(short.words):
        return False
    return not any(w.isdigit() or w in _NEGATIONS for w in noise)


def same_passage(a: str, b: str) -> bool:
    """Whether two chunk texts are copies of one passage (see the module doc)."""
    return _same(_Text(a), _Text(b))


def fold(ids: list[str], texts: dict[str, str]) -> dict[str, str]:
    """Each id mapped to the first id (in `ids` order) whose text is the same passage as its own."""
    reps: list[tuple[str, _Text]] = []
    out: dict[str, str] = {}
    for cid in ids:
        if cid in out:
            continue
        text = _Text(texts[cid])
        out[cid] = next((rid for rid, rtext in reps if _same(text, rtext)), cid)
        if out[cid] == cid:
            reps.append((cid, text))
    return out
