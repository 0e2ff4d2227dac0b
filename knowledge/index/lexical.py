"""The lexical (BM25) index: an SQLite FTS5 table of pre-tokenised terms.

Rows are keyed by the chunk row's rowid, so deleting a file's rows is a rowid lookup rather than
a scan of the whole index. Terms come from `knowledge.text.terms`; when that tokeniser changes
(`TERMS_VERSION`), the index is rebuilt from the stored chunk texts on open.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable

from knowledge.index.access import Scope
from knowledge.index.chunking import embed_text
from knowledge.text.terms import TERMS_VERSION, terms

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(terms);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab(chunks_fts, 'row');
"""


class LexicalIndex:
    """The `chunks_fts` table. Callers own the transaction (and the connection's lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        columns = [r[1] for r in conn.execute("PRAGMA table_info(chunks_fts)")]
        if columns and columns != ["terms"]:  # an older layout keyed by chunk id: rebuild it
            conn.execute("DROP TABLE IF EXISTS chunks_fts_vocab")
            conn.execute("DROP TABLE chunks_fts")
        conn.executescript(SCHEMA)

    def needs_rebuild(self, stored_version: str | None) -> bool:
        return stored_version != TERMS_VERSION

    def add(self, rows: Iterable[tuple[int, str]]) -> None:
        """Index (rowid, text) pairs."""
        self.conn.executemany("INSERT INTO chunks_fts (rowid, terms) VALUES (?, ?)",
                              ((rowid, " ".join(terms(text))) for rowid, text in rows))

    def delete(self, rowids: list[int]) -> None:
        self.conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ((r,) for r in rowids))

    def rebuild(self, rows: Iterable[tuple[int, str, str, str]]) -> None:
        """Re-tokenise every chunk (rowid, title, heading, text) with the current `terms`."""
        self.conn.execute("DELETE FROM chunks_fts")
        self.add((rowid, embed_text(title or "", heading or "", text)) for rowid, title, heading, text in rows)

    def search(self, kb: str, query_terms: list[str], n: int, scope: Scope) -> list[tuple[str, float]]:
        """BM25 over the terms: (chunk id, score) best first, among the chunks `scope` may see."""
        if not query_terms or scope.is_empty:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(query_terms))
        where, params = scope.sql("c.collection")
        rows = self.conn.execute(
            "SELECT c.id, bm25(chunks_fts) AS s FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ? AND c.kb = ?{where} ORDER BY s LIMIT ?",  # nosec B608 - placeholders only
            (match, kb, *params, n)).fetchall()
        return [(r[0], -float(r[1])) for r in rows]

    def idf(self, terms_: list[str]) -> dict[str, float]:
        """BM25's inverse document frequency of each term over every indexed chunk (rare = high)."""
        n = self.conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
        unique = list(dict.fromkeys(terms_))
        df = dict.fromkeys(unique, 0)
        if unique:
            marks = ",".join("?" * len(unique))
            sql = f"SELECT term, doc FROM chunks_fts_vocab WHERE term IN ({marks})"  # nosec B608 - placeholders
            df.update(self.conn.execute(sql, unique))
        return {t: math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1.0) for t in unique}

