"""The TPOT target: the step cost line is learned from observed steps, and the scheduler gives
prompts only the tokens that fit the target, never starving them or the decoders."""

from appliance.engine.kvcache import KVCache
from appliance.engine.pacing import MIN_PREFILL, StepPacer
from appliance.engine.scheduler import Scheduler, SchedulerConfig
from appliance.engine.sequence import SamplingParams, Sequence

from .test_scheduler import FakeMemory, run_step


def learned(target_s, fixed=0.02, per_token=0.003):
    pacer = StepPacer(target_s)
    for n in (1, 8, 64, 200, 16, 4, 128):
        pacer.observe(n, fixed + per_token * n)
    return pacer


def test_cost_line_and_budget():
    pacer = learned(0.2)
    fixed, per_token = pacer.cost()
    assert abs(fixed - 0.02) < 1e-9 and abs(per_token - 0.003) < 1e-9
    assert pacer.budget(decoders=4, n_batch=512) == 60          # (0.2 - 0.02) / 0.003
    assert pacer.budget(decoders=100, n_batch=512) == 100 + MIN_PREFILL  # decoders alone are over it
    assert StepPacer(0).budget(4, 512) == 512                    # off: full batches
    assert StepPacer(0.05).cost() is None                        # nothing measured yet


def test_prefill_is_paced_while_decoders_run():
    cfg = SchedulerConfig(max_running=4, n_batch=512, prefill_chunk=512, gen_reserve=8, tpot_target_s=0.2)
    s = Scheduler(KVCache(4000, 4, FakeMemory()), cfg)
    s.pacer = learned(0.2)
    reader = Sequence(prompt_tokens=list(range(10)), params=SamplingParams(), max_tokens=50)
    s.add(reader)
    run_step(s)                                                  # the reader is decoding now
    s.add(Sequence(prompt_tokens=list(range(1000, 1900)), params=SamplingParams(), max_tokens=4))
    sizes = []
    for _ in range(5):
        items = run_step(s)
        assert any(i.seq is reader and len(i.tokens) == 1 for i in items)   # the reader never waits
        sizes.append(sum(len(i.tokens) for i in items))
    assert sizes == [60] * 5                                     # 1 decode + 59 prompt tokens each step
