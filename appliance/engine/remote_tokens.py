"""Prompt token counts for the remote backend (the chat service budgets history with them).

Three ways, in the order `auto` tries them: vLLM's and the appliance's `POST /tokenize` with chat
messages; llama.cpp server's `POST /apply-template` then `POST /tokenize`; or, when
`engine.remote_tokenizer` names a GGUF with the cluster's vocabulary, a vocabulary-only local load
(no round trip, no weights).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from appliance.engine.errors import BackendError, BackendUnavailable


class RemoteTokenizer:
    """`tokenize_messages()` through the cluster or a local vocabulary."""

    def __init__(self, client: httpx.AsyncClient, run: Callable, base: str, model: str,
                 gguf: Path | None = None) -> None:
        self._client, self._run, self._base, self._model = client, run, base, model
        self._local = None
        self.mode = "auto"
        if gguf is not None:
            from appliance.engine.prompt import PromptTokenizer

            self._local = PromptTokenizer.vocab_only(gguf)
            self.mode = "local"

    def tokenize_messages(self, messages: list[dict]) -> list[int]:
        if self._local is not None:
            return self._local.tokenize_messages(messages)
        try:
            return self._run(self._remote(messages), timeout=60)
        except httpx.HTTPError as e:
            raise BackendUnavailable(f"cannot count prompt tokens at {self._base}: {e}") from None

    async def _remote(self, messages: list[dict]) -> list[int]:
        if self.mode in ("auto", "messages"):
            r = await self._client.post("/tokenize", json={"model": self._model, "messages": messages,
                                                           "add_generation_prompt": True})
            # llama-server answers this form with an empty list (it reads only `content`): messages
            # always render to some tokens, so an empty answer means "not understood".
            if r.status_code == 200 and r.json().get("tokens"):
                self.mode = "messages"
                return list(r.json()["tokens"])
            if self.mode == "messages":
                raise BackendError(f"/tokenize answered {r.status_code}: {r.text[:200]}")
        r = await self._client.post("/apply-template", json={"messages": messages})
        if r.status_code == 200 and "prompt" in r.json():
            t = await self._client.post("/tokenize", json={"content": r.json()["prompt"], "add_special": True,
                                                           "parse_special": True})
            if t.status_code == 200:
                self.mode = "llama.cpp"
                return [x if isinstance(x, int) else x["id"] for x in t.json()["tokens"]]
        raise BackendError(f"the inference cluster at {self._base} has no /tokenize endpoint for chat "
                           "messages; set engine.remote_tokenizer to a GGUF with its vocabulary")
