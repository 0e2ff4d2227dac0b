"""Speculative decoding on the real engine (embedded SmolLM2): same tokens as plain greedy decoding,
drafts counted in the metrics, a cancelled speculating request frees every cell."""

import pytest

from appliance.engine.sequence import SamplingParams

from .engine_helpers import make_engine
from .test_engine import assert_idle, assert_memory_matches_ledger

EXCERPT = ("To reset a forgotten VPN password, open the self-service portal at https://id.example.com, "
           "choose 'Forgot password', enter your employee number, and confirm the code sent to your phone. "
           "The new password must be at least 14 characters long and may not reuse any of the last five.")


def quote_prompt(excerpt=EXCERPT):
    return [{"role": "system", "content": "Answer from the excerpt, quoting it exactly."},
            {"role": "user", "content": f"Excerpt:\n{excerpt}\n\nCopy the excerpt above word for word."}]


@pytest.fixture(scope="module")
def engine(chat_model_path):
    eng = make_engine(chat_model_path, speculative=4, spec_min_output=1)
    yield eng
    eng.shutdown()


def test_speculative_greedy_gives_the_plain_tokens(engine):
    plain = engine.submit(quote_prompt(), SamplingParams(max_tokens=60, temperature=0, speculative=0)).result(120)
    before = engine.snapshot()
    spec = engine.submit(quote_prompt(), SamplingParams(max_tokens=60, temperature=0)).result(120)
    after = engine.snapshot()
    drafted = after["spec_drafted"].get("lookup", 0) - before["spec_drafted"].get("lookup", 0)
    accepted = after["spec_accepted"].get("lookup", 0) - before["spec_accepted"].get("lookup", 0)
    assert drafted > 0 and accepted > 0  # it did speculate, and some drafts were right
    assert spec.text == plain.text
    assert spec.stats.generated_tokens == plain.stats.generated_tokens
    assert_idle(engine)
    assert_memory_matches_ledger(engine)


def test_verify_rows_see_what_single_steps_see(chat_model_path):
    """The logits of a verify step's rows are, row for row, those of decoding the same tokens one
    at a time (up to batch numerics: the isolation test's KL bound). Sampling is then exact too: the
    sampler sees each row's distribution in order, as it would have step by step."""
    from appliance.engine.llama import ContextConfig, LlamaRunner
    from appliance.engine.sequence import BatchItem

    from .engine_helpers import kl
    from .test_isolation import KL_BOUND

    with LlamaRunner(ContextConfig(model_path=chat_model_path, n_ctx=1024, n_seq_max=2, n_threads=2)) as r:
        prompt = r.tokenize("To reset a forgotten VPN password, open the self-service portal and")
        follow = r.tokenize(" choose 'Forgot password', then enter", add_special=False)
        step = []
        assert r.decode([BatchItem(slot=0, tokens=prompt, start=0, logits=False)]) == 0
        for i, tok in enumerate(follow):
            item = BatchItem(slot=0, tokens=[tok], start=len(prompt) + i, logits=True)
            assert r.decode([item]) == 0
            step.append(r.logits(item.row))
        r.seq_rm(0, len(prompt), -1)
        verify = BatchItem(slot=0, tokens=follow, start=len(prompt), logits=True, draft=follow[1:])
        assert r.decode([verify]) == 0
        assert len(verify.rows) == len(follow)
        assert max(kl(a, r.logits(row)) for a, row in zip(step, verify.rows, strict=True)) < KL_BOUND
        # and the rows are not interchangeable: a shifted row is far off
        assert kl(step[0], r.logits(verify.rows[1])) > KL_BOUND


def assert_cancel_frees_every_cell(engine, prompt, max_tokens=300):
    """Cancel a request after two streamed pieces: it ends 'cancelled' and the KV ledger is exact."""
    req = engine.submit(prompt, SamplingParams(max_tokens=max_tokens, temperature=0))
    it = iter(req)
    next(it)
    next(it)
    req.cancel()
    assert req.result(60).finish_reason == "cancelled"
    assert_idle(engine)
    assert_memory_matches_ledger(engine)


def test_cancelled_speculating_request_frees_every_cell(engine):
    assert_cancel_frees_every_cell(engine, quote_prompt(EXCERPT * 3))
