"""Closed-loop load over any OpenAI-compatible HTTP API: N users, each sending streaming requests
back to back. Timings are taken client-side; server gauges come from /metrics when it has them."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import httpx

from appliance.bench.workloads import Workload


@dataclass
class Record:
    """One request as the client saw it."""

    user: int
    status: int
    ttft: float | None = None
    tpot: float | None = None
    latency: float = 0.0
    out_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    error: str = ""


@dataclass
class Target:
    """Where to send the load."""

    name: str
    url: str
    model: str
    key: str = ""


@dataclass
class RunResult:
    """One load run: its records, wall time and server-side peaks."""

    target: str
    workload: str
    concurrency: int
    wall_s: float
    records: list[Record]
    server: dict = field(default_factory=dict)
    interrupted: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["summary"] = summarise(self)
        return d


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def ok_records(run: RunResult) -> list[Record]:
    """The requests of a run that got a whole answer."""
    return [r for r in run.records if r.status == 200 and not r.error]


def summarise(run: RunResult) -> dict:
    ok = ok_records(run)
    out = sum(r.out_tokens for r in ok)
    ms = lambda xs, q: None if pct(xs, q) is None else round(pct(xs, q) * 1000, 1)  # noqa: E731
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpot = [r.tpot for r in ok if r.tpot is not None]
    lat = [r.latency for r in ok]
    s = {"target": run.target, "workload": run.workload, "concurrency": run.concurrency,
         "requests": len(run.records), "ok": len(ok), "errors": sum(1 for r in run.records if r.error
                                                                        and r.status != 503),
         "rejected_503": sum(1 for r in run.records if r.status == 503), "wall_s": round(run.wall_s, 2),
         "out_tokens": out, "out_tok_s": round(out / run.wall_s, 2) if run.wall_s else 0.0,
         "req_s": round(len(ok) / run.wall_s, 3) if run.wall_s else 0.0}
    for name, xs in (("ttft", ttft), ("tpot", tpot), ("latency", lat)):
        for q in (50, 95, 99):
            s[f"{name}_p{q}_ms"] = ms(xs, q / 100)
    s.update({k: v for k, v in run.server.items()})
    return s


class MetricsPoller:
    """Peaks of the appliance's gauges during a run (other servers: nothing)."""

    def __init__(self, target: Target, every: float = 0.5) -> None:
        self.target, self.every = target, every
        self.peaks: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MetricsPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.target.key}"} if self.target.key else {}
        base = self.target.url.rstrip("/").removesuffix("/v1")
        while not self._stop.is_set():
            try:
                text = httpx.get(base + "/metrics", headers=headers, timeout=5).text
                values = _gauges(text)
                self.last = values
                for k in ("appliance_running", "appliance_kv_cells_used", "appliance_kv_cells_cached"):
                    if k in values:
                        self.peaks[k] = max(self.peaks.get(k, 0.0), values[k])
            except (httpx.HTTPError, ValueError):
                pass
            self._stop.wait(self.every)

    def summary(self) -> dict:
        if not self.last:
            return {}
        return {"peak_running": self.peaks.get("appliance_running"),
                "peak_kv_used": self.peaks.get("appliance_kv_cells_used"),
                "peak_kv_cached": self.peaks.get("appliance_kv_cells_cached"),
                "prefix_hit_rate": self.last.get("appliance_prefix_hit_rate"),
                "spec_accept_rate": self.last.get("appliance_spec_accept_rate") or None}


def _gauges(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.type == "gauge" and fam.samples:
            out[fam.name] = fam.samples[0].value
    return out


def run_load(target: Target, workload: Workload, concurrency: int, requests_per_user: int,
             on_done: Callable[[Record], None] | None = None, stop: threading.Event | None = None,
             seed: int = 0) -> RunResult:
    """N users, each sending `requests_per_user` streaming requests back to back."""
    stop = stop or threading.Event()
    records: list[Record] = []
    lock = threading.Lock()
    client = httpx.Client(timeout=httpx.Timeout(1800, connect=10))

    def user(uid: int) -> None:
        rng = random.Random(seed * 1000 + uid)
        for _ in range(requests_per_user):
            if stop.is_set():
                return
            messages, max_tokens = workload.request(rng)
            rec = _one(client, target, uid, messages, max_tokens)
            with lock:
                records.append(rec)
            if on_done:
                on_done(rec)

    t0 = time.perf_counter()
    with MetricsPoller(target) as poller:
        threads = [threading.Thread(target=user, args=(u,), daemon=True) for u in range(concurrency)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except KeyboardInterrupt:
            stop.set()
    client.close()
    return RunResult(target.name, workload.name, concurrency, time.perf_counter() - t0, records,
                     poller.summary(), interrupted=stop.is_set())


def _one(client: httpx.Client, target: Target, uid: int, messages: list[dict], max_tokens: int) -> Record:
    body = {"model": target.model, "messages": messages, "max_tokens": max_tokens, "stream": True,
            "temperature": 0.7, "stream_options": {"include_usage": True}}
    if target.model == "appliance-rag":  # the engine is what is measured: the model writes the answer
        body["answer_style"] = "generate"
    headers = {"Authorization": f"Bearer {target.key}"} if target.key else {}
    t0 = time.perf_counter()
    rec = Record(uid, 0)
    first = last = None
    chunks = 0
    try:
        with client.stream("POST", target.url.rstrip("/") + "/chat/completions", json=body, headers=headers) as r:
            rec.status = r.status_code
            if r.status_code != 200:
                rec.error = r.read().decode("utf-8", "replace")[:200]
                return rec
            for line in r.iter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                event = json.loads(line[5:])
                if event.get("usage"):
                    u = event["usage"]
                    rec.out_tokens = u.get("completion_tokens", 0)
                    rec.prompt_tokens = u.get("prompt_tokens", 0)
                    rec.cached_tokens = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
                for choice in event.get("choices", []):
                    if (choice.get("delta") or {}).get("content"):
                        last = time.perf_counter()
                        first = first or last
                        chunks += 1
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        rec.error = f"{type(e).__name__}: {e}"[:200]
    rec.latency = time.perf_counter() - t0
    rec.out_tokens = rec.out_tokens or chunks
    if first is not None:
        rec.ttft = first - t0
        if rec.out_tokens > 1 and last is not None:
            rec.tpot = (last - first) / (rec.out_tokens - 1)
    return rec
