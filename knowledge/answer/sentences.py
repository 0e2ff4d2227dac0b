"""Excerpts cut into the units a quoted answer is made of: prose sentences, and whole lines where a
line is the unit (a list item's first line, a table row, a line of code or a command).

Why lines stay whole: a quote that stops half-way through a command or a table row is worse than no
quote. Why prose lines are joined first: the loaders keep the documents' hard wraps, so a sentence
often spans lines, and a line is then half a sentence.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from knowledge.text.terms import is_cjk_text

# A table row, a code line (indented or a shell prompt), or a Markdown heading: one unit each.
_LINE_UNIT = re.compile(r"^(?:\s*\||\s{4,}\S|\t|\s*[$#]\s|\s*#{1,6}\s)")
_ITEM = re.compile(r"^\s*(?:[-*+•·]|\d{1,3}[.)、])\s+")  # a list item starts a paragraph of its own
_FENCE = re.compile(r"^\s*(```|~~~)")
_FINAL = re.compile(r"[.!?:;。！？：；)\]\"”]\s*$")
_CJK_END = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]$")
_CJK_START = re.compile(r"^[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")
_TITLE_NEXT = re.compile(r"[A-Z0-9\u3400-\u9fff]")  # what follows a title starts a sentence
PROSE_LINE = 60  # characters: a line this long is prose's, not a title's or (mostly) code's
TITLE_WIDTH = 0.6  # a title line is shorter than this share of its block's longest line
_LEADERS = re.compile(r"(?:\.\s?){5,}|…{2,}")  # a table of contents' dot leaders
_COMMENT = re.compile(r"^\s*(?:#|//)\s*\w")  # a comment line of code or of a configuration file
_NUMBERED = re.compile(r"\d+(?:\.\d+)+\.?\s+[A-Z\u3400-\u9fff]")  # "3.1.3 Services …", "12.2.1 Upgrading …"
MAX_TITLE_WORDS = 12  # a numbered title is at most this long; a longer line is a numbered sentence
# A document's footnote mark glued to its word ("memory[2]", "Alt+F2^[13]"): beside excerpts numbered
# [1], [2]… it reads as a citation of excerpt 2, or of one that does not exist. Not in code, where
# "argv[1]" means it.
_GLUED_MARK = re.compile(r"(?<=[^\s\[(])\^?\[\d{1,3}\]")


# A sentence that announces what follows it without a colon: "… can be invoked as follows.",
# "Use the following command.", "另外，可以使用下列命令使非特权用户无需密码就获得管理员权限。", "步骤如下。".
_BLOCKS = (r"(?:commands?|lines?|steps?|examples?|options?|packages?|entr(?:y|ies)|table|list|code|files?|"
           r"settings?|procedure|script|snippet)")
_ANNOUNCES = re.compile(
    r"\bas follows\b|\b(?:the|these) following\s*[.:]?$|\bfollowing (?:\w+ )?" + _BLOCKS + r"\b|\blike this[.:]?$"
    r"|下列|如下|下述|(?:以下|下面)的?(?:命令|指令|步骤|方法|操作|内容|设置|选项|代码|示例|例子|几)", re.IGNORECASE)


@dataclass(frozen=True)
class Unit:
    """One quotable piece of an excerpt, in document order (`index`)."""

    index: int
    text: str
    whole_line: bool = False  # a table row or a line of code: quoted as it stands

    @property
    def is_heading(self) -> bool:
        """A title on its own ("Data directory", "数据目录"): it names the subject, it answers nothing."""
        text = self.text.lstrip("#").strip()
        short = len(text) < 16 if is_cjk_text(text) else len(text.split()) < 5
        # A numbered section title is one at any length ("3.1.3 Services running on the main server")
        short = short or (_NUMBERED.match(text) is not None and len(text.split()) <= MAX_TITLE_WORDS)
        # "followed by", "apt-get update": pieces of a sentence that a listing cut, not titles
        lower = text[:1].islower()
        return short and not lower and self.unfinished and not self.whole_line

    @property
    def unfinished(self) -> bool:
        """No final stop: a sentence that goes on in the next unit, unless this is a title."""
        return not _FINAL.search(self.text)

    @property
    def opens_list(self) -> bool:
        """Ends with a colon: what it introduces (a list, a command) is its answer."""
        return self.text.rstrip().endswith((":", "："))

    @property
    def announces(self) -> bool:
        """Introduces what follows it: a trailing colon, or prose that says so ("as follows", "the
        following command", "下列命令", "如下"). Quoted without it, it promises and does not give."""
        return self.opens_list or (not self.whole_line and _ANNOUNCES.search(self.text) is not None)

    @property
    def is_comment(self) -> bool:
        """A comment line of a listing ("# To get a list of every"): prose, wrapped by hand."""
        return self.whole_line and _COMMENT.match(self.text) is not None

    @property
    def is_contents(self) -> bool:
        """A table-of-contents line ("6.2 What are all those names? . . . . 21"): never an answer."""
        return bool(_LEADERS.search(self.text))


def units(text: str) -> list[Unit]:
    """`text` cut into sentences and whole-line units, in order."""
    out: list[str | tuple[str]] = []  # a tuple marks a whole-line unit
    para: list[str] = []
    fenced = False

    def flush() -> None:
        for block in _headings_apart(para):
            out.extend(sentences(join(block)))
        para.clear()

    for line in _dedented(text):
        if _FENCE.match(line):
            flush()
            fenced = not fenced
        elif fenced or _LINE_UNIT.match(line):
            flush()
            if line.strip():
                out.append((line.strip(),))
        elif not line.strip():
            flush()
        else:
            if _ITEM.match(line):
                flush()
            para.append(line.strip())
    flush()
    return [Unit(i, u[0], True) if isinstance(u, tuple) else Unit(i, u) for i, u in enumerate(out)]


def _headings_apart(lines: list[str]) -> list[list[str]]:
    """A block of lines cut before and after its title lines. A PDF's text puts "8.1 Shutting down
    the system" on a line of its own, right above the paragraph, with no blank line between: a line
    well short of the block's width, with no final stop, followed by another line, is a title."""
    width = max((len(line) for line in lines), default=0)
    blocks: list[list[str]] = [[]]
    for i, line in enumerate(lines):
        title = (i + 1 < len(lines) and len(line) < TITLE_WIDTH * width and not _FINAL.search(line)
                 and starts_sentence(lines[i + 1]))
        if title:
            blocks += [[line], []]
        else:
            blocks[-1].append(line)
    return [b for b in blocks if b]


def unmark(text: str) -> str:
    """`text` without the footnote marks glued to its prose's words; code and table rows (as `units`
    tells them) keep theirs. For what a reader or a model sees beside numbered excerpts."""
    if not text.strip():
        return text
    out, fenced = [], False
    for line, bare in zip(text.splitlines(keepends=True), _dedented(text), strict=True):
        if _FENCE.match(bare):
            fenced = not fenced
        elif not fenced and not _LINE_UNIT.match(bare):
            line = _GLUED_MARK.sub("", line)
        out.append(line)
    return "".join(out)


def _dedented(text: str) -> list[str]:
    """Lines less the indentation most of them share: a plain-text rendering indents every line of
    prose (and a chunk may start mid-paragraph, unindented); only what is indented beyond is code."""
    lines = text.expandtabs(4).splitlines()
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    if not indents:
        return []
    # Prose is judged by its long lines when there are any: a page with one paragraph and a
    # ten-line listing is not a page of indented prose.
    long = [len(line) - len(line.lstrip()) for line in lines if len(line.strip()) >= PROSE_LINE]
    base = Counter(long or indents).most_common(1)[0][0]
    return [line[min(base, len(line) - len(line.lstrip())):] for line in lines]


def sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph (sentencex: rule-based, per language, no model to download)."""
    lang = "zh" if is_cjk_text(paragraph) else "en"
    out: list[str] = []
    for piece in _segmenter()(lang, paragraph):
        if out and out[-1].endswith((".", "!", "?")) and not piece[:1].isspace():
            out[-1] += piece  # "/etc/cron." + "{daily,weekly}": a full stop inside a word ends nothing
        else:
            out.append(piece)
    return [s.strip() for s in out if s.strip()]


def starts_sentence(text: str) -> bool:
    """`text` begins as a sentence does (a capital, a digit, a Chinese character), not mid-way."""
    return _TITLE_NEXT.match(text) is not None


def join(lines: list[str]) -> str:
    """Lines (or sentences) as one paragraph: no space between two Chinese characters."""
    text = lines[0]
    for line in lines[1:]:
        text += line if _CJK_END.search(text) and _CJK_START.match(line) else " " + line
    return text


@lru_cache(maxsize=1)
def _segmenter():
    from sentencex import segment

    return lambda lang, text: list(segment(lang, text))
