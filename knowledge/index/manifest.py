"""The ingest manifest: one row per file (path, content hash, chunk ids, status, error).

It is what makes ingest incremental (unchanged files are skipped) and crash-safe: before vectors
are written, the ids about to be written are journalled in `pending_ids`; the row only becomes
`done` in the same transaction that commits the chunk rows (see `knowledge.index.db`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from knowledge.index.access import DEFAULT_COLLECTION, EVERYTHING, Scope

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    kb TEXT NOT NULL, path TEXT NOT NULL, root TEXT NOT NULL, source TEXT NOT NULL,
    size INTEGER, mtime REAL, sha256 TEXT, kind TEXT, chunk_ids TEXT NOT NULL DEFAULT '[]',
    pending_ids TEXT, status TEXT NOT NULL, error TEXT, updated REAL,
    PRIMARY KEY (kb, path));
CREATE TABLE IF NOT EXISTS collections (kb TEXT NOT NULL, name TEXT NOT NULL, created REAL,
                                        PRIMARY KEY (kb, name));
"""
_COLUMNS = "path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids, status, error, collection"


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
    collection: str = DEFAULT_COLLECTION


def _record(r: tuple) -> FileRecord:
    return FileRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]),
                      json.loads(r[8]) if r[8] else None, r[9], r[10], r[11])


class Manifest:
    """The `files` table. Callers own the transaction (and the connection's lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.executescript(SCHEMA)
        if "collection" not in {r[1] for r in conn.execute("PRAGMA table_info(files)")}:
            # A manifest from before collections: every file is in the one everybody reads.
            conn.execute(f"ALTER TABLE files ADD COLUMN collection TEXT NOT NULL DEFAULT '{DEFAULT_COLLECTION}'")

    def files(self, kb: str, root: str | None = None, scope: Scope = EVERYTHING) -> dict[str, FileRecord]:
        """Every file of `kb` (under `root` when given) that `scope` may see, keyed by absolute path."""
        where, params = scope.sql("collection")
        # nosec justification: a fixed column list and Scope.sql's placeholders; every value is bound.
        sql = f"SELECT {_COLUMNS} FROM files WHERE kb = ?" + (" AND root = ?" if root else "") + where  # nosec B608
        rows = self.conn.execute(sql, [kb, *([root] if root else []), *params]).fetchall()
        return {r[0]: _record(r) for r in rows}

    def collections(self, kb: str) -> dict[str, int]:
        """{collection: files in it} for every known collection (created or holding files)."""
        out = {r[0]: 0 for r in self.conn.execute("SELECT name FROM collections WHERE kb = ?", (kb,))}
        out.setdefault(DEFAULT_COLLECTION, 0)
        out.update(self.conn.execute("SELECT collection, COUNT(*) FROM files WHERE kb = ? GROUP BY collection",
                                     (kb,)))
        return dict(sorted(out.items()))

    def add_collection(self, kb: str, name: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO collections VALUES (?, ?, ?)", (kb, name, time.time()))

    def get(self, kb: str, path: str) -> FileRecord | None:
        """One file by path (a primary-key lookup, not a scan)."""
        sql = f"SELECT {_COLUMNS} FROM files WHERE kb = ? AND path = ?"  # nosec B608 - a fixed column list
        row = self.conn.execute(sql, (kb, path)).fetchone()
        return _record(row) if row else None

    def journal(self, kb: str, rec: FileRecord, new_ids: list[str]) -> None:
        """Record the ids about to be written to the vector store, before writing them."""
        self.conn.execute(
            "INSERT INTO files (kb, path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids,"
            " status, updated, collection) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?, ?, 'pending', ?, ?)"
            " ON CONFLICT (kb, path) DO UPDATE SET pending_ids = excluded.pending_ids, status = 'pending'",
            (kb, rec.path, rec.root, rec.source, rec.size, rec.mtime, rec.kind,
             json.dumps(rec.chunk_ids), json.dumps(new_ids), time.time(), rec.collection))

    def upsert(self, kb: str, rec: FileRecord, ids: list[str], status: str, error: str | None) -> None:
        """The file's committed state; clears the journal."""
        self.conn.execute(
            "INSERT INTO files (kb, path, root, source, size, mtime, sha256, kind, chunk_ids, pending_ids, status,"
            " error, updated, collection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)"
            " ON CONFLICT (kb, path) DO UPDATE SET root = excluded.root, source = excluded.source,"
            " size = excluded.size, mtime = excluded.mtime, sha256 = excluded.sha256, kind = excluded.kind,"
            " chunk_ids = excluded.chunk_ids, pending_ids = NULL, status = excluded.status,"
            " error = excluded.error, updated = excluded.updated, collection = excluded.collection",
            (kb, rec.path, rec.root, rec.source, rec.size, rec.mtime, rec.sha256, rec.kind, json.dumps(ids),
             status, error, time.time(), rec.collection))

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
