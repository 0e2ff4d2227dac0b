"""Every CLI error is a sentence: each command fed a missing file, an empty knowledge base or an
unknown model exits non-zero with an `error: ...` line that names the problem, never a traceback.

Run through the installed `appliance` script, as a user types it, in a fresh data directory (nothing
indexed), so "empty knowledge base" is the state every case starts from.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT

APPLIANCE = str(ROOT / ".venv" / "bin" / "appliance")
NOSUCH_MODEL = {"APPLIANCE_CHAT_MODEL": "nosuch"}

# (argv, extra environment, words the message must hold)
MISSING_FILE = [
    (["ingest", "nosuch-folder"], {}, "no such folder"),
    (["ingest", "T.toml"], {}, "not a folder"),
    (["eval", "retrieval", "nosuch.jsonl"], {}, "cannot read the QA file nosuch.jsonl"),
    (["eval", "retrieval", "--suite", "nosuch.toml"], {}, "nosuch.toml"),
    (["eval", "answers", "nosuch.jsonl"], {}, "cannot read the QA file nosuch.jsonl"),
    (["eval", "gate", "nosuch.jsonl"], {}, "cannot read the QA file nosuch.jsonl"),
    (["summarize", "nosuch.pdf"], {}, "no such file"),
    (["ask", "--doc", "nosuch.pdf", "what?"], {}, "no such file"),
    (["batch", "run", "nosuch.toml", "--out", "r.jsonl"], {}, "cannot read template nosuch.toml"),
    (["batch", "run", "T.toml", "--out", "r.jsonl", "--schema", "nosuch.json"], {}, "nosuch.json"),
    (["restore", "nosuch.tar.zst"], {}, "cannot read nosuch.tar.zst"),
    (["models", "add", "nosuch.gguf"], {}, "model file not found"),
    (["quantize", "nosuch.gguf"], {}, "model file not found"),
    (["quantize", "smollm2-135m", "--allow-requantize", "--calib", "nosuch"], {}, "not a folder"),
    (["plan", "nosuch.gguf"], {}, "model file not found"),
    (["docs", "remove", "nosuch/file.md"], {}, "no indexed document"),
    (["config", "show", "-c", "nosuch.toml"], {}, "config file not found"),
    (["search", "anything", "-c", "nosuch.toml"], {}, "config file not found"),
]
EMPTY_KB = [
    (["search", "how do I back up?"], {}, "knowledge base is empty"),
    (["search", "how do I back up?", "--json"], {}, "knowledge base is empty"),
    (["eval", "retrieval", "qa.jsonl"], {}, "knowledge base is empty"),
    (["eval", "answers", "qa.jsonl"], {}, "knowledge base is empty"),
    (["eval", "gate", "qa.jsonl"], {}, "knowledge base is empty"),
    (["batch", "run", "T.toml", "--out", "r.jsonl"], {}, "no items"),
    (["summarize", "a.md"], {}, "no indexed document"),
    (["quantize", "smollm2-135m", "--allow-requantize", "--calib-kb"], {}, "knowledge base is empty"),
]
UNKNOWN_MODEL = [
    (["ask", "how do I back up?"], NOSUCH_MODEL, "no model named 'nosuch'"),
    (["summarize", "T.toml"], NOSUCH_MODEL, "no model named 'nosuch'"),
    (["plan"], NOSUCH_MODEL, "no model named 'nosuch'"),
    (["serve", "--port", "1"], NOSUCH_MODEL, "no model named 'nosuch'"),
    (["models", "use", "nosuch"], {}, "no model named 'nosuch'"),
    (["models", "remove", "nosuch"], {}, "no model named 'nosuch'"),
    (["plan", "nosuch"], {}, "no model named 'nosuch'"),
    (["quantize", "nosuch"], {}, "no model named 'nosuch'"),
    (["bench", "--ladder", "--ladder-source", "nosuch"], {}, "no model named 'nosuch'"),
]


def _run(cwd: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
    full.update({"APPLIANCE_DATA_DIR": str(cwd / "data"), "COLUMNS": "200", **env})
    return subprocess.run([APPLIANCE, *argv], cwd=cwd, env=full, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def cwd(tmp_path) -> Path:
    (tmp_path / "T.toml").write_text('instruction = "Say what the text is about."\n')
    (tmp_path / "qa.jsonl").write_text('{"question": "How do I back up?", "answer_contains": ["backup"], '
                                       '"source": "a.md", "lang": "en"}\n')
    return tmp_path


@pytest.mark.parametrize(("argv", "env", "words"), MISSING_FILE + EMPTY_KB + UNKNOWN_MODEL,
                         ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_error_is_a_sentence(cwd, argv, env, words):
    done = _run(cwd, argv, env)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said, said
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors and words in " ".join(errors), said


def test_ask_on_an_empty_knowledge_base_says_what_to_do(cwd):
    done = _run(cwd, ["ask", "How do I back up the appliance?"], {})
    assert done.returncode == 0 and "knowledge base is empty" in done.stdout and "appliance ingest" in done.stdout


def test_a_bad_argument_is_a_usage_sentence_not_a_traceback(cwd):
    done = _run(cwd, ["search"], {})
    assert done.returncode == 2 and "Traceback" not in done.stderr and "Missing argument" in done.stderr
