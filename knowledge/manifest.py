"""The ingest manifest: one row per file (path, content hash, chunk ids, status, error).

It is what makes ingest incremental (unchanged files are skipped) and crash-safe: before vectors
are written, the ids about to be written are journalled in `pending_ids`; the row only becomes
`done` in the same transaction that commits the chunk rows (see `knowledge.db`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    kb TEXT NOT NULL, path TEXT NOT NULL, root TEXT NOT NULL, source TEXT NOT NULL,
    size INTEGER, mtime REAL, sha256 TEXT, kind TEXT, chunk_ids TEXT NOT NULL DEFAULT '[]',
    pending_ids TEXT, status TEXT NOT NULL, error TEXT, updated REAL,
    PRIMARY KEY (kb, path));
"""
_COLUMNS = "path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids, status, error"


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


def _record(r: tuple) -> FileRecord:
    return FileRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                      json.loads(r[8]) if r[8] else None, r[9], r[10])


class Manifest:
    """The `files` table. Callers own the transaction (and the connection's lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.executescript(SCHEMA)

    def files(self, kb: str, root: str | None = None) -> dict[str, FileRecord]:
        """Every file of `kb` (under `root` when given), keyed by absolute path."""
        sql = f"SELECT {_COLUMNS} FROM files WHERE kb = ?" + (" AND root = ?" if root else "")
        rows = self.conn.execute(sql, (kb, root) if root else (kb,)).fetchall()
        return {r[0]: _record(r) for r in rows}

    def get(self, kb: str, path: str) -> FileRecord | None:
        """One file by path (a primary-key lookup, not a scan)."""
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM files WHERE kb = ? AND path = ?", (kb, path)).fetchone()
        return _record(row) if row else None

    def journal(self, kb: str, rec: FileRecord, new_ids: list[str]) -> None:
        """Record the ids about to be written to the vector store, before writing them."""
        self.conn.execute(
            "INSERT INTO files (kb, path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids,"
            " status, updated) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?, ?, 'pending', ?)"
            " ON CONFLICT (kb, path) DO UPDATE SET pending_ids = excluded.pending_ids, status = 'pending'",
            (kb, rec.path, rec.root, rec.source, rec.size, rec.mtime, rec.kind,
             json.dumps(rec.chunk_ids), json.dumps(new_ids), time.time()))

    def upsert(self, kb: str, rec: FileRecord, ids: list[str], status: str, error: str | None) -> None:
        """The file's committed state; clears the journal."""
        self.conn.execute(
            "INSERT INTO files (kb, path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids, status,"
            " error, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)"
            " ON CONFLICT (kb, path) DO UPDATE SET root = excluded.root, source = excluded.source,"
            " size = excluded.size, mtime = excluded.mtime, sha256 = excluded.sha256, kind = excluded.kind,"
            " chunk_ids = excluded.chunk_ids, pending_ids = NULL, status = excluded.status,"
            " error = excluded.error, updated = excluded.updated",
            (kb, rec.path, rec.root, rec.source, rec.size, rec.mtime, rec.sha256, rec.kind, json.dumps(ids),
             status, error, time.time()))

    def touch(self, kb: str, path: str, mtime: float) -> None:
        """Content unchanged (same hash) but the mtime moved: remember the new mtime."""
        self.conn.execute("UPDATE files SET mtime = ? WHERE kb = ? AND path = ?", (mtime, kb, path))

    def invalidate(self, kb: str, path: str) -> None:
        """Force the next ingest to re-process a file (its store state is in doubt)."""
        self.conn.execute("UPDATE files SET sha256 = '', pending_ids = NULL, status = 'stale' "
                          "WHERE kb = ? AND path = ?", (kb, path))

    def delete(self, kb: str, path: str) -> None:
        self.conn.execute("DELETE FROM files WHERE kb = ? AND path = ?", (kb, path))

    def clear(self, kb: str) -> None:
        self.conn.execute("DELETE FROM files WHERE kb = ?", (kb,))
