"""Markdown: one section per heading, keeping the heading path (# > ## > ###)."""

from __future__ import annotations

import re
from pathlib import Path

from knowledge.loaders.base import Document, Section
from knowledge.loaders.text import decode_bytes

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def load_markdown(path: Path, raw: bytes) -> Document:
    text = decode_bytes(raw)
    sections: list[Section] = []
    path_stack: list[tuple[int, str]] = []
    buf: list[str] = []
    in_fence = False
    title = ""

    def flush() -> None:
        body = "\n".join(buf).strip()
        if body:
            sections.append(Section(body, [h for _, h in path_stack]))
        buf.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush()
            level, heading = len(m.group(1)), m.group(2).strip()
            while path_stack and path_stack[-1][0] >= level:
                path_stack.pop()
            path_stack.append((level, heading))
            title = title or heading
        else:
            buf.append(line)
    flush()
    return Document(sections, title=title or path.stem, kind="markdown")
