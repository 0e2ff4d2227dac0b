"""The embedded models load and work inside a network namespace with no network at all."""

import subprocess

import pytest

from .conftest import ROOT, netns_available, venv_python

pytestmark = pytest.mark.skipif(not netns_available(), reason="unshare -rn not permitted here")


def test_smoke_runs_without_network(tmp_path):
    out = subprocess.run(["unshare", "-rn", venv_python(), "-m", "appliance.smoke"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "decode ok" in out.stdout and "embedding ok" in out.stdout


def test_no_route_outside(tmp_path):
    code = "import socket\ns=socket.socket()\ns.settimeout(3)\ns.connect(('1.1.1.1', 80))"
    out = subprocess.run(["unshare", "-rn", venv_python(), "-c", code], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "unreachable" in out.stderr.lower()
