"""One writer per data directory, across processes.

Chroma's PersistentClient is not safe when two processes write one store, and one process's
crash repair would delete another's journalled, not yet committed vectors. So:
- every index write (ingest, remove, re-index, upload, repair) holds `writer.lock` (flock, exclusive);
- `appliance serve` holds `server.lock` while it runs, with `server.json` saying where it listens,
  and command-line writers refuse to touch a directory a running server owns (they name the server's
  documents API and the UI instead).
flock locks belong to the open file, so they vanish with the process: a crash never leaves one stale.
"""

from __future__ import annotations

import fcntl
import json
import os
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
        self.dir, self.info = Path(data_dir), {"pid": os.getpid(), "host": host, "port": port}
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
        (self.dir / "server.json").write_text(json.dumps(self.info))
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


def refuse_if_served(data_dir: Path) -> None:
    """Command-line writers call this first: a running server owns the index."""
    server = running_server(data_dir)
    if server is None:
        return
    url = f"http://{server.get('host', '127.0.0.1')}:{server.get('port', 8000)}"
    raise WriterBusy(f"the appliance server (pid {server.get('pid', '?')}) is running on {data_dir}; two processes "
                     f"must not write one index. Add or remove documents through it: the UI's Documents tab, or "
                     f"curl -H 'Authorization: Bearer KEY' -F files=@FILE {url}/v1/documents (see README); "
                     f"or stop the server first.")
