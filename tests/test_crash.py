"""kill -9 in the middle of an ingest, re-run, and the index is consistent."""

import os
import signal
import sqlite3
import subprocess
import time

from knowledge.ingest.folder import ingest

from .conftest import ROOT, venv_python
from .kb_helpers import assert_consistent, open_kb


def done_files(db_path):
    try:
        with sqlite3.connect(db_path, timeout=1) as c:
            return c.execute("SELECT COUNT(*) FROM files WHERE status = 'done'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_kill_mid_ingest_then_rerun(tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(120):
        body = " ".join(f"Document {i} paragraph {j} talks about topic {i * 7 % 13}." for j in range(40))
        (docs / f"doc{i:03}.md").write_text(f"# Doc {i}\n\n{body}\n")
    data = tmp_path / "data"
    env = {**os.environ, "APPLIANCE_DATA_DIR": str(data), "APPLIANCE_KNOWLEDGE__EMBED_BATCH": "8"}
    proc = subprocess.Popen([venv_python(), "-m", "appliance.cli", "ingest", str(docs)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and done_files(data / "knowledge.db") < 10 and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "ingest finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = done_files(data / "knowledge.db")
    assert 0 < killed_at < 120
    kb = open_kb(data, embedder)
    report = ingest(kb, docs)
    assert report.count("failed") == 0
    assert report.count("unchanged") >= killed_at - 1
    assert len(kb.db.files("default")) == 120
    assert_consistent(kb)
