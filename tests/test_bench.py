"""`appliance bench` against a short run of a real server: 2 users, 2 requests each."""

import json
import subprocess

from typer.testing import CliRunner

from appliance.cli import app

from .conftest import ROOT, venv_python


def test_bench_short_run_writes_consistent_report(data_dir, tmp_path):
    out = tmp_path / "bench"
    result = CliRunner().invoke(app, ["bench", "--workload", "short", "--concurrency", "2", "--requests", "2",
                                      "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    (run,) = data["runs"]
    s = run["summary"]
    assert s["requests"] == 4 and s["ok"] == 4 and s["errors"] == 0
    assert s["out_tokens"] > 0 and s["out_tok_s"] > 0 and s["ttft_p50_ms"] > 0 and s["wall_s"] > 0
    assert abs(s["out_tok_s"] * s["wall_s"] - s["out_tokens"]) <= 0.02 * s["out_tokens"] + 1
    assert sum(r["out_tokens"] for r in run["records"]) == s["out_tokens"]
    assert s["peak_running"] >= 1  # read from the server's /metrics
    assert data["meta"]["rates"]["prefill_tok_s"] > 0 and s["ceiling_tok_s"] > 0 and s["ceiling_fraction"] > 0
    report = (out / "report.md").read_text()
    assert "this machine's rates through our runner" in report
    assert "| appliance | 2 |" in report and "cores" in report
    for png in ("throughput.png", "ttft.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_bench_against_any_openai_server_by_url(data_dir, tmp_path):
    from .server_helpers import start_server

    server = start_server(tmp_path / "srv", "--no-ui", env={"APPLIANCE_KNOWLEDGE__SAMPLE_DOCS": "false"})
    try:
        out = tmp_path / "bench"
        result = CliRunner().invoke(app, ["bench", "--url", server.url + "/v1", "--model", "smollm2-135m",
                                          "--key", server.key, "--workload", "short", "--concurrency", "1",
                                          "--requests", "2", "--out", str(out)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        (run,) = json.loads((out / "results.json").read_text())["runs"]
        assert run["target"] == "smollm2-135m" and run["summary"]["ok"] == 2
        assert "| smollm2-135m | 1 |" in (out / "report.md").read_text()
    finally:
        server.stop()


def test_ceiling_share_arithmetic():
    from appliance.bench.ceiling import Rates

    rates = Rates(prefill_tok_s=300.0, decode_tok_s={1: 100.0, 4: 200.0, 16: 240.0})
    assert abs(rates.decode_at(2) - (100.0 + (200.0 - 100.0) / 3)) < 1e-9 and rates.decode_at(64) == 240.0
    # 600 uncached prompt tokens (2 s) + 400 generated at batch 4 (2 s): 100 tok/s is the ceiling
    share = rates.share(uncached=600, generated=400, batch=4, achieved_tok_s=75.0)
    assert share == {"ceiling_tok_s": 100.0, "ceiling_fraction": 0.75}


def test_ladder_source_rung_serves_the_unquantized_model_first(chat_model_path):
    from appliance.bench.runner import RUNGS, ladder_rungs

    assert ladder_rungs() == RUNGS
    rungs = ladder_rungs(str(chat_model_path))
    name, env = rungs[0]
    assert name == "source Q4_1, sequential"  # the label reads the file's own quantization
    assert env["APPLIANCE_CHAT_MODEL"] == str(chat_model_path)
    assert env["APPLIANCE_ENGINE__CONTINUOUS_BATCHING"] == "false" and rungs[1:] == RUNGS


def _step_script(name: str, out, *args: str) -> dict:
    """Run a step benchmark script with --json; its last line, checked against the file it wrote."""
    done = subprocess.run([venv_python(), str(ROOT / "scripts" / f"bench_{name.replace('-', '_')}.py"), *args,
                           "--json", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert json.loads((out / f"{name}.json").read_text()) == result
    return result


def test_kv_occupancy_script_measures_both_cases(data_dir, tmp_path):
    result = _step_script("kv-occupancy", tmp_path, "--filler", "512", "--repeat", "1")
    assert [r["filler_cells"] for r in result["rows"]] == [0, 512]
    for row in result["rows"]:
        assert row["fresh_tok_s"] > 0 and row["burst_tok_s"] > 0 and row["decode_ms"] > 0


def test_verify_cost_script_times_each_step_size(data_dir, tmp_path):
    result = _step_script("verify-cost", tmp_path, "--rows", "1,3", "--repeat", "2")
    assert set(result["step_ms"]) == {"1", "3"} and all(v > 0 for v in result["step_ms"].values())
    assert result["relative"]["1"] == 1.0


def test_access_benchmark_times_every_side_on_one_index(data_dir, tmp_path):
    out = tmp_path / "access.json"
    subprocess.run([venv_python(), str(ROOT / "scripts" / "bench_access.py"), "--chunks", "40", "--collections", "2",
                    "--queries", "4", "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert result["chunks"] == 40 and result["unfiltered_ratio"] == 1.0
    for side in ("unfiltered", "half", "one"):
        assert result[f"{side}_median_ms"] > 0 and result[f"{side}_p95_ms"] >= result[f"{side}_median_ms"]
