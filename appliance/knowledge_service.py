"""Opens the knowledge base from settings: the one place the appliance wires `knowledge` up."""

from __future__ import annotations

from appliance.config import Settings
from knowledge.kb import KBConfig, KnowledgeBase


def kb_config(settings: Settings) -> KBConfig:
    k = settings.knowledge
    return KBConfig(name=k.collection, chunk_tokens=k.chunk_tokens, chunk_overlap=k.chunk_overlap,
                    max_file_mb=k.max_file_mb, embed_batch=k.embed_batch, candidates=k.candidates,
                    cjk_dense_weight=k.cjk_dense_weight, rerank_model=k.rerank_model)


def open_kb(settings: Settings, embedder=None, reindex: bool = False) -> KnowledgeBase:
    """The configured knowledge base; `reindex` drops its index first (embedding model change)."""
    model = settings.resolve(settings.embedding_model) if settings.embedding_model else None
    return KnowledgeBase(settings.data_path, kb_config(settings), embedder=embedder, embedding_model=model,
                         reindex=reindex)
