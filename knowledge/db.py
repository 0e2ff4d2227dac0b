"""The ingest manifest and the lexical index, in one SQLite file (`<data_dir>/knowledge.db`).

One database so that a file's chunk rows, its full-text rows and its manifest entry commit in
one transaction, *after* the vector store write. A crash in between leaves a journal entry
(`pending_ids`) that the next run uses to remove any half-written vectors.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from knowledge.chunking import Chunk
from knowledge.lexical import terms

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    kb TEXT NOT NULL, path TEXT NOT NULL, root TEXT NOT NULL, source TEXT NOT NULL,
    size INTEGER, mtime REAL, sha256 TEXT, kind TEXT, chunk_ids TEXT NOT NULL DEFAULT '[]',
    pending_ids TEXT, status TEXT NOT NULL, error TEXT, updated REAL,
    PRIMARY KEY (kb, path));
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, kb TEXT NOT NULL, path TEXT NOT NULL, source TEXT NOT NULL,
    page INTEGER, heading TEXT, title TEXT, text TEXT NOT NULL, start INTEGER, "end" INTEGER);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (kb, path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(id UNINDEXED, kb UNINDEXED, terms);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


@dataclass
class FileRecord:
    """One manifest row."""

    path: str
    root: str
    source: str
    size: int
    mtime: float
    sha256: str
    kind: str
    chunk_ids: list[str]
    pending_ids: list[str] | None
    status: str
    error: str | None


def _locked(method):
    """One connection is shared by the ingest's worker threads: serialise every call."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class KnowledgeDB:
    """Manifest + chunk texts + FTS5 lexical index for every knowledge base in a data dir."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)

    @_locked
    def close(self) -> None:
        self.conn.close()

    # -- manifest ------------------------------------------------------------------------
    @_locked
    def files(self, kb: str, root: str | None = None) -> dict[str, FileRecord]:
        sql = "SELECT path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids, status, error " \
              "FROM files WHERE kb = ?" + (" AND root = ?" if root else "")
        rows = self.conn.execute(sql, (kb, root) if root else (kb,)).fetchall()
        return {r[0]: FileRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                                 json.loads(r[8]) if r[8] else None, r[9], r[10]) for r in rows}

    @_locked
    def begin_write(self, kb: str, rec: FileRecord, new_ids: list[str]) -> None:
        """Journal the ids about to be written to the vector store (before writing them)."""
        with self.conn:
            self.conn.execute(
                "INSERT INTO files (kb, path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids,"
                " status, updated) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?, ?, 'pending', ?)"
                " ON CONFLICT (kb, path) DO UPDATE SET pending_ids = excluded.pending_ids, status = 'pending'",
                (kb, rec.path, rec.root, rec.source, rec.size, rec.mtime, rec.kind,
                 json.dumps(rec.chunk_ids), json.dumps(new_ids), time.time()))

    @_locked
    def commit_file(self, kb: str, rec: FileRecord, chunks: list[Chunk], ids: list[str]) -> None:
        """After the vector store write: chunk rows, FTS rows and the manifest entry, atomically."""
        with self.conn:
            self._delete_chunk_rows(kb, rec.path)
            self.conn.executemany(
                'INSERT OR REPLACE INTO chunks (id, kb, path, source, page, heading, title, text, start, "end")'
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(i, kb, rec.path, c.source, c.page, c.heading, c.title, c.text, c.start, c.end)
                 for i, c in zip(ids, chunks, strict=True)])
            self.conn.executemany("INSERT INTO chunks_fts (id, kb, terms) VALUES (?, ?, ?)",
                                  [(i, kb, " ".join(terms(c.embed_text))) for i, c in zip(ids, chunks, strict=True)])
            self._upsert_file(kb, rec, ids, status="done", error=None)

    @_locked
    def record_failure(self, kb: str, rec: FileRecord, error: str) -> None:
        """A file that could not be loaded: no chunks, the reason kept for `docs list`."""
        with self.conn:
            self._delete_chunk_rows(kb, rec.path)
            self._upsert_file(kb, rec, [], status="failed", error=error)

    @_locked
    def touch(self, kb: str, path: str, mtime: float) -> None:
        """Content unchanged (same hash) but the mtime moved: remember the new mtime."""
        with self.conn:
            self.conn.execute("UPDATE files SET mtime = ? WHERE kb = ? AND path = ?", (mtime, kb, path))

    @_locked
    def remove_file(self, kb: str, path: str) -> None:
        with self.conn:
            self._delete_chunk_rows(kb, path)
            self.conn.execute("DELETE FROM files WHERE kb = ? AND path = ?", (kb, path))

    @_locked
    def invalidate(self, kb: str, path: str) -> None:
        """Force the next ingest to re-process a file (its store state is in doubt)."""
        with self.conn:
            self.conn.execute("UPDATE files SET sha256 = '', pending_ids = NULL, status = 'stale' "
                              "WHERE kb = ? AND path = ?", (kb, path))

    def _upsert_file(self, kb: str, rec: FileRecord, ids: list[str], status: str, error: str | None) -> None:
        self.conn.execute(
            "INSERT INTO files (kb, path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids, status,"
            " error, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)"
            " ON CONFLICT (kb, path) DO UPDATE SET root = excluded.root, source = excluded.source,"
            " size = excluded.size, mtime = excluded.mtime, sha256 = excluded.sha256, kind = excluded.kind,"
            " chunk_ids = excluded.chunk_ids, pending_ids = NULL, status = excluded.status,"
            " error = excluded.error, updated = excluded.updated",
            (kb, rec.path, rec.root, rec.source, rec.size, rec.mtime, rec.sha256, rec.kind, json.dumps(ids),
             status, error, time.time()))

    def _delete_chunk_rows(self, kb: str, path: str) -> None:
        ids = [r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE kb = ? AND path = ?", (kb, path))]
        self.conn.executemany("DELETE FROM chunks_fts WHERE id = ?", [(i,) for i in ids])
        self.conn.execute("DELETE FROM chunks WHERE kb = ? AND path = ?", (kb, path))

    # -- chunks --------------------------------------------------------------------------
    @_locked
    def chunk_ids(self, kb: str) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE kb = ?", (kb,))}

    @_locked
    def chunk_count(self, kb: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM chunks WHERE kb = ?", (kb,)).fetchone()[0]

    @_locked
    def chunks_by_id(self, ids: Iterable[str]) -> dict[str, dict]:
        ids = list(ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self.conn.execute(
            f'SELECT id, source, page, heading, title, text, start, "end", path FROM chunks WHERE id IN ({marks})',
            ids).fetchall()
        return {r[0]: {"source": r[1], "page": r[2], "heading": r[3] or "", "title": r[4] or "", "text": r[5],
                       "start": r[6], "end": r[7], "path": r[8]} for r in rows}

    @_locked
    def lexical_search(self, kb: str, query_terms: list[str], n: int) -> list[tuple[str, float]]:
        """BM25 (FTS5) over the pre-tokenised terms: (chunk id, score) best first."""
        if not query_terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(query_terms))
        rows = self.conn.execute(
            "SELECT id, bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH ? AND kb = ? "
            "ORDER BY s LIMIT ?", (match, kb, n)).fetchall()
        return [(r[0], -float(r[1])) for r in rows]

    # -- meta ----------------------------------------------------------------------------
    @_locked
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @_locked
    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @_locked
    def clear_kb(self, kb: str) -> None:
        with self.conn:
            ids = [(r[0],) for r in self.conn.execute("SELECT id FROM chunks WHERE kb = ?", (kb,))]
            self.conn.executemany("DELETE FROM chunks_fts WHERE id = ?", ids)
            self.conn.execute("DELETE FROM chunks WHERE kb = ?", (kb,))
            self.conn.execute("DELETE FROM files WHERE kb = ?", (kb,))
