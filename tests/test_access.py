"""Collections in the knowledge layer: every read filters by the reader's scope inside its query
(dense `where`, lexical SQL, copies, manifest, batch rows), and the grants that produce a scope."""

from __future__ import annotations

import sqlite3

import pytest

from appliance.batch import Template, select_items
from appliance.server.access import AccessError, AccessStore
from appliance.server.auth import UserStore
from appliance.server.longdoc import DocumentError, find_document
from knowledge.errors import KnowledgeError
from knowledge.index.access import EVERYTHING, Scope, check_collection
from knowledge.ingest.folder import ingest
from knowledge.retrieve.retriever import Retriever

from .kb_helpers import open_kb

SALARY = "# Salary bands\n\nThe salary band of a senior engineer is 91,500 euros a year, paid in twelve instalments."
TRAVEL = "# Travel\n\nTrain tickets above 180 euros need the approval of a department head before booking."
PUBLIC = "# Canteen\n\nThe canteen on the ground floor serves lunch from 11:30 until 14:00 on working days."
HR, PUB = Scope.of(["hr"]), Scope.of(["default"])
SALARY_Q = "What is the salary band of a senior engineer?"


@pytest.fixture
def kb(tmp_path, embedder):
    """`pub` (default) with the canteen and the travel rule; `hr` with salaries and the same travel rule."""
    for folder, files in {"pub": {"canteen.md": PUBLIC, "travel.md": TRAVEL},
                          "hr": {"salaries.md": SALARY, "travel-copy.md": TRAVEL}}.items():
        (tmp_path / folder).mkdir()
        for name, text in files.items():
            (tmp_path / folder / name).write_text(text)
    kb = open_kb(tmp_path / "data", embedder, chunk_tokens=60, chunk_overlap=0)
    ingest(kb, tmp_path / "pub")
    ingest(kb, tmp_path / "hr", collection="hr")
    yield kb
    kb.close()


def _sources(hits) -> set[str]:
    return {s for h in hits for s in (h.source, *h.also_in)}


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_each_retrieval_side_sees_only_the_readers_collections(kb, mode):
    outside = Retriever(kb).search(SALARY_Q, k=10, mode=mode, scope=PUB)
    assert "salaries.md" not in _sources(outside) and all("91,500" not in h.text for h in outside)
    inside = Retriever(kb).search(SALARY_Q, k=10, mode=mode, scope=HR)
    assert inside and inside[0].source == "salaries.md"
    assert _sources(Retriever(kb).search(SALARY_Q, k=10, mode=mode, scope=Scope.of([]))) == set()


def test_a_copy_in_another_collection_is_never_cited(kb):
    q = "Who approves expensive train tickets?"
    pub = next(h for h in Retriever(kb).search(q, k=5, scope=PUB) if "180 euros" in h.text)
    assert pub.source == "travel.md" and pub.also_in == []  # the hr copy is not named
    hr = next(h for h in Retriever(kb).search(q, k=5, scope=HR) if "180 euros" in h.text)
    assert hr.source == "travel-copy.md" and hr.also_in == []
    both = next(h for h in Retriever(kb).search(q, k=5, scope=EVERYTHING) if "180 euros" in h.text)
    assert {both.source, *both.also_in} == {"travel.md", "travel-copy.md"}  # still one hit for an admin
    # Word-for-word copies are stored once per collection, never shared across two.
    rows = kb.db.conn.execute("SELECT collection, same_as FROM chunks WHERE text LIKE '%180 euros%'").fetchall()
    assert sorted(c for c, _ in rows) == ["default", "hr"] and all(s is None for _, s in rows)


def test_documents_batch_rows_and_whole_document_answers_are_scoped(kb):
    assert {r.source for r in kb.db.files(kb.cfg.name, scope=PUB).values()} == {"canteen.md", "travel.md"}
    with pytest.raises(DocumentError, match="no indexed document"):
        find_document(kb.db, kb.cfg.name, "salaries.md", False, scope=PUB)
    assert "91,500" in find_document(kb.db, kb.cfg.name, "salaries.md", False, scope=HR)[0].text
    tmpl = Template("Summarise.", "{text}", "files", 64, 4000)
    assert {i.source for i in select_items(kb.db, kb.cfg.name, tmpl, [], scope=PUB)} == {"canteen.md", "travel.md"}
    assert select_items(kb.db, kb.cfg.name, tmpl, ["salaries.md"], scope=PUB) == []


def test_the_vector_store_filters_by_the_readers_collections(kb):
    vector = kb.embedder.encode([SALARY_Q])[0]
    ids = [h.id for h in kb.store.query(vector, 10, PUB)]
    rows = kb.db.chunks_by_id(ids)
    assert ids and {r["collection"] for r in rows.values()} == {"default"}


def test_both_ways_of_a_scoped_vector_search_return_the_readers_nearest_only(tmp_path, embedder):
    """Most of the index readable: the nearest are over-fetched and filtered by label. A small part
    readable: too few of the nearest are, so Chroma filters inside its query. Both give only the
    reader's chunks, and the same ones as Chroma's own filtered search."""
    from knowledge.index.store import OVERFETCH, _hits

    for c in range(4):
        (tmp_path / f"c{c}").mkdir()
        for n in range(12):
            (tmp_path / f"c{c}" / f"n{n}.md").write_text(f"# Note {c}-{n}\n\nRoom {n} of wing {c} holds "
                                                        f"{n * 7 + c} chairs and {c + 2} windows.\n")
    kb = open_kb(tmp_path / "data", embedder)
    for c in range(4):
        ingest(kb, tmp_path / f"c{c}", collection=f"c{c}")
    vector = kb.embedder.encode(["How many chairs are in room 3 of wing 1?"])[0]
    for scope in (Scope.of(["c0", "c1", "c2"]), Scope.of(["c3"])):
        hits = kb.store.query(vector, 5, scope)
        rows = kb.db.chunks_by_id([h.id for h in hits])
        assert len(hits) == 5 and {r["collection"] for r in rows.values()} <= set(scope.names)
        wide = kb.store._col.query(query_embeddings=[vector], n_results=5 * OVERFETCH, include=["metadatas"])
        readable = sum(m["collection"] in scope.names for m in wide["metadatas"][0])
        assert (readable >= 5) == (len(scope.names) == 3)  # each scope takes the path it is meant to
        filtered = kb.store._col.query(query_embeddings=[vector], n_results=5, include=["distances"],
                                       where=scope.where())
        assert [h.id for h in hits] == [h.id for h in _hits(filtered)]
    kb.close()


def test_a_chroma_server_filters_the_same_way(tmp_path, embedder):
    """The scaled-out front-end keeps its vectors on a Chroma server: the `where` runs there."""
    from appliance.bench.server import start_chroma

    proc, url = start_chroma(tmp_path / "chroma" / "store")
    try:
        for folder, text in (("pub", PUBLIC), ("hr", SALARY)):
            (tmp_path / folder).mkdir()
            (tmp_path / folder / f"{folder}.md").write_text(text)
        kb = open_kb(tmp_path / "data", embedder, chroma_url=url)
        ingest(kb, tmp_path / "pub")
        ingest(kb, tmp_path / "hr", collection="hr")
        vector = kb.embedder.encode([SALARY_Q])[0]
        rows = kb.db.chunks_by_id([h.id for h in kb.store.query(vector, 10, PUB)])
        assert rows and {r["collection"] for r in rows.values()} == {"default"}
        assert Retriever(kb).search(SALARY_Q, k=3, scope=HR)[0].source == "hr.md"
        kb.close()
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_folder_keeps_its_collection_when_an_outer_folder_is_ingested(tmp_path, embedder):
    (tmp_path / "docs" / "hr").mkdir(parents=True)
    (tmp_path / "docs" / "canteen.md").write_text(PUBLIC)
    (tmp_path / "docs" / "hr" / "salaries.md").write_text(SALARY)
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, tmp_path / "docs" / "hr", collection="hr")
    ingest(kb, tmp_path / "docs")  # no --collection: the hr file must not fall back to default
    assert "91,500" not in " ".join(h.text for h in Retriever(kb).search(SALARY_Q, k=5, scope=PUB))
    ingest(kb, tmp_path / "docs", collection="default")  # named explicitly: it moves, and is found there
    assert "91,500" in Retriever(kb).search(SALARY_Q, k=1, scope=PUB)[0].text
    assert Retriever(kb).search(SALARY_Q, k=5, scope=HR) == []
    kb.close()


def test_two_versions_differing_in_one_figure_stay_apart_in_two_collections(tmp_path, embedder):
    for folder, figure in (("v1", "91,500"), ("v2", "94,000")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "salaries.md").write_text(SALARY.replace("91,500", figure))
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, tmp_path / "v1", collection="hr-2025")
    ingest(kb, tmp_path / "v2", collection="hr-2026")
    assert "91,500" in Retriever(kb).search(SALARY_Q, k=1, scope=Scope.of(["hr-2025"]))[0].text
    assert "94,000" in Retriever(kb).search(SALARY_Q, k=1, scope=Scope.of(["hr-2026"]))[0].text
    kb.close()


@pytest.mark.parametrize("name", ["../hr", "hr/x", "HR", "", ".hidden", "a b", "x" * 64, "hr;drop"])
def test_a_collection_name_with_path_or_odd_characters_is_refused(tmp_path, embedder, name):
    with pytest.raises(KnowledgeError, match="invalid collection name"):
        check_collection(name)
    kb = open_kb(tmp_path / "data", embedder)
    (tmp_path / "d").mkdir()
    with pytest.raises(KnowledgeError, match="invalid collection name"):
        ingest(kb, tmp_path / "d", collection=name)
    assert not (tmp_path / "hr").exists()
    kb.close()


def test_an_index_from_before_collections_is_labelled_and_stays_readable(tmp_path, embedder):
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "canteen.md").write_text(PUBLIC)
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, tmp_path / "pub")
    ids = sorted(kb.db.stored_ids(kb.cfg.name))
    kb.store._col.update(ids=ids, metadatas=[{"old": 1}] * len(ids))  # vectors as an older version wrote them
    kb.db.conn.execute("DELETE FROM meta WHERE key LIKE 'vector_collections:%'")
    kb.db.conn.commit()
    kb.close()
    kb = open_kb(tmp_path / "data", embedder)
    hits = Retriever(kb).search("When is lunch served in the canteen?", k=1, mode="dense", scope=PUB)
    assert hits and hits[0].source == "canteen.md"
    kb.close()


# -- groups and grants -----------------------------------------------------------------
@pytest.fixture
def access(tmp_path):
    users = UserStore(tmp_path / "users.db")
    for name in ("alice", "bob"):
        users.add(name, "password-" + name)
    store = AccessStore(tmp_path / "users.db", lambda: {"default": 3, "hr": 1})
    return users, store


def test_every_user_reads_default_and_an_admin_reads_everything(access):
    users, store = access
    assert store.scope_for(users.get("bob")) == Scope.of(["default"])
    users.add("root", "password-root", admin=True)
    assert store.scope_for(users.get("root")).is_everything


def test_a_grant_counts_at_once_and_a_revoke_too(access):
    users, store = access
    store.add_member("hr-team", "alice")
    store.grant("hr-team", "hr", "read")
    assert store.scope_for(users.get("alice")) == Scope.of(["default", "hr"])
    assert store.writable(users.get("alice")) == ["default"]  # read is not write
    store.revoke("hr-team", "hr")
    assert store.scope_for(users.get("alice")) == Scope.of(["default"])


def test_a_user_in_no_group_sees_nothing(access):
    users, store = access
    store.remove_member("everyone", "bob")
    assert store.scope_for(users.get("bob")).is_empty


def test_bad_grants_are_refused_with_a_reason(access):
    _, store = access
    with pytest.raises(AccessError, match="no collection 'finance'"):
        store.grant("everyone", "finance", "read")
    with pytest.raises(AccessError, match="read or write"):
        store.grant("everyone", "hr", "admin")
    with pytest.raises(AccessError, match="invalid collection name"):
        store.grant("everyone", "../hr", "read")
    with pytest.raises(AccessError, match=r"no user 'mallory' .*`appliance users add mallory` creates it"):
        store.add_member("hr-team", "mallory")
    with pytest.raises(AccessError, match="invalid group name"):
        store.add_member("HR Team", "alice")


def test_a_removed_account_leaves_its_groups(access, tmp_path):
    users, store = access
    store.add_member("hr-team", "alice")
    users.remove("alice")
    assert sqlite3.connect(tmp_path / "users.db").execute(
        "SELECT COUNT(*) FROM members WHERE user = 'alice'").fetchone()[0] == 0
