"""Is the index whole? Vector store ids = stored chunk rows (a passage several files share is stored
once, the other rows name it: see `knowledge.ingest.shared`), chunk rows = the manifest's ids, every copy's
stored row present, and no journal left.

Every writer keeps these three equal (ingest journals ids before writing vectors); a `kill -9` can
leave journalled vectors or orphans behind, which `repair` removes. The server repairs at start,
`ingest` before each run, and `appliance doctor` reports the check.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.index.kb import KnowledgeBase


@dataclass
class IndexCheck:
    """The counts that must agree."""

    vectors: int
    chunk_rows: int
    manifest_ids: int
    journalled_files: int  # files with a write in flight (or interrupted)
    ok: bool

    def describe(self) -> str:
        text = f"{self.vectors} vectors, {self.chunk_rows} chunk rows, {self.manifest_ids} manifest ids"
        return text + ("" if self.ok else f", {self.journalled_files} interrupted writes: run "
                       "`appliance ingest` on any folder (or restart the server) to repair")


def check(kb: KnowledgeBase) -> IndexCheck:
    """Compare the store, the chunk table and the manifest (ids, not just counts)."""
    name = kb.cfg.name
    files = kb.db.files(name).values()
    stored, listed = kb.store.all_ids(), kb.db.chunk_ids(name)
    manifest = [i for r in files if r.status == "done" for i in r.chunk_ids]
    journalled = sum(1 for r in files if r.pending_ids is not None)
    ok = (stored == kb.db.stored_ids(name) and listed == set(manifest) and len(manifest) == len(set(manifest))
          and not journalled and not kb.db.dangling(name))
    return IndexCheck(len(stored), len(listed), len(manifest), journalled, ok)


def repair(kb: KnowledgeBase) -> int:
    """Undo what a crashed run left: journaled-but-uncommitted vectors, and any orphans."""
    name, fixed = kb.cfg.name, 0
    for rec in kb.db.files(name).values():
        if rec.pending_ids is not None:
            kb.store.delete(sorted(set(rec.pending_ids) - set(rec.chunk_ids)))
            kb.db.invalidate(name, rec.path)
            fixed += 1
    listed, stale = kb.db.stored_ids(name), kb.db.dangling(name)
    if kb.store.count() != len(listed):  # listing every vector id is slow on a large index: only when needed
        stored = kb.store.all_ids()
        orphans = stored - listed
        kb.store.delete(sorted(orphans))
        fixed += len(orphans)
        stale |= {m["path"] for m in kb.db.chunks_by_id(listed - stored).values()}
    for path in stale:  # a row without its vector, or a copy whose stored row is gone: read the file again
        kb.db.invalidate(name, path)
        fixed += 1
    return fixed
