"""Plain text of a file by other libraries than the loaders', for measuring the loaders.

The simplest peer reads with it, so a passage our loaders lose shows up as ours below the peer
instead of vanishing from both sides. Nothing here chooses what is content: an HTML page is its
body's visible text (menus included, as a reader's browser shows them), a PDF is pypdf's text layer
(the loaders read PDFium's), an Office file the text runs of its XML, a text file its bytes decoded.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

_BLOCK_TAGS = frozenset("""address article aside blockquote br dd details div dl dt figcaption figure footer h1 h2
h3 h4 h5 h6 header hr li main nav ol p pre section summary table td th tr ul""".split())
_INVISIBLE = ("script", "style", "noscript", "template", "head")
_OFFICE_PARTS = {".docx": (r"word/(document|footnotes|endnotes)\.xml", "p", "t"),
                 ".pptx": (r"ppt/slides/slide\d+\.xml", "p", "t"),
                 ".xlsx": (r"xl/sharedStrings\.xml", "si", "t")}


def plain_text(path: Path) -> str | None:
    """The file's text, or None for a kind this reader does not open (or a file it cannot read)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".html", ".htm", ".xhtml"):
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
    import lxml.html

    # huge_tree: libxml2 otherwise stops at 256 levels of nesting (2048 with it) and returns an empty body
    root = lxml.html.document_fromstring(raw, parser=lxml.html.HTMLParser(huge_tree=True))
    for bad in list(root.iter(*_INVISIBLE)):
        bad.drop_tree()
    body = root.find("body")
    lines: list[str] = []
    _blocks(root if body is None else body, lines, [])
    return "\n".join(" ".join(line.split()) for line in lines if line.strip())


def _blocks(node, lines: list[str], current: list[str]) -> None:
    """Text in reading order; a block element starts and ends a line (iterative: pages nest deep)."""
    stack = [(node, False)]
    while stack:
        el, closing = stack.pop()
        if closing:
            if isinstance(el.tag, str) and el.tag in _BLOCK_TAGS:
                lines.append("".join(current))
                current.clear()
            current.append(el.tail or "")
            continue
        if not isinstance(el.tag, str):  # comments and processing instructions
            current.append(el.tail or "")
            continue
        if el.tag in _BLOCK_TAGS:
            lines.append("".join(current))
            current.clear()
        current.append(el.text or "")
        stack.append((el, True))
        stack.extend((child, False) for child in reversed(el))
    lines.append("".join(current))


def _pdf_text(path: Path) -> str:
    from pypdf import PdfReader

    return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)


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
