"""Walk a document folder the way a company share needs: hidden folders skipped, symlinks that
leave the root refused, unsupported files counted, every refusal reported with its reason."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from knowledge.ingest.report import FileResult, IngestReport


@dataclass
class Candidate:
    """A regular file to consider, with the stat facts used for change detection."""

    path: str     # absolute
    root: Path
    source: str   # relative to root, POSIX style: what citations show
    size: int
    mtime: float


def walk(root: Path, report: IngestReport, wanted: Callable[[Path], bool]) -> Iterator[Candidate]:
    """Yield candidate files under `root` in a stable order; record skips in `report`."""
    def skip(path: Path, reason: str) -> None:
        report.results.append(FileResult(path.relative_to(root).as_posix(), "skipped", 0, reason))

    def unreadable(path: Path, reason: str) -> None:
        report.unreadable.append(str(path))
        skip(path, reason + "; what the index holds from it is kept")

    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda e: unreadable(
            Path(e.filename), f"folder unreadable ({e.strerror})") if e.filename else None):
        here = Path(dirpath)
        for d in sorted(dirnames):
            p = here / d
            if d.startswith("."):
                skip(p, "hidden folder skipped")
            elif p.is_symlink():
                skip(p, _link_reason(p, root, "folder"))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (here / d).is_symlink())
        for f in sorted(filenames):
            p = here / f
            if f.startswith("."):
                continue  # dotfiles (.DS_Store, .gitignore) are never documents
            if p.is_symlink():
                target = _inside(p, root)
                if target is None or not wanted(p):
                    skip(p, _link_reason(p, root, "file")) if target is None else None
                    continue
                # A link to a file inside the root: indexed once, under its own path.
                skip(p, "symlink to a file inside the root (indexed under its target)")
                continue
            if not wanted(p):
                report.ignored[p.suffix.lower() or "(none)"] += 1
                continue
            try:
                st = p.stat()
            except OSError as e:
                unreadable(p, f"cannot stat ({e.strerror})")
                continue
            yield Candidate(str(p), root, p.relative_to(root).as_posix(), st.st_size, st.st_mtime)


def _inside(link: Path, root: Path) -> Path | None:
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return target if target.is_relative_to(root) else None


def _link_reason(link: Path, root: Path, what: str) -> str:
    if _inside(link, root) is None:
        return f"symlinked {what} points outside the ingested root (refused)"
    return f"symlinked {what} inside the root (not followed)"
