"""Tools nobody here wrote, against our code: schemathesis generates requests from the server's own
OpenAPI schema (as an administrator, as a plain user, and without a key), and bandit reads the
source. Both are pinned in pyproject.toml; their figures are printed (pytest -s) and kept in
test-artifacts/."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .conftest import ROOT
from .server_helpers import start_server

BIN = Path(sys.executable).parent
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("schemathesis"))
    s.cli("users", "add", "reader", "--password-stdin", stdin="reader-password\n").check_returncode()
    s.user_key = s.cli("users", "key", "create", "reader").stdout.strip()
    yield s
    s.stop()


def _schemathesis(server, key: str, tmp: Path) -> dict:
    """One run over every operation with every check (tests/schemathesis.toml names the two exceptions)."""
    r = subprocess.run([str(BIN / "schemathesis"), "--config-file", str(ROOT / "tests" / "schemathesis.toml"),
                        "run", server.url + "/openapi.json", "-H", f"Authorization: Bearer {key}",
                        "--max-examples", "30", "--seed", "7", "--request-timeout", "300", "--no-color",
                        "--report", "junit", "--report-dir", str(tmp)],
                       capture_output=True, text=True, timeout=1200, cwd=tmp)
    cases = re.search(r"(\d+) generated", r.stdout)
    tested = re.search(r"Tested: (\d+)", r.stdout)
    return {"rc": r.returncode, "cases": int(cases.group(1)) if cases else 0,
            "operations": int(tested.group(1)) if tested else 0, "tail": r.stdout[-4000:]}


@pytest.mark.parametrize("who", ["admin", "user"])
def test_schemathesis_finds_no_server_error_and_no_schema_violation(server, tmp_path, who):
    # An administrator's API key, not the command line's token: with that one, /v1/documents/ingest
    # would index whatever folder the generator names, "/" included (it is answered 403 here).
    result = _schemathesis(server, server.key if who == "admin" else server.user_key, tmp_path)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"schemathesis-{who}.json").write_text(json.dumps({k: v for k, v in result.items() if k != "tail"}))
    print(f"schemathesis ({who}): {result['cases']} cases over {result['operations']} operations")
    assert result["rc"] == 0, result["tail"]
    assert result["operations"] == len(_operations(server)) and result["cases"] > 200


def _operations(server) -> list[tuple[str, str, dict]]:
    schema = httpx.get(server.url + "/openapi.json", headers={"Authorization": f"Bearer {server.key}"}).json()
    return [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()]


def test_no_route_answers_without_a_key_except_healthz(server):
    assert httpx.get(server.url + "/openapi.json").status_code == 401
    for path, method, op in _operations(server):
        if path == "/healthz":
            assert "security" not in op
            continue
        assert op.get("security"), (method, path)  # declared, so schemathesis' ignored_auth check covers it
        url = server.url + re.sub(r"\{[^}]+\}", "x", path)
        r = httpx.request(method.upper(), url, json={})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", (method, path, r.text)


def test_bandit_finds_nothing_of_medium_or_high_severity():
    r = subprocess.run([str(BIN / "bandit"), "-r", "appliance", "knowledge", "ui", "scripts", "-q", "-f", "json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    report = json.loads(r.stdout)
    serious = [f"{x['filename']}:{x['line_number']} {x['test_id']} {x['issue_text']}" for x in report["results"]
               if x["issue_severity"] in ("MEDIUM", "HIGH")]
    totals = report["metrics"]["_totals"]
    print(f"bandit: {totals['loc']} lines, high {totals['SEVERITY.HIGH']}, medium {totals['SEVERITY.MEDIUM']}, "
          f"low {totals['SEVERITY.LOW']}")
    assert serious == [], serious
