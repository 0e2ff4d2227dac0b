"""Per-user conversation history for the UI, persisted in SQLite."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

from appliance.server.db import open_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (id TEXT PRIMARY KEY, user TEXT NOT NULL, title TEXT NOT NULL,
                                          messages TEXT NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS conversations_user ON conversations (user, updated);
"""


class HistoryStore:
    """Conversations keyed by user: [{role, content, citations?}, ...]."""

    def __init__(self, path: Path) -> None:
        self._conn = open_db(path, SCHEMA)
        self._lock = threading.Lock()

    def list(self, user: str) -> list[tuple[str, str]]:
        """(id, title) newest first."""
        return self._conn.execute("SELECT id, title FROM conversations WHERE user = ? ORDER BY updated DESC",
                                  (user,)).fetchall()

    def get(self, user: str, conv_id: str) -> list[dict]:
        row = self._conn.execute("SELECT messages FROM conversations WHERE id = ? AND user = ?",
                                 (conv_id, user)).fetchone()
        return json.loads(row[0]) if row else []

    def save(self, user: str, conv_id: str | None, messages: list[dict]) -> str:
        """Create or update a conversation; returns its id. Titles come from the first question."""
        conv_id = conv_id or uuid.uuid4().hex[:12]
        first = next((m["content"] for m in messages if m["role"] == "user"), "New chat")
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "messages = excluded.messages, updated = excluded.updated WHERE conversations.user = excluded.user",
                (conv_id, user, first[:60], json.dumps(messages, ensure_ascii=False), time.time()))
        return conv_id

    def delete(self, user: str, conv_id: str) -> None:
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM conversations WHERE id = ? AND user = ?", (conv_id, user))
