"""The caller's handle on a submitted request: stream deltas (sync or async), cancel, result.

The engine thread pushes events into a `Channel`; the `Request` reads them. The sequence
holds the channel but never the Request, so when a caller drops its Request without
finishing it, a finalizer cancels the sequence and its KV cells are freed at the next step.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from appliance.engine.sequence import Sequence, Stats

_DONE = object()


@dataclass
class Result:
    """A finished request."""

    text: str
    finish_reason: str
    stats: Stats


class Channel:
    """Thread-safe event pipe from the engine thread to one consumer (thread or event loop)."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._aq: asyncio.Queue | None = None

    def put(self, event: object) -> bool:
        """Deliver an event; False when the consumer's event loop is gone."""
        with self._lock:
            if self._aq is None:
                self._q.put(event)
                return True
            try:
                self._loop.call_soon_threadsafe(self._aq.put_nowait, event)
                return True
            except RuntimeError:  # loop closed: the consumer is gone
                return False

    def get(self, timeout: float | None = None) -> object:
        return self._q.get(timeout=timeout)

    def bind_async(self) -> asyncio.Queue:
        """Switch delivery to the running event loop (events already queued move over)."""
        with self._lock:
            if self._aq is None:
                self._loop = asyncio.get_running_loop()
                self._aq = asyncio.Queue()
                while True:
                    try:
                        self._aq.put_nowait(self._q.get_nowait())
                    except queue.Empty:
                        break
            return self._aq


class Request:
    """Iterate it (`for delta in req` or `async for delta in req`) for streamed text."""

    def __init__(self, seq: Sequence, channel: Channel) -> None:
        self._seq = seq
        self._channel = channel
        self._parts: list[str] = []
        self._done = False
        self._error: BaseException | None = None
        # A dropped, unfinished Request cancels its sequence (frees KV at the next step).
        self._finalizer = weakref.finalize(self, _cancel, seq)

    @property
    def id(self) -> int:
        return self._seq.id

    @property
    def prompt_tokens(self) -> int:
        return len(self._seq.prompt_tokens)

    def cancel(self) -> None:
        """Stop generating; the engine frees the sequence's cells at its next step."""
        self._seq.cancelled = True

    def _handle(self, event: object) -> str | None:
        if event is _DONE:
            self._done = True
            self._finalizer.detach()
            return None
        if isinstance(event, BaseException):
            self._done, self._error = True, event
            self._finalizer.detach()
            raise event
        self._parts.append(event)  # type: ignore[arg-type]
        return event  # type: ignore[return-value]

    def __iter__(self) -> Iterator[str]:
        while not self._done:
            delta = self._handle(self._channel.get())
            if delta:
                yield delta

    async def __aiter__(self) -> AsyncIterator[str]:
        aq = self._channel.bind_async()
        try:
            while not self._done:
                delta = self._handle(await aq.get())
                if delta:
                    yield delta
        finally:
            if not self._done:  # consumer stopped early (client disconnect): free the KV
                self.cancel()

    def result(self, timeout: float | None = None) -> Result:
        """Wait for the end (consuming the stream) and return text, finish reason and stats."""
        while not self._done:
            try:
                self._handle(self._channel.get(timeout=timeout))
            except queue.Empty:
                raise TimeoutError(f"request {self.id} not finished after {timeout}s") from None
        return self._result()

    async def aresult(self) -> Result:
        """The async form of result()."""
        async for _ in self:
            pass
        return self._result()

    def _result(self) -> Result:
        return Result("".join(self._parts), self._seq.finish_reason or "unknown", self._seq.stats())


def _cancel(seq: Sequence) -> None:
    seq.cancelled = True


DONE = _DONE
