"""The importance matrix: mean squared activations entering each weight matrix, from calibration text.

llama.cpp's quantizers weigh each weight column by how large its input gets on real text, so the
columns the team's documents light up keep more precision. We compute it in-process, as
`llama-imatrix` does, through the scheduler's eval callback: for every matrix multiplication with a
model weight (`blk.*`) and at least 16 activation rows, the activations' squares are summed per
input column, then divided by the number of rows. No second llama.cpp build is needed, and the
result goes straight into `llama_model_quantize`.

The callback reads `struct ggml_tensor` through ctypes. Its layout is checked against the
library's own `ggml_tensor_overhead()` before any callback is installed, so a libggml whose
struct changed is a clear error instead of garbage.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from appliance.quant.types import QuantError
from knowledge.threads import on_own_thread

_MAX_DIMS, _MAX_SRC, _MAX_OP_PARAMS, _MAX_NAME = 4, 10, 64, 64
_OBJECT_SIZE = 32  # struct ggml_object, which ggml_tensor_overhead() adds
_F32 = 0
MIN_ROWS = 16      # as llama-imatrix: tiny batches (single-token decodes) are not representative


class _Tensor(ctypes.Structure):
    pass


_Tensor._fields_ = [
    ("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
    ("ne", ctypes.c_int64 * _MAX_DIMS), ("nb", ctypes.c_size_t * _MAX_DIMS),
    ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * (_MAX_OP_PARAMS // 4)), ("flags", ctypes.c_int32),
    ("src", ctypes.POINTER(_Tensor) * _MAX_SRC), ("view_src", ctypes.POINTER(_Tensor)),
    ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * _MAX_NAME),
    ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8),
]


def _ggml():
    import llama_cpp

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_tensor_overhead.restype = ctypes.c_size_t
    lib.ggml_op_name.restype = ctypes.c_char_p
    lib.ggml_op_name.argtypes = [ctypes.c_int]
    lib.ggml_nbytes.restype = ctypes.c_size_t
    lib.ggml_nbytes.argtypes = [ctypes.POINTER(_Tensor)]
    lib.ggml_backend_buffer_is_host.restype = ctypes.c_bool
    lib.ggml_backend_buffer_is_host.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.argtypes = [ctypes.POINTER(_Tensor), ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_size_t]
    if lib.ggml_tensor_overhead() != ctypes.sizeof(_Tensor) + _OBJECT_SIZE:
        raise QuantError("this libggml's tensor layout differs from the one the importance-matrix "
                         "collector reads; quantize without --calib (no imatrix) or update the appliance")
    return lib


def weight_name(raw: bytes) -> str:
    """`blk.0.attn_q.weight`, also from a backend copy's name such as `CUDA0#blk.0.attn_q.weight#0`."""
    name = raw.decode("utf-8", "replace")
    if "#" in name:
        name = name.split("#")[1]
    return name


class Collector:
    """Sums of squared activations per weight; installs itself as a context's eval callback."""

    def __init__(self) -> None:
        self.ggml = _ggml()
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}
        self.skipped_moe = 0
        self.error: BaseException | None = None
        self._mul_mat = self._op_ids()
        import llama_cpp

        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._on_tensor)

    def _op_ids(self) -> dict[str, int]:
        # ggml_op_name does not bound-check, so walk up from 0 only until both are found (they sit
        # early in the enum); names avoid hard-coding its numbering.
        names: dict[str, int] = {}
        for op in range(64):
            name = self.ggml.ggml_op_name(op)
            if name in (b"MUL_MAT", b"MUL_MAT_ID"):
                names[name.decode()] = op
                if len(names) == 2:
                    return names
        raise QuantError("libggml's operation names lack MUL_MAT; cannot collect an importance matrix")

    def _on_tensor(self, ptr, ask: bool, _user) -> bool:
        try:
            t = ctypes.cast(ptr, ctypes.POINTER(_Tensor)).contents
            return self._wanted(t) if ask else self._collect(t)
        except BaseException as e:  # noqa: BLE001 - an exception must not unwind through C
            self.error = self.error or e
            return not ask  # keep computing; the error is raised after the decode

    def _wanted(self, t: _Tensor) -> bool:
        if t.op == self._mul_mat.get("MUL_MAT_ID", -1):
            self.skipped_moe += 1  # expert matrices keep llama.cpp's plain quantization
            return False
        if t.op != self._mul_mat["MUL_MAT"]:
            return False
        src0, src1 = t.src[0].contents, t.src[1].contents
        return src1.ne[1] >= MIN_ROWS and src1.type == _F32 and weight_name(src0.name).startswith("blk.")

    def _collect(self, t: _Tensor) -> bool:
        src0, src1 = t.src[0].contents, t.src[1].contents
        x = self._activations(t.src[1], src1)
        name = weight_name(src0.name)
        x64 = x.astype(np.float64)
        per_slice = (x64 * x64).sum(axis=2)  # (ne3, ne2, ne0): summed over the rows
        n2, n3 = int(src0.ne[2]), int(src0.ne[3])
        sq = np.zeros((n2 * n3, x.shape[-1]))
        for i3 in range(per_slice.shape[0]):  # 3-D+ activations over a 2-D weight all land in slice 0
            for i2 in range(per_slice.shape[1]):
                sq[(i3 % n3) * n2 + (i2 % n2)] += per_slice[i3, i2]
        rows = x.shape[0] * x.shape[1] * x.shape[2] // (n2 * n3)
        if name not in self.sums:
            self.sums[name], self.counts[name] = np.zeros_like(sq), 0
        self.sums[name] += sq
        self.counts[name] += rows
        return True

    def _activations(self, ptr, t: _Tensor) -> np.ndarray:
        if t.nb[0] != 4:
            raise QuantError("non-contiguous activations in a matrix multiplication")
        nbytes = self.ggml.ggml_nbytes(ptr)
        if self.ggml.ggml_backend_buffer_is_host(t.buffer):
            raw = (ctypes.c_char * nbytes).from_address(t.data)
            buf = np.frombuffer(raw, dtype=np.uint8)
        else:  # GPU memory: copy it out, as llama-imatrix does
            buf = np.empty(nbytes, dtype=np.uint8)
            self.ggml.ggml_backend_tensor_get(ptr, buf.ctypes.data, 0, nbytes)
        shape = (int(t.ne[3]), int(t.ne[2]), int(t.ne[1]), int(t.ne[0]))
        strides = (int(t.nb[3]), int(t.nb[2]), int(t.nb[1]), 4)
        return np.lib.stride_tricks.as_strided(buf.view(np.float32), shape=shape, strides=strides)

    def result(self) -> dict[str, np.ndarray]:
        """Per weight, the mean squared activation per input column (flattened over stacked matrices)."""
        if self.error is not None:
            raise QuantError(f"importance matrix collection failed: {self.error}")
        return {n: (s / max(1, self.counts[n])).astype(np.float32).ravel() for n, s in self.sums.items()}


def compute(model: Path, windows: Iterable[list[int]], n_ctx: int,
            progress: Callable[[int], None] | None = None, n_gpu_layers: int = -1) -> dict[str, np.ndarray]:
    """The importance matrix of `model` over token `windows` (each at most `n_ctx` tokens), computed
    on a thread that ends with it (knowledge.threads: no OpenMP team left to slow later decodes)."""
    return on_own_thread(lambda: _compute(model, windows, n_ctx, progress, n_gpu_layers), name="imatrix")


def _compute(model: Path, windows: Iterable[list[int]], n_ctx: int,
             progress: Callable[[int], None] | None, n_gpu_layers: int) -> dict[str, np.ndarray]:
    from appliance.engine.llama import ContextConfig, LlamaRunner
    from appliance.engine.sequence import BatchItem

    collector = Collector()
    cfg = ContextConfig(model_path=model, n_ctx=n_ctx, n_seq_max=1, n_batch=n_ctx, n_ubatch=n_ctx,
                        n_gpu_layers=n_gpu_layers, eval_callback=collector.callback)
    with LlamaRunner(cfg) as runner:
        for window in windows:
            runner.clear_memory()
            # every row's logits: otherwise llama.cpp skips the last layer's FFN for rows without output
            runner.decode([BatchItem(slot=0, tokens=window, start=0, logits=True, every_row=True)])
            if collector.error is not None:
                break
            if progress:
                progress(len(window))
    matrix = collector.result()
    if not matrix:
        raise QuantError("the calibration text produced no importance data (too few tokens per window?)")
    return matrix
