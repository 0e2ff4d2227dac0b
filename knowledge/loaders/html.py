"""HTML: the main text with title and headings; navigation, scripts and styles dropped.

Text is kept from *any* block element, not from a list of paragraph tags: generated documentation
(DocBook/Publican, Confluence, Notion, SharePoint exports) puts its paragraphs in `<div class="para">`
and similar, which a `p/li/td` list silently dropped. Inline elements join their block's text.
Parsing is BeautifulSoup's; a main-text extractor (trafilatura) was measured on real DocBook pages
and dropped the headings of 8 of 9, which citations need.

Content boxes are content: DocBook's sidebar/note/tip/warning boxes, Sphinx admonitions and
`aside.sidebar`/`aside.footnote`, MkDocs admonitions, Doxygen's `dl.section`, `<details>`. A box
keeps its title in front of its first paragraph ("SECURITY: …"), so a quote or a citation names it,
and a title that is a heading element does not become the section heading of what follows the box.
Only navigation is dropped: by element (`nav`, page `header`/`footer`), by role, by the navigation
classes of the generators, and an `aside` or `.sidebar` that is mostly links (a site menu).
"""

from __future__ import annotations

from pathlib import Path

from knowledge.errors import LoaderError
from knowledge.loaders.base import Document, Outline, Section
from knowledge.loaders.text import decode_bytes

_DROP = ("script", "style", "noscript", "form", "iframe", "svg", "button", "template", "head")  # not text
_NAV_TAGS = ("nav", "header", "footer")  # navigation by element: menus, page header and footer
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_INLINE = frozenset("""a abbr acronym b bdi bdo big br cite code data dfn em font i img input kbd label mark q
rp rt ruby s samp small span strike strong sub sup time tt u var wbr""".split())
_BLOCKS = ["p", "div", "table", "ul", "ol", "dl", "pre", "blockquote"]
_NAV_CLASSES = frozenset("""nav navbar menu navheader navfooter sphinxsidebar related breadcrumb breadcrumbs
footer pageheader pagefooter parentlinks navigation""".split())
# ARIA landmarks of navigation: menus, the page's banner and its footer (ikiwiki's `role=contentinfo`
# footer holds "Links:" and "Last edited").
_NAV_ROLES = frozenset(("navigation", "banner", "contentinfo"))
# Boxes whose first title-like child is their title (kept in front of their text, never a heading).
_BOX_CLASSES = frozenset("""sidebar note tip warning important caution admonition admonitionblock attention danger
error hint seealso todo deprecated versionadded versionchanged footnote callout""".split())
_TITLE_SELECTOR = ".title, .admonition-title, summary, dt, .label"
_MENU_LINK_SHARE = 0.6  # an aside/.sidebar whose text is mostly link text is a menu


def load_html(path: Path, raw: bytes) -> Document:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_bytes(raw), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(list(_DROP)):
        tag.decompose()
    navigation = [tag for tag in soup.find_all(True) if _is_navigation(tag)]
    nav_text = False
    for tag in navigation:
        if not tag.decomposed:
            nav_text = nav_text or bool(tag.get_text(strip=True))
            tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    sections = _Sections(title)
    _walk(root, sections)
    sections.flush()
    sections.outline.close()
    if not sections.out:  # no text inside any block: fall back to all visible text
        text = root.get_text("\n", strip=True)
        if text:
            sections.out.append(Section(text, [title] if title else []))
    if not sections.out and nav_text:
        raise LoaderError("only navigation (menus, links, page header and footer): no text of its own")
    return Document(sections.out, title=title or path.stem, kind="html")


class _Sections:
    """Paragraphs grouped under the current heading path."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.outline = Outline()
        self.paragraphs: list[str] = []
        self.current: list[str] = []
        self.prefix = ""  # a box's title, waiting for the box's first paragraph

    def heading(self, level: int, text: str) -> None:
        self.flush()
        self.outline.heading(level, text)

    @property
    def out(self) -> list[Section]:
        return self.outline.sections

    def box_title(self, title: str) -> None:
        """The next paragraph is a box's first: it starts with the box's title."""
        self.end_block()
        if title:  # an untitled box inside a titled one leaves the outer title waiting
            self.prefix = f"{title.rstrip(':')}: "

    def text(self, words: str) -> None:
        self.current.append(words)

    def end_block(self) -> None:
        # Adjacent text nodes join as written (no added space: Chinese has none between words);
        # runs of white space fold to one, as a browser shows them.
        paragraph = " ".join("".join(self.current).split())
        if paragraph:
            self.paragraphs.append(self._prefixed(paragraph))
        self.current.clear()

    def verbatim(self, text: str) -> None:
        self.end_block()
        if text.strip():
            self.paragraphs.append(self._prefixed(text.strip("\n")))

    def close_box(self) -> None:
        self.end_block()
        if self.prefix:  # a box with a title and no text: the title alone
            self.paragraphs.append(self.prefix.rstrip(": "))
            self.prefix = ""

    def _prefixed(self, paragraph: str) -> str:
        text, self.prefix = self.prefix + paragraph, ""
        return text

    def flush(self) -> None:
        self.end_block()
        body = "\n\n".join(self.paragraphs).strip()
        if body:
            self.outline.add(body, fallback=[self.title] if self.title else [])
        self.paragraphs.clear()


def _data_row(row) -> list[str] | None:
    """The cells of a data table's row: two or more with text and no paragraphs inside; None for a
    layout table's row (DocBook's Note and Warning boxes: an icon cell, then paragraphs), which is
    walked as blocks instead."""
    cells = [" ".join(c.get_text(" ", strip=True).split()) for c in row.find_all(["td", "th"], recursive=False)]
    return cells if sum(bool(c) for c in cells) >= 2 and row.find(_BLOCKS) is None else None


def _is_navigation(tag) -> bool:
    """Navigation by element, role, generator class, or an aside/.sidebar that is a menu (one pass in
    Python: CSS selectors through soupsieve took half of a page's load time)."""
    classes = tag.get("class") or ()
    if (tag.name in _NAV_TAGS or tag.get("role") in _NAV_ROLES or tag.get("aria-hidden") == "true"
            or _NAV_CLASSES.intersection(classes)):
        return True
    return (tag.name == "aside" or "sidebar" in classes) and _is_menu(tag)


def _is_menu(tag) -> bool:
    """An aside or `.sidebar` that is navigation: mostly link text (a site's menu or page list)."""
    text = len("".join(tag.get_text().split()))
    links = sum(len("".join(a.get_text().split())) for a in tag.find_all("a"))
    return text == 0 or links / text > _MENU_LINK_SHARE


def _is_box(tag) -> bool:
    return tag.name in ("aside", "details") or bool(_BOX_CLASSES.intersection(tag.get("class") or ()))


def _box(tag, sections: _Sections) -> None:
    """A content box: its title (if any) in front of its first paragraph, then its text."""
    title = tag.select_one(_TITLE_SELECTOR)
    words = " ".join(title.get_text().split()) if title is not None else ""  # inline parts join, as shown
    # a title comes first in reading order; a `dt` deep in the box's own list is not one
    if words and _starts_with(tag, words):
        title.extract()
    else:
        words = ""
    sections.box_title(words)
    _walk(tag, sections, in_box=True)
    sections.close_box()


def _starts_with(tag, words: str) -> bool:
    """Whether the tag's text begins with `words`, reading only as far as needed (a box may hold
    megabytes, and boxes nest)."""
    wanted, seen = "".join(words.split()), ""  # white space aside: inline parts join as a browser shows them
    for piece in tag.strings:
        seen += "".join(piece.split())
        if len(seen) >= len(wanted):
            break
    return seen.startswith(wanted)


def _walk(node, sections: _Sections, in_box: bool = False) -> None:
    from bs4 import Comment, NavigableString, Tag

    for child in node.children:
        if isinstance(child, Comment):
            continue
        if isinstance(child, NavigableString):
            # White space alone between two inline elements is a word break as a browser shows it
            # ("<code>srcdir</code> <code>destdir</code>"): dropping it ran the words together.
            sections.text(str(child))
        elif isinstance(child, Tag):
            if child.name in _HEADINGS and not in_box:
                sections.heading(int(child.name[1]), child.get_text(" ", strip=True))
            elif _is_box(child):
                _box(child, sections)
            elif child.name == "pre":  # code and listings keep their line breaks
                sections.verbatim(child.get_text())
            elif child.name == "tr" and (cells := _data_row(child)):  # one line "| a | b |": quoted whole
                sections.verbatim("| " + " | ".join(cells) + " |")
            elif child.name in _INLINE:
                _walk(child, sections, in_box)
            else:  # a block: its text is one paragraph, apart from the blocks inside it
                sections.end_block()
                _walk(child, sections, in_box)
                sections.end_block()
