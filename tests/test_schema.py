"""The data directory's schema version: forward migrations in order, a newer schema refused."""

import pytest

from appliance.schema import FILE, SchemaTooNew, ensure, read


def test_unversioned_data_is_schema_1_and_gets_the_file(tmp_path):
    assert ensure(tmp_path) == "no data yet" and not (tmp_path / FILE).exists()
    (tmp_path / "users.db").write_bytes(b"")
    assert read(tmp_path) == 1
    assert ensure(tmp_path) == "schema 1 (current)" and (tmp_path / FILE).read_text().strip() == "1"


def test_migrations_run_in_order_and_a_newer_schema_is_refused(tmp_path):
    (tmp_path / FILE).write_text("1\n")
    done = []
    steps = {1: lambda d: done.append(1), 2: lambda d: done.append(2)}
    assert ensure(tmp_path, current=3, migrations=steps) == "schema 3 (migrated from 1)"
    assert done == [1, 2] and read(tmp_path) == 3
    with pytest.raises(SchemaTooNew, match="schema 3, written by a newer appliance"):
        ensure(tmp_path, current=2, migrations=steps)


def test_the_cli_refuses_a_data_directory_from_a_newer_version(tmp_path, monkeypatch):
    import subprocess
    import sys

    from .conftest import ROOT

    (tmp_path / FILE).write_text("99\n")
    out = subprocess.run([sys.executable, "-m", "appliance.cli", "docs", "stats"], cwd=ROOT, capture_output=True,
                         text=True, env={"APPLIANCE_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 1 and "written by a newer appliance" in out.stderr
