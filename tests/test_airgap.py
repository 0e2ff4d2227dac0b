"""The embedded models load and work inside a network namespace with no network at all."""

import json
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


def test_quantize_runs_without_network(tmp_path):
    # The whole pipeline (importance matrix, quantization, held-out check, registration) on the
    # embedded model, with no network at all. Q4_1 → Q8_0 is a requantize, hence the flag.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "APPLIANCE_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run(["unshare", "-rn", venv_python(), "-m", "appliance.cli", "quantize", "smollm2-135m",
                          "--type", "Q8_0", "--allow-requantize", "--calib", str(ROOT / "knowledge/data/sample/docs"),
                          "--no-bench", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["registered"] and report["imatrix"] and report["calib_tokens_user"] > 0
