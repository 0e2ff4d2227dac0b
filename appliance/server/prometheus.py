"""Prometheus export of engine and ingest metrics, read from the services at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from appliance.server.services import Services


class _Collector:
    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def collect(self):
        snap = self.svc.engine.snapshot()
        for name, doc in (("ttft", "Time to first token"), ("tpot", "Time per output token"),
                          ("queue_time", "Time waiting for admission")):
            h = snap[name]
            buckets = [(str(b), c) for b, c in zip(h["buckets"], h["cumulative"], strict=True)]
            buckets.append(("+Inf", h["count"]))
            yield HistogramMetricFamily(f"appliance_{name}_seconds", doc, buckets=buckets, sum_value=h["sum"])
        requests = CounterMetricFamily("appliance_requests", "Finished requests by reason", labels=["reason"])
        for reason, n in snap["requests"].items():
            requests.add_metric([reason], n)
        yield requests
        for name, key, doc in (
                ("appliance_generated_tokens", "generated_tokens", "Tokens generated"),
                ("appliance_prompt_tokens_computed", "prompt_tokens_computed", "Prompt tokens computed"),
                ("appliance_prompt_tokens_cached", "prompt_tokens_cached", "Prompt tokens from the prefix cache"),
                ("appliance_requests_rejected", "requests_rejected", "Requests refused as overloaded"),
                ("appliance_preemptions", "preemptions", "Sequences preempted under KV pressure")):
            yield CounterMetricFamily(name, doc, value=snap[key])
        for key, doc in (("running", "Requests being decoded"), ("waiting", "Requests queued"),
                         ("kv_cells_used", "KV cells in use"),
                         ("kv_cells_cached", "KV cells held only by cached prefixes"),
                         ("batch_peak", "Most requests decoded in one step since start"),
                         ("kv_cells_free", "Free KV cells"), ("kv_bytes_used", "KV bytes in use"),
                         ("prefix_hit_rate", "Share of prompt tokens served from the prefix cache")):
            yield GaugeMetricFamily(f"appliance_{key}", doc, value=snap[key])
        yield from _speculation(snap)
        yield from _answers(self.svc.chat.counts)
        yield GaugeMetricFamily("appliance_engine_healthy", "1 when the engine thread runs", value=int(snap["healthy"]))
        c = self.svc.documents.counters
        yield CounterMetricFamily("appliance_ingest_runs", "Ingest runs", value=c.runs)
        yield CounterMetricFamily("appliance_ingest_chunks", "Chunks indexed", value=c.chunks)
        files = CounterMetricFamily("appliance_ingest_files", "Files by ingest outcome", labels=["status"])
        for status, n in c.files.items():
            files.add_metric([status], n)
        yield files


def _answers(counts) -> list:
    """RAG answers by style, and their sentences by the grounding check's verdict."""
    styles = CounterMetricFamily("appliance_answers", "RAG answers by style (generate, quote, hybrid, declined)",
                                 labels=["style"])
    for key, n in sorted(counts.items()):
        if key.startswith("style:"):
            styles.add_metric([key.removeprefix("style:")], n)
    sentences = CounterMetricFamily("appliance_answer_sentences", "Answer sentences by grounding check "
                                    "(supported: found in the excerpts the model was given)", labels=["grounded"])
    for verdict in ("supported", "unsupported"):
        sentences.add_metric(["yes" if verdict == "supported" else "no"], counts.get(verdict, 0))
    return [styles, sentences]


def _speculation(snap: dict):
    drafted, accepted = snap.get("spec_drafted", {}), snap.get("spec_accepted", {})
    for name, values, doc in (("appliance_spec_drafted_tokens", drafted, "Draft tokens proposed (speculation)"),
                              ("appliance_spec_accepted_tokens", accepted, "Draft tokens the model confirmed")):
        family = CounterMetricFamily(name, doc, labels=["proposer"])
        for proposer, n in values.items():
            family.add_metric([proposer], n)
        yield family
    total = sum(drafted.values())
    yield GaugeMetricFamily("appliance_spec_accept_rate", "Share of draft tokens confirmed (0 before any draft)",
                            value=sum(accepted.values()) / total if total else 0.0)


def render(svc: Services) -> bytes:
    """The /metrics body in Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(svc))
    return generate_latest(registry)
