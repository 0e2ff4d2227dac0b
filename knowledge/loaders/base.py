"""What every loader yields: sections of text with their location in the document."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Section:
    """A run of text under one heading path (and on one page, for paged formats)."""

    text: str
    heading: list[str] = field(default_factory=list)
    page: int | None = None


@dataclass
class Document:
    """A loaded file: its sections in reading order and its title (if the format has one)."""

    sections: list[Section]
    title: str = ""
    kind: str = ""

    @property
    def text_chars(self) -> int:
        return sum(len(s.text.strip()) for s in self.sections)
