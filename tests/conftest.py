"""Shared fixtures: a temp data dir per test, and the embedded models."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from appliance.offline import install_guard

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _offline_session():
    """Every test runs with the offline guard on, like the product."""
    install_guard(offline=True)
    yield


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    """An isolated data directory, also exported as APPLIANCE_DATA_DIR for subprocesses."""
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("APPLIANCE_DATA_DIR", str(d))
    monkeypatch.delenv("APPLIANCE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return d


@pytest.fixture(scope="session")
def chat_model_path() -> Path:
    from appliance.models.registry import embedded_chat_model_path

    path = embedded_chat_model_path()
    if path is None:
        pytest.fail("embedded chat model missing: run ./install.sh --dev")
    return path


def netns_available() -> bool:
    """Whether `unshare -rn` can make a network namespace with no network here."""
    if not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


def venv_python() -> str:
    return os.environ.get("APPLIANCE_TEST_PYTHON") or str(ROOT / ".venv" / "bin" / "python")


@pytest.fixture(scope="session")
def embedder():
    """One embedding model for the whole session (loading it takes seconds)."""
    from knowledge.index.embed import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def sample_docs() -> Path:
    return ROOT / "knowledge" / "data" / "sample" / "docs"


@pytest.fixture(scope="module")
def retriever(tmp_path_factory, embedder, sample_docs):
    """A retriever over the sample guide, indexed once per test module (a module may add to it)."""
    from knowledge.ingest.folder import ingest
    from knowledge.retrieve.retriever import Retriever

    from .kb_helpers import open_kb

    kb = open_kb(tmp_path_factory.mktemp("data"), embedder)
    report = ingest(kb, sample_docs)
    assert report.count("failed") == 0 and report.count("new") >= 9
    return Retriever(kb)
