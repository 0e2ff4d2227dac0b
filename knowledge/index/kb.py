"""A knowledge base: embedder + vector store + manifest/lexical DB, opened together once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from knowledge.index.db import KnowledgeDB
from knowledge.index.embed import Embedder
from knowledge.index.store import ModelMismatch, VectorStore


@dataclass
class KBConfig:
    """How documents are chunked and searched (from the `[knowledge]` settings)."""

    name: str = "default"
    chunk_tokens: int = 300
    chunk_overlap: int = 40
    max_file_mb: float = 50.0
    embed_batch: int = 64
    candidates: int = 40
    dense_weight: float = 0.5
    cjk_dense_weight: float = 0.05
    rerank_model: str = ""
    max_per_file: int = 3
    chroma_url: str = ""  # a Chroma server instead of data/chroma
    embed_backend: str = "auto"  # auto | torch | onnx


class KnowledgeBase:
    """Everything `ingest`, `search` and the chat service need, sharing one embedder."""

    def __init__(self, data_dir: Path, cfg: KBConfig, embedder: Embedder | None = None,
                 embedding_model: str | None = None, reindex: bool = False) -> None:
        self.cfg = cfg
        self.data_dir = Path(data_dir)
        self.embedder = embedder or Embedder(embedding_model or None, batch_size=cfg.embed_batch,
                                             backend=cfg.embed_backend)
        self.db = KnowledgeDB(self.data_dir / "knowledge.db")
        try:
            self.store = self._open_store(reindex)
        except ModelMismatch as e:
            # An index built by the other backend of the same model (before an upgrade made ONNX the
            # CPU default, say): keep embedding with that one rather than force a re-index.
            if not self.embedder.use_backend(e.built_with):
                self.db.close()
                raise
            self.store = self._open_store(reindex)
        # Which collection each file was in, kept across a rebuild (`--reindex` drops the manifest).
        self.prior_collections: dict[str, str] = {}
        if reindex:
            self.prior_collections = {p: r.collection for p, r in self.db.files(cfg.name).items()}
            self.db.clear_kb(cfg.name)
        else:
            self._label_vectors()

    def _label_vectors(self) -> None:
        """Once per index from before collections: write each vector's collection into the vector
        store, so that scoped queries (Chroma `where`) see them."""
        key = f"vector_collections:{self.cfg.name}"
        if self.db.get_meta(key) == "1":
            return
        rows = self.db.chunks_by_id(self.db.stored_ids(self.cfg.name))
        if rows:
            present = sorted(set(rows) & self.store.all_ids())
            self.store.label(present, [rows[i]["collection"] for i in present])
        self.db.set_meta(key, "1")

    def _open_store(self, reindex: bool) -> VectorStore:
        return VectorStore(self.data_dir / "chroma", self.cfg.name, self.embedder.model_id, reindex=reindex,
                           url=self.cfg.chroma_url)

    @property
    def chunk_budget(self) -> int:
        """Chunk size in embedding tokens, capped so the title/heading prefix still fits the
        model's input window (all-MiniLM-L6-v2 truncates at 256 tokens)."""
        return max(32, min(self.cfg.chunk_tokens, self.embedder.max_tokens - 32))

    def count_tokens(self, texts: list[str]) -> list[int]:
        return self.embedder.count_tokens_batch(texts)

    def close(self) -> None:
        self.db.close()
