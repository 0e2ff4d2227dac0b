"""The dense store: one Chroma persistent collection per knowledge base, cosine space.

We always pass our own embeddings (Chroma's default embedding function would download a
model), and we record which embedding model built the collection so vectors are never mixed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from knowledge.errors import IndexWriteError, KnowledgeError
from knowledge.index.access import Scope
from knowledge.index.chunking import Chunk

_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")
_BATCH = 1000
# Chroma's Rust core (1.5.x) waits forever when one of its writes fails with ENOSPC, so a write
# that could fill the disk is refused before it starts. Measured: an upsert grows the store by
# about 5x its payload (log, metadata, full-text index), up to 8x when the HNSW segment flushes.
ROOM_RESERVE_MB = 16
_GROWTH = 10


@dataclass
class DenseHit:
    id: str
    similarity: float  # cosine similarity, 1 = identical direction


class ModelMismatch(KnowledgeError):
    """The collection was built with another embedding model (`built_with`)."""

    def __init__(self, message: str, built_with: str = "") -> None:
        super().__init__(message)
        self.built_with = built_with


def collection_name(kb: str) -> str:
    """Chroma collection name for knowledge base `kb` (3-512 chars of [a-zA-Z0-9._-])."""
    name = f"kb-{kb}"
    if not _NAME.match(name):
        raise KnowledgeError(f"invalid knowledge base name {kb!r}: use letters, digits, '.', '_' or '-'")
    return name


def _client(path: Path, url: str):
    """A persistent client on `path`, or an HTTP client of the Chroma server at `url`."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=True)
    if not url:
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings)
    parts = urlsplit(url if "//" in url else f"http://{url}")
    try:
        return chromadb.HttpClient(host=parts.hostname or "localhost", port=parts.port or 8000,
                                   ssl=parts.scheme == "https", settings=settings)
    except Exception as e:  # noqa: BLE001 - chromadb raises plain exceptions for an unreachable server
        raise KnowledgeError(f"cannot reach the Chroma server at {url} (knowledge.chroma_url): {e}") from None


# A scoped search looks this many times deeper, unfiltered, before it asks Chroma to filter.
OVERFETCH = 4


class VectorStore:
    """Chroma collection holding chunk vectors and each one's access collection (the only metadata:
    the `where` of a scoped query). Texts and citation facts live in the chunk store (SQLite), so
    Chroma neither indexes the text a second time nor keeps metadata nobody reads (measured: 1.56 ms
    per vector with both, 0.61 with neither)."""

    def __init__(self, path: Path, kb: str, model_id: str, reindex: bool = False, url: str = "") -> None:
        self._client = _client(path, url)
        self._disk = None if url else path  # a Chroma server watches its own disk
        self.name = collection_name(kb)
        self.model_id = model_id
        self._col = self._client.get_or_create_collection(
            self.name, metadata={"hnsw:space": "cosine", "embedding_model": model_id},
            embedding_function=None)
        built_with = (self._col.metadata or {}).get("embedding_model")
        if reindex:
            self.reset()
        elif built_with and built_with != model_id and self._col.count() > 0:
            raise ModelMismatch(
                f"knowledge base {kb!r} was indexed with embedding model {built_with!r}, but "
                f"{model_id!r} is configured; re-index with `appliance ingest DIR --reindex`", built_with)

    def reset(self) -> None:
        """Drop every vector (re-index after an embedding model change)."""
        self._client.delete_collection(self.name)
        self._col = self._client.create_collection(
            self.name, metadata={"hnsw:space": "cosine", "embedding_model": self.model_id},
            embedding_function=None)

    def count(self) -> int:
        return self._col.count()

    def upsert(self, ids: Sequence[str], chunks: Sequence[Chunk], vectors: np.ndarray,
               collections: Sequence[str]) -> None:
        """Add or replace chunk vectors, each labelled with its access collection; IndexWriteError up
        front when the disk could fill."""
        for i in range(0, len(ids), _BATCH):
            part = slice(i, i + _BATCH)
            self._ensure_room(sum(len(c.text.encode()) + 200 for c in chunks[part]) + vectors[part].nbytes)
            self._col.upsert(ids=list(ids[part]), embeddings=vectors[part],
                             metadatas=[{"collection": c} for c in collections[part]])

    def label(self, ids: Sequence[str], collections: Sequence[str]) -> None:
        """Set the access collection of stored vectors (an index from before collections)."""
        ids = list(ids)
        for i in range(0, len(ids), _BATCH):
            self._ensure_room(200 * len(ids[i:i + _BATCH]))
            self._col.update(ids=ids[i:i + _BATCH], metadatas=[{"collection": c} for c in collections[i:i + _BATCH]])

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        for i in range(0, len(ids), _BATCH):
            self._ensure_room(0)  # a delete is logged before it is applied
            self._col.delete(ids=ids[i:i + _BATCH])

    def _ensure_room(self, payload: int) -> None:
        if self._disk is None:
            return
        need = ROOM_RESERVE_MB * 2**20 + _GROWTH * payload
        free = shutil.disk_usage(self._disk).free
        if free < need:
            raise IndexWriteError(f"the disk is nearly full: {free / 2**20:.1f} MB free on {self._disk}, and "
                                  f"the vector store needs {need / 2**20:.0f} MB free for this write; free some "
                                  "space, then try again", disk_full=True)

    def all_ids(self) -> set[str]:
        out: set[str] = set()
        offset = 0
        while True:
            got = self._col.get(include=[], limit=5000, offset=offset)["ids"]
            out.update(got)
            if len(got) < 5000:
                return out
            offset += len(got)

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of `ids` (missing ids are left out)."""
        if not ids:
            return {}
        got = self._col.get(ids=list(ids), include=["embeddings"])
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], got["embeddings"], strict=True)}

    def query(self, vector: np.ndarray, n: int, scope: Scope) -> list[DenseHit]:
        """Nearest chunks to a unit vector among those of the collections `scope` may see; no other
        collection's id leaves this method.

        A scoped search first takes the nearest `OVERFETCH * n` vectors unfiltered and keeps those
        whose collection label the reader may see: Chroma's `where` builds the set of allowed ids on
        every query, which costs more the more chunks the reader may see (measured on 8,000 chunks:
        2 ms unfiltered, 14 ms for one collection of four, 21 ms for two, 38 ms for all four). Only
        when too few of the nearest are readable (a reader of a small part of the index) does the
        search filter inside Chroma instead. Both give the reader's nearest `n`.
        """
        total = self.count()
        if total == 0 or scope.is_empty:
            return []
        if scope.is_everything:
            res = self._col.query(query_embeddings=[vector], n_results=min(n, total), include=["distances"])
            return _hits(res)
        wide = min(n * OVERFETCH, total)
        res = self._col.query(query_embeddings=[vector], n_results=wide, include=["distances", "metadatas"])
        kept = [DenseHit(i, 1.0 - float(d)) for i, d, m in zip(res["ids"][0], res["distances"][0],
                                                                res["metadatas"][0], strict=True)
                if scope.allows((m or {}).get("collection", ""))]
        if len(kept) >= min(n, total) or wide == total:
            return kept[:n]
        res = self._col.query(query_embeddings=[vector], n_results=min(n, total), include=["distances"],
                              where=scope.where())
        return _hits(res)


def _hits(res: dict) -> list[DenseHit]:
    return [DenseHit(i, 1.0 - float(d)) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)]
