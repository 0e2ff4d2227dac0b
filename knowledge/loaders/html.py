"""HTML: the main text with title and headings; navigation, scripts and styles dropped."""

from __future__ import annotations

from pathlib import Path

from knowledge.loaders.base import Document, Section
from knowledge.loaders.text import decode_bytes

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "iframe",
         "svg", "button", "template")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLOCKS = ("p", "li", "pre", "blockquote", "td", "th", "dd", "dt", "figcaption", "caption")


def load_html(path: Path, raw: bytes) -> Document:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_bytes(raw), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(list(_DROP)):
        tag.decompose()
    for tag in soup.select('[role="navigation"], [aria-hidden="true"], .nav, .navbar, .menu, .sidebar'):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    buf: list[str] = []

    def flush() -> None:
        body = "\n\n".join(buf).strip()
        if body:
            sections.append(Section(body, [h for _, h in stack] or ([title] if title else [])))
        buf.clear()

    for el in root.find_all(list(_HEADINGS) + list(_BLOCKS)):
        if el.name in _HEADINGS:
            flush()
            level = int(el.name[1])
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, el.get_text(" ", strip=True)))
        elif not el.find_parent(list(_BLOCKS)):  # nested blocks are inside their parent's text
            text = el.get_text(" ", strip=True)
            if text:
                buf.append(text)
    flush()
    if not sections:  # no block markup at all: fall back to all visible text
        text = root.get_text("\n", strip=True)
        if text:
            sections.append(Section(text, [title] if title else []))
    return Document(sections, title=title or path.stem, kind="html")
