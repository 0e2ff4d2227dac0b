"""A full disk during ingest: a clear error, the files committed before it kept, the index whole again
after the next run (RELIABILITY.md). The data directory is a 64 MB tmpfs in a private mount namespace
(`unshare -rm`), nearly filled before the ingest. The vector store refuses a write that could fill the
disk (Chroma waits forever on ENOSPC), so "full" here means under its reserve."""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import ROOT, venv_python


def _tmpfs_available() -> bool:
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d"],
                           capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _tmpfs_available(), reason="unshare -rm with a tmpfs mount not permitted here")

_SCRIPT = r"""
import faulthandler, json, os, shutil, sys
from pathlib import Path
from knowledge.ingest import folder as ingest_mod
from knowledge.index import store
from knowledge.errors import IndexWriteError
from knowledge.ingest.integrity import check
from knowledge.index.kb import KBConfig, KnowledgeBase

faulthandler.dump_traceback_later(600, exit=True)              # a hang shows where, not just a timeout
mnt, docs = Path(sys.argv[1]), Path(sys.argv[2])
out = {}
ingest_mod.MIN_FREE_MB = 8                                     # the default 64 is all of this tmpfs
kb = KnowledgeBase(mnt / "data", KBConfig())
ingest_mod.ingest(kb, Path(sys.argv[3]))                      # the sample guide fits
out["before"] = kb.db.chunk_count("default")
free = shutil.disk_usage(mnt).free
room = (store.ROOM_RESERVE_MB + 2) * 2**20                      # a few files fit above the reserve
with open(mnt / "filler", "wb") as fh:
    fh.write(b"\0" * max(0, free - room))
ingest_mod.MIN_FREE_MB = 32                                    # more than is left: refused before it starts
try:
    ingest_mod.ingest(kb, docs)
except IndexWriteError as e:
    out["refused_up_front"] = [e.disk_full, str(e)]
ingest_mod.MIN_FREE_MB = 0                                     # now let it start and run out mid-write
try:
    ingest_mod.ingest(kb, docs)
except IndexWriteError as e:
    out["mid_write"] = [e.disk_full, str(e)]
out["sample_kept"] = sum(1 for r in kb.db.files("default").values() if r.status == "done" and "sample" in r.root)
(mnt / "filler").unlink()
report = ingest_mod.ingest(kb, docs)
out["after"] = {"repaired": report.repaired, "failed": report.count("failed"), "ok": check(kb).ok,
                "files": sum(1 for r in kb.db.files("default").values() if r.status == "done" and r.root == str(docs))}
print(json.dumps(out))
"""


def test_disk_full_during_ingest_is_a_clear_error_and_loses_nothing(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(40):
        body = "\n\n".join(f"Procedure {i}-{p}: form {i * 100 + p} goes to office {p % 7} within {p + i} days. " * 3
                           for p in range(40))
        (docs / f"p{i}.md").write_text(f"# P{i}\n\n{body}\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    command = (f"mount -t tmpfs -o size=64m tmpfs {mnt} && exec {venv_python()} -c '{_SCRIPT}' {mnt} {docs} "
               f"{ROOT / 'knowledge' / 'data' / 'sample'}")
    run = subprocess.run(["unshare", "-rm", "sh", "-c", command], cwd=ROOT, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    full, message = out["refused_up_front"]
    assert full and "MB free" in message and "free some space" in message
    full, message = out["mid_write"]
    assert full and "the disk is full" in message and "are kept" in message, message
    assert int(message.split("The ")[1].split(" file(s)")[0]) >= 1, message  # it stopped after some files
    assert out["sample_kept"] >= 1  # what was indexed before is still there
    assert out["after"]["ok"] and out["after"]["failed"] == 0 and out["after"]["files"] == 40
