"""Everyday words: how common a word is in English at large, so that the not-covered gate does
not let "another", "find" or "during" decide whether the documents cover a question.

The gate weighs a question's words by their rarity in the index (IDF). In a small knowledge base
an everyday word that its documents happen not to use ("anything", "went", "during") gets the
highest weight there is, as if it were the subject, and a plain paraphrase of a covered question
is declined: 4 of the sample's 22 answerable English questions were. wordfreq's Zipf scale (log10
of a word's frequency per billion running words, from large general corpora) says which words are
everyday; their weight is scaled down, while a word that is rare in English (and every word
missing from wordfreq, such as "debconf") keeps its full IDF.

Chinese words are not discounted by frequency (that lowered the minimum over the corpora that
chose it: BENCHMARKS.md, "Everyday words in the gate"), only Chinese *function* words are: 为, 给,
让, 做 and the like, from the stopwords-iso list, a closed class that names no subject. jieba keeps
them as words, and in a small index "为" weighed as much as "学生" (BENCHMARKS.md, "Chinese
function words in the gate").
"""

from __future__ import annotations

from functools import lru_cache

from knowledge.text.terms import is_cjk_text

RARE_ZIPF = 5.0      # a word at most this common (about 1 in 100,000 words) keeps its whole weight
EVERYDAY_ZIPF = 6.0  # from here on ("use", "get", "time") a word keeps only FLOOR of it
FLOOR = 0.05


@lru_cache(maxsize=8192)
def zipf(word: str) -> float:
    """How common `word` is in English at large: log10 of its frequency per billion words (0: unknown)."""
    import wordfreq  # data ships in the wheel: nothing is fetched

    return wordfreq.zipf_frequency(word, "en")


@lru_cache(maxsize=1)
def _function_words_zh() -> frozenset[str]:
    import stopwordsiso  # the lists ship in the wheel: nothing is fetched

    return frozenset(stopwordsiso.stopwords("zh"))


def factor(word: str) -> float:
    """The share of its index weight that a `word` keeps. English: 1 for a word rarer than
    RARE_ZIPF, falling linearly to FLOOR at EVERYDAY_ZIPF and beyond. Chinese: FLOOR for a
    function word, else 1."""
    if is_cjk_text(word):
        return FLOOR if word in _function_words_zh() else 1.0
    scaled = (EVERYDAY_ZIPF - zipf(word)) / (EVERYDAY_ZIPF - RARE_ZIPF)
    return min(1.0, max(FLOOR, scaled))


def discount(weights: dict[str, float], pairs: list[tuple[str, str]]) -> dict[str, float]:
    """`weights` (per term) with each term scaled by the factor of the most common word it came
    from ("run" and "running" both give "run"); `pairs` is the question's `term_words`."""
    factors: dict[str, float] = {}
    for term, word in pairs:
        factors[term] = min(factors.get(term, 1.0), factor(word))
    return {term: w * factors.get(term, 1.0) for term, w in weights.items()}
