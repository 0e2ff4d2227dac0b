"""`appliance quantize` end to end: calibrate, quantize, measure, gate, register.

A `Workbench` prepares what every candidate is judged by once (calibration and held-out windows,
the source model's reference distributions, the importance matrix) and then builds and measures
any number of candidates: one for a plain run, a grid for `--compare`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from appliance.models.gguf import read_gguf
from appliance.models.metadata import ModelInfo, model_info
from appliance.quant import calib, imatrix, quality
from appliance.quant.quantize import check_source, quantize_file
from appliance.quant.types import (
    BASE_TYPE,
    TYPE_BITS,
    Override,
    QuantError,
    bits_per_weight,
    policy_for,
    repack_share,
    tensor_types,
)

# Tensor groups tried at Q8_0 when a candidate fails the gate, to say which ones to keep higher.
GROUPS = {"output+token_embd": (r"^output\.weight$", r"^token_embd\.weight$"), "attn_v": (r"attn_v\.weight",),
          "ffn_down": (r"ffn_down\.weight",), "attn_q+attn_k": (r"attn_q\.weight", r"attn_k\.weight"),
          "attn_output": (r"attn_output\.weight",), "ffn_up+ffn_gate": (r"ffn_up\.weight", r"ffn_gate\.weight")}

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class Options:
    """What the user asked for (the CLI's flags)."""

    source: Path
    calib_texts: list[str]
    calib_origin: str
    n_ctx: int = 512
    calib_tokens: int = 16384
    eval_tokens: int = 4096
    allow_requantize: bool = False
    n_gpu_layers: int = -1
    skipped: list[str] = field(default_factory=list)


@dataclass
class Candidate:
    """One quantized file and what it costs."""

    type: str
    imatrix: bool
    path: Path
    bytes: int
    bits_per_weight: float
    tensor_types: dict[str, str]
    quality: quality.Quality
    model: ModelInfo  # the header's facts, for `plan`'s ledger
    repack_share: float = 0.0
    tok_s_b1: float | None = None
    tok_s_b16: float | None = None

    def to_dict(self) -> dict:
        return {"type": self.type, "imatrix": self.imatrix, "path": str(self.path), "bytes": self.bytes,
                "bits_per_weight": round(self.bits_per_weight, 3), "cpu_repack_share": round(self.repack_share, 3),
                **self.quality.to_dict(),
                "tok_s_b1": _r(self.tok_s_b1), "tok_s_b16": _r(self.tok_s_b16)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


class Workbench:
    """Shared preparation for the candidates of one source model."""

    def __init__(self, opts: Options, progress: Progress | None = None) -> None:
        self.opts = opts
        self.progress = progress or (lambda stage, done, total: None)
        self.source_quant = check_source(opts.source, opts.allow_requantize)
        split = calib.split(opts.calib_texts, opts.calib_origin, opts.skipped)
        self.text = split
        tokenize, bos = _tokenizer(opts.source)
        user_budget = int(opts.calib_tokens * (1 - calib.GENERAL_SHARE))
        user = calib.windows(tokenize, split.calibration, opts.n_ctx, user_budget, bos)
        general = calib.windows(tokenize, calib.general_text(), opts.n_ctx, opts.calib_tokens - user_budget, bos)
        self.calib_windows = user + general
        self.eval_windows = calib.windows(tokenize, split.held_out, opts.n_ctx, opts.eval_tokens, bos)
        if not self.eval_windows:
            raise QuantError(f"{opts.calib_origin}: the held-out text is under 64 tokens; give more documents")
        self.user_calib_tokens = sum(len(w) for w in user)
        self.general_calib_tokens = sum(len(w) for w in general)
        self._imatrix: dict[str, np.ndarray] | None = None
        self.reference = quality.reference(opts.source, self.eval_windows, opts.n_gpu_layers,
                                           self._counter("reference", self.eval_windows))

    def _counter(self, stage: str, windows: list[list[int]]) -> Callable[[int], None]:
        total, done = sum(len(w) for w in windows), [0]

        def step(n: int) -> None:
            done[0] += n
            self.progress(stage, done[0], total)
        return step

    @property
    def imatrix(self) -> dict[str, np.ndarray]:
        """The importance matrix over the calibration windows (computed on first use)."""
        if self._imatrix is None:
            self._imatrix = imatrix.compute(self.opts.source, self.calib_windows, self.opts.n_ctx,
                                            self._counter("imatrix", self.calib_windows), self.opts.n_gpu_layers)
        return self._imatrix

    def build(self, qtype: str, out: Path, use_imatrix: bool = True, keep: list[Override] | None = None,
              mixed: bool = True, bench: bool = True) -> Candidate:
        """Quantize to `out` and measure the result against the reference."""
        qtype = qtype.upper()
        self.progress(f"quantize {qtype}", 0, 1)
        quantize_file(self.opts.source, out, qtype, policy_for(qtype, keep or [], mixed),
                      self.imatrix if use_imatrix else None, allow_requantize=True)
        info = read_gguf(out)
        q = quality.compare(out, self.eval_windows, self.reference, self.opts.n_gpu_layers,
                            self._counter(f"check {qtype}", self.eval_windows))
        cand = Candidate(qtype, use_imatrix, out, out.stat().st_size, bits_per_weight(info), tensor_types(info), q,
                         model_info(info), repack_share(info))
        if bench:
            cand.tok_s_b1, cand.tok_s_b16 = decode_rates(out, self.opts.n_gpu_layers)
        return cand

    def diagnose(self, qtype: str, out: Path, use_imatrix: bool, keep: list[Override], baseline: float,
                 mixed: bool = True) -> list[dict]:
        """KLD with each tensor group kept at Q8_0, best first: what to keep higher."""
        wide = "Q8_0" if TYPE_BITS.get(BASE_TYPE[qtype.upper()], 16) < TYPE_BITS["Q8_0"] else None
        if wide is None:
            return []
        found = []
        for group, patterns in GROUPS.items():
            extra = [Override(p, wide) for p in patterns]
            trial = out.with_name(out.stem + ".trial.gguf")
            try:
                c = self.build(qtype, trial, use_imatrix, extra + keep, mixed, bench=False)
            finally:
                trial.unlink(missing_ok=True)
            found.append({"group": group, "keep": [f"{p}={wide}" for p in patterns],
                          "kld_mean": round(c.quality.kld_mean, 5),
                          "kld_saved_pct": round(100 * (1 - c.quality.kld_mean / baseline), 1) if baseline else 0.0,
                          "bytes": c.bytes})
        return sorted(found, key=lambda d: d["kld_mean"])

    def facts(self) -> dict:
        """Where the calibration and check text came from, for the report."""
        return {"calibration": self.text.origin, "files": self.text.files, "skipped": self.text.skipped,
                "calib_tokens_user": self.user_calib_tokens, "calib_tokens_general": self.general_calib_tokens,
                "eval_tokens_scored": int(self.reference.target_logp.size), "source_quant": self.source_quant}


def _tokenizer(model: Path) -> tuple[Callable[[str], list[int]], int | None]:
    from appliance.engine.llama import ContextConfig, LlamaRunner

    runner = LlamaRunner(ContextConfig(model_path=model, vocab_only=True))
    specials = runner.tokenize("", add_special=True)  # [BOS] when the model wants one, else []
    bos = specials[0] if specials else None

    def tokenize(text: str) -> list[int]:
        return runner.tokenize(text, add_special=False, parse_special=False)
    tokenize.runner = runner  # type: ignore[attr-defined]  # keep the vocabulary loaded while in use
    return tokenize, bos


def decode_rates(model: Path, n_gpu_layers: int = -1) -> tuple[float, float]:
    """Decode tokens/s at batch 1 and 16 through our runner (the ceiling's measurement)."""
    from appliance.bench.ceiling import measure
    from appliance.engine.llama import ContextConfig

    rates = measure(ContextConfig(model_path=model, n_ctx=2048, n_gpu_layers=n_gpu_layers), batches=(1, 16))
    return rates.decode_tok_s[1], rates.decode_tok_s[16]

