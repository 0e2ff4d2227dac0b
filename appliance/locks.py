"""One writer per data directory, across processes.

Chroma's PersistentClient is not safe when two processes write one store, and one process's
crash repair would delete another's journalled, not yet committed vectors. So:
- every index write (ingest, remove, re-index, upload, repair) holds `writer.lock` (flock, exclusive);
- `appliance serve` holds `server.lock` while it runs, with `server.json` saying where it listens and
  holding a per-run local token (file mode 0600, so only the data directory's owner reads it).
  Command-line writers never open the index a running server owns: they hand the job to the server
  through its documents API with that token (`appliance.cli.handoff`).
flock locks belong to the open file, so they vanish with the process: a crash never leaves one stale.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from appliance.errors import ApplianceError


class WriterBusy(ApplianceError):
    """Another process owns the data directory's index."""


class WriterLock:
    """`with WriterLock(data_dir):` — waits for any other writer (telling `on_wait` who it is)."""

    def __init__(self, data_dir: Path, on_wait: Callable[[str], None] | None = None) -> None:
        self.path = Path(data_dir) / "writer.lock"
        self.on_wait = on_wait
        self._fh = None

    def __enter__(self) -> WriterLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a+")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self.on_wait:
                self._fh.seek(0)
                self.on_wait(self._fh.read().strip() or "another process")
            fcntl.flock(self._fh, fcntl.LOCK_EX)
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(f"pid {os.getpid()}")
        self._fh.flush()
        return self

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


class ServerLease:
    """Held by `appliance serve` for its lifetime; refuses to start beside another server."""

    def __init__(self, data_dir: Path, host: str, port: int) -> None:
        # The token lets local command-line writers act through the server as an administrator.
        self.token = secrets.token_urlsafe(32)
        self.dir = Path(data_dir)
        self.info = {"pid": os.getpid(), "host": host, "port": port, "token": self.token}
        self._fh = None

    def __enter__(self) -> ServerLease:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._fh = (self.dir / "server.lock").open("a+")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.close()
            other = running_server(self.dir) or {}
            raise WriterBusy(f"another appliance server (pid {other.get('pid', '?')}, port "
                             f"{other.get('port', '?')}) already serves {self.dir}") from None
        info = self.dir / "server.json"
        info.unlink(missing_ok=True)
        fd = os.open(info, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(self.info))
        return self

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            (self.dir / "server.json").unlink(missing_ok=True)
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()


def running_server(data_dir: Path) -> dict | None:
    """The live server owning `data_dir` ({pid, host, port}), or None."""
    lock = Path(data_dir) / "server.lock"
    if not lock.exists():
        return None
    with lock.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return json.loads((Path(data_dir) / "server.json").read_text())
            except (OSError, ValueError):
                return {}
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


def server_url(server: dict) -> str:
    """The base URL a local client reaches the server at (a wildcard bind means loopback)."""
    host = server.get("host") or "127.0.0.1"
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # nosec B104 - a comparison, not a bind
    return f"http://{'[' + host + ']' if ':' in host else host}:{server.get('port', 8000)}"
