"""`appliance backup` while the server runs and an ingest is under way, `appliance restore` into a new
directory: users, API keys, conversations and documents come back, and the index is consistent.
A damaged archive or a non-empty target restores nothing."""

import json
import os
import subprocess
import sys
import tarfile
import time

import httpx
import pytest

from appliance.server.history import HistoryStore

from .conftest import ROOT
from .server_helpers import start_server


def cli(data, *args, stdin=None):
    env = {**os.environ, "APPLIANCE_DATA_DIR": str(data)}
    return subprocess.run([sys.executable, "-m", "appliance.cli", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=600)


def _sample_files() -> int:
    return sum(1 for p in (ROOT / "knowledge" / "data" / "sample" / "docs").rglob("*") if p.is_file())


def _indexed(server) -> int:
    out = server.cli("docs", "stats")
    return sum(json.loads(out.stdout)["files"].values()) if out.returncode == 0 else 0


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    """A backup taken from a running server while a handed-off ingest runs; the server's facts beside it."""
    tmp = tmp_path_factory.mktemp("backup")
    docs = tmp / "team-docs"
    docs.mkdir()
    for n in range(40):
        (docs / f"note-{n:02}.md").write_text(f"# Note {n}\n\n" + f"Rotate the VPN certificate of site {n}. " * 60)
    server = start_server(tmp / "srv")
    try:
        server.cli("users", "add", "bob", "--password-stdin", stdin="bobs-password\n").check_returncode()
        bob_key = server.cli("users", "key", "create", "bob").stdout.strip()
        conv = HistoryStore(server.data / "users.db").save("bob", None, [
            {"role": "user", "content": "Which port?"}, {"role": "assistant", "content": "8000 [1]"}])
        ingest = subprocess.Popen([sys.executable, "-m", "appliance.cli", "ingest", str(docs)], cwd=ROOT,
                                  env={**os.environ, "APPLIANCE_DATA_DIR": str(server.data)},
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        sample = _sample_files()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _indexed(server) <= sample and ingest.poll() is None:
            time.sleep(0.2)  # until the ingest has committed its first note: it is under way
        archive = tmp / "appliance.tar.zst"
        taken = server.cli("backup", str(archive), "--json")
        ingest.wait(300)
        assert taken.returncode == 0, taken.stderr
        yield {"archive": archive, "taken": json.loads(taken.stdout.splitlines()[-1]), "bob_key": bob_key,
               "conv": conv, "tmp": tmp}
    finally:
        server.stop()


def test_restore_brings_everything_back_consistent(snapshot, tmp_path):
    target = tmp_path / "restored"
    out = cli(target, "restore", str(snapshot["archive"]), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    counts = report["counts"]
    assert counts["users"] == 2 and counts["api_keys"] >= 2 and counts["conversations"] == 1
    # The backup started once the ingest had committed a note; an ingest run holds the writer lock
    # throughout and the index is copied under that lock, so the backup holds all 40 notes, not some.
    assert counts["documents"] == _sample_files() + 40, counts
    assert report["index"].startswith("consistent:"), report["index"]
    assert report == {**report, "counts": snapshot["taken"]["counts"]}
    assert HistoryStore(target / "users.db").list("bob")[0][0] == snapshot["conv"]
    server = start_server(tmp_path / "srv2", data=target)
    try:
        headers = {"Authorization": f"Bearer {snapshot['bob_key']}"}
        assert httpx.get(server.url + "/v1/models", headers=headers).status_code == 200  # bob's key works
        hits = server.cli("search", "Which port does the server listen on by default?", "--json")
        assert "getting-started" in hits.stdout
        stats = json.loads(server.cli("docs", "stats").stdout)
        assert sum(stats["files"].values()) == counts["documents"] and stats["vectors"] == counts["chunks"]
    finally:
        server.stop()


def test_a_damaged_archive_restores_nothing(snapshot, tmp_path):
    import zstandard

    unpacked = tmp_path / "unpacked"
    with snapshot["archive"].open("rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as zst, \
            tarfile.open(fileobj=zst, mode="r|") as tar:
        tar.extractall(unpacked, filter="data")
    users = unpacked / "data" / "users.db"
    users.write_bytes(users.read_bytes()[:-10] + b"0123456789")  # same size, other bytes
    damaged = tmp_path / "damaged.tar.gz"
    with tarfile.open(damaged, "w:gz") as tar:
        tar.add(unpacked / "data", arcname="data")
    target = tmp_path / "target"
    out = cli(target, "restore", str(damaged))
    assert out.returncode == 1 and "users.db does not match its checksum" in out.stderr, out.stderr
    assert not target.exists() or not any(target.iterdir())


def test_restore_refuses_a_directory_in_use(snapshot, tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "users.db").write_bytes(b"")
    out = cli(target, "restore", str(snapshot["archive"]))
    assert out.returncode == 1 and "not empty" in out.stderr
