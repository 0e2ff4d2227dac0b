"""Engine errors callers act on: the server maps them to HTTP statuses."""

from __future__ import annotations

from appliance.errors import ApplianceError


class EngineError(ApplianceError):
    """llama.cpp refused something (load, context, decode)."""


class DecodeError(EngineError):
    """llama_decode failed with a non-recoverable code."""


class EngineOverloaded(ApplianceError):
    """The waiting queue (or this user's share of it) is full. Retry after `retry_after` s."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PromptTooLong(ApplianceError):
    """The prompt cannot fit in the context, before any work is done."""

    def __init__(self, n_prompt: int, n_ctx: int) -> None:
        super().__init__(f"prompt of {n_prompt} tokens does not fit the context of {n_ctx} tokens "
                         "(it needs room for at least one generated token)")
        self.n_prompt = n_prompt
        self.n_ctx = n_ctx


class Cancelled(ApplianceError):
    """The caller stopped the work (the Stop button, Ctrl-C, a closed connection)."""


class EngineStopped(ApplianceError):
    """The engine was shut down."""


class BackendError(EngineError):
    """The remote inference cluster refused a request or broke a stream (HTTP 502)."""


class BackendUnavailable(EngineStopped):
    """The remote inference cluster cannot be reached (HTTP 503, try again later)."""
