"""Terms for the lexical (BM25) index and the relevance gate: Snowball-stemmed English words and
jieba-segmented Chinese words.

Why segmentation: Chinese has no spaces, and the embedded embedding model is English-only, so for
Chinese questions lexical matching carries the recall and decides "not covered". Character bigrams
made half of a question's terms non-words (认情, 况下, 下服…) and sank the overlap of questions the
documents do answer; jieba's search mode gives words plus their shorter sub-words instead.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from functools import lru_cache

_CJK_CHARS = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD = re.compile(rf"[a-z0-9]+(?:['’][a-z]+)?|[{_CJK_CHARS}]+")
_CJK = re.compile(rf"[{_CJK_CHARS}]")
_LATIN_WORD = re.compile(rf"[^\W_{_CJK_CHARS}]+")  # letters and digits of any non-CJK script
STOPWORDS = frozenset("""
a an and are as at be been but by can could did do does doing for from had has have how i if in into is it
its me my no not of on or our please should so than that the their them then there these they this those to
us was we were what when where which who why will with would you your yours am any about tell want need
""".split())
# Chinese words that carry no topic: particles, pronouns, question words ("which", "how", "what").
CJK_STOP = frozenset("""
的 了 吗 呢 吧 啊 是 在 和 与 或 及 把 被 就 都 也 还 又 而 但 我 你 他 她 它 我们 你们 他们 这 那 这个 那个
哪 哪个 哪些 哪里 什么 怎么 怎样 怎么样 如何 为什么 多少 几 吗 呢 请 请问 一下 可以 能 会 要 应该 需要
""".split())
# Bump when `terms()` changes: the lexical index is then rebuilt from the stored chunk texts.
TERMS_VERSION = "jieba-snowball-1"
_jieba_lock = threading.Lock()


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer: the Snowball stemmers in C

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=1)
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)  # it announces building its prefix dictionary on stderr
    with _jieba_lock:
        jieba.initialize()
    return jieba


def is_cjk_text(text: str, threshold: float = 0.3) -> bool:
    """Whether `text` is mostly CJK (which weighs dense against lexical retrieval, and picks the gate's
    threshold and the answer's language).

    A CJK character is about a word of its own, while a Latin word is several letters, so letters
    are not what to count: "怎样把 Debian 加入 Active Directory 域？" has 6 CJK characters against 21
    Latin letters, yet is a Chinese question. Each Latin word counts as two CJK characters instead.
    """
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    if not cjk + latin:
        return False
    return cjk / (cjk + 2 * latin) >= threshold


def cjk_words(run: str) -> list[str]:
    """Words of a run of CJK text (jieba search mode: words and their sub-words), stop words left out."""
    return [w for w in _jieba().cut_for_search(run) if w.strip() and w not in CJK_STOP]


def weight_share(weights: dict[str, float], found: set[str]) -> float:
    """The share of the total term weight (IDF: rare words decide) whose terms are in `found`, 0..1.
    The gate, the quote picker and the grounding check all ask this one question."""
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in found) / total if total else 0.0


def terms(text: str) -> list[str]:
    """Index/query terms of `text`, in order (duplicates kept: BM25 counts them)."""
    return [term for term, _ in term_words(text)]


def term_words(text: str) -> list[tuple[str, str]]:
    """Each term of `text` with the lower-case word it came from ("instal", "installing"), in order."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: list[tuple[str, str]] = []
    for token in _WORD.findall(text):
        if _CJK.match(token):
            out.extend((word, word) for word in cjk_words(token))
        elif token not in STOPWORDS:
            out.append((_stemmer().stemWord(token.replace("’", "'").split("'")[0]), token))
    return out
