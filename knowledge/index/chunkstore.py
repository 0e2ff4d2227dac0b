"""Chunk texts and their citation facts (source, page, heading, offsets), keyed by chunk id.

The vector store holds only ids and vectors; answers and citations read the text from here.
Each row's SQLite rowid is also the key of its lexical index row (`knowledge.index.lexical`).

A passage that several files hold word for word is stored once: the first row is the *stored* copy
(vector and lexical row, `same_as` NULL); the others keep their own citation facts and name the
stored copy in `same_as` (see `knowledge.ingest.shared`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from knowledge.index.access import DEFAULT_COLLECTION, EVERYTHING, Scope
from knowledge.index.chunking import Chunk, passage_digest

SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, kb TEXT NOT NULL, path TEXT NOT NULL, source TEXT NOT NULL,
    page INTEGER, heading TEXT, title TEXT, text TEXT NOT NULL, start INTEGER, "end" INTEGER,
    digest TEXT, same_as TEXT, collection TEXT NOT NULL DEFAULT 'default');
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (kb, path);
"""
_SHARED_INDEXES = """
CREATE INDEX IF NOT EXISTS chunks_digest ON chunks (kb, digest) WHERE same_as IS NULL;
CREATE INDEX IF NOT EXISTS chunks_same_as ON chunks (same_as) WHERE same_as IS NOT NULL;
"""


class ChunkStore:
    """The `chunks` table. Callers own the transaction (and the connection's lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        conn.executescript(SCHEMA)
        columns = {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
        if "same_as" not in columns:  # an index from before shared passages: every row is stored
            conn.execute("ALTER TABLE chunks ADD COLUMN digest TEXT")
            conn.execute("ALTER TABLE chunks ADD COLUMN same_as TEXT")
            rows = conn.execute("SELECT rowid, heading, text FROM chunks").fetchall()
            conn.executemany("UPDATE chunks SET digest = ? WHERE rowid = ?",
                             [(passage_digest(h or "", t), r) for r, h, t in rows])
        if "collection" not in columns:  # from before collections: all in the one everybody reads
            conn.execute(f"ALTER TABLE chunks ADD COLUMN collection TEXT NOT NULL DEFAULT '{DEFAULT_COLLECTION}'")
        conn.executescript(_SHARED_INDEXES)

    def add(self, kb: str, path: str, ids: list[str], chunks: list[Chunk],
            same_as: list[str | None] | None = None, collection: str = DEFAULT_COLLECTION) -> list[int]:
        """Insert one file's chunks (`same_as[i]`: the stored row chunk i repeats, None when it is
        stored itself); returns their rowids, in order."""
        rowids = []
        for i, c, same in zip(ids, chunks, same_as or [None] * len(chunks), strict=True):
            cur = self.conn.execute(
                'INSERT OR REPLACE INTO chunks (id, kb, path, source, page, heading, title, text, start, "end",'
                " digest, same_as, collection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (i, kb, path, c.source, c.page, c.heading, c.title, c.text, c.start, c.end, c.digest, same,
                 collection))
            rowids.append(cur.lastrowid)
        return rowids

    def stored_by_digest(self, kb: str, digests: Iterable[str], exclude_paths: set[str],
                         collection: str = DEFAULT_COLLECTION) -> dict[str, str]:
        """{digest: id} of stored rows of `collection` holding these passages, outside `exclude_paths`.
        Only within one collection: a copy must never depend on a row another collection owns."""
        out: dict[str, str] = {}
        digests = list(dict.fromkeys(digests))
        for start in range(0, len(digests), 500):
            part = digests[start:start + 500]
            # nosec justification: only '?' placeholders are formatted in; every value is bound.
            for d, cid, path in self.conn.execute(
                    f"SELECT digest, id, path FROM chunks WHERE kb = ? AND collection = ? AND same_as IS NULL "  # nosec B608
                    f"AND digest IN ({','.join('?' * len(part))}) ORDER BY rowid", [kb, collection, *part]):
                if path not in exclude_paths:
                    out.setdefault(d, cid)
        return out

    def copies_elsewhere(self, kb: str, path: str) -> dict[str, list[tuple[str, str]]]:
        """For each stored row of `path` that other files point to: [(their id, digest)], oldest first."""
        out: dict[str, list[tuple[str, str]]] = {}
        for stored, cid, d in self.conn.execute(
                "SELECT s.id, c.id, c.digest FROM chunks s JOIN chunks c ON c.same_as = s.id "
                "WHERE s.kb = ? AND s.path = ? AND c.path != ? ORDER BY c.rowid", (kb, path, path)):
            out.setdefault(stored, []).append((cid, d))
        return out

    def promote(self, old: str, heir: str) -> int | None:
        """Make `heir` the stored copy of what `old` held; returns its rowid when it was a copy
        (it then needs a lexical row), None when it was stored already."""
        self.conn.execute("UPDATE chunks SET same_as = ? WHERE same_as = ? AND id != ?", (heir, old, heir))
        row = self.conn.execute("SELECT rowid, same_as FROM chunks WHERE id = ?", (heir,)).fetchone()
        if row is None or row[1] is None:
            return None
        self.conn.execute("UPDATE chunks SET same_as = NULL WHERE id = ?", (heir,))
        return row[0]

    def copies_of(self, ids: Iterable[str], scope: Scope = EVERYTHING) -> dict[str, list[dict]]:
        """{stored id: rows of the other files' copies of it that `scope` may see}, for citing every file."""
        ids = list(ids)
        out: dict[str, list[dict]] = {}
        where, params = scope.sql("collection")
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            # nosec justification: '?' placeholders and Scope.sql's fixed column name only; values are bound.
            for r in self.conn.execute(
                    f'SELECT same_as, id, source, page, heading, title, text, start, "end", path, collection '  # nosec B608
                    f'FROM chunks WHERE same_as IN ({",".join("?" * len(part))}){where} ORDER BY rowid',
                    [*part, *params]):  # placeholders and a fixed column name only
                out.setdefault(r[0], []).append({"id": r[1], **_row(r[2:])})
        return out

    def stored_ids(self, kb: str) -> set[str]:
        """Ids of the rows that own a vector."""
        return {r[0] for r in self.conn.execute("SELECT id FROM chunks WHERE kb = ? AND same_as IS NULL", (kb,))}

    def dangling(self, kb: str) -> set[str]:
        """Paths of files with a copy whose stored row is gone (an interrupted write)."""
        return {r[0] for r in self.conn.execute(
            "SELECT c.path FROM chunks c LEFT JOIN chunks s ON s.id = c.same_as "
            "WHERE c.kb = ? AND c.same_as IS NOT NULL AND s.id IS NULL", (kb,))}

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

    def text_after(self, kb: str, source: str, offset: int, chars: int) -> str:
        """Up to `chars` characters of `source`'s text from `offset` on, from the chunk that holds it."""
        row = self.conn.execute('SELECT start, text FROM chunks WHERE kb = ? AND source = ? AND start <= ? '
                                'AND "end" > ? ORDER BY start DESC LIMIT 1', (kb, source, offset, offset)).fetchone()
        return row[1][offset - row[0]:offset - row[0] + chars] if row else ""

    def count(self, kb: str) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM chunks WHERE kb = ?", (kb,)).fetchone()[0]

    def by_id(self, ids: Iterable[str]) -> dict[str, dict]:
        """Rows for the given ids (missing ids are left out)."""
        ids = list(ids)
        out: dict[str, dict] = {}
        for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
            part = ids[start:start + 500]
            rows = self.conn.execute(
                f'SELECT id, source, page, heading, title, text, start, "end", path, collection FROM chunks '
                f'WHERE id IN ({",".join("?" * len(part))})', part).fetchall()  # nosec B608 - placeholders
            out.update({r[0]: _row(r[1:]) for r in rows})
        return out

    def in_order(self, kb: str, scope: Scope = EVERYTHING) -> list[dict]:
        """Every chunk of `kb` that `scope` may see (id, source, page, heading, text), by source then
        position in it."""
        where, params = scope.sql("collection")
        rows = self.conn.execute(f'SELECT id, source, page, heading, text FROM chunks WHERE kb = ?{where} '
                                 'ORDER BY source, start, rowid', [kb, *params]).fetchall()  # nosec B608 - Scope.sql
        return [{"id": r[0], "source": r[1], "page": r[2], "heading": r[3] or "", "text": r[4]} for r in rows]

    def of_file(self, kb: str, path: str) -> list[Chunk]:
        """One file's chunks in reading order."""
        rows = self.conn.execute('SELECT text, source, page, heading, title, start, "end" FROM chunks '
                                 "WHERE kb = ? AND path = ? ORDER BY start, rowid", (kb, path)).fetchall()
        return [Chunk(r[0], r[1], i, r[5] or 0, r[6] or 0, r[2] if r[2] not in (None, -1) else None, r[3] or "",
                      r[4] or "") for i, r in enumerate(rows)]

    def rows_for_index(self) -> Iterable[tuple[int, str, str, str]]:
        """(rowid, title, heading, text) of every stored chunk: what the lexical index is rebuilt from."""
        yield from self.conn.execute("SELECT rowid, title, heading, text FROM chunks WHERE same_as IS NULL")


def _row(r: tuple) -> dict:
    return {"source": r[0], "page": r[1], "heading": r[2] or "", "title": r[3] or "", "text": r[4], "start": r[5],
            "end": r[6], "path": r[7], "collection": r[8]}
