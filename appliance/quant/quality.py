"""What quantization cost, on held-out text: perplexity, KL divergence, top-1 agreement.

As llama-perplexity does, each window of `n_ctx` tokens starts with BOS and only its second half is
scored, so every scored token has at least half a window of context. The source model's
next-token distributions are kept as their top `TOP_K` log-probabilities plus the rest of the mass
in one bucket; a candidate's KL divergence is then exact over that coarsened distribution (a lower
bound of the full-vocabulary KL, tight when the top K hold nearly all the mass). Only one model is
loaded at a time, so a 13B source and its quantization never need memory together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knowledge.threads import on_own_thread

TOP_K = 32
_FLOOR = 1e-10


@dataclass
class Reference:
    """The source model's view of the held-out tokens."""

    top_ids: np.ndarray     # (n, K) int32
    top_logp: np.ndarray    # (n, K) float32, descending
    target_logp: np.ndarray  # (n,) log-probability of the actual next token

    @property
    def ppl(self) -> float:
        return float(np.exp(-self.target_logp.mean()))


@dataclass
class Quality:
    """One candidate against the reference."""

    ppl_source: float
    ppl: float
    kld_mean: float
    kld_p99: float
    top1_agreement: float
    tokens: int

    def to_dict(self) -> dict:
        return {"ppl_source": round(self.ppl_source, 4), "ppl": round(self.ppl, 4),
                "delta_ppl_pct": round(100 * (self.ppl / self.ppl_source - 1), 2),
                "kld_mean": round(self.kld_mean, 5), "kld_p99": round(self.kld_p99, 5),
                "top1_agreement": round(self.top1_agreement, 4), "eval_tokens": self.tokens}


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def _scored(model: Path, windows: list[list[int]], n_gpu_layers: int,
            progress: Callable[[int], None] | None) -> Iterable[tuple[np.ndarray, np.ndarray]]:
    """(log-probs of the scored rows, the tokens they predict) per window."""
    from appliance.engine.llama import ContextConfig, LlamaRunner
    from appliance.engine.sequence import BatchItem

    n_ctx = max(len(w) for w in windows)
    cfg = ContextConfig(model_path=model, n_ctx=n_ctx, n_seq_max=1, n_batch=n_ctx, n_ubatch=n_ctx,
                        n_gpu_layers=n_gpu_layers)
    with LlamaRunner(cfg) as runner:
        for window in windows:
            runner.clear_memory()
            runner.decode([BatchItem(slot=0, tokens=window, start=0, logits=True, every_row=True)])
            first = len(window) // 2
            logp = _log_softmax(runner.output_logits(len(window))[first:-1])
            if progress:
                progress(len(window))
            yield logp, np.asarray(window[first + 1:], dtype=np.int64)


def reference(model: Path, windows: list[list[int]], n_gpu_layers: int = -1,
              progress: Callable[[int], None] | None = None) -> Reference:
    """The source model's top-K distributions and next-token log-probabilities (computed on a thread
    that ends with it: knowledge.threads)."""
    return on_own_thread(lambda: _reference(model, windows, n_gpu_layers, progress), name="quantize-check")


def _reference(model: Path, windows: list[list[int]], n_gpu_layers: int,
               progress: Callable[[int], None] | None) -> Reference:
    ids, logps, targets = [], [], []
    for logp, nxt in _scored(model, windows, n_gpu_layers, progress):
        top = np.argpartition(-logp, TOP_K, axis=1)[:, :TOP_K]
        top_lp = np.take_along_axis(logp, top, axis=1)
        order = np.argsort(-top_lp, axis=1)
        ids.append(np.take_along_axis(top, order, axis=1).astype(np.int32))
        logps.append(np.take_along_axis(top_lp, order, axis=1).astype(np.float32))
        targets.append(logp[np.arange(len(nxt)), nxt])
    return Reference(np.concatenate(ids), np.concatenate(logps), np.concatenate(targets))


def compare(model: Path, windows: list[list[int]], ref: Reference, n_gpu_layers: int = -1,
            progress: Callable[[int], None] | None = None) -> Quality:
    """Score `model` on the same windows against the source's reference (on a thread that ends with
    it: knowledge.threads)."""
    return on_own_thread(lambda: _compare(model, windows, ref, n_gpu_layers, progress), name="quantize-check")


def _compare(model: Path, windows: list[list[int]], ref: Reference, n_gpu_layers: int,
             progress: Callable[[int], None] | None) -> Quality:
    klds, agree, targets, at = [], [], [], 0
    for logp, nxt in _scored(model, windows, n_gpu_layers, progress):
        n = len(nxt)
        ids, p_logp = ref.top_ids[at:at + n], ref.top_logp[at:at + n].astype(np.float64)
        at += n
        q_logp = np.take_along_axis(logp, ids.astype(np.int64), axis=1)
        p = np.exp(p_logp)
        p_rest = np.clip(1 - p.sum(axis=1), _FLOOR, 1)
        q_rest = np.clip(1 - np.exp(q_logp).sum(axis=1), _FLOOR, 1)
        kld = (p * (p_logp - q_logp)).sum(axis=1) + p_rest * (np.log(p_rest) - np.log(q_rest))
        klds.append(np.maximum(kld, 0.0))
        agree.append(logp.argmax(axis=1) == ids[:, 0])
        targets.append(logp[np.arange(n), nxt])
    kld_all = np.concatenate(klds)
    return Quality(ref.ppl, float(np.exp(-np.concatenate(targets).mean())), float(kld_all.mean()),
                   float(np.percentile(kld_all, 99)), float(np.concatenate(agree).mean()), int(kld_all.size))
