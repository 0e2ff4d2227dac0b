"""One way to open the server's SQLite files (users, history): shared by threads, schema applied."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_db(path: Path, schema: str) -> sqlite3.Connection:
    """A connection usable from the server's threads (callers serialise writes with a lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    conn.executescript(schema)
    return conn
