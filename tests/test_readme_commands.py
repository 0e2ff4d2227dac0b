"""Every command the README shows works as written.

The lines come from the README itself (tests/readme_commands.py). Each is in CASES (what it runs as:
the line itself, or for a synopsis line such as `appliance docs list | stats | remove PATH` each of its
forms with small inputs) with one check of what its comment says, or in ELSEWHERE (another test runs
it) or FRAGMENTS (prose naming a command). A README line that is added or changed without a case here
fails `test_every_readme_command_has_a_case`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from .conftest import ROOT
from .kb_helpers import make_pdf
from .readme_cases import CASES
from .readme_commands import SAME, Case, Workspace, python_block, readme_commands, run_case, start_serve

pytestmark = pytest.mark.slow

# Lines another test runs as written; the check below asserts that test still holds the command.
ELSEWHERE = {
    "./install.sh": (".ci/run", "./install.sh --dev",
                     "CI runs it (with --dev, which only adds the test tools) before this suite; running it "
                     "inside the suite would rebuild the virtualenv under the running tests"),
    "./install.sh --dev && .venv/bin/python -m pytest -q": (
        ".ci/run", "./install.sh --dev && .venv/bin/python -m pytest -q", "it is this suite's own command"),
    "scripts/make-bundle.sh appliance-bundle.tar": ("tests/test_bundle.py", "scripts/make-bundle.sh --version",
                                                    "needs the network (pip downloads the wheelhouse): test_bundle"),
    "tar xf appliance-bundle.tar": ("tests/test_bundle.py", "shutil.unpack_archive(bundles",
                                    "unpacks the bundle test_bundle makes"),
    "appliance-bundle/appliance/install.sh --from-bundle appliance-bundle": (
        "tests/test_bundle.py", "appliance-bundle/appliance/install.sh --from-bundle appliance-bundle",
        "installs inside a network namespace in test_bundle"),
    ".venv/bin/python scripts/bench_verify_cost.py": ("tests/test_bench.py", '"verify-cost"', "test_bench"),
    ".venv/bin/python scripts/bench_kv_occupancy.py": ("tests/test_bench.py", '"kv-occupancy"', "test_bench"),
    ".venv/bin/python scripts/bench_access.py": ("tests/test_bench.py", "bench_access.py", "test_bench"),
}
# The Python blocks run in test_python_snippets_run_against_the_server.
PYTHON = {"python: from openai import OpenAI", "python: import httpx",
          'python: r = client.chat.completions.create(model="appliance-summarize", messages=[{"role": "user", '
          '"content": "Summarise."}],'}
# Inline spans that name a command in prose; each command's runnable forms are cases.
FRAGMENTS = {f"inline: appliance {c}" for c in (
    "quantize", "models use NAME", "serve", "ingest FOLDER", "docs remove", "ask", "users key create",
    "ask --doc", "docs", "ingest", "models add", "collections create NAME", "eval loaders FOLDER")}


def test_every_readme_command_has_a_case():
    lines = readme_commands()
    known = {*CASES, *ELSEWHERE, *FRAGMENTS, *PYTHON}
    unaccounted = [line for line in lines if line not in known]
    stale = [line for line in known if line not in lines]
    assert not unaccounted, f"README lines without a case in tests/readme_cases.py: {unaccounted}"
    assert not stale, f"cases for lines the README no longer shows: {stale}"


def test_the_parser_sees_a_changed_line():
    text = "## X\n\n```\nappliance docs list   # all\n    [--json]\nappliance new-thing\n```\n\n`appliance a b`\n"
    assert readme_commands(text) == ["appliance docs list [--json]", "appliance new-thing", "inline: appliance a b"]


@pytest.mark.parametrize("line", sorted(ELSEWHERE))
def test_lines_run_elsewhere_are_still_run_there(line):
    where, needle, _why = ELSEWHERE[line]
    assert needle in (ROOT / where).read_text(), f"{where} no longer runs {line!r}"


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Workspace:
    """The sample guide indexed as `./docs`, with `./docs/hr` in the collection `hr`."""
    w = Workspace.make(tmp_path_factory.mktemp("readme"))
    for command in ("appliance ingest ./docs", "appliance ingest ./docs/hr --collection hr"):
        done = w.sh(command)
        assert done.returncode == 0, done.stdout + done.stderr
    make_pdf(w.root / "handbook.pdf", ["Employee handbook\nThe canteen opens at half past eleven."])
    (w.root / "faq.md").write_text("# FAQ\n\nThe guest wifi password changes every Monday.\n")
    return w


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`.venv/bin/appliance serve` in a workspace of its own, and an API key made with the README's command."""
    w = Workspace.make(tmp_path_factory.mktemp("served"))
    server = start_serve(w)
    url, password = server.url, server.admin_password
    try:
        key = w.sh("appliance users key create admin").stdout.strip().split()[-1]
        assert key.startswith("apl-"), key
        # the README's placeholders: the host, the key, and the question "…"
        w.subs.update({"http://host:8000": url, "apl-…": key, '"content": "…"': '"content": "How do I back up?"'})
        make_pdf(w.root / "handbook.pdf", ["Employee handbook\nThe canteen opens at half past eleven."])
        (w.root / "faq.md").write_text("# FAQ\n\nThe guest wifi password changes every Monday.\n")
        yield w, url, key, password
    finally:
        server.stop()


def test_serve_starts_with_an_admin_and_the_sample_guide(served):
    w, url, key, password = served
    assert len(password) >= 12
    docs = httpx.get(url + "/v1/documents", headers={"Authorization": f"Bearer {key}"}).json()
    assert any(d["source"].endswith("security-policy.pdf") for d in docs["data"]), docs


@pytest.mark.parametrize("line", [line for line in CASES if not CASES[line].server])
def test_readme_command(ws, line):
    case = CASES[line]
    case.check(ws, run_case(ws, line, case))


@pytest.mark.parametrize("line", [line for line in CASES if CASES[line].server])
def test_readme_command_beside_a_server(served, line):
    case = CASES[line]
    case.check(served[0], run_case(served[0], line, case))


def test_python_snippets_run_against_the_server(served):
    w = served[0]
    chat = w.sub(python_block("from openai import OpenAI"))
    summary = w.sub(python_block("r = client.chat.completions.create(model=\"appliance-summarize\""))
    done = _python(w, chat + "\nprint('-- summary --')\n" + summary)
    chat_out, summary_out = done.stdout.split("-- summary --")
    assert "'source': 'en/administration.html'" in chat_out and summary_out.strip(), done.stdout
    upload = _python(w, w.sub(python_block("import httpx")) + "\nprint(json.dumps(report))", "import json\n")
    assert json.loads(upload.stdout.strip().splitlines()[-1])["counts"]["new"] == 1, upload.stdout


def _python(w: Workspace, code: str, prefix: str = "") -> subprocess.CompletedProcess:
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", prefix + code], cwd=w.root,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def test_a_case_fails_when_its_command_fails(ws):
    with pytest.raises(AssertionError, match=r"\$ appliance docs remove nosuch"):
        run_case(ws, "appliance docs remove nosuch/file.md", Case([SAME], lambda w, r: None))


def test_workspace_is_laid_out_like_a_checkout(ws):
    assert (ws.root / "knowledge" / "data" / "sample" / "qa.jsonl").exists()
    assert Path(shutil.which("appliance", path=ws.env["PATH"])).parent == ws.root / ".venv" / "bin"
