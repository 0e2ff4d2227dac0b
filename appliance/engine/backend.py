"""The interface the server calls, so a second backend can stand in for the local engine.

The local `Engine` implements it. A deployment that outgrows one box adds an OpenAI-compatible
remote backend (vLLM or llama.cpp servers behind a load balancer) with the same five members;
the RAG, UI and API code only ever see this protocol.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from appliance.engine.errors import Cancelled, EngineOverloaded
from appliance.engine.request import Request, Result
from appliance.engine.sequence import SamplingParams

if TYPE_CHECKING:  # annotations only
    from appliance.config import Settings
    from appliance.models.metadata import ModelInfo


@runtime_checkable
class ChatBackend(Protocol):
    """What the server needs from an inference backend."""

    model_name: str

    def submit(self, prompt: list[dict] | list[int], params: SamplingParams | None = None) -> Request:
        """Queue a chat (messages) or raw prompt; returns a streamable, cancellable Request."""
        ...

    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        """Prompt tokens for messages (used to budget context)."""
        ...

    def snapshot(self) -> dict:
        """Metrics and gauges: running, waiting, KV cells, TTFT/TPOT histograms."""
        ...

    def shutdown(self) -> None:
        """Stop and release resources."""
        ...


def open_backend(settings: Settings) -> ChatBackend:
    """The configured backend: the local llama.cpp engine, or the remote cluster (`engine.backend`)."""
    if settings.engine.backend == "openai":
        from appliance.engine.remote import RemoteBackend

        return RemoteBackend.from_config(settings)
    from appliance.engine.engine import Engine

    return Engine.from_config(settings)


class LazyBackend:
    """The local engine, loaded at its first prompt. A quoted answer or a decline needs no model,
    so `appliance ask` in quote style answers without loading it (measured on the sample guide,
    SmolLM2-135M, 2 cores: 2.05 s -> 1.83 s for the whole command, median of 3)."""

    def __init__(self, settings: Settings, info: ModelInfo) -> None:
        self._settings = settings
        self.info = info  # the registered model's facts: they pick the answer style and prompt size
        self.model_name = settings.chat_model
        self._engine: ChatBackend | None = None

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def _open(self) -> ChatBackend:
        if self._engine is None:
            self._engine = open_backend(self._settings)
        return self._engine

    def submit(self, prompt: list[dict] | list[int], params: SamplingParams | None = None) -> Request:
        return self._open().submit(prompt, params)

    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        return self._open().tokenize_messages(messages)

    def snapshot(self) -> dict:
        return self._engine.snapshot() if self._engine is not None else {}

    def shutdown(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()

    def __enter__(self) -> LazyBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def complete_background(backend: ChatBackend, messages: list[dict], params: SamplingParams,
                        stop: threading.Event | None = None) -> Result:
    """One finished completion of background work: while the queue is full it waits (interactive
    users come first) instead of failing; with `stop` set the request is cancelled, Cancelled raised."""
    stop = stop or threading.Event()
    while True:
        if stop.is_set():
            raise Cancelled("stopped")
        try:
            req = backend.submit(messages, params)
            break
        except EngineOverloaded as e:
            stop.wait(e.retry_after)
    while True:
        try:
            return req.result(timeout=0.25)
        except TimeoutError:
            if stop.is_set():
                req.cancel()
                raise Cancelled("stopped") from None
