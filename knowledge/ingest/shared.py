"""Passages that several files hold word for word are embedded and stored once.

The same manual saved under two names, or a folder copied next to itself, used to cost a second
embedding pass and a second vector and lexical row per passage, which retrieval then folded back
into one hit. Now the first file's row is the *stored* copy and every later copy is a chunk row of
its own file (its source, page and heading, for citations) whose `same_as` names the stored row;
search finds the stored row and cites every file that holds it.

A stored row that other files point to is never simply dropped: removing or re-reading its file
first hands it to an heir (the changed file's own new chunk with the same text, else the oldest
copy, whose vector is copied over under its own id), so no copy is left without a vector.
"""

from __future__ import annotations

import numpy as np

from knowledge.index.chunking import Chunk
from knowledge.index.kb import KnowledgeBase
from knowledge.index.manifest import FileRecord


def assign(kb: KnowledgeBase, group: list[tuple[str, list[Chunk], list[str]]],
           collection: str) -> list[list[str | None]]:
    """For each (path, chunks, ids) of `group` (files of `collection`): per chunk, None (embed and store
    it) or the id of the stored row of the same collection it repeats. Stored rows of the files in
    `group` are not reused: they are being rewritten."""
    digests = [[c.digest for c in chunks] for _, chunks, _ in group]
    found = kb.db.stored_by_digest(kb.cfg.name, [d for ds in digests for d in ds], {p for p, _, _ in group},
                                   collection)
    out: list[list[str | None]] = []
    for (_, _, ids), ds in zip(group, digests, strict=True):
        row: list[str | None] = []
        for cid, d in zip(ids, ds, strict=True):
            row.append(found.get(d))
            found.setdefault(d, cid)  # later files of the group repeat this one
        out.append(row)
    return out


def handover(kb: KnowledgeBase, path: str,
             new: list[tuple[str, str, str | None]] = ()) -> dict[str, str]:
    """Before `path`'s rows are dropped: {stored id: heir id} for each stored row of it that other
    files point to. `new` is what the file is rewritten with: (id, digest, same_as) per chunk. The
    heir is the stored row of the same text after the rewrite, else the oldest copy, which gets the
    old vector under its own id here (vector store first, like every write; the SQLite side follows
    in the caller's transaction)."""
    kept = {cid for cid, _, same in new if same is None}
    after = {d: same or cid for cid, d, same in new}  # digest -> the row that will be stored
    promote: dict[str, str] = {}
    for old, copies in kb.db.copies_elsewhere(kb.cfg.name, path).items():
        if old not in kept:  # an unchanged stored chunk keeps its id, and its copies keep pointing at it
            promote[old] = after.get(copies[0][1]) or copies[0][0]
    moving = {old: heir for old, heir in promote.items() if heir not in set(after.values())}
    vectors = kb.store.vectors(list(moving))
    if vectors:
        heirs = [moving[old] for old in vectors]
        rows = kb.db.chunks_by_id(heirs)
        kb.store.upsert(heirs, [Chunk(rows[h]["text"], rows[h]["source"], 0, 0, 0) for h in heirs],
                        np.stack(list(vectors.values())), [rows[h]["collection"] for h in heirs])
    return promote


def remove(kb: KnowledgeBase, rec: FileRecord, failure: str | None = None) -> None:
    """Take one file out of the index (or record it as failed with `failure`), handing over what
    other files share with it."""
    promote = handover(kb, rec.path)
    if failure is None:
        kb.db.remove_file(kb.cfg.name, rec.path, promote)
    else:
        kb.db.record_failure(kb.cfg.name, rec, failure, promote)
    kb.store.delete(rec.chunk_ids)  # after the commit: a crash in between leaves orphans, which repair removes
