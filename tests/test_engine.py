"""The real engine on the embedded SmolLM2: prefix cache, overload, tight context, cancel, stops."""

import asyncio
import gc

import pytest

from appliance.engine.errors import EngineOverloaded, PromptTooLong
from appliance.engine.sequence import SamplingParams, TextStream

from .engine_helpers import SYSTEM_PROMPT, make_engine

GREEDY = dict(temperature=0.0)


def chat(question, system=SYSTEM_PROMPT):
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def assert_idle(engine):
    assert engine.wait_idle(30)
    snap = engine.snapshot()
    assert snap["running"] == 0 and snap["waiting"] == 0
    assert snap["kv_cells_live"] == 0
    return snap


def assert_memory_matches_ledger(engine):
    """llama.cpp's own positions agree with the ledger for every slot."""
    for slot in range(engine.runner.n_seq_max):
        held = engine.cache._slots.get(slot)
        lo, hi = engine.runner.seq_pos_range(slot)
        if held is None or not held.tokens:
            assert hi == -1, f"slot {slot} holds positions the ledger forgot"
        else:
            assert (lo, hi) == (0, len(held.tokens) - 1)


@pytest.fixture(scope="module")
def engine(chat_model_path):
    eng = make_engine(chat_model_path)
    yield eng
    eng.shutdown()


def test_generates_and_reports_stats(engine):
    res = engine.submit(chat("How do I file an expense report?"),
                        SamplingParams(max_tokens=24, **GREEDY)).result(timeout=60)
    assert res.text.strip()
    assert res.finish_reason in ("stop", "length")
    s = res.stats
    assert s.prompt_tokens > 300 and 0 < s.generated_tokens <= 24
    assert s.ttft is not None and s.ttft > 0 and s.queue_time >= 0


def test_prefix_cache_hit_on_shared_system_prompt(engine):
    n_sys = len(engine.tokenize_messages([{"role": "system", "content": SYSTEM_PROMPT}]))
    engine.submit(chat("Who handles laptops?"), SamplingParams(max_tokens=4, **GREEDY)).result(60)
    res = engine.submit(chat("Who handles leave requests?"),
                        SamplingParams(max_tokens=4, **GREEDY)).result(60)
    # The rendered system turn is a prefix of both prompts (its end tokens may differ by one).
    assert res.stats.cached_prompt_tokens >= n_sys - 2
    assert res.stats.cached_prompt_tokens >= 300
    snap = assert_idle(engine)
    assert snap["prefix_hit_rate"] > 0
    assert_memory_matches_ledger(engine)


def test_stop_string_and_max_tokens(engine):
    params = SamplingParams(max_tokens=40, **GREEDY)
    base = engine.submit(chat("Describe the VPN setup steps in detail."), params).result(60)
    words = base.text.split()
    assert len(words) > 4, base.text
    stop = " " + words[3]
    cut = base.text[:base.text.index(stop)]
    res = engine.submit(chat("Describe the VPN setup steps in detail."),
                        SamplingParams(max_tokens=40, stop=[stop], **GREEDY))
    deltas = list(res)
    out = res.result()
    assert out.finish_reason == "stop" and out.text == cut
    assert "".join(deltas) == cut  # nothing of the stop string leaked into the stream
    short = engine.submit(chat("Describe the VPN setup steps in detail."),
                          SamplingParams(max_tokens=3, **GREEDY)).result(60)
    assert short.finish_reason == "length" and short.stats.generated_tokens == 3


def test_chinese_streaming_is_utf8_safe(engine):
    # Real tokenizer: some CJK characters are split over several byte tokens.
    text = "知识库问答服务器，完全离线运行。"
    tokens = engine.runner.tokenize(text, add_special=False)
    pieces = [engine.runner.piece(t) for t in tokens]
    assert any(_not_utf8(p) for p in pieces), "expected at least one split character"
    stream = TextStream([])
    out = [stream.feed(p) for p in pieces] + [stream.flush()]
    assert "".join(out) == text and not any("\ufffd" in o for o in out)
    # And through the engine: a Chinese answer streams without replacement characters.
    req = engine.submit([{"role": "user", "content": "用中文说你好。"}],
                        SamplingParams(max_tokens=24, seed=1, **GREEDY))
    deltas = list(req)
    assert deltas and not any("\ufffd" in d for d in deltas)


def _not_utf8(b):
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def test_cancel_mid_stream_frees_cells(engine):
    req = engine.submit(chat("Write a long story about printers."), SamplingParams(max_tokens=200, **GREEDY))
    it = iter(req)
    next(it)
    next(it)
    req.cancel()
    res = req.result(60)
    assert res.finish_reason == "cancelled"
    assert_idle(engine)
    assert_memory_matches_ledger(engine)


def test_dropped_consumer_cancels(engine):
    req = engine.submit(chat("Write a long poem about VPNs."), SamplingParams(max_tokens=300, **GREEDY))
    seq = req._seq
    del req
    gc.collect()
    assert seq.cancelled
    assert_idle(engine)
    assert seq.finish_reason == "cancelled"


def test_async_iteration(engine):
    async def run():
        req = engine.submit(chat("Name one printer brand."), SamplingParams(max_tokens=8, **GREEDY))
        parts = [d async for d in req]
        return parts, req.result()

    parts, res = asyncio.run(run())
    assert "".join(parts) == res.text and res.stats.generated_tokens > 0


def test_prompt_too_long_before_any_work(engine):
    before = engine.snapshot()["steps"]
    with pytest.raises(PromptTooLong):
        engine.submit(list(range(100, 100 + engine.runner.n_ctx)), SamplingParams(max_tokens=4))
    assert engine.snapshot()["steps"] == before


def test_concurrent_requests_batch_together(engine):
    reqs = [engine.submit(chat(f"Question number {i}: who fixes printers?"),
                          SamplingParams(max_tokens=16, **GREEDY)) for i in range(8)]
    results = [r.result(120) for r in reqs]
    assert all(r.stats.generated_tokens > 0 for r in results)
    snap = assert_idle(engine)
    # Eight requests shared decode steps: far fewer steps than 8 × tokens.
    assert snap["batch_tokens"] / snap["steps"] > 1.5
    # Some step decoded as many sequences as the engine has slots (eight requests, fewer slots).
    assert snap["batch_peak"] == engine.runner.n_seq_max


def test_overload_rejects_extra_and_finishes_admitted(chat_model_path):
    with make_engine(chat_model_path, n_seq_max=2, max_queue=3, per_user_queue=3) as eng:
        admitted, rejected = [], 0
        for i in range(12):
            try:
                admitted.append(eng.submit(chat(f"Tell me about tool {i}."),
                                           SamplingParams(max_tokens=16, **GREEDY)))
            except EngineOverloaded as e:
                assert e.retry_after > 0
                rejected += 1
        assert rejected > 0 and admitted
        assert all(r.result(120).finish_reason in ("stop", "length") for r in admitted)
        assert_idle(eng)
        assert eng.snapshot()["requests_rejected"] == rejected
        while eng.cache.evict_one():
            pass
        assert eng.cache.used_cells == 0
        assert_memory_matches_ledger(eng)


def test_tight_context_preempts_and_finishes(chat_model_path):
    # 256 cells; 4 sequences of ~30 prompt + 100 generated tokens each cannot all fit at once.
    with make_engine(chat_model_path, n_ctx=256, n_seq_max=4, gen_reserve=0, prefix_cache=False) as eng:
        reqs = [eng.submit([{"role": "user", "content": f"Count from one to one hundred, run {i}."}],
                           SamplingParams(max_tokens=100, temperature=0.8, seed=i, ignore_eos=True))
                for i in range(4)]
        results = [r.result(300) for r in reqs]
        assert all(r.finish_reason == "length" and r.stats.generated_tokens == 100 for r in results)
        snap = assert_idle(eng)
        assert snap["preemptions"] > 0
        assert eng.cache.used_cells == 0
        assert_memory_matches_ledger(eng)


def test_llama_no_kv_slot_is_recovered(chat_model_path):
    """llama_decode returning 1 (memory the ledger did not know of is full) never crashes."""
    from appliance.engine.sequence import BatchItem

    with make_engine(chat_model_path, n_ctx=256, n_seq_max=4, gen_reserve=0, prefix_cache=False) as eng:
        with eng._lock:  # fill slot 3 behind the ledger's back, leaving ~70 free cells
            junk = list(range(1000, 1186))
            assert eng.runner.decode([BatchItem(slot=3, tokens=junk, start=0, logits=False)]) == 0
        reqs = [eng.submit([{"role": "user", "content": f"Count to fifty, run {i}."}],
                           SamplingParams(max_tokens=40, ignore_eos=True, temperature=0.5, seed=i))
                for i in range(2)]
        results = [r.result(300) for r in reqs]
        assert all(r.finish_reason == "length" for r in results)
        snap = assert_idle(eng)
        assert snap["no_kv_slot"] > 0
        with eng._lock:
            eng.runner.seq_rm(3, -1, -1)
        assert eng.cache.used_cells == 0
        assert_memory_matches_ledger(eng)


def test_vocabulary_only_load_counts_prompts_like_the_engine(engine, chat_model_path):
    """The remote backend's local prompt counting (engine.remote_tokenizer = a GGUF) loads no weights
    and gives the engine's own prompt tokens."""
    from appliance.engine.prompt import PromptTokenizer

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "默认端口是多少？ Port?"}]
    local = PromptTokenizer.vocab_only(chat_model_path)
    assert local.runner._ctx is None  # no context, no KV cache
    assert local.tokenize_messages(messages) == engine.tokenize_messages(messages)
    local.runner.close()
