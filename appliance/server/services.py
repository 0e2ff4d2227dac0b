"""The services the API and the UI share, created once per process and passed down."""

from __future__ import annotations

import logging
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

from appliance.config import Settings
from appliance.engine.backend import ChatBackend
from appliance.server.auth import UserStore
from appliance.server.chat import ChatService
from appliance.server.history import HistoryStore
from knowledge.ingest import IngestReport, Progress, ingest
from knowledge.kb import KnowledgeBase
from knowledge.retrieve import Retriever

log = logging.getLogger("appliance.server")
SAMPLE_DOCS = Path(__file__).resolve().parents[2] / "knowledge" / "sample" / "docs"


@dataclass
class IngestCounters:
    """For /metrics: what ingests did since start."""

    runs: int = 0
    files: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    running: bool = False


@dataclass
class Services:
    """Engine, knowledge base, chat, users and history: one of each per process."""

    settings: Settings
    engine: ChatBackend
    kb: KnowledgeBase
    retriever: Retriever
    chat: ChatService
    users: UserStore
    history: HistoryStore
    ingest_counters: IngestCounters = field(default_factory=IngestCounters)
    _ingest_lock: threading.Lock = field(default_factory=threading.Lock)

    def run_ingest(self, folder: Path, progress: Progress | None = None) -> IngestReport:
        """One ingest at a time (uploads and the CLI share the same manifest)."""
        with self._ingest_lock:
            self.ingest_counters.running = True
            try:
                report = ingest(self.kb, folder, progress)
            finally:
                self.ingest_counters.running = False
        c = self.ingest_counters
        c.runs += 1
        c.chunks += report.chunks
        for r in report.results:
            c.files[r.status] = c.files.get(r.status, 0) + 1
        return report

    def close(self) -> None:
        self.engine.shutdown()
        self.kb.close()


def build_services(settings: Settings, engine: ChatBackend | None = None) -> Services:
    """Create everything from settings (loads the chat and embedding models)."""
    from appliance.engine.engine import Engine
    from appliance.knowledge_service import open_kb

    data = settings.data_path
    kb = open_kb(settings)
    retriever = Retriever(kb)
    engine = engine or Engine.from_config(settings)
    return Services(settings, engine, kb, retriever, ChatService(engine, retriever),
                    UserStore(data / "users.db"), HistoryStore(data / "users.db"))


def first_start(services: Services) -> str | None:
    """On an empty install: create `admin` (returns its one-time password) and index the sample guide."""
    password = None
    if services.users.count() == 0:
        password = secrets.token_urlsafe(12)
        services.users.add("admin", password, admin=True)
    kb = services.kb
    if services.settings.knowledge.sample_docs and kb.db.chunk_count(kb.cfg.name) == 0 and SAMPLE_DOCS.is_dir():
        log.info("indexing the bundled sample guide (%s)", SAMPLE_DOCS)
        services.run_ingest(SAMPLE_DOCS)
    return password
