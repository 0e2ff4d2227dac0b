"""The three tables of knowledge.db, each on its own, and the transactions that span them."""

from __future__ import annotations

import sqlite3

import pytest

from knowledge.index.access import EVERYTHING
from knowledge.index.chunking import Chunk
from knowledge.index.chunkstore import ChunkStore
from knowledge.index.db import KnowledgeDB
from knowledge.index.lexical import LexicalIndex
from knowledge.index.manifest import FileRecord, Manifest
from knowledge.text.terms import TERMS_VERSION, terms


def _rec(path: str = "/docs/a.md", **kw) -> FileRecord:
    base = dict(path=path, root="/docs", source=path.rsplit("/", 1)[-1], size=10, mtime=1.0, sha256="h",
                kind="markdown", chunk_ids=[], pending_ids=None, status="new", error=None)
    return FileRecord(**{**base, **kw})


def _chunks(*texts: str, heading: str = "") -> list[Chunk]:
    return [Chunk(t, "a.md", i, 0, len(t), heading=heading) for i, t in enumerate(texts)]


@pytest.fixture
def conn():
    c = sqlite3.connect(":memory:")
    yield c
    c.close()


def test_manifest_journal_then_upsert_clears_the_journal(conn):
    m = Manifest(conn)
    m.journal("kb", _rec(), ["x-1", "x-2"])
    assert m.get("kb", "/docs/a.md").pending_ids == ["x-1", "x-2"]
    assert m.get("kb", "/docs/a.md").status == "pending"
    m.upsert("kb", _rec(sha256="abc"), ["x-1"], status="done", error=None)
    rec = m.get("kb", "/docs/a.md")
    assert (rec.pending_ids, rec.chunk_ids, rec.status, rec.sha256) == (None, ["x-1"], "done", "abc")


def test_manifest_scoping_invalidate_and_delete(conn):
    m = Manifest(conn)
    m.upsert("kb", _rec("/docs/a.md"), [], "done", None)
    m.upsert("kb", _rec("/other/b.md", root="/other"), [], "done", None)
    m.upsert("kb2", _rec("/docs/a.md"), [], "done", None)
    assert set(m.files("kb")) == {"/docs/a.md", "/other/b.md"}
    assert set(m.files("kb", root="/other")) == {"/other/b.md"}
    m.invalidate("kb", "/docs/a.md")
    assert (m.get("kb", "/docs/a.md").status, m.get("kb", "/docs/a.md").sha256) == ("stale", "")
    assert m.get("kb2", "/docs/a.md").status == "done"  # another knowledge base is untouched
    m.delete("kb", "/docs/a.md")
    assert m.get("kb", "/docs/a.md") is None and m.get("kb2", "/docs/a.md") is not None


def test_chunkstore_add_read_delete(conn):
    cs = ChunkStore(conn)
    rowids = cs.add("kb", "/docs/a.md", ["c1", "c2"], _chunks("alpha", "beta", heading="Intro"))
    assert len(set(rowids)) == 2
    rows = cs.by_id(["c1", "c2", "missing"])
    assert set(rows) == {"c1", "c2"} and rows["c1"]["heading"] == "Intro" and rows["c2"]["text"] == "beta"
    assert cs.count("kb") == 2 and cs.ids("kb") == {"c1", "c2"} and cs.count("other") == 0
    assert sorted(cs.delete_file("kb", "/docs/a.md")) == sorted(rowids)
    assert cs.count("kb") == 0


def test_chunkstore_reads_more_ids_than_sqlite_binds(conn):
    cs = ChunkStore(conn)
    n = 1200
    cs.add("kb", "/docs/a.md", [f"c{i}" for i in range(n)], _chunks(*(f"t{i}" for i in range(n))))
    assert len(cs.by_id(f"c{i}" for i in range(n))) == n


def test_lexical_index_search_and_delete_by_rowid(conn):
    cs, lex = ChunkStore(conn), LexicalIndex(conn)
    rowids = cs.add("kb", "/docs/a.md", ["c1", "c2"], _chunks("rotate the certificates", "backup schedule"))
    lex.add(zip(rowids, ["rotate the certificates", "backup schedule"], strict=True))
    assert [cid for cid, _ in lex.search("kb", terms("rotating certificate"), 5, EVERYTHING)] == ["c1"]
    assert lex.search("other-kb", terms("backup"), 5, EVERYTHING) == []
    lex.delete(rowids[:1])
    assert lex.search("kb", terms("certificates"), 5, EVERYTHING) == []
    assert [cid for cid, _ in lex.search("kb", terms("backup"), 5, EVERYTHING)] == ["c2"]


def test_db_commit_is_atomic_and_remove_clears_lexical_rows(tmp_path):
    db = KnowledgeDB(tmp_path / "k.db")
    rec = _rec()
    db.begin_write("kb", rec, ["c1"])
    db.commit_file("kb", rec, _chunks("firewall ports"), ["c1"])
    assert db.file("kb", rec.path).status == "done" and db.chunk_count("kb") == 1
    assert db.lexical_search("kb", terms("firewall"), 5, EVERYTHING)[0][0] == "c1"
    db.commit_file("kb", rec, _chunks("kernel modules"), ["c9"])  # a changed file replaces its rows
    assert db.chunk_ids("kb") == {"c9"} and db.lexical_search("kb", terms("firewall"), 5, EVERYTHING) == []
    db.remove_file("kb", rec.path)
    assert db.file("kb", rec.path) is None and db.lexical_search("kb", terms("kernel"), 5, EVERYTHING) == []
    fts_rows = db.conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
    assert fts_rows == 0
    db.close()


def test_lexical_index_rebuilt_from_an_older_layout(tmp_path):
    """A knowledge.db written by the previous layout (FTS rows keyed by chunk id) still searches."""
    path = tmp_path / "k.db"
    db = KnowledgeDB(path)
    db.commit_file("kb", _rec(), _chunks("snapshot retention policy", heading="Backups"), ["c1"])
    db.conn.execute("DROP TABLE chunks_fts")
    db.conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(id UNINDEXED, kb UNINDEXED, terms)")
    db.conn.execute("DELETE FROM meta WHERE key = 'lexical_terms'")
    db.conn.commit()
    db.close()
    db = KnowledgeDB(path)
    assert [r[1] for r in db.conn.execute("PRAGMA table_info(chunks_fts)")] == ["terms"]
    assert db.lexical_search("kb", terms("retention"), 5, EVERYTHING)[0][0] == "c1"
    assert db.lexical_search("kb", terms("backups"), 5, EVERYTHING)[0][0] == "c1"  # the heading is indexed too
    assert db.get_meta("lexical_terms") == TERMS_VERSION
    db.close()
