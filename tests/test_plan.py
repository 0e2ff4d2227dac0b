"""The memory ledger: hand-computed ledgers, the reference arithmetic, and agreement with llama.cpp."""

import pytest
from typer.testing import CliRunner

from appliance.cli import app
from appliance.engine.llama import ContextConfig, measure_buffers
from appliance.models.gguf import read_gguf
from appliance.models.metadata import model_info
from appliance.plan import OVERHEAD_BYTES, Shape, estimate_compute, parse_size, plan

GiB = 2**30


def test_reference_arithmetic_13b():
    fp16 = Shape("13B", 13_000_000_000, 40, 40, 128, "FP16")
    int4 = Shape("13B", 13_000_000_000, 40, 40, 128, "INT4")
    assert fp16.weights_bytes == 26_000_000_000 and int4.weights_bytes == 6_500_000_000
    # 2 × 40 layers × 40 heads × 128 × 2 bytes = 819,200 bytes: "several hundred KB per token".
    assert fp16.kv_bytes_per_token("f16") == 819_200


def test_gqa_ledger_by_hand():
    # Llama-3-8B-like: 32 layers, 8 KV heads of 128 → 2·32·8·128·2 = 131,072 B/token.
    s = Shape("8B", 8_000_000_000, 32, 8, 128, "Q4_K_M", n_head=32, n_vocab=128_256)
    ledger = plan(s, 24 * GiB, context=8192, concurrency=4, kv_type="f16", compute_bytes=500 * 2**20)
    assert ledger.kv_bytes_per_token == 131_072
    assert ledger.kv_bytes_per_seq == 131_072 * 8192 == 1 * GiB
    assert ledger.kv_bytes_total == 4 * GiB
    assert ledger.weights_bytes == int(8e9 * 4.85 / 8)
    assert ledger.total_bytes == ledger.weights_bytes + 4 * GiB + 500 * 2**20 + OVERHEAD_BYTES
    assert ledger.fits and ledger.free_bytes == 24 * GiB - ledger.total_bytes
    room = 24 * GiB - ledger.weights_bytes - 500 * 2**20 - OVERHEAD_BYTES
    assert ledger.max_concurrency == room // GiB
    assert ledger.max_context == room // (4 * 131_072)


def test_non_gqa_q8_kv_by_hand_and_does_not_fit():
    s = Shape("13B", 13_000_000_000, 40, 40, 128, "Q4_K_M")
    per_token = round(40 * 40 * 256 * 34 / 32)
    ledger = plan(s, 24 * GiB, context=4096, concurrency=16, kv_type="q8_0", compute_bytes=0)
    assert ledger.kv_bytes_per_token == per_token == 435_200
    assert not ledger.fits and ledger.free_bytes < 0
    assert any("lower concurrency" in a for a in ledger.advice)
    assert ledger.max_concurrency * 4096 * per_token <= 24 * GiB - ledger.weights_bytes - OVERHEAD_BYTES
    tiny = plan(s, 4 * GiB, 4096, 1)
    assert not tiny.fits and "weights alone" in tiny.advice[0]


def test_parse_size():
    assert parse_size("24GB") == 24_000_000_000 and parse_size("24GiB") == 24 * GiB
    assert parse_size("13B") == 13_000_000_000 and parse_size("6.5G") == 6_500_000_000


@pytest.mark.parametrize("n_ctx", [512, 2048, 8192])
def test_ledger_agrees_with_llama_cpp(chat_model_path, n_ctx):
    info = model_info(read_gguf(chat_model_path))
    shape = Shape("smollm2", info.n_params, info.n_layer, info.n_head_kv, info.head_dim_k, info.quant,
                  n_head=info.n_head, n_embd=info.n_embd, n_vocab=info.n_vocab, weights_bytes=info.weights_bytes)
    got = measure_buffers(ContextConfig(model_path=chat_model_path, n_ctx=n_ctx, n_seq_max=4))
    predicted_kv = shape.kv_bytes_per_token("f16") * n_ctx
    assert abs(got["kv"] - predicted_kv) <= 0.10 * got["kv"]
    assert abs(got["compute"] - estimate_compute(shape, n_ctx)) <= 0.10 * got["compute"]


def test_plan_cli_json_and_described(data_dir):
    runner = CliRunner()
    r = runner.invoke(app, ["plan", "--params", "13B", "--layers", "40", "--kv-heads", "40", "--head-dim", "128",
                            "--quant", "Q4_K_M", "--vram", "24GB", "--ctx", "4096", "--concurrency", "16", "--json"])
    import json

    ledger = json.loads(r.output)
    for key in ("weights_bytes", "kv_bytes_per_token", "kv_bytes_total", "compute_bytes", "free_bytes",
                "max_concurrency", "max_context"):
        assert key in ledger
    assert ledger["fits"] is False
    r = runner.invoke(app, ["plan", "--ctx", "1024", "--concurrency", "2", "--vram", "8GB"], env={"COLUMNS": "150"})
    assert r.exit_code == 0 and "measured (llama.cpp)" in r.output
