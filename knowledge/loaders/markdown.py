"""Markdown: one section per heading, keeping the heading path (# > ## > ###)."""

from __future__ import annotations

import re
from pathlib import Path

from knowledge.loaders.base import Document, Outline
from knowledge.loaders.text import decode_bytes

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def load_markdown(path: Path, raw: bytes) -> Document:
    text = decode_bytes(raw)
    outline = Outline()
    buf: list[str] = []
    in_fence = False
    title = ""

    def flush() -> None:
        body = "\n".join(buf).strip()
        if body:
            outline.add(body)
        buf.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush()
            level, heading = len(m.group(1)), m.group(2).strip()
            outline.heading(level, heading)
            title = title or heading
        else:
            buf.append(line)
    flush()
    return Document(outline.close(), title=title or path.stem, kind="markdown")
