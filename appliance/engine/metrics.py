"""Engine counters and histograms: TTFT, TPOT, queue time, tokens, KV cells, prefix hits.

Updated by the engine thread; `snapshot()` returns a dict the server exports to Prometheus and the
admin tab plots (a dict, so a remote backend can produce the same shape).
"""

from __future__ import annotations

import threading
from collections import deque

from prometheus_client import CollectorRegistry, Histogram

from appliance.engine.sequence import Sequence

# Seconds: fine at the low end (TPOT on a GPU is a few ms), coarse at the top (CPU TTFT).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class LatencyHistogram:
    """prometheus-client's histogram (buckets, sum, count) plus a window of recent values.

    The window gives the p50/p95 the admin tab and bench reports show; Prometheus itself gets the
    cumulative buckets. Each histogram has its own registry: it is exported through the engine's
    snapshot, not through the process-global registry.
    """

    def __init__(self, name: str, doc: str, window: int = 1000) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._hist = Histogram(name, doc, buckets=LATENCY_BUCKETS, registry=self._registry)
        self.recent: deque[float] = deque(maxlen=window)

    def observe(self, value: float) -> None:
        self._hist.observe(value)
        self.recent.append(value)

    def quantile(self, q: float) -> float | None:
        """The q-quantile of the recent window (None before the first observation)."""
        if not self.recent:
            return None
        values = sorted(self.recent)
        return values[min(len(values) - 1, int(q * len(values)))]

    def snapshot(self) -> dict:
        buckets, cumulative, total, count = [], [], 0.0, 0
        for metric in self._registry.collect():
            for sample in metric.samples:
                if sample.name.endswith("_bucket") and sample.labels["le"] != "+Inf":
                    buckets.append(float(sample.labels["le"]))
                    cumulative.append(int(sample.value))
                elif sample.name.endswith("_sum"):
                    total = sample.value
                elif sample.name.endswith("_count"):
                    count = int(sample.value)
        return {"buckets": buckets, "cumulative": cumulative, "sum": total, "count": count,
                "p50": self.quantile(0.5), "p95": self.quantile(0.95)}


class EngineMetrics:
    """Everything the engine counts. Updated by the engine thread, read by anyone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ttft = LatencyHistogram("ttft_seconds", "Time to first token")
        self.tpot = LatencyHistogram("tpot_seconds", "Time per output token")
        self.queue_time = LatencyHistogram("queue_time_seconds", "Time waiting for admission")
        self.requests: dict[str, int] = {}
        self.generated_tokens = 0
        self.prompt_tokens_computed = 0
        self.prompt_tokens_cached = 0
        self.preemptions = 0
        self.no_kv_slot = 0
        self.rejected = 0
        self.steps = 0
        self.batch_tokens = 0
        self.batch_peak = 0  # most sequences in one decode step: batching seen, not sampled by a poller
        self.drafted: dict[str, int] = {}   # draft tokens proposed, per proposer
        self.accepted: dict[str, int] = {}  # of which the target confirmed

    def on_step(self, n_tokens: int, n_sequences: int) -> None:
        with self._lock:
            self.steps += 1
            self.batch_tokens += n_tokens
            self.batch_peak = max(self.batch_peak, n_sequences)

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

    def on_draft(self, proposer: str, drafted: int, accepted: int) -> None:
        with self._lock:
            self.drafted[proposer] = self.drafted.get(proposer, 0) + drafted
            self.accepted[proposer] = self.accepted.get(proposer, 0) + accepted

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
                "batch_peak": self.batch_peak,
                "spec_drafted": dict(self.drafted),
                "spec_accepted": dict(self.accepted),
                "spec_accept_rate": {p: self.accepted.get(p, 0) / n for p, n in self.drafted.items() if n},
                "ttft": self.ttft.snapshot(),
                "tpot": self.tpot.snapshot(),
                "queue_time": self.queue_time.snapshot(),
            }
