"""HTML: the main text with title and headings; navigation, scripts and styles dropped.

Text is kept from *any* block element, not from a list of paragraph tags: generated documentation
(DocBook/Publican, Confluence, Notion, SharePoint exports) puts its paragraphs in `<div class="para">`
and similar, which a `p/li/td` list silently dropped. Inline elements join their block's text.
Parsing is BeautifulSoup's; a main-text extractor (trafilatura) was measured on real DocBook pages
and dropped the headings of 8 of 9, which citations need.
"""

from __future__ import annotations

from pathlib import Path

from knowledge.loaders.base import Document, Section
from knowledge.loaders.text import decode_bytes

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "iframe",
         "svg", "button", "template", "head")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_INLINE = frozenset("""a abbr acronym b bdi bdo big br cite code data dfn em font i img input kbd label mark q
rp rt ruby s samp small span strike strong sub sup time tt u var wbr""".split())
_BLOCKS = ["p", "div", "table", "ul", "ol", "dl", "pre", "blockquote"]
_NAV_SELECTORS = '[role="navigation"], [aria-hidden="true"], .nav, .navbar, .menu, .sidebar, .navheader, .navfooter'


def load_html(path: Path, raw: bytes) -> Document:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_bytes(raw), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(list(_DROP)):
        tag.decompose()
    for tag in soup.select(_NAV_SELECTORS):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    sections = _Sections(title)
    _walk(root, sections)
    sections.flush()
    if not sections.out:  # no text inside any block: fall back to all visible text
        text = root.get_text("\n", strip=True)
        if text:
            sections.out.append(Section(text, [title] if title else []))
    return Document(sections.out, title=title or path.stem, kind="html")


class _Sections:
    """Paragraphs grouped under the current heading path."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.out: list[Section] = []
        self.stack: list[tuple[int, str]] = []
        self.paragraphs: list[str] = []
        self.current: list[str] = []

    def heading(self, level: int, text: str) -> None:
        self.flush()
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, text))

    def text(self, words: str) -> None:
        self.current.append(words)

    def end_block(self) -> None:
        # Adjacent text nodes join as written (no added space: Chinese has none between words);
        # runs of white space fold to one, as a browser shows them.
        paragraph = " ".join("".join(self.current).split())
        if paragraph:
            self.paragraphs.append(paragraph)
        self.current.clear()

    def verbatim(self, text: str) -> None:
        self.end_block()
        if text.strip():
            self.paragraphs.append(text.strip("\n"))

    def flush(self) -> None:
        self.end_block()
        body = "\n\n".join(self.paragraphs).strip()
        if body:
            self.out.append(Section(body, [h for _, h in self.stack] or ([self.title] if self.title else [])))
        self.paragraphs.clear()


def _data_row(row) -> list[str] | None:
    """The cells of a data table's row: two or more with text and no paragraphs inside; None for a
    layout table's row (DocBook's Note and Warning boxes: an icon cell, then paragraphs), which is
    walked as blocks instead."""
    cells = [" ".join(c.get_text(" ", strip=True).split()) for c in row.find_all(["td", "th"], recursive=False)]
    return cells if sum(bool(c) for c in cells) >= 2 and row.find(_BLOCKS) is None else None


def _walk(node, sections: _Sections) -> None:
    from bs4 import Comment, NavigableString, Tag

    for child in node.children:
        if isinstance(child, Comment):
            continue
        if isinstance(child, NavigableString):
            if child.strip():
                sections.text(str(child))
        elif isinstance(child, Tag):
            if child.name in _HEADINGS:
                sections.heading(int(child.name[1]), child.get_text(" ", strip=True))
            elif child.name == "pre":  # code and listings keep their line breaks
                sections.verbatim(child.get_text())
            elif child.name == "tr" and (cells := _data_row(child)):  # one line "| a | b |": quoted whole
                sections.verbatim("| " + " | ".join(cells) + " |")
            elif child.name in _INLINE:
                _walk(child, sections)
            else:  # a block: its text is one paragraph, apart from the blocks inside it
                sections.end_block()
                _walk(child, sections)
                sections.end_block()
