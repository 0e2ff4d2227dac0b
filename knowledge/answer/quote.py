"""Quoted answers: the excerpts' own sentences that answer the question, picked and quoted verbatim.

Why: a 135M-parameter model given the right excerpt mostly echoes it or answers around the fact
(contains-the-answer 0.20 on the dev corpus with the right file cited 0.96). The sentence that holds
the fact is usually the one that shares the question's rarest words and meaning, so picking it is a
retrieval problem at sentence scale, which the knowledge base already knows how to score.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from knowledge.answer.sentences import Unit, join, starts_sentence, units, unmark
from knowledge.text.nearcopy import same_passage
from knowledge.text.terms import is_cjk_text, terms, weight_share

# Sentences (or whole lines) in one quoted answer. The reading budget is MAX_CHARS; 4 units left
# short Chinese sentences and list items out under it (chosen on the dev and sample sets: 4 -> 8
# gained 3 questions there and lost none; 8 to 12 the same). BENCHMARKS.md, 2026-12-07, fifth.
MAX_UNITS = 8
MAX_CHARS = 600        # and characters, so that a quote stays an answer, not the excerpt again
KEEP_SHARE = 0.6       # a further unit must score this share of the best one
RANK_PRIOR = 0.05      # a tie between excerpts goes to the better-ranked one
FOLLOWING = 1          # units after the best one, always quoted with it
MIN_PIECE = 20         # characters: a shorter unit inside a quoted sentence may be a unit of its own ("Note:")
SAME_LENGTH = 0.8      # a reworded copy of a chosen sentence is at least this share of its length
DENSE_WEIGHT = {"en": 0.5, "zh": 0.2}  # the embedder is English-only: little weight on Chinese
NUMBER_BONUS = 0.1     # for a unit that holds a number, when the question asks for one
FOLLOWER_UNITS = 8     # what an announcing unit brings: up to this many lines or list items of its block,
BLOCK_CHARS = 400      # and characters (the first always comes, shortened if need be)
FOLLOWER_CHARS = 300   # a longer follower is shortened to this, never dropped
ITEM_CHARS = 60        # a prose unit this short after an announcement is a list item ("colon :"); half in Chinese


@dataclass(frozen=True)
class Quote:
    """One picked unit of excerpt `n` (the citation number)."""

    n: int
    unit: Unit
    score: float


_ENDED = re.compile(r"[.!?。！？]['\"”’)\]]*\s*$")
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]|\n\s*\n")
_MARKS = re.compile(r"\[\d+\]|[\u00b9\u00b2\u00b3\u2070-\u2079]")  # footnote marks: "[16]", "²"
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_QUESTION = re.compile(r"[^\s?]\?\s*$")
# A question that asks for an amount ("How many languages…", "多少内存", "几个字符") is answered by
# a sentence with a number in it, in digits or in words ("around 1000", "five minutes", "四分钟").
_ASKS_AMOUNT = re.compile(r"\bhow (?:many|much|long|big|large|old|often|far)\b|\bwhat (?:year|size)\b"
                          r"|多少|多大|多长|多久|多高|多远|几[个次天年种位条分秒]", re.IGNORECASE)
_NUMBER = re.compile(r"\d|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
                     r"forty|fifty|sixty|hundred|thousand|million|billion|dozen)s?\b|[二两三四五六七八九十百千万亿]",
                     re.IGNORECASE)
_POINTS_BACK = re.compile(r"(?:(?:This|That|These|Those|Such)\b|[这此它该])")  # a sentence that refers back
# ... or names, mid-sentence, a thing the sentence before it introduced ("the first time you press this
# key combination"); not the document itself ("this manual", "in this case").
_REFERS_BACK = re.compile(r"\b(?:this|these)\s+(?!(?:case|manual|section|chapter|document|page|guide|book|way|"
                          r"time|point|example|release|version|list|text|help|article|tutorial|are|was|were|will|would|can|could|"
                          r"may|might|must|should|has|have|had|does|did|means|also|not|one|ones)\b)[a-z]{3,}",
                          re.IGNORECASE)
Embed = Callable[[list[str]], np.ndarray]


def pick(question: str, excerpts: Sequence[tuple[int, str]], lang: str, idf: dict[str, float],
         embed: Embed | None = None) -> list[Quote]:
    """The units of `excerpts` ((citation number, text), best-ranked first) that answer `question`,
    in quoting order: by excerpt, then as they stand in it. Empty when no excerpt has a sentence to
    quote (only titles and questions, or no text)."""
    cands = [(rank, n, u) for rank, (n, text) in enumerate(excerpts) for u in units(text) if not u.is_contents]
    if not cands:
        return []
    scores = _scores(question, [u.text for _, _, u in cands], lang, idf, embed)
    scores = [s - RANK_PRIOR * rank for s, (rank, _, _) in zip(scores, cands, strict=True)]
    if _ASKS_AMOUNT.search(question):
        scores = [s + NUMBER_BONUS * bool(_NUMBER.search(u.text)) for s, (_, _, u) in zip(scores, cands, strict=True)]
    keys = [_key(u) for _, _, u in cands]  # what copies of one sentence share, once per unit
    # A title or a question with nothing under it in its excerpt ("配置服务" closing a chunk) names a
    # subject and answers nothing: it is never quoted.
    order = [i for i in sorted(range(len(cands)), key=lambda i: -scores[i]) if not _bare(_answering(i, cands), cands)]
    if not order:
        return []
    best = _answering(order[0], cands)
    chosen = [best, *_following(best, cands, FOLLOWING)]
    for i in order[1:]:
        if len(chosen) >= MAX_UNITS or scores[i] < KEEP_SHARE * scores[order[0]]:
            break
        i = _answering(i, cands)
        if _foreign(cands[i][2], cands[best][2], lang):
            continue
        copy = _within(keys[i], [keys[j] for j in chosen]) or _reworded(i, chosen, cands, keys)
        if not copy and _chars(chosen, cands) + len(cands[i][2].text) <= MAX_CHARS:
            chosen.append(i)
    chosen += _followers(chosen, cands, keys)
    chosen += [j for i in chosen for j in _continued(i, cands)]  # a comment's sentence, to its end
    chosen += [j for i in chosen for j in _antecedent(i, cands, i == best)]  # what "This" refers to
    announced = [j for i in chosen for j in _introduced(i, cands)]  # "as follows:" brings its command
    chosen += announced
    chosen += [j for i in chosen for j in _introducer(i, cands)]  # and a command brings its "as follows:"
    chosen = _once(sorted(set(chosen), key=lambda i: (cands[i][0], cands[i][2].index)), keys)
    return [Quote(cands[i][1], _shortened(cands[i][2]) if i in announced else cands[i][2], scores[i])
            for i in chosen]


def sentence_end(text: str, tail: str) -> str:
    """`text` completed from `tail` (the document's text right after it) up to the end of its last
    sentence, so that a chunk cut mid-sentence is not quoted cut ("buzz for release" + "1.1, …").
    A chunk that ends on a colon, or on a sentence that announces what follows ("as follows.",
    "下列命令…。"), gets the block it introduces (a command, a list)."""
    if not tail:
        return text
    if _ENDED.search(text):
        return _with_announced(text, tail)
    if text.rstrip().endswith((":", "：")):
        return text + _next_block(tail)
    end = _SENTENCE_END.search(tail)
    if end:
        return _with_announced(text + tail[:end.end()], tail[end.end():])
    cut = tail.rstrip().rsplit(None, 1)[0] if " " in tail.strip() else tail
    return text + cut + "…"


def _with_announced(text: str, tail: str) -> str:
    """`text`, and when its last sentence announces what follows ("使用下列命令…。", "as follows."),
    the block after it in the document: the chunk may end just before the command it promises."""
    last = units(text)
    return text + _next_block(tail) if last and last[-1].announces and tail.strip() else text


def _next_block(tail: str) -> str:
    """The first block of `tail`: its leading blank lines, then up to the next blank line."""
    body = tail.lstrip("\n")
    end = _BLANK_LINE.search(body)
    return tail[:len(tail) - len(body)] + (body[:end.start()] if end else body)


def render(quotes: list[Quote]) -> str:
    """The quotes as Markdown block quotes, one paragraph per excerpt, each ending with its [n]."""
    groups: list[tuple[int, list[Unit]]] = []
    for q in quotes:
        if groups and groups[-1][0] == q.n:
            groups[-1][1].append(q.unit)
        else:
            groups.append((q.n, [q.unit]))
    return "\n\n".join(_block(n, group) for n, group in groups)


def _block(n: int, group: list[Unit]) -> str:
    lines, prose = [], []
    for before, u in zip([None, *group], group, strict=False):
        if before is not None and u.index > before.index + 1:  # something left out between the two
            prose.append("…")
        if u.whole_line:  # code and table rows keep their line and their spacing, as code
            if prose:
                lines.append(join(prose))
                prose = []
            lines.append(f"`{u.text.strip()}`")
        else:
            prose.append(unmark(u.text))
    if prose:
        lines.append(join(prose))
    lines[-1] += f" [{n}]"
    return "\n>\n".join(f"> {line}" for line in lines)


def _scores(question: str, texts: list[str], lang: str, idf: dict[str, float], embed: Embed | None) -> list[float]:
    """Each text's share of the question's term weight, plus its dense similarity (weighted)."""
    lexical = [weight_share(idf, set(terms(text))) for text in texts]
    if embed is None:
        return lexical
    vectors = embed([question, *texts])
    sims = vectors[1:] @ vectors[0]
    return [lex + DENSE_WEIGHT.get(lang, 0.5) * max(float(s), 0.0) for lex, s in zip(lexical, sims, strict=True)]


def _answering(i: int, cands: list[tuple[int, int, Unit]]) -> int:
    """A heading answers nothing, nor does a question (a FAQ's "Can I put my commercial program in a
    Debian package?"): the unit under it does (same excerpt), when there is one."""
    rank, _, unit = cands[i]
    if (_heading(i, cands) or _asks(unit)) and i + 1 < len(cands) and cands[i + 1][0] == rank:
        return i + 1
    return i


def _bare(i: int, cands: list[tuple[int, int, Unit]]) -> bool:
    """A title or a question with no answer under it in its excerpt: never quoted."""
    return (cands[i][2].is_heading and _heading(i, cands)) or _asks(cands[i][2])


def _asks(unit: Unit) -> bool:
    """A question: its last word carries the question mark ("question mark ?", a list item naming
    the character, asks nothing)."""
    return not unit.whole_line and (_QUESTION.search(unit.text) is not None or unit.text.rstrip().endswith("？"))


def _foreign(unit: Unit, best: Unit, lang: str) -> bool:
    """A Chinese sentence beside the English best one, for an English question: its reader asked in
    English and could not read it. Not the other way round: the Chinese translations of manuals lag
    and leave names out (exim4's "邮件客户端" for "mail transport agent"), so a Chinese question
    keeps the English original beside the translation."""
    return lang == "en" and not unit.whole_line and is_cjk_text(unit.text) and not is_cjk_text(best.text)


def _introduced(i: int, cands: list[tuple[int, int, Unit]]) -> list[int]:
    """What a unit that announces it introduces: a command's lines, table rows, a list's items (up to
    FOLLOWER_UNITS of them in BLOCK_CHARS), or a sentence. "… as follows:", "使用下列命令…。",
    "the following characters are not allowed:" promise what comes next, all of it."""
    if not cands[i][2].announces:
        return []
    out: list[int] = []
    for j in range(i + 1, min(i + 1 + FOLLOWER_UNITS, len(cands))):
        unit = cands[j][2]
        if cands[j][0] != cands[i][0] or (cands[i][2].whole_line and not unit.whole_line):
            break  # a listing's line introduces lines of the listing, not the prose after it
        if _asks(unit):
            break  # a FAQ's next question: the announced block was cut off before it
        item = unit.whole_line or len(unit.text) <= (ITEM_CHARS // 2 if is_cjk_text(unit.text) else ITEM_CHARS)
        lines_then_prose = any(cands[k][2].whole_line for k in out) and not unit.whole_line
        if out and (not item or lines_then_prose or _chars(out, cands) + len(unit.text) > BLOCK_CHARS):
            break  # the list or listing has ended in a paragraph, or is as long as a quote allows
        # (A short line is not taken for a title here: "=(B2<A2)+B2-A2", "Russ Allbery" after a
        # colon look like one and are what the colon announces.)
        out.append(j)
        if not item:
            break  # an announced sentence: it is the block
    return out


def _shortened(unit: Unit) -> Unit:
    """An announced block's unit cut to FOLLOWER_CHARS at a word, marked "…": a long command or
    paragraph stays an answer's part, and the announcement is never quoted without it."""
    if len(unit.text) <= FOLLOWER_CHARS:
        return unit
    cut = unit.text[:FOLLOWER_CHARS]
    cut = cut.rsplit(None, 1)[0] if " " in cut.strip() and not is_cjk_text(cut) else cut
    return Unit(unit.index, cut.rstrip() + "…", unit.whole_line)


def _introducer(i: int, cands: list[tuple[int, int, Unit]]) -> list[int]:
    """The unit before, when it announces unit `i`: a definition's term ("0-99:" before "Globally
    allocated by the Debian project"), a command's "run this:", "the following command."."""
    if i == 0 or cands[i - 1][0] != cands[i][0]:
        return []
    return [i - 1] if cands[i - 1][2].announces else []


def _followers(chosen: list[int], cands: list[tuple[int, int, Unit]], keys: list[str]) -> list[int]:
    """The unit after each further pick, in the units and characters the quote has left: a sentence
    that names the subject ("You can get a shell in several ways.") is often followed by the fact.
    Only after picking, so that a follower never displaces a unit that scored (every pick's follower
    taking a place cost dev English 0.84 -> 0.80)."""
    out: list[int] = []
    for i in chosen[1:]:
        for j in _following(i, cands, FOLLOWING):
            taken = [*chosen, *out]
            if (len(taken) < MAX_UNITS and not _within(keys[j], [keys[k] for k in taken])
                    and _chars(taken, cands) + len(cands[j][2].text) <= MAX_CHARS):
                out.append(j)
    return out


def _antecedent(i: int, cands: list[tuple[int, int, Unit]], best: bool = False) -> list[int]:
    """The unit before a sentence that points back to it ("This is what prevents out-of-memory
    crashes.", "这样…"): quoted alone, such a sentence names what it says of nothing. For the `best`
    unit also one that refers back mid-sentence ("… the first time you press this key combination"
    after the sentence that names the key): the answer is then the sentence before."""
    if i == 0 or cands[i - 1][0] != cands[i][0] or _heading(i - 1, cands):
        return []
    text = cands[i][2].text
    back = _POINTS_BACK.match(text) or (best and not cands[i][2].whole_line and _REFERS_BACK.search(text))
    return [i - 1] if back else []


def _continued(i: int, cands: list[tuple[int, int, Unit]]) -> list[int]:
    """The units that finish the sentence unit `i` starts, up to three. A configuration file's
    comment is prose wrapped by hand, one unit a line ("# To get a list of every" / "# possible
    question that could be asked during an install, do an" / …); a page's listings cut its sentence
    into paragraphs ("Then run" / "apt-get update" / "followed by" / "apt-get dist-upgrade")."""
    out: list[int] = []
    j = i
    while len(out) < 3 and j + 1 < len(cands) and cands[j + 1][0] == cands[i][0] and _runs_on(j, cands):
        j += 1
        out.append(j)
    return out


def _runs_on(j: int, cands: list[tuple[int, int, Unit]]) -> bool:
    """Unit `j` stops mid-sentence and the unit after it goes on with it: a comment line into the
    next comment line; prose that is not a title into whatever follows."""
    unit, after = cands[j][2], cands[j + 1][2]
    if not unit.unfinished:
        return False
    return after.is_comment if unit.is_comment else not unit.whole_line and not _heading(j, cands)


def _heading(i: int, cands: list[tuple[int, int, Unit]]) -> bool:
    """A title (`Unit.is_heading`) with the start of a sentence under it. A short unit followed by
    one that begins mid-sentence ("Then run" above "apt-get update") is a piece of that sentence."""
    if not cands[i][2].is_heading:
        return False
    after = i + 1 < len(cands) and cands[i + 1][0] == cands[i][0]
    return not after or starts_sentence(cands[i + 1][2].text)


def _following(i: int, cands: list[tuple[int, int, Unit]], n: int) -> list[int]:
    """The `n` units after unit `i` in its excerpt: the fact often follows the sentence that names it.
    A heading ends them, and so does a question (a FAQ's next entry): what follows is another subject."""
    out: list[int] = []
    for j in range(i + 1, min(i + 1 + n, len(cands))):
        if cands[j][0] != cands[i][0] or _heading(j, cands) or _asks(cands[j][2]):
            break
        out.append(j)
    return out


def _once(chosen: list[int], keys: list[str]) -> list[int]:
    """Each sentence quoted once (`keys`: each unit's `_key`): a copy of the document (its PDF, an
    older version) repeats it, often with its footnote marks in another form ("system²",
    "system[16]"), or cut where its chunk starts."""
    picked = [keys[i] for i in chosen]
    seen: set[str] = set()
    out = []
    for i in chosen:
        if keys[i] not in seen and not _within(keys[i], [k for k in picked if k != keys[i]]):
            seen.add(keys[i])
            out.append(i)
    return out


def _reworded(i: int, chosen: list[int], cands: list[tuple[int, int, Unit]], keys: list[str]) -> bool:
    """Unit `i` is a chosen sentence again, in another copy's wording: the HTML and the PDF of one
    manual print "CD/BD .iso image" and "CD/BD ISO image" (`nearcopy`). Prose only (a command is
    quoted as it stands), and about as long: a piece of a longer sentence (a chunk that starts
    mid-sentence, a command a PDF ran into the prose) is not the sentence."""
    if cands[i][2].whole_line:
        return False
    return any(not cands[j][2].whole_line and SAME_LENGTH * len(keys[j]) <= len(keys[i]) <= len(keys[j])
               and same_passage(keys[i], keys[j]) for j in chosen)


def _within(key: str, others: Iterable[str]) -> bool:
    """`key` is one of `others`, or the tail or middle of one: a chunk that starts mid-sentence
    ("the package), the first line of the changelog …") holds a piece of a sentence quoted whole."""
    return any(key == o or (len(key) >= MIN_PIECE and key in o) for o in others)


def _key(unit: Unit) -> str:
    """What two copies of one sentence share: its words, less case, spacing and footnote marks."""
    return " ".join(_MARKS.sub("", unit.text).lower().split())


def _chars(chosen: list[int], cands: list[tuple[int, int, Unit]]) -> int:
    return sum(len(cands[i][2].text) for i in chosen)
