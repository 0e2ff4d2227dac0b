"""GGUF metadata, the registry (add/list/verify/remove/use), and clear errors on bad files."""

import shutil

import pytest

from appliance.errors import ModelError
from appliance.models.gguf import read_gguf
from appliance.models.metadata import model_info
from appliance.models.registry import EMBEDDED_CHAT_NAME, ModelRegistry


def test_embedded_metadata(chat_model_path):
    info = model_info(read_gguf(chat_model_path))
    assert info.architecture == "llama" and info.quant == "Q4_1"
    assert info.n_layer == 30 and info.n_head == 9 and info.n_head_kv == 3
    assert info.head_dim_k == 64 and info.has_chat_template
    assert 130e6 < info.n_params < 140e6
    # 2 (K and V) × 30 layers × 3 KV heads × 64 dims × 2 bytes
    assert info.kv_bytes_per_token("f16") == 2 * 30 * 3 * 64 * 2
    assert info.kv_bytes_per_token("q8_0") == round(2 * 30 * 3 * 64 * 34 / 32)


def test_embedded_registered_as_default(data_dir):
    reg = ModelRegistry(data_dir)
    entries = reg.list()
    assert entries[0].name == EMBEDDED_CHAT_NAME and entries[0].embedded
    assert reg.default_name() == EMBEDDED_CHAT_NAME
    assert len(entries[0].sha256) == 64


def test_add_verify_use_remove(data_dir, chat_model_path, tmp_path):
    copy = tmp_path / "My-Model.Q4_1.gguf"
    shutil.copy(chat_model_path, copy)
    reg = ModelRegistry(data_dir)
    entry = reg.add(copy)
    assert entry.name == "my-model.q4_1"
    with pytest.raises(ModelError, match="already registered"):
        reg.add(copy)
    assert all(ok for _, ok, _ in reg.verify())
    reg.use(entry.name)
    assert reg.resolve("").name == entry.name
    with copy.open("r+b") as fh:  # flip a byte inside the weights
        fh.seek(copy.stat().st_size - 10)
        fh.write(b"\x00\x01\x02")
    (name, ok, msg), = reg.verify(entry.name)
    assert not ok and "sha256" in msg
    reg.remove(entry.name)
    assert reg.default_name() == EMBEDDED_CHAT_NAME


def test_truncated_gguf_refused(data_dir, chat_model_path, tmp_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(chat_model_path.read_bytes()[: 20_000_000])
    with pytest.raises(ModelError, match="truncated"):
        ModelRegistry(data_dir).add(cut)


def test_not_a_gguf_refused(data_dir, tmp_path):
    bogus = tmp_path / "weights.gguf"
    bogus.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(ModelError, match="not a GGUF"):
        ModelRegistry(data_dir).add(bogus)
    with pytest.raises(ModelError, match="not found"):
        ModelRegistry(data_dir).add(tmp_path / "missing.gguf")
