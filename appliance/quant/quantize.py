"""One call of llama.cpp's `llama_model_quantize`, with our policy and importance matrix.

In-process through the binding rather than the `llama-quantize` tool: the installed appliance then
needs no second build of llama.cpp, and the same libllama that serves the model writes it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from appliance.engine.llama import init_backend
from appliance.models.gguf import read_gguf
from appliance.quant.types import FULL_PRECISION, Policy, QuantError, ftype_value, ggml_type_value


def source_quant(path: Path) -> str:
    """The source's quantization name (F16, Q8_0, Q4_1, …) from its header."""
    from appliance.models.metadata import model_info

    return model_info(read_gguf(path)).quant


def check_source(path: Path, allow_requantize: bool) -> str:
    """Refuse an already-quantized source unless asked; returns its quantization name."""
    quant = source_quant(path)
    if quant.upper() not in FULL_PRECISION and not allow_requantize:
        raise QuantError(f"{path.name} is already quantized ({quant}); quantizing it again compounds the "
                         "error. Start from an F16/BF16/Q8_0 file, or pass --allow-requantize")
    return quant


def quantize_file(src: Path, dst: Path, qtype: str, policy: Policy,
                  imatrix: dict[str, np.ndarray] | None = None, allow_requantize: bool = False,
                  threads: int = 0) -> None:
    """Write `dst`, the `qtype` quantization of `src`. Raises QuantError if llama.cpp refuses."""
    import llama_cpp as lib

    init_backend()
    params = lib.llama_model_quantize_default_params()
    params.nthread = threads or os.cpu_count() or 1
    params.ftype = ftype_value(qtype)
    params.allow_requantize = allow_requantize
    if policy.output_type:
        params.output_tensor_type = ggml_type_value(policy.output_type)
    if policy.embedding_type:
        params.token_embedding_type = ggml_type_value(policy.embedding_type)
    keep_alive: list = []  # ctypes buffers llama.cpp reads during the call
    if policy.overrides:
        overrides = (lib.llama_model_tensor_override * (len(policy.overrides) + 1))()
        for slot, o in zip(overrides, policy.overrides, strict=False):
            slot.pattern, slot.type = o.pattern.encode(), ggml_type_value(o.type)
        overrides[-1].pattern = None  # NULL-terminated, as llama.cpp walks it
        params.tt_overrides = overrides
        keep_alive.append(overrides)
    if imatrix:
        params.imatrix = _imatrix_array(lib, imatrix, keep_alive)
    dst.parent.mkdir(parents=True, exist_ok=True)
    partial = dst.with_name(dst.name + ".partial")
    rc = lib.llama_model_quantize(str(src).encode(), str(partial).encode(), ctypes.byref(params))
    if rc != 0:
        partial.unlink(missing_ok=True)
        raise QuantError(f"llama.cpp could not quantize {src.name} to {qtype} (code {rc}); "
                         "APPLIANCE_LLAMA_LOG=1 shows its reason")
    os.replace(partial, dst)  # a finished file only: an interrupted run leaves no half model


def _imatrix_array(lib, imatrix: dict[str, np.ndarray], keep_alive: list):
    # llama.cpp copies name, data and size of each entry until a NULL name; the values are the
    # mean squared activations (already divided by their counts).
    entries = (lib.llama_model_imatrix_data * (len(imatrix) + 1))()
    for slot, (name, values) in zip(entries, sorted(imatrix.items()), strict=False):
        data = np.ascontiguousarray(values, dtype=np.float32)
        keep_alive.append(data)
        slot.name = name.encode()
        slot.data = data.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        slot.size = data.size
    entries[-1].name = None
    keep_alive.append(entries)
    return entries
