"""Plain text of a file by other libraries than the loaders', for measuring the loaders.

The simplest peer reads with it, so a passage our loaders lose shows up as ours below the peer
instead of vanishing from both sides. Nothing here chooses what is content: an HTML page is its
body's visible text (menus included, as a reader's browser shows them), a PDF is pypdf's text layer
(pdfminer.six's where pypdf cannot open it; the loaders read PDFium's), an Office file the text runs
of its XML, a text file its bytes decoded.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

_BLOCK_TAGS = frozenset("""address article aside blockquote br dd details div dl dt figcaption figure footer h1 h2
h3 h4 h5 h6 header hr li main nav ol p pre section summary table td th tr ul""".split())
_INVISIBLE = ("script", "style", "noscript", "template", "head")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
_OFFICE_PARTS = {".docx": (r"word/(document|footnotes|endnotes)\.xml", "p", "t"),
                 ".pptx": (r"ppt/slides/slide\d+\.xml", "p", "t"),
                 ".xlsx": (r"xl/sharedStrings\.xml", "si", "t")}


def plain_text(path: Path) -> str | None:
    """The file's text, or None for a kind this reader does not open (or a file it cannot read)."""
    suffix = path.suffix.lower()
    try:
        if suffix in HTML_SUFFIXES:
            return html_text(path.read_bytes())
        if suffix == ".pdf":
            return _pdf_text(path)
        if suffix in _OFFICE_PARTS:
            return _office_text(path, *_OFFICE_PARTS[suffix])
        if suffix in (".txt", ".md", ".markdown", ".rst", ".text", ""):
            return _decode(path.read_bytes())
    except Exception:  # noqa: BLE001 - a reference reader that fails reads nothing; the caller counts it
        return None
    return None


def html_text(raw: bytes) -> str:
    """The visible text of an HTML page's body, a line per block element (lxml, not BeautifulSoup)."""
    return "\n".join(b.text for b in html_blocks(raw))


@dataclass
class Block:
    """One block of visible text: the element that holds it (`div.sidebar`) and whether it sits in
    navigation by a generic reading (see `_navigation`), which is not the loaders' rule."""

    text: str
    element: str = ""
    navigation: bool = False


def html_blocks(raw: bytes | str) -> list[Block]:
    """The body's visible text as blocks in reading order (iterative: pages nest deep)."""
    import lxml.html

    if isinstance(raw, bytes):
        try:  # UTF-8 without a declared charset would be read as Latin-1 by libxml2
            raw = _XML_DECLARATION.sub("", raw.decode("utf-8"), count=1)
        except UnicodeDecodeError:
            pass  # a legacy encoding: libxml2 reads the page's own declaration
    # huge_tree: libxml2 otherwise stops at 256 levels of nesting (2048 with it) and returns an empty body
    root = lxml.html.document_fromstring(raw, parser=lxml.html.HTMLParser(huge_tree=True))
    for bad in list(root.iter(*_INVISIBLE)):
        bad.drop_tree()
    body = root.find("body")
    blocks: list[Block] = []
    current: list[str] = []
    owners = [(body if body is not None else root, False)]  # the block elements open, innermost last

    def end() -> None:
        text = " ".join("".join(current).split())
        if text:
            el, nav = owners[-1]
            blocks.append(Block(text, _name(el), nav or _mostly_links(el, text)))
        current.clear()

    stack = [(owners[0][0], False)]
    while stack:
        el, closing = stack.pop()
        is_block = isinstance(el.tag, str) and el.tag in _BLOCK_TAGS
        if closing:
            if is_block:
                end()
                owners.pop()
            current.append(el.tail or "")
            continue
        if not isinstance(el.tag, str):  # comments and processing instructions
            current.append(el.tail or "")
            continue
        if is_block:
            end()
            owners.append((el, owners[-1][1] or _navigation(el)))
        current.append(el.text or "")
        stack.append((el, True))
        stack.extend((child, False) for child in reversed(el))
    end()
    return blocks


_NAV_ROLES = ("navigation", "banner", "contentinfo", "tablist", "menubar", "toolbar")  # ARIA's: menus, tab bars
_XML_DECLARATION = re.compile(r"^\ufeff?\s*<\?xml[^>]*\?>")
_NAV_WORDS = re.compile(r"(^|[-_ ])(nav\w*|menu\w*|breadcrumbs?|toc|related|pager|topbar|footer|header|skip)($|[-_ ])")


def _navigation(el) -> bool:
    """Navigation by element, role or name: what a reader takes for menus, page headers and footers,
    breadcrumbs, next/previous bars and tables of contents."""
    if el.tag in ("nav", "header", "footer") or el.get("role") in _NAV_ROLES:
        return True
    names = f"{el.get('class') or ''} {el.get('id') or ''}".lower()
    return bool(_NAV_WORDS.search(names))


def _mostly_links(el, text: str) -> bool:
    """A block whose text is nearly all link text (a "Prev | Up | Next" line, a list of links)."""
    inline = [c for c in el if isinstance(c.tag, str) and c.tag not in _BLOCK_TAGS]  # this block's own text
    links = sum(len("".join(a.text_content().split())) for c in inline for a in c.iter("a"))
    return links >= 0.8 * len(text.replace(" ", ""))


def _name(el) -> str:
    classes = ".".join((el.get("class") or "").split())
    return el.tag + (f".{classes}" if classes else "")


def markdown_blocks(raw: bytes) -> list[Block]:
    """A Markdown file as a reader sees it rendered (markdown-it, CommonMark), as blocks."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(_decode(raw))
    return html_blocks(f"<html><body>{html}</body></html>") if html.strip() else []


def _pdf_text(path: Path) -> str:
    """pypdf's text layer; where pypdf cannot open the file (a PDF that ends without its "%%EOF"
    marker: "EOF marker not found"), pdfminer.six's, which reads past it. Neither shares code with
    the loaders' PDFium. A PDF neither can read is not measured (the caller counts it)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)
    except PdfReadError:
        from pdfminer.high_level import extract_text

        return extract_text(path)


def _office_text(path: Path, parts: str, para: str, run: str) -> str:
    from lxml import etree

    out: list[str] = []
    with zipfile.ZipFile(path) as z:
        for name in sorted(n for n in z.namelist() if re.fullmatch(parts, n)):
            tree = etree.fromstring(z.read(name))
            for p in tree.iter(f"{{*}}{para}"):
                out.append("".join(t.text or "" for t in p.iter(f"{{*}}{run}")))
    return "\n".join(out)


def _decode(raw: bytes) -> str:
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    return raw.decode("latin-1")
