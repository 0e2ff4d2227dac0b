"""The services the API and the UI share, created once per process and passed down."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from appliance.config import Settings
from appliance.engine.backend import ChatBackend
from appliance.engine.scheduler import background_cap
from appliance.server.access import AccessStore
from appliance.server.auth import UserStore
from appliance.server.chat import ChatService, RagSettings
from appliance.server.documents import DocumentsService
from appliance.server.history import HistoryStore
from appliance.server.longdoc import LongDocService, LongDocSettings
from knowledge.errors import IndexWriteError
from knowledge.index.db import KnowledgeDB
from knowledge.index.kb import KBConfig, KnowledgeBase
from knowledge.retrieve.retriever import Retriever
from knowledge.text import everyday
from knowledge.text.terms import terms

log = logging.getLogger("appliance.server")
SAMPLE_DOCS = Path(__file__).resolve().parents[2] / "knowledge" / "data" / "sample" / "docs"


@dataclass
class Services:
    """Engine, knowledge base, documents, chat, users and history: one of each per process."""

    settings: Settings
    engine: ChatBackend
    kb: KnowledgeBase
    retriever: Retriever
    chat: ChatService
    users: UserStore
    history: HistoryStore
    documents: DocumentsService
    longdoc: LongDocService
    access: AccessStore
    local_token: str = ""  # set by `serve`: the command line's key (appliance.locks.ServerLease)

    def close(self) -> None:
        self.engine.shutdown()
        self.kb.close()


def build_services(settings: Settings, engine: ChatBackend | None = None) -> Services:
    """Create everything from settings (loads the chat and embedding models)."""
    from appliance.engine.backend import open_backend

    data = settings.data_path
    kb = open_kb(settings)
    retriever = Retriever(kb)
    engine = engine or open_backend(settings)
    chat = chat_service(settings, engine, retriever)
    users = UserStore(data / "users.db")
    return Services(settings, engine, kb, retriever, chat, users, HistoryStore(data / "users.db"),
                    DocumentsService(kb, data / "uploads"), longdoc_service(settings, chat, kb),
                    open_access(settings, kb.db))


def open_access(settings: Settings, db: KnowledgeDB) -> AccessStore:
    """Groups and grants, checked against the collections the index knows."""
    return AccessStore(settings.data_path / "users.db", lambda: db.collections(settings.knowledge.collection))


def longdoc_service(settings: Settings, chat: ChatService, kb: KnowledgeBase) -> LongDocService:
    """Whole-document answers with the chat's context budget and as many notes per answer as the chat
    has excerpts (a small model answers better from fewer); map calls on at most the background
    slots (half the engine's sequences unless `engine.background_slots` says otherwise)."""
    window = background_cap(settings.engine.background_slots, settings.engine.n_seq_max)
    cfg = LongDocSettings(context_tokens=chat.cfg.context_tokens, window=window, max_notes=chat.cfg.top_k)
    return LongDocService(chat.backend, cfg, embed=kb.embedder.encode, retriever=chat.retriever)


SMALL_MODEL_PARAMS = 1_000_000_000  # under this, a model loses the thread in long prompts


def chat_service(settings: Settings, engine: ChatBackend, retriever: Retriever) -> ChatService:
    """The RAG chat over `engine`, its prompt sized for the model (config `[chat]`, 0 = auto)."""
    c = settings.chat
    info = getattr(engine, "info", None)
    small = info is not None and info.n_params < SMALL_MODEL_PARAMS
    style = c.answer_style if c.answer_style != "auto" else ("quote" if small else "generate")
    # A small model reads 2 excerpts (it loses the thread in long prompts; the gate was chosen on
    # what it reads), cut to 700 characters when it writes the answer from them; quotes are picked
    # from the whole excerpts, and from quote_excerpts of them, since no model reads those.
    cut = small and style == "generate"
    rag = RagSettings(top_k=c.top_k or (2 if small else 4), excerpt_chars=c.excerpt_chars or (700 if cut else 1200),
                      quote_excerpts=c.quote_excerpts, context_tokens=c.context_tokens,
                      min_relevance_en=c.min_relevance_en, min_relevance_zh=c.min_relevance_zh,
                      partial_floor_en=min(c.partial_floor_en, c.min_relevance_en),
                      partial_floor_zh=min(c.partial_floor_zh, c.min_relevance_zh), answer_style=style)
    return ChatService(engine, retriever, rag)


def kb_config(settings: Settings) -> KBConfig:
    """The knowledge base's settings, from the `[knowledge]` section."""
    k = settings.knowledge
    return KBConfig(name=k.collection, chunk_tokens=k.chunk_tokens, chunk_overlap=k.chunk_overlap,
                    max_file_mb=k.max_file_mb, embed_batch=k.embed_batch, candidates=k.candidates,
                    dense_weight=k.dense_weight, cjk_dense_weight=k.cjk_dense_weight, rerank_model=k.rerank_model,
                    max_per_file=k.max_per_file, chroma_url=k.chroma_url, embed_backend=k.embed_backend)


def open_kb(settings: Settings, embedder=None, reindex: bool = False) -> KnowledgeBase:
    """The configured knowledge base; `reindex` drops its index first (embedding model change)."""
    model = settings.resolve(settings.embedding_model) if settings.embedding_model else None
    return KnowledgeBase(settings.data_path, kb_config(settings), embedder=embedder, embedding_model=model,
                         reindex=reindex)


def indexed_roots(settings: Settings) -> list[Path]:
    """Folders the knowledge base holds files from, read from the manifest alone (no vector store, no
    embedding model: it works when the configured model no longer matches the index)."""
    path = settings.data_path / "knowledge.db"
    if not path.is_file():
        return []
    db = KnowledgeDB(path)
    try:
        return sorted({Path(r.root) for r in db.files(settings.knowledge.collection).values()})
    finally:
        db.close()


def open_documents(settings: Settings, on_wait=None) -> DocumentsService:
    """The documents service over the configured knowledge base, for commands without a server."""
    return DocumentsService(open_kb(settings), settings.data_path / "uploads", on_wait=on_wait)


def first_start(services: Services) -> str | None:
    """At every start: repair the index if a write was interrupted. On an empty install: create
    `admin` (returns its one-time password) and index the sample guide."""
    password = None
    if services.users.count() == 0:
        password = secrets.token_urlsafe(12)
        services.users.add("admin", password, admin=True)
    kb = services.kb
    try:
        fixed = services.documents.repair()  # after a crash or kill -9: the index is whole before serving
    except IndexWriteError as e:  # a full disk: serve what is indexed; the next start or ingest repairs
        log.warning("could not repair the index yet: %s", e)
        fixed = 0
    if fixed:
        log.warning("repaired %d leftovers of an interrupted index write", fixed)
    # Loaded here, not by the first question: jieba's dictionary, wordfreq's list and the Chinese
    # function words (about 1 s).
    terms("预热 warm")
    everyday.factor("warm")
    everyday.factor("预热")
    if services.settings.knowledge.sample_docs and kb.db.chunk_count(kb.cfg.name) == 0 and SAMPLE_DOCS.is_dir():
        log.info("indexing the bundled sample guide (%s)", SAMPLE_DOCS)
        services.documents.ingest(SAMPLE_DOCS)
    return password
