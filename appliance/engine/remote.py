"""The remote backend: the same appliance in front of an OpenAI-compatible serving cluster.

`engine.backend = "openai"` swaps the local llama.cpp engine for this class; retrieval, the UI, the
API and the documents stay in this process. Each request is one streamed upstream call on a
background event loop, so `Request.cancel()` (Stop, a closed tab, a client that went away) cancels
the task at once and closing its connection makes the cluster free the sequence.

Errors the server maps to HTTP: the cluster's 429/503 become EngineOverloaded (503 with its
Retry-After), an unreachable cluster after the connect retries BackendUnavailable (503), anything
else it refuses BackendError (502), and a stream that breaks mid-answer ends the request with
BackendError in its stream.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from appliance.config import Settings
from appliance.engine.errors import BackendError, BackendUnavailable, EngineOverloaded
from appliance.engine.metrics import EngineMetrics
from appliance.engine.remote_tokens import RemoteTokenizer
from appliance.engine.request import DONE, Channel, Request
from appliance.engine.sequence import SamplingParams, Stats

log = logging.getLogger("appliance.engine")
_ids = itertools.count(1)
_PROBE_EVERY = 5.0  # seconds between reachability probes while the cluster is away


@dataclass
class RemoteOptions:
    """Where the cluster is and how to talk to it (from `[engine]`)."""

    url: str
    model: str = ""
    key: str = ""
    tokenizer: str = ""
    timeout: float = 600.0
    retries: int = 3
    max_streams: int = 64
    default_max_tokens: int = 512

    @classmethod
    def from_settings(cls, settings: Settings) -> RemoteOptions:
        e = settings.engine
        if not e.remote_url:
            raise BackendError("engine.backend is 'openai' but engine.remote_url is empty")
        key = e.remote_key.get_secret_value()
        if e.remote_key_file:
            key = settings.resolve(e.remote_key_file).read_text(encoding="utf-8").strip()
        tokenizer = str(settings.resolve(e.remote_tokenizer)) if e.remote_tokenizer else ""
        return cls(url=e.remote_url, model=e.remote_model, key=key, tokenizer=tokenizer,
                   timeout=e.remote_timeout, retries=e.remote_retries, max_streams=e.remote_max_streams,
                   default_max_tokens=e.default_max_tokens)

    @property
    def base(self) -> str:
        """The server root (vLLM's and llama.cpp's /tokenize live there, chat under /v1)."""
        url = self.url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url


# The pseudo-models an appliance lists beside its real model (appliance.server.openai_api).
FRONT_MODELS = ("appliance-rag", "appliance-summarize")


class RemoteCall:
    """What `Request` reads of one upstream call: id, cancelled, finish reason and stats."""

    def __init__(self) -> None:
        self.id = next(_ids)
        self.finish_reason: str | None = None
        self.task: asyncio.Task | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.prompt_tokens = self.cached_tokens = self.generated = 0
        self.t_submit = time.perf_counter()
        self.t_first: float | None = None
        self.t_last: float | None = None
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @cancelled.setter
    def cancelled(self, value: bool) -> None:
        # Cancel the upstream task now: waiting for its next token could take a whole prefill.
        first = value and not self._cancelled  # Request.cancel() may come twice: cancel the task once
        self._cancelled = value
        if first and self.task is not None and self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.task.cancel)

    def stats(self) -> Stats:
        tpot = None
        if self.generated > 1 and self.t_first is not None and self.t_last is not None:
            tpot = (self.t_last - self.t_first) / (self.generated - 1)
        return Stats(prompt_tokens=self.prompt_tokens, cached_prompt_tokens=self.cached_tokens,
                     generated_tokens=self.generated, queue_time=0.0,
                     ttft=None if self.t_first is None else self.t_first - self.t_submit, tpot=tpot)


class RemoteBackend:
    """A `ChatBackend` over an OpenAI-compatible cluster (vLLM, llama.cpp servers, an appliance)."""

    info = None  # model facts are the cluster's; the chat service uses its large-model defaults

    def __init__(self, opts: RemoteOptions) -> None:
        self.opts = opts
        self.metrics = EngineMetrics()
        headers = {"Authorization": f"Bearer {opts.key}"} if opts.key else {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="appliance-remote", daemon=True)
        self._thread.start()
        self._client = self._run(self._make_client(headers))
        self._slots = threading.BoundedSemaphore(opts.max_streams)
        self._open = 0
        self._lock = threading.Lock()
        self._problem: str | None = None
        self._probed = 0.0
        self.model_name = opts.model or self._first_model()
        self.tokens = RemoteTokenizer(self._client, self._run, opts.base, self.model_name,
                                      Path(opts.tokenizer) if opts.tokenizer else None)

    @classmethod
    def from_config(cls, settings: Settings) -> RemoteBackend:
        return cls(RemoteOptions.from_settings(settings))

    async def _make_client(self, headers: dict) -> httpx.AsyncClient:
        timeout = httpx.Timeout(self.opts.timeout, connect=5.0)
        limits = httpx.Limits(max_connections=self.opts.max_streams + 8, max_keepalive_connections=16)
        # trust_env=False: a proxy variable must never route intranet traffic elsewhere.
        return httpx.AsyncClient(base_url=self.opts.base, headers=headers, timeout=timeout, limits=limits,
                                 trust_env=False)

    def _run(self, coro, timeout: float | None = None):
        """Run a coroutine on the backend's loop from any thread and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- ChatBackend -----------------------------------------------------------------------
    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        """Prompt tokens for budgeting, from the cluster's /tokenize or the local vocabulary."""
        return self.tokens.tokenize_messages(messages)

    def submit(self, prompt: list[dict] | list[int], params: SamplingParams | None = None) -> Request:
        """Open the upstream stream; returns once the cluster accepted it (or raises its refusal)."""
        params = params or SamplingParams()
        if not prompt or not isinstance(prompt[0], dict):
            raise ValueError("the remote backend takes chat messages, not token ids")
        if not self._slots.acquire(blocking=False):
            self.metrics.on_rejected()
            raise EngineOverloaded(f"{self.opts.max_streams} requests are open to the cluster; try again",
                                   retry_after=2.0)
        call, channel = RemoteCall(), Channel()
        call.loop = self._loop
        started = asyncio.run_coroutine_threadsafe(self._start(call, channel, self._body(prompt, params)),
                                                   self._loop)
        try:
            started.result()
        except BaseException:
            self._slots.release()
            if isinstance(started.exception(), EngineOverloaded):
                self.metrics.on_rejected()
            raise
        return Request(call, channel)  # type: ignore[arg-type] - RemoteCall has what Request reads

    def snapshot(self) -> dict:
        """The engine's snapshot shape: request metrics, open streams as `running`, no local KV."""
        if self._problem and time.monotonic() - self._probed > _PROBE_EVERY:
            self._probe()
        with self._lock:
            running = self._open
        return {**self.metrics.snapshot(), "running": running, "waiting": 0, "kv_cells_total": 0,
                "kv_cells_used": 0, "kv_cells_live": 0, "kv_cells_cached": 0, "kv_cells_free": 0,
                "kv_bytes_per_token": 0, "kv_bytes_used": 0, "slots_used": running, "slots_cached": 0,
                "prefix_evictions": 0, "model": self.model_name, "backend": "openai",
                "remote_url": self.opts.base, "healthy": self._problem is None, "problem": self._problem}

    def shutdown(self) -> None:
        """Close the connections and stop the loop."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._client.aclose(), timeout=5)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()

    def __enter__(self) -> RemoteBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- upstream calls --------------------------------------------------------------------
    def _body(self, messages: list[dict], p: SamplingParams) -> dict:
        body = {"model": self.model_name, "messages": messages, "stream": True,
                "stream_options": {"include_usage": True}, "temperature": p.temperature, "top_p": p.top_p,
                "max_tokens": p.max_tokens or self.opts.default_max_tokens, "user": p.user,
                "frequency_penalty": p.frequency_penalty, "presence_penalty": p.presence_penalty,
                # Sampling extensions llama.cpp's server and vLLM both read (and the appliance), and
                # llama.cpp's switch to reuse the cached prompt prefix across requests.
                "top_k": p.top_k, "min_p": p.min_p, "cache_prompt": True}
        if p.repeat_penalty != 1.0:
            body["repeat_penalty"] = p.repeat_penalty
        if p.dry_multiplier:
            body.update(dry_multiplier=p.dry_multiplier, dry_base=p.dry_base,
                        dry_allowed_length=p.dry_allowed_length)
        if p.stop:
            body["stop"] = p.stop
        if p.seed is not None:
            body["seed"] = p.seed
        if p.ignore_eos:
            body["ignore_eos"] = True
        if p.grammar:  # llama.cpp server's (and the appliance's) field for constrained output
            body["grammar"] = p.grammar
        if p.priority:
            body["priority"] = p.priority  # the appliance's and vLLM's (with --scheduling-policy priority)
        if p.speculative is not None:  # the appliance's own field; other servers ignore it
            body["speculative"] = p.speculative
        return body

    async def _start(self, call: RemoteCall, channel: Channel, body: dict) -> None:
        """Send the request; return when the cluster answered 200 (the stream then runs as a task)."""
        response = await self._connect(body)
        if response.status_code != 200:
            await self._refuse(response)
        with self._lock:
            self._open += 1
        call.task = asyncio.get_running_loop().create_task(self._relay(call, channel, response))
        if call.cancelled:  # cancelled before the task existed
            call.task.cancel()

    async def _connect(self, body: dict) -> httpx.Response:
        """POST with retries, with back-off, on connect errors only (nothing reached the cluster)."""
        for attempt in range(self.opts.retries + 1):
            try:
                request = self._client.build_request("POST", "/v1/chat/completions", json=body)
                response = await self._client.send(request, stream=True)
                self._problem = None
                return response
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                error = e
                if attempt < self.opts.retries:
                    await asyncio.sleep(0.25 * 2 ** attempt)
        self._problem = f"inference cluster unreachable at {self.opts.base}"
        self._probed = time.monotonic()
        raise BackendUnavailable(f"cannot reach the inference cluster at {self.opts.base}: {error}")

    async def _refuse(self, response: httpx.Response) -> None:
        text = (await response.aread()).decode("utf-8", errors="replace")
        await response.aclose()
        message = _error_message(text) or f"HTTP {response.status_code}"
        if response.status_code in (429, 503):
            raise EngineOverloaded(f"the inference cluster is busy: {message}",
                                   retry_after=_retry_after(response.headers.get("Retry-After")))
        if response.status_code == 400:
            raise ValueError(f"the inference cluster refused the request: {message}")
        raise BackendError(f"the inference cluster answered {response.status_code}: {message}")

    async def _relay(self, call: RemoteCall, channel: Channel, response: httpx.Response) -> None:
        """Copy the upstream SSE stream into the request's channel; always ends it."""
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                self._on_event(call, channel, json.loads(data))
            call.finish_reason = call.finish_reason or "stop"
            channel.put(DONE)
        except asyncio.CancelledError:
            call.finish_reason = "cancelled"
            channel.put(DONE)
        except Exception as e:  # noqa: BLE001 - a broken stream (network, JSON, cluster error) ends this request only
            log.warning("request %d: the inference cluster stream broke: %s", call.id, e)
            call.finish_reason = "error"
            channel.put(e if isinstance(e, BackendError) else
                        BackendError(f"the inference cluster stopped answering mid-stream: {e}"))
        finally:
            with self._lock:
                self._open -= 1
            self._slots.release()
            self.metrics.on_finish(call)  # type: ignore[arg-type] - RemoteCall has what it reads
            try:
                await response.aclose()  # closing the connection is the cluster's cancel signal
            except (asyncio.CancelledError, httpx.HTTPError):
                pass

    def _on_event(self, call: RemoteCall, channel: Channel, event: dict) -> None:
        if "error" in event:
            raise BackendError(f"the inference cluster failed: {_error_message(json.dumps(event))}")
        if event.get("usage"):
            u = event["usage"]
            call.prompt_tokens = u.get("prompt_tokens", call.prompt_tokens)
            call.generated = u.get("completion_tokens", call.generated)
            details = u.get("prompt_tokens_details") or {}
            call.cached_tokens = details.get("cached_tokens") or (event.get("timings") or {}).get("cache_n", 0)
        for choice in event.get("choices") or []:
            text = (choice.get("delta") or {}).get("content")
            if text:
                now = time.perf_counter()
                call.t_first = call.t_first or now
                call.t_last = now
                call.generated += 1  # a delta per token on vLLM/llama.cpp; usage corrects it at the end
                channel.put(text)
            if choice.get("finish_reason"):
                call.finish_reason = choice["finish_reason"]

    # -- reachability ----------------------------------------------------------------------
    def _model_ids(self, timeout: float) -> list[str]:
        """The model ids the cluster lists (raises httpx.HTTPError or BackendError)."""
        data = self._run(self._get_json("/v1/models"), timeout=timeout)
        return [m.get("id") for m in data.get("data", []) if m.get("id")]

    def _first_model(self) -> str:
        try:
            ids = self._model_ids(timeout=30)
        except (httpx.HTTPError, BackendError) as e:
            raise BackendUnavailable(f"cannot list the models of the inference cluster at {self.opts.base} "
                                     f"({e}); start it, or set engine.remote_model") from None
        # Another appliance lists its RAG and summary models first: ask for the plain model behind them.
        ids = [i for i in ids if i not in FRONT_MODELS] or ids
        if not ids:
            raise BackendError(f"the inference cluster at {self.opts.base} lists no models")
        return ids[0]

    async def _get_json(self, path: str) -> dict:
        response = await self._client.get(path, timeout=httpx.Timeout(10.0, connect=2.0))
        if response.status_code != 200:
            raise BackendError(f"GET {path}: HTTP {response.status_code} {_error_message(response.text)}")
        return response.json()

    def _probe(self) -> None:
        """While the cluster is away: one cheap GET, so /healthz sees it come back."""
        self._probed = time.monotonic()
        try:
            self._model_ids(timeout=15)
            self._problem = None
        except (httpx.HTTPError, BackendError, TimeoutError):
            pass

    def check(self) -> dict:
        """`appliance doctor`: reachable, model listed, one generated token. Raises BackendError."""
        ids = self._model_ids(timeout=30)
        if self.model_name not in ids:
            raise BackendError(f"the cluster does not list model {self.model_name!r} (it has {ids})")
        messages = [{"role": "user", "content": "Say OK."}]
        n_prompt = len(self.tokenize_messages(messages))
        result = self.submit(messages, SamplingParams(max_tokens=1, temperature=0)).result(timeout=120)
        return {"model": self.model_name, "tokens": result.stats.generated_tokens, "url": self.opts.base,
                "prompt_tokens": n_prompt}


def _retry_after(value: str | None) -> float:
    try:
        return max(1.0, float(value or 2))
    except ValueError:
        return 2.0


def _error_message(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:300]
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return str(error.get("message") or error)[:300]
    return str(error)[:300]
