"""Speculative decoding by prompt lookup: guess the next tokens from the text so far, verify them in
one decode of the target model, keep the longest prefix the model itself would have produced.

RAG answers quote their excerpts, so the tokens that follow the last few generated tokens are often
already in the prompt: finding the latest earlier occurrence of the tail n-gram proposes them with
no extra model. The target decodes `[last token, d1..dk]` with logits on every row; the sequence's
own sampler picks a token at row 0, and while its pick equals the next draft token it goes on to the
next row. The picks are exactly what plain decoding would have produced (for greedy, and for
sampling, since the draft is deterministic and the sampler sees the same logits in the same order);
the first mismatch is itself a valid pick, so a verify step yields 1..k+1 tokens. The KV cells of the
rejected draft tokens are removed (`seq_rm`) before anything else runs.

Speculation only pays when the verify step costs about as much as a plain one and the draft is
often right. On a GPU a step is memory-bound (k extra rows are nearly free); on a small CPU every row
costs (a 5-row step of the embedded model takes 3.6 times a 1-row one on 2 cores). So the draft
length is chosen each step from both measurements: the request's acceptance rate and the engine's
own step times (`pacing.StepPacer`), taking the k that maximises tokens per second, 0 when none beats
plain decoding. Under load the same rule stops drafting: the rows a draft adds slow every other
sequence in the step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class SpecConfig:
    """Knobs of the speculation policy (EngineSettings documents them for users)."""

    draft_tokens: int = 0        # k: draft tokens per verify step; 0 = off
    ngram_max: int = 3           # longest tail n-gram looked up
    ngram_min: int = 2           # shortest (1 matches almost anything: many wrong drafts)
    min_output: int = 64         # requests allowed fewer output tokens than this never speculate
    min_accept: float = 0.3      # per-token acceptance (token_accept) below this turns drafting off for the request
    warmup: int = 16             # drafted tokens before the acceptance rate is judged
    max_decoders: int = 4        # more sequences decoding than this: the batch is busy, no drafts
    proposer: str = "lookup"     # "lookup" (prompt n-grams) or "draft_model" (engine.draft_model)


@dataclass
class SpecState:
    """One request's speculation: its draft length and what its drafts earned so far."""

    draft_tokens: int
    drafted: int = 0
    accepted: int = 0
    refused: int = 0             # verify steps that refused a draft token (the rest of that draft untried)
    off_reason: str = ""         # why drafting stopped for this request ("" = still allowed)

    @property
    def accept_rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def token_accept(self) -> float | None:
        """The chance a draft token is right given that the ones before it were: what
        `expected_tokens` needs. Not `accept_rate`: after a refusal the rest of a draft is never
        tried, so the share of drafted tokens kept understates it, the more the longer the drafts
        (rag-quote at one user, 4 drafts: share 0.64-0.72, per-token 0.80), and the policy then drafts too little."""
        tried = self.accepted + self.refused
        return self.accepted / tried if tried else None

    def record(self, drafted: int, accepted: int, cfg: SpecConfig) -> None:
        """Count one verify step and stop drafting when the request's drafts keep failing."""
        self.drafted += drafted
        self.accepted += accepted
        self.refused += accepted < drafted
        if self.drafted >= cfg.warmup and (self.token_accept or 0.0) < cfg.min_accept:
            self.off_reason = "low acceptance"


def prompt_lookup(tokens: list[int], k: int, ngram_max: int = 3, ngram_min: int = 2) -> list[int]:
    """Up to `k` tokens that followed the latest earlier occurrence of the tail n-gram of `tokens`.

    Longer n-grams are tried first (a 3-token match predicts better than a 2-token one); the
    latest occurrence wins because an answer quoting an excerpt continues where it last matched.
    """
    n_tok = len(tokens)
    for n in range(min(ngram_max, n_tok - 1), ngram_min - 1, -1):
        tail = tokens[n_tok - n:]
        first = tail[0]
        # Scan backwards from the position just before the tail itself.
        for start in range(n_tok - n - 1, -1, -1):
            if tokens[start] == first and tokens[start:start + n] == tail:
                follow = tokens[start + n:start + n + k]
                if follow:
                    return follow
    return []


def accepted_prefix(draft: list[int], picks: list[int]) -> int:
    """How many leading draft tokens the target's own picks confirmed (`picks[i]` is its choice
    at the row after draft token i-1; the first disagreement ends the run)."""
    n = 0
    for d, p in zip(draft, picks, strict=False):
        if d != p:
            break
        n += 1
    return n


PRIOR_ACCEPT = 0.6  # assumed acceptance before a request has drafted `warmup` tokens


def expected_tokens(accept: float, k: int) -> float:
    """Tokens a verify step of k drafts yields on average (accepted drafts plus the model's own
    pick), when each draft token is right with probability `accept` given the previous ones were."""
    if accept >= 1.0:
        return k + 1.0
    return (1.0 - accept ** (k + 1)) / (1.0 - accept)


def best_k(accept: float, k_max: int, decoders: int, step_time: Callable[[int], float | None],
           draft_cost: Callable[[int], float] = lambda k: 0.0) -> int:
    """The draft length with the most tokens per second for a step of `decoders` sequences, given
    `step_time(tokens)` (seconds, measured by the engine; None when not known yet) and what making a
    k-token draft costs (`draft_cost`, 0 for prompt lookup); 0 when plain decoding is faster. An unknown
    cost is tried (the step that tries it measures it)."""
    base_time = step_time(decoders)
    if base_time is None:
        return k_max
    best, best_rate = 0, decoders / base_time
    for k in range(1, k_max + 1):
        seconds = step_time(decoders + k)
        if seconds is None:
            return k
        rate = (decoders - 1 + expected_tokens(accept, k)) / (seconds + draft_cost(k))
        if rate > best_rate:
            best, best_rate = k, rate
    return best


def draft_length(state: SpecState | None, room: int, decoders: int, step_time: Callable[[int], float | None],
                 cfg: SpecConfig, draft_cost: Callable[[int], float] = lambda k: 0.0) -> int:
    """How many tokens one decode step of a request should draft (0 = none: the policy).

    `room` is how many more tokens the request may produce after this step's own pick (max_tokens
    and context), `decoders` how many sequences decode in this batch, `step_time` the engine's
    measured seconds per step size, `draft_cost` what a k-token draft costs to make.
    """
    if state is None or state.off_reason or state.draft_tokens < 1 or decoders > cfg.max_decoders:
        return 0
    accept = state.token_accept if state.drafted >= cfg.warmup else PRIOR_ACCEPT
    return max(0, min(best_k(accept or 0.0, state.draft_tokens, decoders, step_time, draft_cost), room))


def draft_for(state: SpecState | None, tokens: list[int], room: int, decoders: int,
              step_time: Callable[[int], float | None], cfg: SpecConfig) -> list[int]:
    """The prompt-lookup draft for one decode step of a request, or [] when this step should not speculate."""
    k = draft_length(state, room, decoders, step_time, cfg)
    return prompt_lookup(tokens, k, cfg.ngram_max, cfg.ngram_min) if k > 0 else []


def new_state(draft_tokens: int | None, max_tokens: int, cfg: SpecConfig) -> SpecState | None:
    """A request's speculation state, or None when it never speculates.

    `draft_tokens` is the request's own choice (None = the configured default, 0 = off); a request
    whose answer is short by construction gains nothing (the reference deployment lost on them).
    """
    k = cfg.draft_tokens if draft_tokens is None else draft_tokens
    if k < 1 or (draft_tokens is None and max_tokens < cfg.min_output):
        return None
    return SpecState(draft_tokens=k)
