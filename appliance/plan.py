"""`appliance plan`: the memory ledger of a deployment — weights, KV cache, compute buffers, headroom.

The reference deployment redrew this ledger after every change: the KV cache, not the weights,
is what runs out under concurrency. Works from a GGUF file (exact weights, measured compute
buffers) or from a description (`--params 13B --layers 40 --kv-heads 40 --head-dim 128`).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field

from appliance.errors import ApplianceError
from appliance.models.gguf import KV_TYPE_BYTES

# Average bits per weight of common GGUF quantizations (llama.cpp's own figures, rounded);
# INT4/INT8/FP16 are the nominal widths used in back-of-envelope arithmetic.
BITS_PER_WEIGHT = {
    "F32": 32.0, "F16": 16.0, "FP16": 16.0, "BF16": 16.0, "INT8": 8.0, "Q8_0": 8.5, "Q6_K": 6.56,
    "Q5_K_M": 5.69, "Q5_K_S": 5.54, "Q5_1": 6.0, "Q5_0": 5.5, "Q4_K_M": 4.85, "Q4_K_S": 4.58,
    "Q4_1": 5.0, "Q4_0": 4.5, "IQ4_XS": 4.25, "INT4": 4.0, "Q3_K_M": 3.91, "Q3_K_S": 3.5, "Q2_K": 3.35,
}
OVERHEAD_BYTES = 300 * 2**20  # runtime, CUDA context and scratch not in llama.cpp's buffer reports
N_UBATCH = 512


class PlanError(ApplianceError):
    """The description is incomplete or inconsistent."""


@dataclass
class Shape:
    """What the ledger needs to know about a model."""

    name: str
    n_params: int
    n_layer: int
    n_head_kv: int
    head_dim: int
    quant: str
    n_head: int = 0
    n_embd: int = 0
    n_vocab: int = 32000
    weights_bytes: int = 0
    head_dim_v: int = 0

    def __post_init__(self) -> None:
        self.n_head = self.n_head or self.n_head_kv
        self.n_embd = self.n_embd or self.n_head * self.head_dim
        self.head_dim_v = self.head_dim_v or self.head_dim
        if not self.weights_bytes:
            bits = BITS_PER_WEIGHT.get(self.quant.upper())
            if bits is None:
                raise PlanError(f"unknown quantization {self.quant!r}; one of {', '.join(BITS_PER_WEIGHT)}")
            self.weights_bytes = int(self.n_params * bits / 8)

    @classmethod
    def of(cls, name: str, info) -> Shape:
        """The shape of a model described by its `ModelInfo` (from the GGUF header)."""
        return cls(name, info.n_params, info.n_layer, info.n_head_kv, info.head_dim_k, info.quant, n_head=info.n_head,
                   n_embd=info.n_embd, n_vocab=info.n_vocab or 32000, weights_bytes=info.weights_bytes,
                   head_dim_v=info.head_dim_v)

    def kv_bytes_per_token(self, kv_type: str = "f16") -> int:
        """2 (K and V) × layers × KV heads × head size × bytes per value."""
        return int(round(self.n_layer * self.n_head_kv * (self.head_dim + self.head_dim_v) * KV_TYPE_BYTES[kv_type]))


@dataclass
class Ledger:
    """One deployment's memory, in bytes, with what fits."""

    model: str
    quant: str
    kv_type: str
    context: int
    concurrency: int
    weights_bytes: int
    kv_bytes_per_token: int
    kv_bytes_per_seq: int
    kv_bytes_total: int
    compute_bytes: int
    compute_measured: bool
    overhead_bytes: int
    total_bytes: int
    device_bytes: int
    free_bytes: int
    fits: bool
    max_concurrency: int
    max_context: int
    advice: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def estimate_compute(shape: Shape, n_ctx: int, flash_attn: bool = True) -> int:
    """llama.cpp's compute buffer: the logits of one micro-batch, or the attention scores when
    flash attention is off (whichever is larger: the graph allocator reuses memory), plus
    activations. Checked against llama.cpp's own report in the tests."""
    logits = 4 * N_UBATCH * shape.n_vocab
    scores = 0 if flash_attn else 4 * N_UBATCH * n_ctx * shape.n_head
    activations = 4 * N_UBATCH * shape.n_embd * 8
    return max(logits, scores) + activations


def parse_size(text: str) -> int:
    """'24GB', '24 GiB', '6.5G', '13B' (params) → a number."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGTB]?)(IB|B)?\s*", text.upper())
    if not m:
        raise PlanError(f"cannot read size {text!r}; use e.g. 24GB or 13B")
    scale = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "B": 1e9}[m.group(2)]
    if m.group(3) == "IB":
        scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[m.group(2)]
    return int(float(m.group(1)) * scale)


def plan(shape: Shape, device_bytes: int, context: int, concurrency: int, kv_type: str = "f16",
         compute_bytes: int | None = None) -> Ledger:
    """The ledger for `concurrency` sequences of `context` tokens each on `device_bytes`."""
    if context < 1 or concurrency < 1:
        raise PlanError("context and concurrency must be at least 1")
    if kv_type not in KV_TYPE_BYTES:
        raise PlanError(f"unknown KV type {kv_type!r}")
    per_token = shape.kv_bytes_per_token(kv_type)
    total_ctx = context * concurrency
    measured = compute_bytes is not None
    compute = compute_bytes if measured else estimate_compute(shape, total_ctx)
    fixed = shape.weights_bytes + compute + OVERHEAD_BYTES
    kv_total = per_token * total_ctx
    total = fixed + kv_total
    room = device_bytes - fixed
    ledger = Ledger(shape.name, shape.quant, kv_type, context, concurrency, shape.weights_bytes, per_token,
                    per_token * context, kv_total, compute, measured, OVERHEAD_BYTES, total, device_bytes,
                    device_bytes - total, total <= device_bytes,
                    max(0, room // (per_token * context)) if room > 0 else 0,
                    max(0, room // (per_token * concurrency)) if room > 0 else 0)
    ledger.advice = _advice(ledger, shape)
    return ledger


def _advice(ledger: Ledger, shape: Shape) -> list[str]:
    if ledger.fits:
        return []
    out = []
    if ledger.weights_bytes + ledger.compute_bytes + OVERHEAD_BYTES > ledger.device_bytes:
        out.append("the weights alone do not fit: use a smaller quantization or model, or more memory")
        return out
    if ledger.max_concurrency >= 1:
        out.append(f"lower concurrency to {ledger.max_concurrency} at context {ledger.context}")
    if ledger.max_context >= 1:
        out.append(f"lower context to {ledger.max_context} tokens at concurrency {ledger.concurrency}")
    if ledger.kv_type == "f16":
        out.append("store the KV cache in 8-bit (engine.type_k/type_v = q8_0): about half the KV bytes")
    need = ledger.total_bytes - ledger.device_bytes
    out.append(f"or add {math.ceil(need / 2**30)} GiB of memory")
    return out


def detect_device_bytes() -> tuple[int, str]:
    """GPU memory from nvidia-smi, else system RAM (CPU deployments)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout.split()
            if out:
                return int(float(out[0]) * 2**20), "GPU (nvidia-smi)"
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "system RAM (no GPU)"
