"""What an ingest reports: per-file results, the run's summary, and the progress callbacks.

Its own module so that the walker and the ingest pipeline can both use it without importing
each other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class FileResult:
    """What happened to one file (or skipped folder/link)."""

    source: str
    status: str  # new, changed, unchanged, removed, failed, skipped
    chunks: int = 0
    reason: str = ""
    deduplicated: int = 0  # repeated or near-identical chunks of this file left out
    shared: int = 0  # chunks another file already holds word for word: cited, not stored again


@dataclass
class IngestReport:
    """Summary of one ingest run."""

    root: str
    results: list[FileResult] = field(default_factory=list)
    ignored: Counter = field(default_factory=Counter)  # unsupported extensions
    timings: dict[str, float] = field(default_factory=lambda: dict.fromkeys(
        ("walk", "parse", "chunk", "embed", "store", "total"), 0.0))
    bytes_read: int = 0
    repaired: int = 0
    # Folders and files that could not be read this time: what the index holds under them is kept.
    unreadable: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def chunks(self) -> int:
        return sum(r.chunks for r in self.results if r.status in ("new", "changed"))

    @property
    def deduplicated(self) -> int:
        return sum(r.deduplicated for r in self.results)

    @property
    def shared(self) -> int:
        return sum(r.shared for r in self.results)

    @property
    def problems(self) -> list[FileResult]:
        return [r for r in self.results if r.status in ("failed", "skipped")]

    def summary(self) -> dict:
        """The report as plain data: what the documents API returns and the CLI prints."""
        return {"root": self.root, "chunks": self.chunks, "seconds": round(self.timings["total"], 3),
                "counts": {s: self.count(s) for s in ("new", "changed", "unchanged", "removed", "failed", "skipped")},
                "problems": [{"source": p.source, "status": p.status, "reason": p.reason} for p in self.problems],
                "deduplicated": self.deduplicated,
                "shared": self.shared, "repaired": self.repaired, "unreadable": list(self.unreadable),
                "ignored": dict(self.ignored.most_common(6))}


class Progress:
    """Callbacks the CLI/UI implement to show progress; the defaults do nothing."""

    def start(self, total_files: int) -> None: ...
    def file_done(self, result: FileResult) -> None: ...
    def chunks_embedded(self, n: int) -> None: ...
