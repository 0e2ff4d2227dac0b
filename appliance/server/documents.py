"""The documents service: list, upload, remove and re-index, used by the UI, the CLI and the API.

Every write goes through `_writer`: one ingest, remove, re-index or upload at a time in this
process, and none while another process writes the same data directory (`appliance.locks`).
"""

from __future__ import annotations

import errno
import filecmp
import re
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from appliance.locks import WriterLock
from knowledge.errors import IndexWriteError, KnowledgeError
from knowledge.index.access import DEFAULT_COLLECTION, EVERYTHING, Scope, check_collection
from knowledge.index.kb import KnowledgeBase
from knowledge.index.manifest import FileRecord
from knowledge.ingest import shared
from knowledge.ingest.folder import ingest
from knowledge.ingest.integrity import repair
from knowledge.ingest.report import IngestReport, Progress

_SAFE_NAME = re.compile(r"[^\w.\- ]+", re.UNICODE)


@dataclass
class IngestCounters:
    """For /metrics: what ingests did since start."""

    runs: int = 0
    files: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    running: bool = False

    def add(self, report: IngestReport) -> None:
        self.runs += 1
        self.chunks += report.chunks
        for r in report.results:
            self.files[r.status] = self.files.get(r.status, 0) + 1


class DocumentsService:
    """The knowledge base's documents as users and admins see them."""

    def __init__(self, kb: KnowledgeBase, uploads_dir: Path, on_wait=None) -> None:
        self.kb = kb
        self.uploads_dir = Path(uploads_dir)
        self.counters = IngestCounters()
        self._in_process = threading.Lock()
        self._on_wait = on_wait  # told who holds the data directory's writer lock, before waiting

    @contextmanager
    def _writer(self) -> Iterator[None]:
        """This process's writers one at a time, and no other process's writer meanwhile."""
        with self._in_process, WriterLock(self.kb.data_dir, self._on_wait):
            yield

    # -- reads (each for one reader's scope) -----------------------------------------------
    def list(self, scope: Scope) -> list[FileRecord]:
        """Every known file (indexed or failed) that `scope` may see, by root then source."""
        return sorted(self.kb.db.files(self.kb.cfg.name, scope=scope).values(), key=lambda r: (r.root, r.source))

    def find(self, ref: str, scope: Scope) -> list[FileRecord]:
        """Files `scope` may see matching an absolute path or a source path as listed."""
        ref = ref.strip()
        if not ref:
            return []
        absolute = str(Path(ref).expanduser().resolve()) if ref.startswith(("/", "~")) else None
        return [r for r in self.list(scope) if r.path == absolute or r.source == ref.strip("/")]

    def stats(self, scope: Scope) -> dict:
        """Totals of what `scope` may see: files by status, chunks (and, for everything, vectors)."""
        by_status: dict[str, int] = {}
        files = self.list(scope)
        for r in files:
            by_status[r.status] = by_status.get(r.status, 0) + 1
        kb = self.kb
        out = {"knowledge_base": kb.cfg.name, "files": by_status, "embedding_model": kb.embedder.model_id,
               "chunk_tokens": kb.chunk_budget}
        if scope.is_everything:
            return {**out, "chunks": kb.db.chunk_count(kb.cfg.name), "vectors": kb.store.count(),
                    "collections": kb.db.collections(kb.cfg.name)}
        return {**out, "chunks": sum(len(r.chunk_ids) for r in files),
                "collections": {c: n for c, n in kb.db.collections(kb.cfg.name).items() if scope.allows(c)}}

    # -- writes --------------------------------------------------------------------------
    def ingest(self, folder: Path, progress: Progress | None = None, collection: str | None = None) -> IngestReport:
        """Index a folder (incremental) into `collection` (None: files keep theirs, new ones go to default)."""
        with self._writer():
            self.counters.running = True
            try:
                report = ingest(self.kb, folder, progress, collection=collection)
            finally:
                self.counters.running = False
        self.counters.add(report)
        return report

    def remove(self, ref: str) -> list[FileRecord]:
        """Remove matching documents from the index; an uploaded copy is deleted too, so a
        re-index does not bring it back. Raises KnowledgeError when nothing matches."""
        with self._writer():
            matches = self.find(ref, EVERYTHING)  # administrators and the operator only
            if not matches:
                raise KnowledgeError(f"no indexed document {ref!r} (see appliance docs list)")
            for rec in matches:
                shared.remove(self.kb, rec)
                if Path(rec.root) == self.uploads_for(rec.collection).resolve():
                    Path(rec.path).unlink(missing_ok=True)
        return matches

    def repair(self) -> int:
        """Remove what an interrupted write left (journalled vectors, orphans); returns how many."""
        with self._writer():
            return repair(self.kb)

    def reindex(self, progress: Progress | None = None) -> list[IngestReport]:
        """Bring every known folder up to date (changed files re-read, deleted ones removed)."""
        roots = sorted({r.root for r in self.list(EVERYTHING)})
        return [self.ingest(Path(root), progress) for root in roots if Path(root).is_dir()]

    def uploads_for(self, collection: str) -> Path:
        """The folder a collection's uploads are kept in (`uploads/` for default, as before)."""
        if collection == DEFAULT_COLLECTION:
            return self.uploads_dir
        return self.uploads_dir.parent / "uploads-by-collection" / check_collection(collection)

    def upload(self, files: Iterable[tuple[str, Path]], progress: Progress | None = None,
               collection: str = DEFAULT_COLLECTION) -> IngestReport:
        """Copy (name, temp path) pairs into `collection`'s uploads folder under safe names, then index it.
        The caller has checked that the uploader may write `collection`.

        A name already taken by different content gets a version suffix (`report (2).pdf`), never a
        silent overwrite; the same content again is left as it is.
        """
        folder = self.uploads_for(collection)
        folder.mkdir(parents=True, exist_ok=True)
        for name, tmp in files:
            target = _free_name(folder / safe_name(name), Path(tmp))
            if target is None:
                continue
            try:
                shutil.copyfile(tmp, target)
            except OSError as e:
                target.unlink(missing_ok=True)  # no half-copied upload left to be indexed later
                raise IndexWriteError(f"could not save {safe_name(name)} in {folder}: {e.strerror or e}",
                                      disk_full=e.errno == errno.ENOSPC) from None
        return self.ingest(folder, progress, collection)


def safe_name(name: str) -> str:
    """A plain file name: no folders, no leading dots, no characters outside words and `.- `."""
    base = _SAFE_NAME.sub("_", Path(name).name).lstrip(". ")
    return base or "upload"


def _free_name(target: Path, content: Path) -> Path | None:
    """`target`, or the first free `name (N).ext` beside it; None when an identical file is there."""
    candidate, n = target, 1
    while candidate.exists():
        if filecmp.cmp(candidate, content, shallow=False):
            return None
        n += 1
        candidate = target.with_name(f"{target.stem} ({n}){target.suffix}")
    return candidate

