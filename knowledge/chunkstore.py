"""Chunk texts and their citation facts (source, page, heading, offsets), keyed by chunk id.

The vector store holds only ids and vectors; answers and citations read the text from here.
Each row's SQLite rowid is also the key of its lexical index row (`knowledge.lexical`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from knowledge.chunking import Chunk

SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, kb TEXT NOT NULL, path TEXT NOT NULL, source TEXT NOT NULL,
    page INTEGER, heading TEXT, title TEXT, text TEXT NOT NULL, start INTEGER, "end" INTEGER);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (kb, path);
"""


class ChunkStore:
    """The `chunks` table. Callers own the transaction (and the connection's lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.executescript(SCHEMA)

    def add(self, kb: str, path: str, ids: list[str], chunks: list[Chunk]) -> list[int]:
        """Insert one file's chunks; returns their rowids, in order."""
        rowids = []
        for i, c in zip(ids, chunks, strict=True):
            cur = self.conn.execute(
                'INSERT OR REPLACE INTO chunks (id, kb, path, source, page, heading, title, text, start, "end")'
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (i, kb, path, c.source, c.page, c.heading, c.title, c.text, c.start, c.end))
            rowids.append(cur.lastrowid)
        return rowids

    def delete_file(self, kb: str, path: str) -> list[int]:
        """Delete one file's chunks (an index lookup); returns the rowids they had."""
        rowids = [r[0] for r in self.conn.execute("SELECT rowid FROM chunks WHERE kb = ? AND path = ?", (kb, path))]
        self.conn.execute("DELETE FROM chunks WHERE kb = ? AND path = ?", (kb, path))
        return rowids

    def clear(self, kb: str) -> list[int]:
        rowids = [r[0] for r in self.conn.execute("SELECT rowid FROM chunks WHERE kb = ?", (kb,))]
        self.conn.execute("DELETE FROM chunks WHERE kb = ?", (kb,))
        return rowids

    def ids(self, kb: str) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE kb = ?", (kb,))}

    def count(self, kb: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM chunks WHERE kb = ?", (kb,)).fetchone()[0]

    def by_id(self, ids: Iterable[str]) -> dict[str, dict]:
        """Rows for the given ids (missing ids are left out)."""
        ids = list(ids)
        out: dict[str, dict] = {}
        for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
            part = ids[start:start + 500]
            rows = self.conn.execute(
                f'SELECT id, source, page, heading, title, text, start, "end", path FROM chunks '
                f'WHERE id IN ({",".join("?" * len(part))})', part).fetchall()
            out.update({r[0]: {"source": r[1], "page": r[2], "heading": r[3] or "", "title": r[4] or "",
                               "text": r[5], "start": r[6], "end": r[7], "path": r[8]} for r in rows})
        return out

    def in_order(self, kb: str) -> list[dict]:
        """Every chunk of `kb` (id, source, page, heading, text), by source then position in it."""
        rows = self.conn.execute('SELECT id, source, page, heading, text FROM chunks WHERE kb = ? '
                                 'ORDER BY source, start, rowid', (kb,)).fetchall()
        return [{"id": r[0], "source": r[1], "page": r[2], "heading": r[3] or "", "text": r[4]} for r in rows]

    def of_file(self, kb: str, path: str) -> list[Chunk]:
        """One file's chunks in reading order."""
        rows = self.conn.execute('SELECT text, source, page, heading, title, start, "end" FROM chunks '
                                 "WHERE kb = ? AND path = ? ORDER BY start, rowid", (kb, path)).fetchall()
        return [Chunk(r[0], r[1], i, r[5] or 0, r[6] or 0, r[2] if r[2] not in (None, -1) else None, r[3] or "",
                      r[4] or "") for i, r in enumerate(rows)]

    def rows_for_index(self) -> Iterable[tuple[int, str, str, str]]:
        """(rowid, title, heading, text) of every chunk: what the lexical index is rebuilt from."""
        yield from self.conn.execute("SELECT rowid, title, heading, text FROM chunks")
