"""Terms for the lexical (BM25) index: stemmed English words, and CJK character bigrams.

Why bigrams: Chinese has no spaces, and the embedded embedding model is English-only, so for
Chinese questions lexical matching carries the recall. Overlapping character bigrams need no
dictionary and match most two-character words; single characters are kept for one-character runs.
"""

from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
STOPWORDS = frozenset("""
a an and are as at be been but by can could did do does doing for from had has have how i if in into is it
its me my no not of on or our please should so than that the their them then there these they this those to
us was we were what when where which who why will with would you your yours am any about tell want need
""".split())
# Chinese particles that carry no topic (kept short: removing a character also joins its
# neighbours into a bigram, the same way in documents and questions).
CJK_STOP = frozenset("的了吗呢吧啊")
# Bump when `terms()` changes: the lexical index is then rebuilt from the stored chunk texts.
TERMS_VERSION = "suffix-bigram-1"
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A light suffix stripper: enough to match 'rotating' with 'rotate', 'certificates' with 'certificate'."""
    if len(word) <= 4 or word.isdigit():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                base += "y"
            return base.rstrip("e") if len(base) > 4 else base
    return word.rstrip("e") if len(word) > 5 else word


def is_cjk_text(text: str, threshold: float = 0.3) -> bool:
    """Whether most letters of `text` are CJK (used to weigh dense vs lexical retrieval)."""
    letters = [ch for ch in text if ch.isalnum()]
    if not letters:
        return False
    return sum(1 for ch in letters if _CJK.match(ch)) / len(letters) >= threshold


def terms(text: str) -> list[str]:
    """Index/query terms of `text`, in order (duplicates kept: BM25 counts them)."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[str] = []
    for token in _WORD.findall(text):
        if _CJK.match(token):
            chars = [c for c in token if c not in CJK_STOP] if len(token) > 2 else list(token)
            run = "".join(chars) or token
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i:i + 2] for i in range(len(run) - 1))
        elif token not in STOPWORDS:
            out.append(stem(token.replace("’", "'").split("'")[0]))
    return out
