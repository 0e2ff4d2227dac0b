"""One writer per data directory, across processes: the writer lock, the server lease, and the
command-line writers that hand their work to a server that owns the index (the hand-off itself is
tested against a real server in test_api)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from typer.testing import CliRunner

from appliance.bench.server import free_port
from appliance.cli import app
from appliance.locks import ServerLease, WriterBusy, WriterLock, running_server


def test_a_second_writer_waits_and_is_told_who_holds_the_lock(tmp_path):
    order, told = [], []
    with WriterLock(tmp_path):
        def second() -> None:
            with WriterLock(tmp_path, on_wait=told.append):
                order.append("second")

        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first done")
    t.join(10)
    assert order == ["first done", "second"]
    assert told and told[0].startswith("pid ")


def test_server_lease_is_exclusive_and_visible(tmp_path):
    assert running_server(tmp_path) is None
    with ServerLease(tmp_path, "127.0.0.1", 8123):
        assert running_server(tmp_path)["port"] == 8123
        with pytest.raises(WriterBusy, match="already serves"), ServerLease(tmp_path, "127.0.0.1", 8124):
            pass
    assert running_server(tmp_path) is None and not (tmp_path / "server.json").exists()


def test_cli_writers_never_open_an_index_a_server_owns(data_dir, tmp_path):
    """With a lease held but nobody answering, the CLI says so and writes nothing itself."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nSome text.\n")
    runner = CliRunner()
    with ServerLease(data_dir, "127.0.0.1", free_port()):
        assert json.loads((data_dir / "server.json").read_text())["token"]
        ingest = runner.invoke(app, ["ingest", str(docs)], env={"COLUMNS": "300"})
        remove = runner.invoke(app, ["docs", "remove", "a.md"], env={"COLUMNS": "300"})
    for result in (ingest, remove):
        assert result.exit_code == 1
        assert "owns this data directory but did not answer" in result.output
    assert not (data_dir / "knowledge.db").exists() or "a.md" not in runner.invoke(app, ["docs", "list"]).output
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0  # the server is gone: allowed again
