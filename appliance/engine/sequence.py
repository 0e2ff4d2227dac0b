"""One request's state: tokens, sampling parameters, text streaming, timings. Pure Python."""

from __future__ import annotations

import codecs
import itertools
import time
from dataclasses import dataclass, field
from enum import Enum

from appliance.engine.speculative import SpecState

_ids = itertools.count(1)


@dataclass
class BatchItem:
    """Tokens of one sequence in one decode: positions start..start+len-1 in llama seq `slot`."""

    slot: int
    tokens: list[int]
    start: int
    logits: bool  # output logits for the last token (and for each draft token)
    row: int = -1  # batch row of that output, set by the runner's decode()
    seq: Sequence | None = None
    draft: list[int] = field(default_factory=list)  # speculative tail of `tokens`, to verify
    rows: list[int] = field(default_factory=list)  # batch rows of the logits: [last, d1..dk]
    every_row: bool = False  # logits for every token (perplexity, KL divergence, importance matrix)
    draft_k: int = 0  # draft tokens reserved for a draft model to fill before the decode (ledger-checked)


@dataclass
class SamplingParams:
    """How to sample one request. temperature 0 means greedy."""

    max_tokens: int | None = None
    temperature: float = 0.7
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    # OpenAI semantics: 0 = off; positive values discourage tokens already generated.
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = 64
    # DRY ("don't repeat yourself"): penalises extending a sequence that already occurred; 0 = off.
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    # End the answer (finish reason "stop") when its tail is the same span repeated (see loop_period).
    loop_guard: bool = False
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    user: str = "anonymous"
    ignore_eos: bool = False  # benchmarks: generate exactly max_tokens
    # A GBNF grammar the output must follow (JSON schemas are converted to one); "" = free text.
    grammar: str = ""
    # 0 = interactive; 1 = background (batch jobs): admitted after waiting interactive requests, on
    # at most the scheduler's background slots, and preempted first.
    priority: int = 0
    # Draft tokens per verify step (prompt lookup): None = the engine's default, 0 = never speculate.
    speculative: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")
        if not (-2 <= self.frequency_penalty <= 2 and -2 <= self.presence_penalty <= 2):
            raise ValueError("frequency_penalty and presence_penalty must be in [-2, 2]")
        if self.repeat_penalty <= 0 or self.dry_multiplier < 0:
            raise ValueError("repeat_penalty must be > 0 and dry_multiplier >= 0")
        if self.speculative is not None and not 0 <= self.speculative <= 16:
            raise ValueError("speculative must be between 0 and 16 draft tokens")
        if self.priority not in (0, 1):
            raise ValueError("priority must be 0 (interactive) or 1 (background)")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in self.stop if s]


@dataclass
class Stats:
    """What one request cost; times in seconds."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generated_tokens: int = 0
    queue_time: float = 0.0
    ttft: float | None = None
    tpot: float | None = None
    preemptions: int = 0


class Status(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class TextStream:
    """Bytes of tokens in, safe text out.

    UTF-8 safety: a CJK character split across tokens is held until complete. Stop strings:
    text that could still become a stop string is held back, so no partial stop ever leaks.
    """

    def __init__(self, stop: list[str]) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = stop
        self._held = ""
        self.text = ""  # everything emitted so far
        self.stopped = False

    def feed(self, piece: bytes) -> str:
        """Add one token's bytes; return the text that is now safe to emit."""
        if self.stopped:
            return ""
        self._held += self._decoder.decode(piece)
        for stop in self._stop:
            at = self._held.find(stop)
            if at >= 0:
                self.stopped = True
                return self._emit(self._held[:at])
        keep = self._stop_prefix_len(self._held)
        return self._emit_upto(len(self._held) - keep)

    def flush(self) -> str:
        """At the end of generation: release whatever is held (it did not become a stop)."""
        if self.stopped:
            return ""
        self._held += self._decoder.decode(b"", final=True)
        return self._emit_upto(len(self._held))

    def _emit_upto(self, n: int) -> str:
        out, self._held = self._held[:n], self._held[n:]
        self.text += out
        return out

    def _emit(self, out: str) -> str:
        self._held = ""
        self.text += out
        return out

    def _stop_prefix_len(self, text: str) -> int:
        # The longest tail of `text` that is a proper prefix of some stop string.
        best = 0
        for stop in self._stop:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best


@dataclass
class Sequence:
    """The engine's view of one request. Only the engine thread mutates it after submit."""

    prompt_tokens: list[int]
    params: SamplingParams
    max_tokens: int
    id: int = field(default_factory=lambda: next(_ids))
    output_tokens: list[int] = field(default_factory=list)
    status: Status = Status.WAITING
    slot: int | None = None          # llama.cpp seq_id while admitted
    n_computed: int = 0              # tokens of all_tokens already in the KV cache
    n_cached_prompt: int = 0         # prompt tokens shared from the prefix cache
    finish_reason: str | None = None
    cancelled: bool = False
    preemptions: int = 0
    t_submit: float = field(default_factory=time.perf_counter)
    t_admit: float | None = None
    t_first: float | None = None
    t_last: float | None = None
    admit_order: int = 0
    spec: SpecState | None = None    # speculative decoding state; None = plain decoding

    def __post_init__(self) -> None:
        self.stream = TextStream(self.params.stop)

    @property
    def all_tokens(self) -> list[int]:
        return self.prompt_tokens + self.output_tokens

    @property
    def n_tokens(self) -> int:
        return len(self.prompt_tokens) + len(self.output_tokens)

    @property
    def n_pending(self) -> int:
        """Tokens not yet fed to the model (prompt remainder, or the last sampled token)."""
        return self.n_tokens - self.n_computed

    @property
    def is_finished(self) -> bool:
        return self.status is Status.FINISHED

    def stats(self) -> Stats:
        n_out = len(self.output_tokens)
        tpot = None
        if n_out > 1 and self.t_first is not None and self.t_last is not None:
            tpot = (self.t_last - self.t_first) / (n_out - 1)
        return Stats(
            prompt_tokens=len(self.prompt_tokens),
            cached_prompt_tokens=self.n_cached_prompt,
            generated_tokens=n_out,
            queue_time=(self.t_admit or time.perf_counter()) - self.t_submit,
            ttft=None if self.t_first is None else self.t_first - self.t_submit,
            tpot=tpot,
            preemptions=self.preemptions,
        )


def loop_period(tokens: list[int], min_period: int = 4, max_period: int = 64, repeats: int = 3) -> int:
    """The period of a loop at the end of `tokens`, or 0.

    A loop is the same span of `min_period`..`max_period` tokens repeated back to back at least
    `repeats` times at the tail (a short phrase needs more repeats: at least 24 tokens in all, so a
    list of short items is not mistaken for a loop). Small models stuck on a sentence produce this;
    sampling penalties make it rare, this check makes it end.
    """
    n = len(tokens)
    for period in range(min_period, min(max_period, n // repeats) + 1):
        times = max(repeats, -(-24 // period))
        if period * times > n:
            continue
        tail = tokens[n - period:]
        if all(tokens[n - (k + 1) * period:n - k * period] == tail for k in range(1, times)):
            return period
    return 0
