"""A TPOT target for the scheduler: how many tokens one step may carry so decoders keep their pace.

Every step carries each decoding sequence's next token and, in what is left of the batch, chunks
of new prompts (chunked prefill). A 512-token prefill chunk makes that step, and so every reader's
next token, as slow as the prefill. With a target time per output token, the step's token budget is
what fits the target by the machine's own cost per step, measured as it runs: a least-squares line
`seconds = fixed + per_token * tokens` over the recent steps (stall-free batching, as Sarathi-Serve
does it with a fixed budget; here the budget follows the measured costs).

Decoders are never cut: when they alone exceed the target, prompts still get a small chunk, so a new
request is never starved (its TTFT grows instead).
"""

from __future__ import annotations

from collections import deque

MIN_PREFILL = 16   # tokens of prompt per step, whatever the target: admission must progress
WINDOW = 64        # recent steps the cost line is fitted on
SMALL = 64         # steps up to this many tokens also keep their own measured time (see step_time)


class StepPacer:
    """Learns the step cost from (tokens, seconds) and turns a TPOT target into a token budget."""

    def __init__(self, target_s: float) -> None:
        self.target_s = target_s
        self._steps: deque[tuple[int, float]] = deque(maxlen=WINDOW)
        self._small: dict[int, float] = {}  # tokens -> smoothed seconds, for small steps

    def observe(self, tokens: int, seconds: float) -> None:
        """One decode step's size and duration."""
        if tokens > 0 and seconds > 0:
            self._steps.append((tokens, seconds))
            if tokens <= SMALL:
                old = self._small.get(tokens)
                self._small[tokens] = seconds if old is None else 0.8 * old + 0.2 * seconds

    def step_time(self, tokens: int) -> float | None:
        """Seconds a step of `tokens` takes: measured for small steps once seen (small steps are not
        on the line: on a CPU a 2-token step costs far more than half a 4-token one), else the line."""
        if tokens in self._small:
            return self._small[tokens]
        cost = self.cost()
        return None if cost is None else cost[0] + cost[1] * tokens

    def cost(self) -> tuple[float, float] | None:
        """(fixed seconds, seconds per token) of a step, or None until the steps vary enough to tell."""
        n = len(self._steps)
        if n < 4:
            return None
        mx = sum(t for t, _ in self._steps) / n
        my = sum(s for _, s in self._steps) / n
        var = sum((t - mx) ** 2 for t, _ in self._steps)
        if var < 1.0:
            return None
        slope = sum((t - mx) * (s - my) for t, s in self._steps) / var
        if slope <= 0:
            return None
        return max(0.0, my - slope * mx), slope

    def budget(self, decoders: int, n_batch: int) -> int:
        """Tokens this step may carry: decoders first, then prompt chunks up to the target."""
        if self.target_s <= 0:
            return n_batch
        cost = self.cost()
        if cost is None:  # not measured yet: a moderate step, so the first measurements vary
            return min(n_batch, decoders + 4 * MIN_PREFILL)
        fixed, per_token = cost
        fits = int((self.target_s - fixed) / per_token)
        return max(1, min(n_batch, max(fits, decoders + MIN_PREFILL)))
