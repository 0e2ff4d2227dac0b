"""Engine counters and histograms: TTFT, TPOT, queue time, tokens, KV cells, prefix hits.

Plain Python so the engine thread can update them cheaply; `snapshot()` returns a dict the
server exports to Prometheus and the admin tab plots.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from dataclasses import dataclass, field

from appliance.engine.sequence import Sequence

# Seconds: fine at the low end (TPOT on a GPU is a few ms), coarse at the top (CPU TTFT).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class Histogram:
    """Cumulative-bucket histogram plus a window of recent values for quantiles."""

    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=1000))

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1
        self.recent.append(value)

    def quantile(self, q: float) -> float | None:
        if not self.recent:
            return None
        values = sorted(self.recent)
        return values[min(len(values) - 1, int(q * len(values)))]

    def snapshot(self) -> dict:
        cumulative, running = [], 0
        for c in self.counts[:-1]:
            running += c
            cumulative.append(running)
        return {"buckets": list(self.buckets), "cumulative": cumulative, "sum": self.total,
                "count": self.count, "p50": self.quantile(0.5), "p95": self.quantile(0.95)}


class EngineMetrics:
    """Everything the engine counts. Updated by the engine thread, read by anyone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ttft = Histogram()
        self.tpot = Histogram()
        self.queue_time = Histogram()
        self.requests: dict[str, int] = {}
        self.generated_tokens = 0
        self.prompt_tokens_computed = 0
        self.prompt_tokens_cached = 0
        self.preemptions = 0
        self.no_kv_slot = 0
        self.rejected = 0
        self.steps = 0
        self.batch_tokens = 0

    def on_step(self, n_tokens: int) -> None:
        with self._lock:
            self.steps += 1
            self.batch_tokens += n_tokens

    def on_finish(self, seq: Sequence) -> None:
        stats = seq.stats()
        with self._lock:
            reason = seq.finish_reason or "unknown"
            self.requests[reason] = self.requests.get(reason, 0) + 1
            self.generated_tokens += stats.generated_tokens
            self.prompt_tokens_cached += stats.cached_prompt_tokens
            self.prompt_tokens_computed += stats.prompt_tokens - stats.cached_prompt_tokens
            self.preemptions += stats.preemptions
            if stats.ttft is not None:
                self.ttft.observe(stats.ttft)
                self.queue_time.observe(stats.queue_time)
            if stats.tpot is not None:
                self.tpot.observe(stats.tpot)

    def on_rejected(self) -> None:
        with self._lock:
            self.rejected += 1

    def snapshot(self) -> dict:
        with self._lock:
            total_prompt = self.prompt_tokens_cached + self.prompt_tokens_computed
            return {
                "requests": dict(self.requests),
                "requests_rejected": self.rejected,
                "generated_tokens": self.generated_tokens,
                "prompt_tokens_computed": self.prompt_tokens_computed,
                "prompt_tokens_cached": self.prompt_tokens_cached,
                "prefix_hit_rate": self.prompt_tokens_cached / total_prompt if total_prompt else 0.0,
                "preemptions": self.preemptions,
                "no_kv_slot": self.no_kv_slot,
                "steps": self.steps,
                "batch_tokens": self.batch_tokens,
                "ttft": self.ttft.snapshot(),
                "tpot": self.tpot.snapshot(),
                "queue_time": self.queue_time.snapshot(),
            }
