"""Groups and grants: who may read or write which collection (`<data_dir>/users.db`).

A user belongs to groups; a group is granted `read` or `write` (which includes read) on a
collection. Administrators read and write everything. A fresh install has one group, `everyone`,
holding every user, with `write` on the `default` collection: a small team sees no difference
from an appliance without collections. The answer to "what may this user read" is a
`knowledge.index.access.Scope`, resolved on every request (a removed grant counts from the next one)
and applied by the knowledge layer inside its queries.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Callable

from appliance.errors import ApplianceError, no_user
from appliance.server.db import open_db
from knowledge.errors import KnowledgeError
from knowledge.index.access import DEFAULT_COLLECTION, EVERYTHING, Scope, check_collection

EVERYONE = "everyone"
LEVELS = ("read", "write")
_GROUP = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")

SCHEMA = """
CREATE TABLE IF NOT EXISTS groups (name TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS members (user TEXT NOT NULL, grp TEXT NOT NULL, PRIMARY KEY (user, grp));
CREATE TABLE IF NOT EXISTS grants (grp TEXT NOT NULL, collection TEXT NOT NULL, level TEXT NOT NULL,
                                   PRIMARY KEY (grp, collection));
"""


class AccessError(ApplianceError):
    """A bad group, collection or level, or a grant that cannot be made."""


def seed(conn: sqlite3.Connection) -> None:
    """Create the tables; on first use, the `everyone` group with every existing user in it and
    `write` on `default` (what every user could do before collections)."""
    conn.executescript(SCHEMA)
    if conn.execute("SELECT 1 FROM groups WHERE name = ?", (EVERYONE,)).fetchone() is None:
        conn.execute("INSERT INTO groups VALUES (?, ?)", (EVERYONE, time.time()))
        conn.execute("INSERT OR IGNORE INTO grants VALUES (?, ?, 'write')", (EVERYONE, DEFAULT_COLLECTION))
        conn.execute("INSERT OR IGNORE INTO members SELECT name, ? FROM users", (EVERYONE,))


def join_default_group(conn: sqlite3.Connection, user: str) -> None:
    """A new account starts in `everyone` (an admin may take it out again)."""
    conn.execute("INSERT OR IGNORE INTO members VALUES (?, ?)", (user, EVERYONE))


def forget_user(conn: sqlite3.Connection, user: str) -> None:
    conn.execute("DELETE FROM members WHERE user = ?", (user,))


class AccessStore:
    """Groups, memberships and grants. `collections` lists the collections the index knows, so a
    grant to one that does not exist is refused with a clear message."""

    def __init__(self, path, collections: Callable[[], dict[str, int]]) -> None:
        self._conn = open_db(path, "CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, pw_hash TEXT NOT NULL,"
                                   " role TEXT NOT NULL, created REAL NOT NULL);")
        self._lock = threading.Lock()
        self._collections = collections
        with self._lock, self._conn:
            seed(self._conn)

    # -- who reads what ------------------------------------------------------------------
    def scope_for(self, user) -> Scope:
        """The collections `user` may read, fresh from the database (no cache: a revoke counts now)."""
        if user.is_admin:
            return EVERYTHING
        return Scope.of(r[0] for r in self._conn.execute(
            "SELECT DISTINCT g.collection FROM grants g JOIN members m ON m.grp = g.grp WHERE m.user = ?",
            (user.name,)))

    def writable(self, user) -> list[str]:
        """Collections `user` may add documents to."""
        if user.is_admin:
            return list(self._collections())
        return [r[0] for r in self._conn.execute(
            "SELECT DISTINCT g.collection FROM grants g JOIN members m ON m.grp = g.grp "
            "WHERE m.user = ? AND g.level = 'write' ORDER BY g.collection", (user.name,))]

    def groups_of(self, user: str) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT grp FROM members WHERE user = ? ORDER BY grp", (user,))]

    # -- groups --------------------------------------------------------------------------
    def add_member(self, group: str, user: str) -> None:
        """Put `user` in `group` (created on first use)."""
        group = _check_group(group)
        with self._lock, self._conn:
            if self._conn.execute("SELECT 1 FROM users WHERE name = ?", (user,)).fetchone() is None:
                raise AccessError(no_user(user))
            self._conn.execute("INSERT OR IGNORE INTO groups VALUES (?, ?)", (group, time.time()))
            self._conn.execute("INSERT OR IGNORE INTO members VALUES (?, ?)", (user, group))

    def remove_member(self, group: str, user: str) -> None:
        with self._lock, self._conn:
            if not self._conn.execute("DELETE FROM members WHERE user = ? AND grp = ?", (user, group)).rowcount:
                raise AccessError(f"{user!r} is not in group {group!r}")

    def groups(self) -> list[tuple[str, list[str], list[tuple[str, str]]]]:
        """(group, members, [(collection, level)]) for every group."""
        out = []
        for (name,) in self._conn.execute("SELECT name FROM groups ORDER BY name").fetchall():
            members = [r[0] for r in self._conn.execute("SELECT user FROM members WHERE grp = ? ORDER BY user",
                                                        (name,))]
            grants = self._conn.execute("SELECT collection, level FROM grants WHERE grp = ? ORDER BY collection",
                                        (name,)).fetchall()
            out.append((name, members, [tuple(g) for g in grants]))
        return out

    # -- grants --------------------------------------------------------------------------
    def grant(self, group: str, collection: str, level: str) -> None:
        """Give `group` `level` (read or write) on an existing `collection`."""
        group = _check_group(group)
        if level not in LEVELS:
            raise AccessError(f"access level must be read or write, not {level!r}")
        try:
            check_collection(collection)
        except KnowledgeError as e:
            raise AccessError(str(e)) from None
        known = self._collections()
        if collection not in known:
            raise AccessError(f"no collection {collection!r}: ingest into it first (`appliance ingest DIR "
                              f"--collection {collection}`) or create it (`appliance collections create "
                              f"{collection}`); known: {', '.join(known) or 'none'}")
        with self._lock, self._conn:
            self._conn.execute("INSERT OR IGNORE INTO groups VALUES (?, ?)", (group, time.time()))
            self._conn.execute("INSERT OR REPLACE INTO grants VALUES (?, ?, ?)", (group, collection, level))

    def revoke(self, group: str, collection: str) -> None:
        with self._lock, self._conn:
            if not self._conn.execute("DELETE FROM grants WHERE grp = ? AND collection = ?",
                                      (group, collection)).rowcount:
                raise AccessError(f"group {group!r} has no grant on {collection!r}")


def _check_group(name: str) -> str:
    if not _GROUP.match(name or ""):
        raise AccessError(f"invalid group name {name!r}: 1-63 lower-case letters, digits, '.', '-' or '_'")
    return name
