"""Accounts, password hashing (scrypt), API keys (stored hashed) and login throttling, in SQLite."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import ApplianceError, no_user
from appliance.server import access
from appliance.server.db import open_db

# OWASP's scrypt minimum (N=2^17, r=8, p=1): 128 MiB and a few hundred ms per hash. Older hashes
# carry their own parameters and still verify. At most two hashes run at once, so a burst of logins
# queues instead of allocating 128 MiB each.
_SCRYPT = {"n": 2**17, "r": 8, "p": 1}
_MAXMEM = 256 * 2**20
_HASH_SLOTS = threading.BoundedSemaphore(2)
KEY_PREFIX = "apl-"
MAX_FAILURES = 5          # free attempts per (client address, user name)
LOCK_SECONDS = 60.0       # first lock; doubles with each further failure
LOCK_CAP_SECONDS = 900.0
MAX_TRACKED = 10_000      # failure records kept (least recently failed dropped first)
# The client address of the request being served, set by the HTTP middleware; "" outside a request.
CLIENT_ADDRESS: ContextVar[str] = ContextVar("client_address", default="")

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, pw_hash TEXT NOT NULL, role TEXT NOT NULL,
                                  created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, user TEXT NOT NULL, key_hash TEXT NOT NULL UNIQUE,
                                     created REAL NOT NULL, revoked REAL);
"""


class AuthError(ApplianceError):
    """Bad credentials, unknown user, or a locked account."""


@dataclass
class User:
    name: str
    role: str
    # Changes when the password or the role changes: sessions opened before that must end.
    stamp: str = ""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    with _HASH_SLOTS:
        return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=32)


def hash_password(password: str) -> str:
    """scrypt (memory-hard) with a random salt, in a self-describing string."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        _, n, r, p, salt, digest = stored.split("$")
        got = _scrypt(password, bytes.fromhex(salt), int(n), int(r), int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got.hex(), digest)


@functools.lru_cache(maxsize=1)
def _dummy_hash() -> str:
    # Unknown names are checked against this, so a wrong name costs the same time as a wrong password.
    return hash_password(secrets.token_urlsafe(16))


class LoginThrottle:
    """Failed logins per (client address, user name), with escalating locks and a bounded memory.

    Keyed by address too, so someone elsewhere on the network cannot lock `admin` out for everyone.
    """

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def wait(self, key: tuple[str, str]) -> float:
        """Seconds this key must still wait before it may try again (0 = may try)."""
        with self._lock:
            count, last = self._failures.get(key, (0, 0.0))
        if count < MAX_FAILURES:
            return 0.0
        lock = min(LOCK_CAP_SECONDS, LOCK_SECONDS * 2 ** (count - MAX_FAILURES))
        return max(0.0, lock - (self._clock() - last))

    def failed(self, key: tuple[str, str]) -> None:
        with self._lock:
            count, _ = self._failures.pop(key, (0, 0.0))
            self._failures[key] = (count + 1, self._clock())
            while len(self._failures) > MAX_TRACKED:
                self._failures.popitem(last=False)

    def succeeded(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._failures)


def _stamp(role: str, pw_hash: str) -> str:
    return hashlib.sha256(f"{role}:{pw_hash}".encode()).hexdigest()[:16]


def _key_hash(key: str) -> str:
    # API keys are 256 random bits: a plain hash is enough (no dictionary to attack).
    return hashlib.sha256(key.encode()).hexdigest()


class UserStore:
    """Users and API keys of one appliance (`<data_dir>/users.db`)."""

    def __init__(self, path: Path) -> None:
        self._conn = open_db(path, SCHEMA)
        with self._conn:
            access.seed(self._conn)  # groups live beside the accounts; a new account joins `everyone`
        self._lock = threading.Lock()
        self.throttle = LoginThrottle()

    # -- users ---------------------------------------------------------------------------
    def add(self, name: str, password: str, admin: bool = False) -> User:
        if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise AuthError(f"invalid user name {name!r}: letters, digits, '-', '_', '.'")
        if len(password) < 8:
            raise AuthError("password must have at least 8 characters")
        with self._lock, self._conn:
            try:
                self._conn.execute("INSERT INTO users VALUES (?, ?, ?, ?)",
                                   (name, hash_password(password), "admin" if admin else "user", time.time()))
                access.join_default_group(self._conn, name)
            except sqlite3.IntegrityError:
                raise AuthError(f"user {name!r} already exists") from None
        return User(name, "admin" if admin else "user")

    def remove(self, name: str) -> None:
        with self._lock, self._conn:
            if not self._conn.execute("DELETE FROM users WHERE name = ?", (name,)).rowcount:
                raise AuthError(no_user(name))
            self._conn.execute("UPDATE api_keys SET revoked = ? WHERE user = ? AND revoked IS NULL",
                               (time.time(), name))
            access.forget_user(self._conn, name)

    def set_password(self, name: str, password: str) -> None:
        if len(password) < 8:
            raise AuthError("password must have at least 8 characters")
        with self._lock, self._conn:
            if not self._conn.execute("UPDATE users SET pw_hash = ? WHERE name = ?",
                                      (hash_password(password), name)).rowcount:
                raise AuthError(no_user(name))

    def list(self) -> list[tuple[User, int]]:
        """Users with their count of active API keys."""
        rows = self._conn.execute(
            "SELECT u.name, u.role, (SELECT COUNT(*) FROM api_keys k WHERE k.user = u.name AND k.revoked IS NULL)"
            " FROM users u ORDER BY u.name").fetchall()
        return [(User(n, r), k) for n, r, k in rows]

    def get(self, name: str) -> User | None:
        row = self._conn.execute("SELECT name, role, pw_hash FROM users WHERE name = ?", (name,)).fetchone()
        return User(row[0], row[1], _stamp(row[1], row[2])) if row else None

    def count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM users").fetchone()[0]

    # -- login ---------------------------------------------------------------------------
    def login(self, name: str, password: str, address: str | None = None) -> User:
        """Check a password. After MAX_FAILURES wrong ones from one address for one name, that pair
        waits LOCK_SECONDS, doubling per further failure up to LOCK_CAP_SECONDS."""
        key = (CLIENT_ADDRESS.get() if address is None else address, name)
        wait = self.throttle.wait(key)
        if wait > 0:
            raise AuthError(f"too many failed logins; try again in {wait:.0f}s")
        row = self._conn.execute("SELECT role, pw_hash FROM users WHERE name = ?", (name,)).fetchone()
        if not verify_password(password, row[1] if row else _dummy_hash()) or row is None:
            self.throttle.failed(key)
            raise AuthError("wrong user name or password")
        self.throttle.succeeded(key)
        return User(name, row[0], _stamp(row[0], row[1]))

    # -- API keys ------------------------------------------------------------------------
    def create_key(self, name: str) -> str:
        """A new API key for `name`; returned once, stored only as a hash."""
        if self.get(name) is None:
            raise AuthError(no_user(name))
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self._lock, self._conn:
            self._conn.execute("INSERT INTO api_keys VALUES (?, ?, ?, ?, NULL)",
                               (key[:12], name, _key_hash(key), time.time()))
        return key

    def revoke_key(self, key_or_id: str) -> int:
        """Revoke by the full key or its id (the first 12 characters). Returns keys revoked."""
        with self._lock, self._conn:
            return self._conn.execute(
                "UPDATE api_keys SET revoked = ? WHERE revoked IS NULL AND (key_hash = ? OR id = ? OR user = ?)",
                (time.time(), _key_hash(key_or_id), key_or_id[:12], key_or_id)).rowcount

    def keys(self, name: str | None = None) -> list[tuple[str, str, bool]]:
        """(key id, user, active) for listing; the keys themselves are never stored."""
        rows = self._conn.execute("SELECT id, user, revoked IS NULL FROM api_keys" +  # nosec B608 - fixed text
                                  (" WHERE user = ?" if name else "") + " ORDER BY created",
                                  (name,) if name else ()).fetchall()
        return [(i, u, bool(a)) for i, u, a in rows]

    def user_for_key(self, key: str) -> User | None:
        row = self._conn.execute(
            "SELECT u.name, u.role FROM api_keys k JOIN users u ON u.name = k.user "
            "WHERE k.key_hash = ? AND k.revoked IS NULL", (_key_hash(key),)).fetchone()
        return User(*row) if row else None
