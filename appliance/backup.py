"""`appliance backup` and `appliance restore`: a consistent snapshot of a data directory, taken while
the server runs, and its restoration into an empty one.

Consistency: SQLite files (users, API keys and conversations in users.db; manifest, chunk texts and
the lexical index in knowledge.db; Chroma's own chroma.sqlite3) are copied with SQLite's online
backup API, which gives a transaction-consistent copy while other connections write. The index
(knowledge.db, the Chroma folder, uploaded files) is copied under the data directory's writer lock,
so no ingest, upload or removal runs meanwhile: a running ingest finishes first. The archive holds a
`backup.json` manifest (format version, counts, every file with size and sha256); restore verifies
every checksum before writing anything, and the index check (vectors = chunk rows = manifest ids)
runs on the restored copy.

GGUF model files are not copied (they are large and come from removable media); `models.json` is,
and restore names any registered model whose file is missing.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from appliance.errors import ApplianceError
from appliance.locks import WriterLock
from appliance.models.registry import sha256_file

FORMAT = 1
MANIFEST = "backup.json"
_SKIP = {"writer.lock", "server.lock", "server.json"}  # per-process state, never restored
_INDEX = ("knowledge.db", "chroma", "uploads")           # copied under the writer lock


class BackupError(ApplianceError):
    """A backup cannot be written or an archive cannot be restored (the message says why)."""


def backup(data_dir: Path, out: Path, on_wait: Callable[[str], None] | None = None) -> dict:
    """Write a snapshot of `data_dir` to `out` (.tar, .tar.gz, .tar.xz or .tar.zst); returns the manifest."""
    data_dir = Path(data_dir)
    if not (data_dir / "users.db").exists() and not (data_dir / "knowledge.db").exists():
        raise BackupError(f"{data_dir} holds no appliance data (no users.db, no knowledge.db)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".backup-") as tmp:
        stage = Path(tmp) / "data"
        stage.mkdir()
        for item in sorted(data_dir.iterdir()):
            if item.name not in _SKIP and item.name not in _INDEX:
                _copy(item, stage / item.name)
        with WriterLock(data_dir, on_wait):
            for name in _INDEX:
                if (data_dir / name).exists():
                    _copy(data_dir / name, stage / name)
        manifest = _manifest(stage)
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
        partial = out.with_name(out.name + ".partial")
        _write_archive(stage, partial)
        partial.replace(out)  # a crash never leaves a half archive under the real name
    return manifest


def restore(archive: Path, data_dir: Path) -> dict:
    """Verify `archive` and unpack it into `data_dir` (which must be empty or absent); returns the manifest."""
    data_dir = Path(data_dir)
    if data_dir.exists() and any(p.name not in _SKIP for p in data_dir.iterdir()):
        raise BackupError(f"{data_dir} is not empty: restore only into an empty data directory")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir.parent, prefix=".restore-") as tmp:
        stage = Path(tmp)
        _read_archive(archive, stage)
        manifest = verify(stage / "data")
        data_dir.mkdir(exist_ok=True)
        for item in (stage / "data").iterdir():
            if item.name != MANIFEST:
                item.replace(data_dir / item.name)
    return manifest


def verify(folder: Path) -> dict:
    """The unpacked backup's manifest, after checking its format and every file's size and sha256."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise BackupError(f"not an appliance backup: no readable {MANIFEST}") from None
    if manifest.get("format", 0) > FORMAT:
        raise BackupError(f"backup format {manifest['format']} is newer than this appliance reads ({FORMAT}): "
                          "upgrade the appliance first")
    for rel, (size, digest) in manifest["files"].items():
        path = folder / rel
        if not path.is_file() or path.stat().st_size != size or sha256_file(path) != digest:
            raise BackupError(f"backup damaged: {rel} does not match its checksum; nothing was restored")
    return manifest


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        dst.mkdir()
        for item in sorted(src.iterdir()):
            _copy(item, dst / item.name)
    elif _is_sqlite(src):
        _sqlite_copy(src, dst)
    elif not src.name.endswith(("-wal", "-shm", "-journal", ".lock")):  # SQLite's backup reads through them
        shutil.copy2(src, dst)


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(16) == b"SQLite format 3\x00"


def _sqlite_copy(src: Path, dst: Path) -> None:
    """SQLite's online backup: a consistent copy while other connections (the server) write."""
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=60)
    target = sqlite3.connect(dst)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _manifest(stage: Path) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("appliance")
    except PackageNotFoundError:
        __version__ = "unknown"
    files = {str(p.relative_to(stage)): [p.stat().st_size, sha256_file(p)]
             for p in sorted(stage.rglob("*")) if p.is_file()}
    return {"format": FORMAT, "appliance": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "counts": _counts(stage), "files": files,
            "not_included": "GGUF model files (models.json lists them; copy them separately)"}


def _counts(stage: Path) -> dict:
    counts: dict[str, int] = {}
    for db, queries in (("users.db", {"users": "SELECT COUNT(*) FROM users",
                                      "api_keys": "SELECT COUNT(*) FROM api_keys WHERE revoked IS NULL",
                                      "conversations": "SELECT COUNT(*) FROM conversations"}),
                        ("knowledge.db", {"documents": "SELECT COUNT(*) FROM files",
                                          "chunks": "SELECT COUNT(*) FROM chunks"})):
        if (stage / db).is_file():
            conn = sqlite3.connect(stage / db)
            try:
                for key, sql in queries.items():
                    try:
                        counts[key] = conn.execute(sql).fetchone()[0]
                    except sqlite3.Error:
                        counts[key] = 0
            finally:
                conn.close()
    return counts


def _write_archive(stage: Path, out: Path) -> None:
    name = out.name.removesuffix(".partial")
    if name.endswith(".zst"):
        import zstandard

        with out.open("wb") as raw, zstandard.ZstdCompressor(level=10).stream_writer(raw) as zst, \
                tarfile.open(fileobj=zst, mode="w|") as tar:
            tar.add(stage, arcname="data")
        return
    mode = "w:gz" if name.endswith((".gz", ".tgz")) else "w:xz" if name.endswith(".xz") else "w"
    with tarfile.open(out, mode) as tar:
        tar.add(stage, arcname="data")


def _read_archive(archive: Path, dest: Path) -> None:
    try:
        if archive.name.endswith(".zst"):
            import zstandard

            with archive.open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as zst, \
                    tarfile.open(fileobj=zst, mode="r|") as tar:
                tar.extractall(dest, filter="data")
        else:
            with tarfile.open(archive, "r:*") as tar:
                tar.extractall(dest, filter="data")  # no absolute paths, no links out of dest
    except (OSError, tarfile.TarError, ValueError) as e:
        raise BackupError(f"cannot read {archive}: {e}") from None
    if not (dest / "data").is_dir():
        raise BackupError(f"not an appliance backup: {archive} has no data/ folder")
