"""The ONNX Runtime embedding backend: same vectors (within int8), same token counts, chosen
automatically on CPU-only machines, and never mixed with torch vectors in one index."""

import json
import shutil

import numpy as np
import pytest

from knowledge.index.embed import Embedder, choose_backend, embedded_embedding_model_path
from knowledge.index.embed_onnx import OnnxUnsupported, pooling_of
from knowledge.index.kb import KBConfig, KnowledgeBase
from knowledge.ingest.folder import ingest

TEXTS = ["How do I back up the appliance?", "默认情况下服务监听哪个端口？",
         "Visitors must wear a red badge at all times and be escorted in the server room. " * 6]


@pytest.fixture(scope="module")
def both():
    return Embedder(backend="torch"), Embedder(backend="onnx")


def test_onnx_vectors_match_torch_and_count_the_same_tokens(both):
    torch_e, onnx_e = both
    a, b = torch_e.encode(TEXTS), onnx_e.encode(TEXTS)
    assert a.shape == b.shape == (3, 384)
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-4)
    assert (a * b).sum(axis=1).min() > 0.97  # int8 per-channel weights; an fp32 export gives 1.0
    assert onnx_e.count_tokens_batch(TEXTS) == torch_e.count_tokens_batch(TEXTS)
    assert onnx_e.model_id == torch_e.model_id + ":onnx-int8"
    # Order and batching do not change a text's vector (batches are sorted by length inside).
    again = onnx_e.encode(list(reversed(TEXTS)))[::-1]
    assert np.allclose(again, b, atol=1e-5)


def test_auto_picks_onnx_without_a_gpu_and_torch_for_other_models(tmp_path, monkeypatch):
    model = embedded_embedding_model_path()
    monkeypatch.setattr("knowledge.index.embed.has_nvidia_gpu", lambda: False)
    assert choose_backend("auto", model) == "onnx"
    assert choose_backend("auto", model, device="cuda") == "torch"
    monkeypatch.setattr("knowledge.index.embed.has_nvidia_gpu", lambda: True)
    assert choose_backend("auto", model) == "torch"
    # A model whose pooling the ONNX path does not implement stays on torch (and says why if forced).
    odd = tmp_path / "odd"
    shutil.copytree(model, odd)
    cfg = json.loads((odd / "1_Pooling" / "config.json").read_text())
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    (odd / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setattr("knowledge.index.embed.has_nvidia_gpu", lambda: False)
    assert choose_backend("auto", odd) == "torch"
    with pytest.raises(OnnxUnsupported, match="pooling"):
        pooling_of(odd)


def test_an_index_built_on_torch_keeps_torch_under_auto(tmp_path, sample_docs, monkeypatch):
    """An upgrade that makes ONNX the CPU default must not force a re-index of an existing index."""
    monkeypatch.setattr("knowledge.index.embed.has_nvidia_gpu", lambda: False)
    kb = KnowledgeBase(tmp_path, KBConfig(embed_backend="torch"))
    ingest(kb, sample_docs / "en")
    n = kb.store.count()
    kb.close()
    kb = KnowledgeBase(tmp_path, KBConfig(embed_backend="auto"))
    assert kb.embedder.backend == "torch" and kb.store.count() == n
    kb.close()
    fresh = KnowledgeBase(tmp_path / "fresh", KBConfig(embed_backend="auto"))
    assert fresh.embedder.backend == "onnx"
    fresh.close()
