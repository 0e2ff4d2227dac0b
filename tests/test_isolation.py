"""Teacher-forced isolation: a sequence decoded inside a batch of 8 sees what it sees alone."""

import pytest

from appliance.engine.kvcache import KVCache
from appliance.engine.llama import ContextConfig, LlamaRunner
from appliance.engine.sequence import BatchItem

from .engine_helpers import SYSTEM_PROMPT, kl

KL_BOUND = 0.05
PROMPTS = [
    "The quick brown fox jumps over the lazy dog because",
    "In 1969 the first humans landed on the Moon, and",
    "To reset your VPN password, open the settings page and",
    "Photosynthesis converts light energy into chemical energy by",
    "A binary search tree keeps its keys sorted so that",
    "The recipe calls for two cups of flour, one egg and",
    "Kubernetes schedules pods onto nodes according to",
    "My favourite programming language is Python since",
]


@pytest.fixture(scope="module")
def runner(chat_model_path):
    with LlamaRunner(ContextConfig(model_path=chat_model_path, n_ctx=2048, n_seq_max=8,
                                   n_threads=2)) as r:
        yield r


def per_token_items(slot, tokens, start=0, pos_shift=0):
    """One item per token so every position yields logits."""
    return [BatchItem(slot=slot, tokens=[t], start=start + i + pos_shift, logits=True)
            for i, t in enumerate(tokens)]


def logits_of(runner, items):
    assert runner.decode(items) == 0
    return [runner.logits(it.row) for it in items]


def alone(runner, tokens):
    runner.clear_memory()
    return logits_of(runner, per_token_items(0, tokens))


def batched(runner, token_lists, one_sequence=False):
    """All lists in one batch; `one_sequence` reproduces a seq_id bug (every request on seq 0)."""
    runner.clear_memory()
    items, spans, offset = [], [], 0
    for i, toks in enumerate(token_lists):
        its = per_token_items(0 if one_sequence else i, toks, start=offset if one_sequence else 0)
        spans.append((len(items), len(its)))
        items += its
        offset += len(toks)
    out = logits_of(runner, items)
    return [out[s:s + n] for s, n in spans]


def max_kl(a, b):
    return max(kl(x, y) for x, y in zip(a, b, strict=True))


def test_batch_of_8_matches_alone(runner):
    token_lists = [runner.tokenize(p) for p in PROMPTS]
    solo = [alone(runner, t) for t in token_lists]
    together = batched(runner, token_lists)
    worst = max(max_kl(s, b) for s, b in zip(solo, together, strict=True))
    assert worst < KL_BOUND, worst


def test_negative_control_wrong_seq_id_fails(runner):
    token_lists = [runner.tokenize(p) for p in PROMPTS]
    solo = [alone(runner, t) for t in token_lists]
    # Every prompt on seq 0: they attend to each other, as a scheduler bug would cause.
    mixed = batched(runner, token_lists, one_sequence=True)
    worst = max(max_kl(s, b) for s, b in zip(solo, mixed, strict=True))
    assert worst > 10 * KL_BOUND, worst


def test_shared_prefix_matches_cold_run(runner):
    """seq_cp of a 300+ token system prompt into a second slot gives the cold distributions."""
    sys_tokens = runner.tokenize(SYSTEM_PROMPT)
    assert len(sys_tokens) >= 300
    question = runner.tokenize(" Question: how do I book travel?", add_special=False)
    runner.clear_memory()
    kv = KVCache(runner.n_ctx, runner.n_seq_max, memory=runner)
    a = kv.allocate()
    assert runner.decode([BatchItem(slot=a, tokens=sys_tokens, start=0, logits=False)]) == 0
    kv.append(a, sys_tokens)
    b = kv.allocate()
    src, n = kv.match(sys_tokens + question)
    assert (src, n) == (a, len(sys_tokens))
    kv.share(src, b, n)
    # llama.cpp agrees: slot b now sees positions 0..n-1 without any decode of its own.
    assert runner.seq_pos_range(b) == (0, n - 1)
    warm = logits_of(runner, per_token_items(b, question, start=n))
    assert kv.used_cells == len(sys_tokens)  # shared cells counted once (question not yet appended)
    cold = alone(runner, sys_tokens + question)[len(sys_tokens):]
    assert max_kl(cold, warm) < KL_BOUND
