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


class Outline:
    """Sections under the current heading path, for the loaders that read headings (HTML, DOCX,
    Markdown). A heading that no text ever came under, such as a numbered list a converter styled
    as headings ("1. Back up any existing data", "2. Gather information"), is kept as a section of
    its own when the next heading of its level replaces it: otherwise its words left the index."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self._stack: list[list] = []  # [level, text, whether any text came under it]

    def heading(self, level: int, text: str) -> None:
        while self._stack and self._stack[-1][0] >= level:
            self._pop()
        self._stack.append([level, text, False])

    def path(self) -> list[str]:
        return [entry[1] for entry in self._stack]

    def add(self, text: str, fallback: list[str] | None = None) -> None:
        """A section of text under the current path (`fallback` where there is no heading yet)."""
        for entry in self._stack:
            entry[2] = True
        self.sections.append(Section(text, self.path() or list(fallback or [])))

    def close(self) -> list[Section]:
        while self._stack:
            self._pop()
        return self.sections

    def _pop(self) -> None:
        _, text, used = self._stack.pop()
        if not used and text.strip():
            self.sections.append(Section(text, self.path()))
