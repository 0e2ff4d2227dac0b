"""Soak: minutes of mixed traffic against one real server, then checks that it came back to idle.

Workers pick, at random (seeded), among streamed RAG chat, plain chat, embeddings, a stream the client
abandons after a few events (a disconnect) and a stream stopped by a `stop` string; every
`burst_every` seconds a burst of concurrent requests overloads the queue. Counted: requests by
outcome, any 5xx other than 503 (must be 0), the server's resident memory over time, and the
engine's gauges once the load stops (running 0, no live KV cells).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

_QUESTIONS = ("How do I back up the appliance?", "Which port does the server listen on?",
              "默认情况下服务监听哪个端口？", "How are documents removed from the index?",
              "What does the relevance gate do?", "Summarise the security policy in two lines.")


@dataclass
class SoakResult:
    """What happened during a soak."""

    seconds: float
    outcomes: Counter = field(default_factory=Counter)  # "rag 200", "burst 503", "embed error", …
    server_errors: list[str] = field(default_factory=list)  # 5xx other than 503, with the body
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (t, MB)
    idle_after: dict = field(default_factory=dict)

    def summary(self) -> dict:
        rss = [mb for _, mb in self.rss_mb]
        return {"seconds": round(self.seconds, 1), "requests": sum(self.outcomes.values()),
                "outcomes": dict(sorted(self.outcomes.items())), "server_errors": len(self.server_errors),
                "rss_start_mb": rss[0] if rss else None, "rss_peak_mb": max(rss) if rss else None,
                "rss_end_mb": rss[-1] if rss else None,
                "rss_each_minute_mb": [mb for t, mb in self.rss_mb if int(t) % 60 == 0][::1],
                "idle_after": self.idle_after}


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024


def soak(url: str, key: str, pid: int, seconds: float, workers: int = 6, burst_every: float = 20.0,
         burst: int = 12, seed: int = 0, model: str = "appliance-rag") -> SoakResult:
    """Run the mixed load for `seconds`; returns counts, memory samples and the idle check."""
    headers = {"Authorization": f"Bearer {key}"}
    plain = httpx.get(url + "/v1/models", headers=headers).json()["data"]
    plain_model = next(m["id"] for m in plain if m["id"] != model)
    result, lock, stop = SoakResult(seconds), threading.Lock(), threading.Event()
    actions = _actions(model, plain_model)

    def record(name: str, status: int | str, body: str = "") -> None:
        with lock:
            result.outcomes[f"{name} {status}"] += 1
            if isinstance(status, int) and status >= 500 and status != 503:
                result.server_errors.append(f"{name} {status}: {body[:300]}")

    def worker(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            while not stop.is_set():
                name, action = rng.choice(actions)
                _attempt(client, name, lambda c=client, a=action: a(c, rng), record)

    t0 = time.monotonic()
    with ThreadPoolExecutor(workers + burst + 1) as pool:
        futures = [pool.submit(worker, n) for n in range(workers)]
        next_burst = t0 + burst_every / 2
        while time.monotonic() - t0 < seconds:
            result.rss_mb.append((round(time.monotonic() - t0, 1), round(rss_mb(pid), 1)))
            if time.monotonic() >= next_burst:
                futures += [pool.submit(_burst_one, url, headers, model, i, record) for i in range(burst)]
                next_burst += burst_every
            time.sleep(1.0)
        stop.set()
        for f in futures:
            f.result()
    result.idle_after = _wait_idle(url, headers)
    result.rss_mb.append((round(time.monotonic() - t0, 1), round(rss_mb(pid), 1)))
    return result


def _attempt(client: httpx.Client, name: str, call: Callable[[], tuple[int, str]],
             record: Callable[..., None]) -> None:
    try:
        status, body = call()
        record(name, status, body)
    except httpx.HTTPError as e:
        record(name, f"error {type(e).__name__}")
        return
    if status == 503:
        time.sleep(1.0)  # a polite client backs off (the server says Retry-After), as the UI does


# The soak loads the engine: answers are written by the model even where the server would quote.
# A plain model ignores the field (extra request fields are allowed).
_WRITTEN = {"answer_style": "generate"}


def _actions(rag: str, plain: str) -> list[tuple[str, Callable]]:
    def chat(model: str, stream: bool, max_tokens: int, events: int | None = None, stop: str | None = None):
        def run(client: httpx.Client, rng: random.Random) -> tuple[int, str]:
            body = {"model": model, "stream": stream, "max_tokens": max_tokens, "temperature": 0.7,
                    "messages": [{"role": "user", "content": rng.choice(_QUESTIONS)}], **_WRITTEN}
            if stop:
                body["stop"] = [stop]
            if not stream:
                r = client.post("/v1/chat/completions", json=body)
                return r.status_code, r.text
            with client.stream("POST", "/v1/chat/completions", json=body) as r:
                if r.status_code >= 400:
                    return r.status_code, r.read().decode(errors="replace")
                seen = 0
                for line in r.iter_lines():
                    seen += line.startswith("data: ")
                    if events is not None and seen >= events:
                        break  # the client walks away mid-answer
                return r.status_code, ""
        return run

    def embed(client: httpx.Client, rng: random.Random) -> tuple[int, str]:
        r = client.post("/v1/embeddings", json={"model": "default", "input": [rng.choice(_QUESTIONS)] * 4})
        return r.status_code, r.text

    return [("rag-stream", chat(rag, True, 96)), ("rag-stream", chat(rag, True, 96)),
            ("plain", chat(plain, False, 32)), ("embed", embed), ("disconnect", chat(rag, True, 200, events=3)),
            ("stop-string", chat(plain, True, 64, stop="."))]


def _burst_one(url: str, headers: dict, model: str, i: int, record: Callable[..., None]) -> None:
    body = {"model": model, "stream": False, "max_tokens": 24,
            "messages": [{"role": "user", "content": _QUESTIONS[i % len(_QUESTIONS)]}], **_WRITTEN}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        _attempt(client, "burst", lambda: _post(client, body), record)


def _post(client: httpx.Client, body: dict) -> tuple[int, str]:
    r = client.post("/v1/chat/completions", json=body)
    return r.status_code, r.text


def _wait_idle(url: str, headers: dict, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        engine = httpx.get(url + "/admin/stats", headers=headers).json()["engine"]
        idle = engine["running"] == 0 and engine["waiting"] == 0 and engine["kv_cells_live"] == 0
        if idle or time.monotonic() > deadline:
            return {"idle": idle, "running": engine["running"], "waiting": engine["waiting"],
                    "kv_cells_live": engine["kv_cells_live"], "healthy": engine["healthy"]}
        time.sleep(0.5)
