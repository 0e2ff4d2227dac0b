"""Speculative decoding by prompt lookup: the proposer, the acceptance rule, rollback and the
KV ledger (with a fake target), and the per-request policy."""

from appliance.engine.kvcache import KVCache
from appliance.engine.scheduler import Scheduler, SchedulerConfig
from appliance.engine.sequence import SamplingParams, Sequence
from appliance.engine.speculative import SpecConfig, accepted_prefix, new_state, prompt_lookup


class RecordingMemory:
    def __init__(self):
        self.removed = []

    def seq_cp(self, *a):
        pass

    def seq_rm(self, seq, p0, p1):
        self.removed.append((seq, p0, p1))


def make(spec: SpecConfig, n_slots=8):
    memory = RecordingMemory()
    cfg = SchedulerConfig(max_running=n_slots, n_batch=512, prefill_chunk=64, gen_reserve=8, spec=spec)
    return Scheduler(KVCache(1000, n_slots, memory), cfg), memory


def speculating(prompt, max_tokens, spec: SpecConfig, k=None):
    seq = Sequence(prompt_tokens=list(prompt), params=SamplingParams(temperature=0), max_tokens=max_tokens)
    seq.spec = new_state(k, max_tokens, spec)
    return seq


def run(s, target):
    """One engine step with a deterministic fake target: `target(tokens, draft_token)` is the next token.
    Mirrors the engine: pick row by row while the pick confirms the draft, then settle."""
    items = s.schedule()
    s.committed(items)
    for it in items:
        if not it.logits:
            continue
        seq = it.seq
        context = seq.all_tokens[:it.start + len(it.tokens) - len(it.draft)]
        picks = []
        for expected in [*it.draft, None]:
            picks.append(target(context, expected))
            if picks[-1] != expected:
                break
            context = context + [expected]
        if it.draft:
            s.settle_draft(it, accepted_prefix(it.draft, picks))
        for tok in picks:
            s.append_token(seq, tok)
            if len(seq.output_tokens) >= seq.max_tokens:
                s.finish(seq, "length")
                break
    return items


def quoting(source):
    """A target that continues by copying `source`: after token x it says what followed x there."""
    def target(tokens, _expected):
        last = tokens[-1]
        return source[(source.index(last) + 1) % len(source)] if last in source else 0
    return target


def test_prompt_lookup_takes_the_latest_longest_match():
    tokens = [1, 2, 3, 9, 9, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3]
    assert prompt_lookup(tokens, 3) == [4, 5, 6]       # "1 2 3" last seen before 4 5 6
    assert prompt_lookup([5, 6, 7, 5, 6], 4) == [7, 5, 6]
    assert prompt_lookup([1, 2, 3, 4], 4) == []        # the tail occurs nowhere else
    assert prompt_lookup(tokens, 0) == []


def test_accepted_prefix():
    assert accepted_prefix([4, 5, 6], [4, 5, 6, 7]) == 3
    assert accepted_prefix([4, 5, 6], [4, 9]) == 1
    assert accepted_prefix([4, 5, 6], [8]) == 0         # the first draft token rejected
    assert accepted_prefix([], [8]) == 0


def test_speculation_gives_the_plain_tokens_and_keeps_the_ledger_exact():
    source = list(range(100, 140))
    prompt = [1, 2] + source + [3] + source[:3]   # the answer goes on quoting the source
    target = quoting(source)
    plain, _ = make(SpecConfig())
    spec, memory = make(SpecConfig(draft_tokens=4, min_output=1))
    a = speculating(prompt, 20, SpecConfig())
    b = speculating(prompt, 20, spec.cfg.spec)
    plain.add(a)
    spec.add(b)
    steps = {"plain": 0, "spec": 0}
    while not a.is_finished:
        run(plain, target)
        steps["plain"] += 1
    while not b.is_finished:
        run(spec, target)
        steps["spec"] += 1
        if not b.is_finished:   # between steps the ledger holds exactly the computed tokens
            assert spec.cache._slots[b.slot].tokens == b.all_tokens[:b.n_computed]
    assert b.output_tokens == a.output_tokens == source[3:23]
    assert steps["spec"] < steps["plain"] / 2
    assert b.spec.accept_rate == 1.0 and memory.removed == []  # everything drafted was right


def test_a_rejected_draft_is_rolled_back_at_its_position():
    source = list(range(100, 140))
    prompt = [1] + source + [2] + source[:3]
    spec_cfg = SpecConfig(draft_tokens=3, min_output=1)
    s, memory = make(spec_cfg)
    seq = speculating(prompt, 10, spec_cfg)
    s.add(seq)
    run(s, quoting(source))                     # prefill: picks source[3]
    wrong = lambda tokens, expected: 7           # noqa: E731 - a target that disagrees at once
    items = run(s, wrong)
    start = items[0].start
    assert items[0].draft == source[4:7]
    assert memory.removed == [(seq.slot, start + 1, -1)]   # everything after the verified token
    assert seq.output_tokens[-1] == 7 and seq.n_computed == start + 1
    assert s.cache._slots[seq.slot].tokens == seq.all_tokens[:seq.n_computed]


def test_policy_stops_on_low_acceptance_short_answers_and_load():
    cfg = SpecConfig(draft_tokens=4, min_output=32, warmup=8, min_accept=0.5)
    assert new_state(None, 16, cfg) is None                 # a short answer never speculates
    assert new_state(2, 16, cfg).draft_tokens == 2          # unless the request asks for it
    assert new_state(0, 512, cfg) is None                   # a request can turn it off
    assert new_state(None, 512, SpecConfig(draft_tokens=0)) is None
    # Low acceptance: every draft rejected, drafting stops after the warm-up.
    source = list(range(100, 140))
    s, _ = make(cfg)
    seq = speculating([1] + source + [2] + source[:3], 40, cfg)
    s.add(seq)
    quote = quoting(source)
    run(s, quote)

    def contrary(tokens, expected):  # quotes, but never what the draft says
        return quote(tokens, None) if expected is None else expected + 1

    drafted_steps = 0
    for _ in range(10):
        items = run(s, contrary)
        drafted_steps += bool(items and items[0].draft)
    assert seq.spec.off_reason == "low acceptance" and drafted_steps == 2
    # Load: more decoders than max_decoders, no drafts for anyone.
    s, _ = make(cfg)
    seqs = [speculating([i] + source + [2] + source[:3], 40, cfg) for i in range(5)]
    for q in seqs:
        s.add(q)
    run(s, quoting(source))
    assert all(not it.draft for it in run(s, quoting(source)))
    s.finish(seqs[0], "stop")
    assert all(it.draft for it in run(s, quoting(source)))


def test_api_field_maps_to_draft_tokens():
    from appliance.server.wire import ChatRequest

    def draft(value):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        if value != "absent":
            body["speculative"] = value
        return ChatRequest(**body).params("u").speculative

    assert [draft(v) for v in ("absent", True, False, 3)] == [None, None, 0, 3]
    try:
        draft(40)
    except ValueError as e:
        assert "speculative" in str(e)
    else:
        raise AssertionError("40 draft tokens accepted")


def test_draft_length_follows_the_measured_step_cost():
    from appliance.engine.speculative import best_k, expected_tokens

    assert expected_tokens(0.0, 4) == 1.0 and expected_tokens(1.0, 4) == 5.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-9
    memory_bound = lambda n: 0.020 + 0.0001 * n                # noqa: E731 - a GPU: extra rows nearly free
    measured_cpu = {1: 0.0114, 2: 0.0196, 3: 0.0264, 4: 0.0335, 5: 0.0407}.get  # the embedded model, 2 cores
    assert best_k(0.6, 4, 1, memory_bound) == 4
    assert best_k(0.68, 4, 1, measured_cpu) == 0           # each row costs: plain decoding is faster
    assert best_k(0.95, 4, 1, measured_cpu) >= 2            # unless the drafts are nearly always right
    assert best_k(0.6, 4, 16, lambda n: 0.0077 + 0.0033 * n) == 0   # a full batch: drafting slows everyone
    assert best_k(0.54, 4, 1, lambda n: None) == 4          # nothing measured yet: try, and measure
    assert best_k(0.54, 4, 1, {1: 0.0114}.get) == 1         # 2-token steps not measured: try one


def test_policy_judges_each_draft_token_given_the_ones_before():
    """After a refused token the rest of a draft is never tried: the policy's estimate counts only
    tried tokens, so long drafts that are right until one place are not mistaken for poor ones."""
    from appliance.engine.speculative import SpecState, draft_length

    cfg = SpecConfig(draft_tokens=4, warmup=8)
    state = SpecState(draft_tokens=4)
    for _ in range(4):
        state.record(4, 3, cfg)          # three right, the fourth refused, every step
    assert state.accept_rate == 0.75 and state.token_accept == 12 / 16
    state = SpecState(draft_tokens=4)
    for _ in range(4):
        state.record(4, 1, cfg)          # one right, the second refused, the last two never tried
    assert state.accept_rate == 0.25 and state.token_accept == 0.5
    state.record(4, 4, cfg)              # a draft kept whole refuses nothing
    assert state.token_accept == 8 / 12 and state.refused == 4
    # Steps where one draft token pays at a per-token 0.5, but not at the 0.25 share those drafts left.
    state = SpecState(draft_tokens=4)
    for _ in range(4):
        state.record(4, 1, cfg)
    step_time = {1: 0.010, 2: 0.013, 3: 0.016, 4: 0.019, 5: 0.022}.get
    assert draft_length(state, 100, 1, step_time, cfg) == 1


def test_a_costly_draft_model_is_not_worth_drafting():
    from appliance.engine.speculative import best_k

    def step_time(n):
        return 0.010 + 0.0005 * n  # extra rows nearly free, as on a GPU
    assert best_k(0.8, 4, 1, step_time) == 4  # prompt lookup: free drafts pay
    assert best_k(0.8, 4, 1, step_time, draft_cost=lambda k: 0.02 * k) == 0  # each draft token costs two steps


def test_reserved_draft_cells_count_in_the_batch_budget():
    """With a draft model the scheduler reserves draft_k tokens the engine fills later: a prefill
    behind the decoder must leave room for them, or the filled batch exceeds n_batch."""
    spec = SpecConfig(draft_tokens=4, min_output=1, proposer="draft_model")
    s, _ = make(spec)
    s.cfg.n_batch = 64
    s.cfg.prefill_chunk = 64
    s.add(speculating(range(10), 50, spec))
    run(s, lambda ctx, exp: 7)  # prompt done and first token picked: the sequence now decodes
    s.add(speculating(range(100, 300), 50, spec))  # a long prompt waits to be prefilled
    items = s.schedule()
    assert any(i.draft_k for i in items)  # the policy (no step times yet) tries drafting
    assert sum(len(i.tokens) + i.draft_k for i in items) <= 64
