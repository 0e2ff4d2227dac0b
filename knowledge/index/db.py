"""One SQLite file (`<data_dir>/knowledge.db`) holding the manifest, the chunk texts and the
lexical index, and the transactions that span them.

One database so that a file's chunk rows, its lexical rows and its manifest entry commit in one
transaction, *after* the vector store write. A crash in between leaves a journal entry
(`pending_ids`) that the next run uses to remove any half-written vectors. Each table has its own
owner (`Manifest`, `ChunkStore`, `LexicalIndex`); this module only opens them and sequences writes.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

from knowledge.index.access import DEFAULT_COLLECTION, EVERYTHING, Scope, check_collection
from knowledge.index.chunking import Chunk, embed_text
from knowledge.index.chunkstore import ChunkStore
from knowledge.index.lexical import LexicalIndex
from knowledge.index.manifest import FileRecord, Manifest
from knowledge.text.terms import TERMS_VERSION

_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);"


def _locked(method):
    """One connection is shared by the ingest's worker threads: serialise every call."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class KnowledgeDB:
    """Manifest + chunk texts + lexical index for every knowledge base in a data dir."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        with self.conn:
            self.conn.executescript(_META)
            self.manifest = Manifest(self.conn)
            self.chunks = ChunkStore(self.conn)
            self.lexical = LexicalIndex(self.conn)
            if self.lexical.needs_rebuild(self._meta("lexical_terms")):
                self.lexical.rebuild(self.chunks.rows_for_index())
                self._set_meta("lexical_terms", TERMS_VERSION)

    @_locked
    def close(self) -> None:
        self.conn.close()

    # -- reads ---------------------------------------------------------------------------
    @_locked
    def files(self, kb: str, root: str | None = None, scope: Scope = EVERYTHING) -> dict[str, FileRecord]:
        return self.manifest.files(kb, root, scope)

    @_locked
    def collections(self, kb: str) -> dict[str, int]:
        return self.manifest.collections(kb)

    @_locked
    def file(self, kb: str, path: str) -> FileRecord | None:
        return self.manifest.get(kb, path)

    @_locked
    def chunk_ids(self, kb: str) -> set[str]:
        return self.chunks.ids(kb)

    @_locked
    def chunks_of_file(self, kb: str, path: str) -> list[Chunk]:
        return self.chunks.of_file(kb, path)

    @_locked
    def text_after(self, kb: str, source: str, offset: int, chars: int = 300) -> str:
        return self.chunks.text_after(kb, source, offset, chars)

    @_locked
    def chunk_count(self, kb: str) -> int:
        return self.chunks.count(kb)

    @_locked
    def chunks_by_id(self, ids: Iterable[str]) -> dict[str, dict]:
        return self.chunks.by_id(ids)

    @_locked
    def stored_ids(self, kb: str) -> set[str]:
        return self.chunks.stored_ids(kb)

    @_locked
    def stored_by_digest(self, kb: str, digests: Iterable[str], exclude_paths: set[str],
                         collection: str = DEFAULT_COLLECTION) -> dict[str, str]:
        return self.chunks.stored_by_digest(kb, digests, exclude_paths, collection)

    @_locked
    def copies_elsewhere(self, kb: str, path: str) -> dict[str, list[tuple[str, str]]]:
        return self.chunks.copies_elsewhere(kb, path)

    @_locked
    def copies_of(self, ids: Iterable[str], scope: Scope = EVERYTHING) -> dict[str, list[dict]]:
        return self.chunks.copies_of(ids, scope)

    @_locked
    def dangling(self, kb: str) -> set[str]:
        return self.chunks.dangling(kb)

    @_locked
    def chunks_in_order(self, kb: str, scope: Scope = EVERYTHING) -> list[dict]:
        return self.chunks.in_order(kb, scope)

    @_locked
    def idf(self, query_terms: list[str]) -> dict[str, float]:
        return self.lexical.idf(query_terms)

    @_locked
    def lexical_search(self, kb: str, query_terms: list[str], n: int, scope: Scope) -> list[tuple[str, float]]:
        return self.lexical.search(kb, query_terms, n, scope)

    # -- writes (each one transaction) ---------------------------------------------------
    @_locked
    def begin_write(self, kb: str, rec: FileRecord, new_ids: list[str]) -> None:
        """Journal the ids about to be written to the vector store (before writing them)."""
        with self.conn:
            self.manifest.journal(kb, rec, new_ids)

    @_locked
    def commit_file(self, kb: str, rec: FileRecord, chunks: list[Chunk], ids: list[str],
                    same_as: list[str | None] | None = None, promote: dict[str, str] | None = None) -> None:
        """After the vector store write: chunk rows, lexical rows and the manifest entry, atomically.

        `same_as[i]` names the stored copy of chunk i (None: it is stored itself, and indexed);
        `promote` hands each dropped stored row that other files point to over to an heir.
        """
        same_as = same_as or [None] * len(chunks)
        with self.conn:
            self._drop_chunks(kb, rec.path)
            rowids = self.chunks.add(kb, rec.path, ids, chunks, same_as, rec.collection)
            self.lexical.add((r, c.embed_text) for r, c, same in zip(rowids, chunks, same_as, strict=True)
                             if same is None)
            self._promote(promote)
            self.manifest.upsert(kb, rec, ids, status="done", error=None)

    @_locked
    def record_failure(self, kb: str, rec: FileRecord, error: str, promote: dict[str, str] | None = None) -> None:
        """A file that could not be loaded: no chunks, the reason kept for `docs list`."""
        with self.conn:
            self._drop_chunks(kb, rec.path)
            self._promote(promote)
            self.manifest.upsert(kb, rec, [], status="failed", error=error)

    @_locked
    def touch(self, kb: str, path: str, mtime: float) -> None:
        with self.conn:
            self.manifest.touch(kb, path, mtime)

    @_locked
    def remove_file(self, kb: str, path: str, promote: dict[str, str] | None = None) -> None:
        with self.conn:
            self._drop_chunks(kb, path)
            self._promote(promote)
            self.manifest.delete(kb, path)

    @_locked
    def invalidate(self, kb: str, path: str) -> None:
        with self.conn:
            self.manifest.invalidate(kb, path)

    @_locked
    def clear_kb(self, kb: str) -> None:
        with self.conn:
            self.lexical.delete(self.chunks.clear(kb))
            self.manifest.clear(kb)

    def _drop_chunks(self, kb: str, path: str) -> None:
        self.lexical.delete(self.chunks.delete_file(kb, path))

    def _promote(self, promote: dict[str, str] | None) -> None:
        for old, heir in (promote or {}).items():
            rowid = self.chunks.promote(old, heir)
            if rowid is not None:  # a copy became the stored row: it is searched lexically from now on
                row = self.chunks.by_id([heir])[heir]
                self.lexical.add([(rowid, embed_text(row["title"], row["heading"], row["text"]))])

    @_locked
    def add_collection(self, kb: str, name: str) -> None:
        with self.conn:
            self.manifest.add_collection(kb, check_collection(name))

    # -- meta ----------------------------------------------------------------------------
    @_locked
    def get_meta(self, key: str) -> str | None:
        return self._meta(key)

    @_locked
    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self._set_meta(key, value)

    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
