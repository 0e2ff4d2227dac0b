"""The draft-model proposer of speculative decoding: a small GGUF with the target's vocabulary guesses
the next tokens greedily, batched across every sequence that drafts in the step.

It keeps its own llama.cpp context with one sequence per target slot and remembers which tokens each
of them holds; before drafting, a slot is cut back (`seq_rm`) to the longest prefix it shares with the
target sequence and fed the rest, so accepted tokens are never recomputed and a slot handed to a new
request reuses a shared system prompt. The target verifies the draft as it verifies a prompt-lookup
draft (`Engine._sample`); only the proposer differs. If the draft context runs out of cells it is
cleared and that step drafts nothing: drafting is an optimisation, never a reason to fail a request.

Compatibility is checked the way llama.cpp's `common_speculative_are_compatible` does: same
vocabulary type, same BOS/EOS handling, vocabulary sizes within 128, and the same text for every
token id from 5 up. Anything else is refused at start-up with the first difference.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from appliance.engine.errors import EngineError
from appliance.engine.llama import ContextConfig, LlamaRunner
from appliance.engine.sequence import BatchItem
from appliance.engine.speculative import accepted_prefix

log = logging.getLogger("appliance.engine")

VOCAB_MAX_DIFF = 128   # llama.cpp: SPEC_VOCAB_MAX_SIZE_DIFFERENCE
VOCAB_CHECK_FROM = 5   # llama.cpp: SPEC_VOCAB_CHECK_START_TOKEN_ID


def check_compatible(target: LlamaRunner, draft: LlamaRunner) -> None:
    """Raise EngineError unless `draft` can propose tokens for `target` (same tokens, same ids)."""
    def facts(r: LlamaRunner) -> dict:
        lib, v = r.lib, r.vocab
        return {"vocabulary type": lib.llama_vocab_type(v), "adds BOS": lib.llama_vocab_get_add_bos(v),
                "adds EOS": lib.llama_vocab_get_add_eos(v), "BOS": lib.llama_vocab_bos(v),
                "EOS": lib.llama_vocab_eos(v)}
    t, d = facts(target), facts(draft)
    for key in t:
        if t[key] != d[key] and not (key in ("BOS", "EOS") and not t[f"adds {key}"]):
            raise EngineError(f"draft model not compatible with the chat model: {key} differs ({d[key]} vs {t[key]})")
    if abs(target.n_vocab - draft.n_vocab) > VOCAB_MAX_DIFF:
        raise EngineError(f"draft model not compatible with the chat model: vocabulary of {draft.n_vocab} tokens "
                          f"against {target.n_vocab}")
    for token in range(VOCAB_CHECK_FROM, min(target.n_vocab, draft.n_vocab)):
        if target.token_text(token) != draft.token_text(token):
            raise EngineError(f"draft model not compatible with the chat model: token {token} is "
                              f"{draft.token_text(token)!r} there and {target.token_text(token)!r} here")


TOO_LARGE = 0.5  # a draft above this share of the chat model's size costs about a target step per token


def warn_if_too_large(draft: Path, target: Path) -> bool:
    """Log a warning (and return True) when the draft file is so large, against the chat model's,
    that drafting cannot pay. The policy would find that out anyway, but only after the first
    requests had paid for a few drafts and for the draft context prefilling their prompts."""
    share = draft.stat().st_size / max(1, target.stat().st_size)
    if share <= TOO_LARGE:
        return False
    log.warning("draft model %s is %.0f%% of the chat model's size: each draft token costs about a step of "
                "the chat model, so speculative decoding with it cannot pay (a draft of ~10%% pays on a GPU)",
                draft.name, 100 * share)
    return True


class DraftModel:
    """A small model's context drafting for the target's slots."""

    def __init__(self, cfg: ContextConfig, target: LlamaRunner) -> None:
        self.runner = LlamaRunner(cfg)
        try:
            check_compatible(target, self.runner)
        except BaseException:
            self.runner.close()
            raise
        self.held: dict[int, list[int]] = {}  # slot -> tokens in the draft context
        self.step_s: float | None = None      # measured seconds of one batched draft step
        warn_if_too_large(Path(cfg.model_path), Path(target.cfg.model_path))

    def close(self) -> None:
        self.runner.close()

    def reset(self) -> None:
        """Forget every slot (after a failure, or when the draft context is full)."""
        self.runner.clear_memory()
        self.held.clear()

    def cost(self, k: int) -> float:
        """Seconds drafting k tokens is expected to take (0 until measured: the first try measures it)."""
        return k * self.step_s if self.step_s else 0.0

    def propose(self, wants: list[tuple[int, list[int], int]]) -> dict[int, list[int]]:
        """Greedy drafts: for each (slot, tokens so far, k), up to k tokens that follow `tokens`."""
        wants = [(slot, tokens, k) for slot, tokens, k in wants if k > 0 and tokens]
        if not wants:
            return {}
        t0 = time.perf_counter()
        first = self._sync(wants)
        if first is None:
            return {}
        drafts = {slot: [tok] for slot, tok in first.items()}
        limit = {slot: k for slot, _, k in wants}
        steps = 1
        while True:
            active = [s for s, d in drafts.items() if len(d) < limit[s] and not self.runner.is_eog(d[-1])]
            if not active:
                break
            items = [BatchItem(slot=s, tokens=[drafts[s][-1]], start=len(self.held[s]), logits=True) for s in active]
            if self.runner.decode(items) != 0:
                self.reset()
                return {}
            steps += 1
            for item in items:
                self.held[item.slot].append(item.tokens[0])
                drafts[item.slot].append(int(np.argmax(self.runner.logits(item.row))))
        seconds = (time.perf_counter() - t0) / steps
        self.step_s = seconds if self.step_s is None else 0.8 * self.step_s + 0.2 * seconds
        return drafts

    def _sync(self, wants: list[tuple[int, list[int], int]]) -> dict[int, int] | None:
        """Bring each slot to its sequence's tokens; returns each slot's first draft token."""
        n_batch = self.runner.n_batch
        batch: list[BatchItem] = []
        first: dict[int, int] = {}

        def flush() -> bool:
            if batch and self.runner.decode(batch) != 0:
                self.reset()
                return False
            for item in batch:
                if item.logits:
                    first[item.slot] = int(np.argmax(self.runner.logits(item.row)))
            batch.clear()
            return True

        for slot, tokens, _ in wants:
            keep = min(accepted_prefix(self.held.get(slot, []), tokens), len(tokens) - 1)  # common prefix
            self.runner.seq_rm(slot, keep, -1)
            self.held[slot] = list(tokens)
            feed = tokens[keep:]
            for off in range(0, len(feed), n_batch):
                piece = feed[off:off + n_batch]
                if sum(len(i.tokens) for i in batch) + len(piece) > n_batch and not flush():
                    return None
                batch.append(BatchItem(slot=slot, tokens=piece, start=keep + off, logits=off + n_batch >= len(feed)))
        return first if flush() else None
