"""Ingest: incremental behaviour, the bad-input zoo, consistency of store and manifest."""

import os

import pytest

from knowledge.ingest.folder import ingest

from .kb_helpers import assert_consistent, make_docx, make_encrypted_pdf, make_pdf, open_kb, statuses


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.md").write_text("# VPN\nRotate the VPN certificate every 90 days.\n")
    (d / "sub" / "b.txt").write_text("Printers are on the second floor.\n")
    make_pdf(d / "c.pdf", ["Expense reports are due on Fridays.", "Travel needs approval."])
    make_docx(d / "d.docx", "Onboarding", [("Laptop", "New hires get a laptop on day one.")])
    return d


def test_incremental_edit_delete_rename(tmp_path, docs, embedder):
    kb = open_kb(tmp_path / "data", embedder)
    first = ingest(kb, docs)
    assert first.count("new") == 4 and first.count("failed") == 0
    again = ingest(kb, docs)
    assert (again.count("new"), again.count("changed"), again.count("removed")) == (0, 0, 0)
    assert again.count("unchanged") == 4
    (docs / "a.md").write_text("# VPN\nRotate the VPN certificate every 30 days now.\n")
    os.remove(docs / "sub" / "b.txt")
    (docs / "d.docx").rename(docs / "onboarding.docx")
    third = statuses(ingest(kb, docs))
    assert third["a.md"][0] == "changed" and third["sub/b.txt"][0] == "removed"
    assert third["d.docx"][0] == "removed" and third["onboarding.docx"][0] == "new"
    texts = [r["text"] for r in kb.db.chunks_by_id(kb.db.chunk_ids("default")).values()]
    assert any("30 days" in t for t in texts) and not any("90 days" in t for t in texts)
    assert not any("second floor" in t for t in texts)
    assert_consistent(kb)


def test_touch_without_change_is_unchanged(tmp_path, docs, embedder):
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, docs)
    os.utime(docs / "a.md", (1, 1))
    assert statuses(ingest(kb, docs))["a.md"][0] == "unchanged"


def test_bad_input_zoo(tmp_path, embedder):
    d = tmp_path / "zoo"
    (d / ".git").mkdir(parents=True)
    (d / ".git" / "config").write_text("secret")
    (d / "empty.txt").write_bytes(b"")
    good = make_pdf(tmp_path / "g.pdf", ["Some real text here"]).read_bytes()
    (d / "truncated.pdf").write_bytes(good[: len(good) // 3])
    make_encrypted_pdf(d / "locked.pdf", "classified")
    (d / "random.docx").write_bytes(os.urandom(4096))
    (d / "scan.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(200))
    (d / "huge.txt").write_text("x" * (2 * 1024 * 1024 + 10))
    (d / "oneline.txt").write_text("token " * 40_000)  # one long line (2 MB: see test_chunking)
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    (d / "escape.txt").symlink_to(outside)
    (d / "ok.md").write_text("# Fine\nThis one is fine.")
    kb = open_kb(tmp_path / "data", embedder, max_file_mb=2.0)
    report = ingest(kb, d)
    got = statuses(report)
    assert got["empty.txt"] == ("failed", "empty file")
    assert got["truncated.pdf"][0] == "failed" and "PDF" in got["truncated.pdf"][1]
    assert "encrypted" in got["locked.pdf"][1]
    assert "Office" in got["random.docx"][1]
    assert "OCR not available" in got["scan.png"][1]
    assert "size limit" in got["huge.txt"][1]
    assert "outside the ingested root" in got["escape.txt"][1]
    assert got[".git"] == ("skipped", "hidden folder skipped")
    assert got["ok.md"][0] == "new"
    assert got["oneline.txt"][0] == "new"
    assert all(len(t) < 5000 for t in (r["text"] for r in kb.db.chunks_by_id(kb.db.chunk_ids("default")).values()))
    assert_consistent(kb)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file; permission denial cannot be shown")
def test_permission_denied(tmp_path, embedder):
    d = tmp_path / "p"
    d.mkdir()
    (d / "secret.txt").write_text("x")
    (d / "secret.txt").chmod(0)
    report = ingest(open_kb(tmp_path / "data", embedder), d)
    assert statuses(report)["secret.txt"] == ("failed", "permission denied")


def test_orphans_and_journal_are_repaired(tmp_path, docs, embedder):
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, docs)
    # Simulate a crash between the vector write and the manifest commit.
    rec = kb.db.files("default")[str(docs / "a.md")]
    kb.db.begin_write("default", rec, ["ghost-1"])
    import numpy as np

    from knowledge.index.chunking import Chunk

    kb.store.upsert(["ghost-1"], [Chunk("ghost", "a.md", 0, 0, 5)], np.ones((1, 384), dtype=np.float32) / 384**0.5,
                    ["default"])
    report = ingest(kb, docs)
    assert report.repaired >= 1
    assert statuses(report)["a.md"][0] in ("changed", "new")
    assert_consistent(kb)


def test_a_new_extraction_pipeline_reprocesses_unchanged_files(tmp_path, docs, embedder):
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, docs)
    assert all(s == "unchanged" for s, _ in statuses(ingest(kb, docs)).values())
    kb.db.set_meta(f"pipeline:{kb.cfg.name}", "an older pipeline")
    again = statuses(ingest(kb, docs))
    assert again and all(s == "changed" for s, _ in again.values()), again
    assert_consistent(kb)
    assert all(s == "unchanged" for s, _ in statuses(ingest(kb, docs)).values())


def test_unreadable_folder_keeps_its_files_in_the_index(tmp_path, docs, embedder, monkeypatch):
    """A subfolder that cannot be listed this time (permissions, a flaky share) is reported, and
    what the index holds from it stays; files that are really gone elsewhere still leave."""
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, docs)
    real_scandir = os.scandir

    def failing_scandir(path="."):
        if os.fspath(path).endswith(os.sep + "sub"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", failing_scandir)
    os.remove(docs / "a.md")
    result = statuses(ingest(kb, docs))
    assert result["sub"][0] == "skipped" and "kept" in result["sub"][1]
    assert "sub/b.txt" not in result  # neither removed nor touched
    assert result["a.md"][0] == "removed"
    assert "sub/b.txt" in {r.source for r in kb.db.files(kb.cfg.name).values()}
    assert_consistent(kb)


def test_a_root_that_comes_back_empty_is_not_wiped(tmp_path, docs, embedder):
    """An unmounted share looks like an empty folder: its files stay indexed, with a clear reason."""
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, docs)
    n = len(kb.db.files(kb.cfg.name))
    empty = tmp_path / "mnt"
    docs.rename(tmp_path / "elsewhere")
    empty.mkdir()
    empty.rename(docs)  # same path, nothing in it
    result = statuses(ingest(kb, docs))
    assert result["."][0] == "skipped" and "unmounted share" in result["."][1]
    assert len(kb.db.files(kb.cfg.name)) == n and kb.store.count() > 0
    assert_consistent(kb)
