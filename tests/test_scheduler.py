"""Scheduler policy with a fake runner: batching order, chunked prefill, admission, preemption."""

import pytest

from appliance.engine.errors import EngineOverloaded
from appliance.engine.kvcache import KVCache
from appliance.engine.scheduler import Scheduler, SchedulerConfig
from appliance.engine.sequence import SamplingParams, Sequence, Status


class FakeMemory:
    def seq_cp(self, *a):
        pass

    def seq_rm(self, *a):
        pass


def make(n_cells=1000, n_slots=8, **kw):
    cfg = SchedulerConfig(**{"max_running": n_slots, "n_batch": 64, "prefill_chunk": 16,
                             "gen_reserve": 8, **kw})
    return Scheduler(KVCache(n_cells, n_slots, FakeMemory()), cfg)


def seq(tokens, max_tokens=4, user="u"):
    return Sequence(prompt_tokens=list(tokens), params=SamplingParams(user=user), max_tokens=max_tokens)


def run_step(s, next_token=7):
    """Commit the batch and 'sample' a fixed token for every item with logits."""
    items = s.schedule()
    s.committed(items)
    for it in items:
        if it.logits:
            s.append_token(it.seq, next_token)
            if len(it.seq.output_tokens) >= it.seq.max_tokens:
                s.finish(it.seq, "length")
    return items


def test_decode_tokens_come_before_prefill_chunks():
    s = make()
    a = seq(range(10))
    s.add(a)
    run_step(s)  # a prefilled (10 <= chunk)
    b = seq(range(100, 140))
    s.add(b)
    items = s.schedule()
    assert items[0].seq is a and len(items[0].tokens) == 1
    assert items[1].seq is b and len(items[1].tokens) == 16  # chunked prefill
    assert not items[1].logits


def test_long_prompt_does_not_stall_decoding():
    s = make()
    a = seq(range(5), max_tokens=50)
    s.add(a)
    run_step(s)
    s.add(seq(range(200, 400)))
    for _ in range(5):
        items = run_step(s)
        assert any(i.seq is a and len(i.tokens) == 1 for i in items)


def test_prefix_shared_on_admission():
    s = make()
    sys_prompt = list(range(50))
    a = seq(sys_prompt + [1000, 1001], max_tokens=1)
    s.add(a)
    while not a.is_finished:
        run_step(s)
    b = seq(sys_prompt + [2000, 2001])
    s.add(b)
    s.schedule()
    assert b.n_cached_prompt == 50 and b.n_computed == 50
    assert s.prefix_hit_tokens == 50


def test_no_prefix_cache_mode_releases_finished():
    s = make(prefix_cache=False)
    a = seq(range(20), max_tokens=1)
    s.add(a)
    while not a.is_finished:
        run_step(s)
    assert s.cache.used_cells == 0
    b = seq(range(20))
    s.add(b)
    s.schedule()
    assert b.n_cached_prompt == 0


def test_queue_limits_raise_overloaded():
    s = make(max_queue=2, per_user_queue=1)
    s.add(seq([1], user="a"))
    with pytest.raises(EngineOverloaded) as e:
        s.add(seq([2], user="a"))
    assert e.value.retry_after >= 1
    s.add(seq([3], user="b"))
    with pytest.raises(EngineOverloaded):
        s.add(seq([4], user="c"))


def test_admission_waits_for_kv_room():
    s = make(n_cells=60, gen_reserve=20)
    a, b = seq(range(30), max_tokens=20), seq(range(100, 130), max_tokens=20)
    s.add(a)
    s.add(b)
    s.schedule()
    assert a.status is Status.RUNNING and b.status is Status.WAITING


def test_preemption_under_memory_pressure_everything_finishes():
    s = make(n_cells=48, gen_reserve=0, n_slots=4)
    seqs = [seq(range(i * 100, i * 100 + 10), max_tokens=12) for i in range(4)]
    for q in seqs:
        s.add(q)
    for _ in range(500):
        if not s.has_work():
            break
        run_step(s)
    assert all(q.finish_reason == "length" for q in seqs)
    assert sum(q.preemptions for q in seqs) > 0
    # finished sequences stay as cached prefixes; evicting them empties the ledger
    while s.cache.evict_one():
        pass
    assert s.cache.used_cells == 0


def test_cancelled_sequence_frees_cells_next_step():
    s = make()
    a = seq(range(10), max_tokens=100)
    s.add(a)
    run_step(s)
    used = s.cache.used_cells
    assert used == 10
    a.cancelled = True
    s.schedule()
    assert a.finish_reason == "cancelled" and s.cache.used_cells == 0


def test_sequential_mode_runs_one_at_a_time():
    s = make(max_running=1)
    a, b = seq(range(5)), seq(range(10, 15))
    s.add(a)
    s.add(b)
    items = s.schedule()
    assert {i.seq.id for i in items} == {a.id}


def test_single_slot_reuses_its_cached_prefix():
    s = make(n_slots=1, max_running=1)
    a = seq(list(range(30)) + [500], max_tokens=2)
    s.add(a)
    while not a.is_finished:
        run_step(s)
    b = seq(list(range(30)) + [600], max_tokens=2)
    s.add(b)
    s.schedule()
    assert b.status is Status.RUNNING and b.n_cached_prompt == 30
    while not b.is_finished:
        run_step(s)
    assert s.cache.live_cells() == 0


def test_background_requests_wait_behind_interactive_ones_and_keep_slots_free():
    s = make(n_slots=4)
    batch = [Sequence(prompt_tokens=[100 + i] * 10, params=SamplingParams(user="batch", priority=1), max_tokens=50)
             for i in range(6)]
    for b in batch:
        s.add(b)
    run_step(s)
    assert sum(1 for r in s.running if r.params.priority) == 2  # half the slots, not all four
    user = seq(range(20), user="alice")
    s.add(user)  # arrives after six background requests
    run_step(s)
    assert user in s.running  # admitted before the four background ones still waiting
    assert all(b.status is Status.WAITING for b in batch[2:])
    s.add(seq(range(300, 330), user="bob"))
    run_step(s)
    assert [r.params.user for r in s.running].count("batch") == 2 and len(s.running) == 4


def test_background_is_preempted_first():
    s = make(n_cells=60, n_slots=4)
    b = Sequence(prompt_tokens=[5] * 20, params=SamplingParams(user="batch", priority=1), max_tokens=40)
    s.add(b)
    run_step(s)
    u = seq(range(20), max_tokens=40, user="alice")
    s.add(u)
    for _ in range(12):
        run_step(s)
    assert b.preemptions >= 1 and u.preemptions == 0
