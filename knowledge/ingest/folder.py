"""Incremental, crash-safe ingest of a folder into a knowledge base.

Per file: stat (then hash only when size/mtime moved) → load → chunk → embed → journal the new
chunk ids → write vectors → commit chunk rows, FTS rows and manifest entry in one transaction.
`kill -9` anywhere leaves either the old state or a journal entry the next run cleans up.
Parsing and chunking run in worker threads ahead of embedding, which holds the main thread.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knowledge.errors import IndexWriteError, KnowledgeError, LoaderError
from knowledge.index.access import DEFAULT_COLLECTION, check_collection
from knowledge.index.chunking import Chunk, chunk_document, dedupe_chunks
from knowledge.index.kb import KnowledgeBase
from knowledge.index.manifest import FileRecord
from knowledge.ingest import shared
from knowledge.ingest.integrity import repair
from knowledge.ingest.report import FileResult, IngestReport, Progress
from knowledge.ingest.walk import Candidate, walk
from knowledge.loaders import load, supported

_EMBED_GROUP = 256  # chunks embedded together across small files
# Below this much free space an ingest does not start: SQLite and the vector store need room for
# their journals and compaction, and failing up front is clearer than failing half-way.
MIN_FREE_MB = 64
# Bump when loaders, chunking or chunk hygiene change what a file becomes: every file is then
# re-read on the next ingest, so an upgrade's better extraction reaches documents already indexed.
PIPELINE_VERSION = "2"  # 2: block-level HTML text, PDFium text layer, repeated chunks left out


@dataclass
class _Job:
    cand: Candidate
    rec: FileRecord
    status: str
    future: Future | None = None
    dropped: int = 0  # chunks left out as repeats


@dataclass
class _Failed:
    reason: str


def ingest(kb: KnowledgeBase, root: Path, progress: Progress | None = None,
           workers: int = 2, collection: str | None = None) -> IngestReport:
    """Bring the knowledge base in line with the folder `root`. Never raises for one bad file.

    Files go to `collection`; without one, a file keeps the collection it is in (a folder inside
    another one's root, ingested with its own `--collection`, must not fall back to `default` when
    the outer folder is ingested) and new files go to `default`.
    """
    if collection is not None:
        check_collection(collection)
        kb.db.add_collection(kb.cfg.name, collection)
    progress = progress or Progress()
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise KnowledgeError(f"not a folder: {root}")
    t0 = time.perf_counter()
    report = IngestReport(str(root))
    name = kb.cfg.name
    _check_free_space(kb, report)
    report.repaired = repair(kb)
    _reprocess_if_pipeline_changed(kb)
    known = kb.db.files(name, str(root))
    cands = list(walk(root, report, supported))
    report.timings["walk"] = time.perf_counter() - t0
    jobs = _plan(kb, cands, known, report, collection)
    progress.start(len(jobs) + report.count("unchanged"))
    for r in report.results:
        progress.file_done(r)
    _remove_deleted(kb, known, {c.path for c in cands}, report)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="parse") as pool:
        _run(kb, jobs, pool, report, progress)
    report.timings["total"] = time.perf_counter() - t0
    return report


def _remove_deleted(kb: KnowledgeBase, known: dict[str, FileRecord], seen: set[str], report: IngestReport) -> None:
    """Files of this root that are gone leave the index; nothing under an unreadable folder does,
    and nothing at all when the whole root came back empty (an unmounted share looks like that)."""
    gone = {p: r for p, r in known.items() if p not in seen and not _under_any(p, report.unreadable)}
    if gone and not seen and len(gone) == len(known):
        report.results.append(FileResult(".", "skipped", 0, f"the folder is empty but {len(gone)} indexed files "
                                         "came from it: kept (unmounted share?); remove them with "
                                         "`appliance docs remove`"))
        return
    for rec in gone.values():
        shared.remove(kb, rec)
        report.results.append(FileResult(rec.source, "removed", len(rec.chunk_ids)))


def _under_any(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _plan(kb: KnowledgeBase, cands: list[Candidate], known: dict[str, FileRecord],
          report: IngestReport, collection: str | None) -> list[_Job]:
    jobs = []
    max_bytes = int(kb.cfg.max_file_mb * 1024 * 1024)
    for cand in cands:
        old = known.get(cand.path)
        prior = old or kb.db.file(kb.cfg.name, cand.path)  # also indexed from another (outer) folder
        target = collection or (prior.collection if prior else kb.prior_collections.get(cand.path, DEFAULT_COLLECTION))
        if prior and prior.collection != target:  # moving to another collection: out of the old one first
            shared.remove(kb, prior)
            old = None
        elif old and old.status in ("done", "failed") and old.size == cand.size and old.mtime == cand.mtime \
                and old.sha256:
            report.results.append(FileResult(cand.source, "unchanged", len(old.chunk_ids)))
            continue
        rec = FileRecord(cand.path, str(cand.root), cand.source, cand.size, cand.mtime, "", "",
                         old.chunk_ids if old else [], None, "new", None, target)
        if cand.size > max_bytes:
            report.results.append(_fail(kb, rec, f"over the size limit ({cand.size / 2**20:.1f} MB > "
                                                 f"{kb.cfg.max_file_mb:g} MB)"))
            continue
        jobs.append(_Job(cand, rec, "changed" if old else "new"))
    return jobs


def _run(kb: KnowledgeBase, jobs: list[_Job], pool: ThreadPoolExecutor, report: IngestReport,
         progress: Progress) -> None:
    ahead = 8  # parsed files waiting for the embedder, at most
    for job in jobs[:ahead]:
        job.future = pool.submit(_prepare, kb, job)
    group: list[tuple[_Job, list[Chunk]]] = []
    for i, job in enumerate(jobs):
        if i + ahead < len(jobs):
            jobs[i + ahead].future = pool.submit(_prepare, kb, jobs[i + ahead])
        outcome = job.future.result()
        if isinstance(outcome, _Failed):
            outcome = _fail(kb, job.rec, outcome.reason)
        if isinstance(outcome, FileResult):
            report.results.append(outcome)
            progress.file_done(outcome)
            continue
        chunks, raw_len, timings = outcome
        report.bytes_read += raw_len
        for key, value in timings.items():
            report.timings[key] += value
        group.append((job, chunks))
        if sum(len(c) for _, c in group) >= _EMBED_GROUP:
            _flush(kb, group, report, progress)
    _flush(kb, group, report, progress)


def _prepare(kb: KnowledgeBase, job: _Job) -> tuple[list[Chunk], int, dict] | FileResult | _Failed:
    """Worker thread: read, hash, detect unchanged content, load and chunk one file. A failure is
    returned, not written: the main thread owns index writes (a failed file hands over what it shares)."""
    rec, t0 = job.rec, time.perf_counter()
    try:
        raw = Path(rec.path).read_bytes()
    except PermissionError:
        return _Failed("permission denied")
    except OSError as e:
        return _Failed(f"unreadable ({e.strerror or e})")
    rec.sha256 = hashlib.sha256(raw).hexdigest()
    old = kb.db.file(kb.cfg.name, rec.path)
    if old and old.sha256 == rec.sha256 and old.status == "done":
        kb.db.touch(kb.cfg.name, rec.path, rec.mtime)  # touched, not changed
        return FileResult(rec.source, "unchanged", len(old.chunk_ids))
    try:
        doc = load(Path(rec.path), raw)
    except LoaderError as e:
        return _Failed(str(e))
    except Exception as e:  # noqa: BLE001 - a parser bug must cost one file, not the run
        return _Failed(f"could not parse ({type(e).__name__}: {str(e)[:100]})")
    rec.kind = doc.kind
    t1 = time.perf_counter()
    chunks, job.dropped = dedupe_chunks(chunk_document(doc, rec.source, kb.count_tokens, kb.chunk_budget,
                                                       kb.cfg.chunk_overlap))
    if not chunks:
        return _Failed("no text found")
    return chunks, len(raw), {"parse": t1 - t0, "chunk": time.perf_counter() - t1}


def _fail(kb: KnowledgeBase, rec: FileRecord, reason: str) -> FileResult:
    shared.remove(kb, rec, failure=reason)  # a file that became unreadable leaves the index
    return FileResult(rec.source, "failed", 0, reason)


def _flush(kb: KnowledgeBase, group: list[tuple[_Job, list[Chunk]]], report: IngestReport,
           progress: Progress) -> None:
    if not group:
        return
    ids = [[chunk_id(job.rec.path, c) for c in chunks] for job, chunks in group]
    same_as = _assign(kb, group, ids)
    t0 = time.perf_counter()
    stored = [c.embed_text for (_, chunks), same in zip(group, same_as, strict=True)
              for c, s in zip(chunks, same, strict=True) if s is None]
    vectors = kb.embedder.encode(stored) if stored else np.zeros((0, 1), dtype=np.float32)
    report.timings["embed"] += time.perf_counter() - t0
    progress.chunks_embedded(sum(len(c) for _, c in group))
    t1, offset = time.perf_counter(), 0
    for (job, chunks), file_ids, same in zip(group, ids, same_as, strict=True):
        kept = [(i, c) for i, c, s in zip(file_ids, chunks, same, strict=True) if s is None]
        kept_ids = [i for i, _ in kept]
        part = vectors[offset:offset + len(kept)]
        offset += len(kept)
        try:
            kb.db.begin_write(kb.cfg.name, job.rec, file_ids)
            kb.store.upsert(kept_ids, [c for _, c in kept], part, [job.rec.collection] * len(kept_ids))
            promote = shared.handover(kb, job.rec.path, [(i, c.digest, s) for i, c, s
                                                         in zip(file_ids, chunks, same, strict=True)])
            kb.db.commit_file(kb.cfg.name, job.rec, chunks, file_ids, same, promote)
            kb.store.delete(sorted(set(job.rec.chunk_ids) - set(kept_ids)))
        except Exception as e:  # noqa: BLE001 - SQLite, the vector store and the OS each raise their own
            raise write_error(kb, report, e) from e
        result = FileResult(job.rec.source, job.status, len(chunks), deduplicated=job.dropped,
                            shared=len(chunks) - len(kept))
        report.results.append(result)
        progress.file_done(result)
    report.timings["store"] += time.perf_counter() - t1
    group.clear()


def _assign(kb: KnowledgeBase, group: list[tuple[_Job, list[Chunk]]], ids: list[list[str]]) -> list[list[str | None]]:
    """`shared.assign` per collection (passages are shared only inside one), in the group's order."""
    out: dict[int, list[str | None]] = {}
    for collection in dict.fromkeys(job.rec.collection for job, _ in group):
        members = [i for i, (job, _) in enumerate(group) if job.rec.collection == collection]
        found = shared.assign(kb, [(group[i][0].rec.path, group[i][1], ids[i]) for i in members], collection)
        out.update(zip(members, found, strict=True))
    return [out[i] for i in range(len(group))]


def _free_mb(kb: KnowledgeBase) -> float:
    return shutil.disk_usage(kb.data_dir).free / 2**20


def _check_free_space(kb: KnowledgeBase, report: IngestReport) -> None:
    if _free_mb(kb) < MIN_FREE_MB:
        raise IndexWriteError(f"only {_free_mb(kb):.0f} MB free on the disk of {kb.data_dir} (an ingest needs at "
                              f"least {MIN_FREE_MB} MB): free some space, then run the ingest again", disk_full=True)


def write_error(kb: KnowledgeBase, report: IngestReport, e: BaseException) -> IndexWriteError:
    """A clear message for a failed index write; a full disk is named as such."""
    text = f"{type(e).__name__}: {e}"
    full = (getattr(e, "disk_full", False) or getattr(e, "errno", None) == errno.ENOSPC or "disk is full" in text
            or "No space left" in text or _free_mb(kb) < 1)
    done = report.count("new") + report.count("changed")
    cause = f"the disk is full ({_free_mb(kb):.1f} MB free on {kb.data_dir})" if full else text[:300]
    return IndexWriteError(f"writing the index failed: {cause}. The {done} file(s) committed before it are kept and "
                           f"the interrupted one is repaired by the next ingest or server start; "
                           + ("free some space, then run the ingest again." if full else "run the ingest again."),
                           disk_full=full)


def chunk_id(path: str, chunk: Chunk) -> str:
    """Deterministic: the same file and content always give the same ids (upserts are idempotent)."""
    src = hashlib.sha1(path.encode(), usedforsecurity=False).hexdigest()[:12]
    body = hashlib.sha1(chunk.text.encode(), usedforsecurity=False).hexdigest()[:12]
    return f"{src}-{body}-{chunk.index}"


def _reprocess_if_pipeline_changed(kb: KnowledgeBase) -> None:
    key = f"pipeline:{kb.cfg.name}"
    if kb.db.get_meta(key) == PIPELINE_VERSION:
        return
    for rec in kb.db.files(kb.cfg.name).values():
        kb.db.invalidate(kb.cfg.name, rec.path)  # the hash is forgotten: the next pass re-reads it
    kb.db.set_meta(key, PIPELINE_VERSION)
