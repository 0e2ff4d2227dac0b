"""The machine's own ceiling for a workload: how fast it could possibly have run here.

Measured through our runner (not a datasheet): the prefill rate (tokens/s of one long chunk) and
the aggregate decode rate at batch 1..N (N sequences, one token each per step, each holding a shared
384-token prefix plus 64 tokens of its own, as chat requests over one system prompt do: attention
over the context is part of a decode step's cost). A workload that
computed P uncached prompt tokens and generated G tokens at an observed batch B cannot take less
than P / prefill + G / decode(B) seconds; its achieved throughput over G / that time is the share of
the ceiling reached. Benchmarks print it next to every throughput figure.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from appliance.engine.llama import ContextConfig, LlamaRunner
from appliance.engine.sequence import BatchItem
from knowledge.threads import on_own_thread

BATCHES = (1, 2, 4, 8, 16)
PROMPT = 256      # tokens of the prefill measurement
STEPS = 16        # decode steps timed per batch size
SHARED = 384      # tokens of a shared prefix every decoding sequence holds (a system prompt, copied)
CONTEXT = 64      # tokens of its own each decoding sequence holds after it


@dataclass
class Rates:
    """Measured rates of one model on this machine."""

    prefill_tok_s: float
    decode_tok_s: dict[int, float]  # batch size -> aggregate tokens/s

    def decode_at(self, batch: float) -> float:
        """Aggregate decode tokens/s at `batch` sequences (linear between measured sizes, clamped)."""
        sizes = sorted(self.decode_tok_s)
        if batch <= sizes[0]:
            return self.decode_tok_s[sizes[0]]
        for lo, hi in zip(sizes, sizes[1:], strict=False):
            if batch <= hi:
                w = (batch - lo) / (hi - lo)
                return self.decode_tok_s[lo] * (1 - w) + self.decode_tok_s[hi] * w
        return self.decode_tok_s[sizes[-1]]

    def share(self, uncached: int, generated: int, batch: float, achieved_tok_s: float) -> dict:
        """The ceiling throughput for this work and the share of it `achieved_tok_s` is."""
        seconds = uncached / self.prefill_tok_s + generated / self.decode_at(max(1.0, batch))
        ceiling = generated / seconds if seconds > 0 else 0.0
        return {"ceiling_tok_s": round(ceiling, 2),
                "ceiling_fraction": round(achieved_tok_s / ceiling, 3) if ceiling else None}

    def to_dict(self) -> dict:
        return {"prefill_tok_s": round(self.prefill_tok_s, 1),
                "decode_tok_s": {str(b): round(r, 1) for b, r in self.decode_tok_s.items()}}


def measure(ctx: ContextConfig, batches: tuple[int, ...] = BATCHES) -> Rates:
    """Prefill and decode rates of `ctx`'s model, through a context of its own (freed after), on a
    thread that ends with the measurement (`knowledge.threads`: otherwise its idle OpenMP team slows
    every later decode on an engine's thread, and the ceiling would be compared with a handicapped run).
    """
    return on_own_thread(lambda: _measure(ctx, batches), name="ceiling")


def _measure(ctx: ContextConfig, batches: tuple[int, ...]) -> Rates:
    top = max(batches)
    cfg = ContextConfig(**{**ctx.__dict__, "n_seq_max": max(top, 1),
                           "n_ctx": max(ctx.n_ctx, SHARED + top * (CONTEXT + STEPS + 8), PROMPT * 2)})
    with LlamaRunner(cfg) as runner:
        ids = runner.tokenize("The quick brown fox jumps over the lazy dog. " * 64, add_special=False)
        tokens = ids * ((SHARED + CONTEXT) // max(1, len(ids)) + 1)
        prompt = tokens[:min(PROMPT, runner.n_batch)]
        times = []
        for _ in range(3):
            runner.clear_memory()
            t0 = time.perf_counter()
            runner.decode([BatchItem(slot=0, tokens=prompt, start=0, logits=True)])
            times.append(time.perf_counter() - t0)
        prefill = len(prompt) / statistics.median(times)
        return Rates(prefill, {b: _decode_rate(runner, tokens, b) for b in batches})


def measure_for(settings) -> Rates:
    """The rates of the configured chat model with the configured engine settings."""
    return measure(engine_context(settings))


def engine_context(settings, model: str = "") -> ContextConfig:
    """The llama.cpp context the engine settings ask for (threads, offload, KV types, flash
    attention) over `model` (registry name or GGUF path; default the chat model), so that the
    benchmarks measuring parts of a step compare with the ceiling."""
    from pathlib import Path

    from appliance.engine.engine import context_config
    from appliance.models.registry import ModelRegistry

    entry = ModelRegistry(settings.data_path).resolve(model or settings.chat_model)
    return context_config(settings, Path(entry.path))


def _decode_rate(runner: LlamaRunner, prompt: list[int], batch: int) -> float:
    runner.clear_memory()
    shared, own = prompt[:SHARED], prompt[SHARED:SHARED + CONTEXT]
    runner.decode([BatchItem(slot=0, tokens=shared, start=0, logits=False)])
    for s in range(1, batch):
        runner.seq_cp(0, s, 0, len(shared))
    per_call = max(1, runner.n_batch // len(own))  # the own parts, as many per decode as n_batch allows
    for first in range(0, batch, per_call):
        runner.decode([BatchItem(slot=s, tokens=own, start=len(shared), logits=False)
                       for s in range(first, min(batch, first + per_call))])
    token, start = own[-1], len(shared) + len(own)
    t0 = time.perf_counter()
    for step in range(STEPS):
        runner.decode([BatchItem(slot=s, tokens=[token], start=start + step, logits=True) for s in range(batch)])
    return batch * STEPS / (time.perf_counter() - t0)


def add_share(run, rates: Rates) -> None:
    """Put a load run's share of the ceiling into its server facts (shown by the report)."""
    from appliance.bench.load import ok_records

    ok = ok_records(run)
    generated = sum(r.out_tokens for r in ok)
    if not generated or not run.wall_s:
        return
    uncached = sum(max(0, r.prompt_tokens - r.cached_tokens) for r in ok)
    batch = run.server.get("peak_running") or run.concurrency
    run.server.update(rates.share(uncached, generated, min(batch, run.concurrency), generated / run.wall_s))
