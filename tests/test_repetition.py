"""Answers that do not loop: the loop detector (pure), sampling validation, and the real model."""

from __future__ import annotations

import pytest

from appliance.engine.sequence import SamplingParams, loop_period
from appliance.server.chat import RAG_DRY_MULTIPLIER, rag_sampling

from .engine_helpers import make_engine


def test_loop_period_finds_a_repeated_sentence():
    sentence = list(range(100, 117))  # a 17-token sentence
    assert loop_period([1, 2, 3] + sentence * 3) == 17
    assert loop_period([1, 2, 3] + sentence * 2) == 0  # twice is not yet a loop


def test_loop_period_short_spans_need_more_repeats():
    word = [7, 8, 9, 10]
    assert loop_period(word * 5) == 0      # 20 tokens: could be a short list
    assert loop_period(word * 6) == 4      # 24 tokens of the same 4-token span
    assert loop_period([5] * 30) == 4      # a one-token stutter is caught at the smallest period


def test_loop_period_ignores_ordinary_text():
    text = [3, 9, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5]
    assert loop_period(text) == 0
    assert loop_period([]) == 0 and loop_period([1, 2]) == 0


def test_penalty_ranges_are_checked():
    with pytest.raises(ValueError):
        SamplingParams(frequency_penalty=2.5)
    with pytest.raises(ValueError):
        SamplingParams(repeat_penalty=0)


def test_rag_defaults_do_not_override_an_explicit_choice():
    p = rag_sampling(SamplingParams())
    assert p.dry_multiplier == RAG_DRY_MULTIPLIER and p.loop_guard
    assert rag_sampling(SamplingParams(dry_multiplier=1.5)).dry_multiplier == 1.5
    plain = SamplingParams()
    assert plain.dry_multiplier == 0 and not plain.loop_guard and plain.frequency_penalty == 0


@pytest.fixture(scope="module")
def engine(chat_model_path):
    eng = make_engine(chat_model_path)
    yield eng
    eng.shutdown()


REPEAT = [{"role": "user", "content": "Write the word hello 300 times, separated by spaces, nothing else."}]


def test_loop_guard_ends_a_looping_answer(engine):
    free = engine.submit(REPEAT, SamplingParams(max_tokens=120, temperature=0)).result(timeout=120)
    assert free.finish_reason == "length" and free.text.lower().count("hello") > 40, \
        f"control: the model must loop here: {free.text[:200]!r}"
    guarded = engine.submit(REPEAT, SamplingParams(max_tokens=120, temperature=0, loop_guard=True)).result(120)
    assert guarded.finish_reason == "stop" and guarded.stats.generated_tokens < 60


def test_penalties_and_dry_change_a_looping_answer(engine):
    plain = engine.submit(REPEAT, SamplingParams(max_tokens=60, temperature=0)).result(timeout=120)
    dry = engine.submit(REPEAT, SamplingParams(max_tokens=60, temperature=0, dry_multiplier=0.8)).result(120)
    freq = engine.submit(REPEAT, SamplingParams(max_tokens=60, temperature=0, frequency_penalty=1.0)).result(120)
    assert dry.text != plain.text and freq.text != plain.text
    assert len(set(dry.text.split())) > len(set(plain.text.split()))
