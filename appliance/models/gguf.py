"""A small, dependency-free GGUF header reader: metadata, tensor table, truncation check.

We read GGUF ourselves (instead of loading the model through llama.cpp) so that the registry,
`doctor` and `plan` can describe a 13B file in milliseconds without mapping its weights, and so
that a truncated or foreign file is a clear error rather than a crash in C code.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance.errors import ModelError

GGUF_MAGIC = b"GGUF"
# Arrays longer than this (tokenizer vocabularies) keep only their length.
_ARRAY_KEEP = 64

# ggml tensor types: id -> (name, elements per block, bytes per block).
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
}

# llama_ftype (general.file_type) -> the quantization name users know.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE",
}

# Bytes per element of the KV cache types we support.
KV_TYPE_BYTES: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32,
                                   "q4_0": 18 / 32}

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}


@dataclass
class TensorInfo:
    """One entry of the tensor table."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def n_bytes(self) -> int | None:
        spec = GGML_TYPES.get(self.type_id)
        if spec is None:
            return None
        _, block, size = spec
        return self.n_elements // block * size


@dataclass
class GGUFFile:
    """Parsed header of a GGUF file."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    data_offset: int
    file_size: int
    array_lengths: dict[str, int] = field(default_factory=dict)

    @property
    def expected_size(self) -> int:
        """Bytes the file must have to hold every tensor it declares."""
        end = self.data_offset
        for t in self.tensors:
            if t.n_bytes is not None:
                end = max(end, self.data_offset + t.offset + t.n_bytes)
        return end


class _Reader:
    def __init__(self, buf: mmap.mmap | bytes, path: Path) -> None:
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise ModelError(f"{self.path}: truncated GGUF header (file ends at byte {len(self.buf)})")
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise ModelError(f"{self.path}: truncated GGUF header (string past end of file)")
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            item_type, count = self.take("<I"), self.take("<Q")
            items = []
            for i in range(count):
                v = self.value(item_type)
                if i < _ARRAY_KEEP:
                    items.append(v)
            return _Array(items, count)
        raise ModelError(f"{self.path}: unknown GGUF value type {vtype}; not a GGUF file we can read")


class _Array(list):
    """A metadata array; `total` is its full length even when only a prefix was kept."""

    def __init__(self, items: list, total: int) -> None:
        super().__init__(items)
        self.total = total


def read_gguf(path: str | Path) -> GGUFFile:
    """Parse a GGUF file's header and tensor table. Raises ModelError on anything malformed."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    size = path.stat().st_size
    if size < 24:
        raise ModelError(f"{path}: not a GGUF file (only {size} bytes)")
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != GGUF_MAGIC:
            raise ModelError(f"{path}: not a GGUF file (magic {bytes(buf[:4])!r})")
        return _parse(_Reader(buf, path), path, size)


def _parse(r: _Reader, path: Path, size: int) -> GGUFFile:
    r.pos = 4
    version = r.take("<I")
    if version not in (2, 3):
        raise ModelError(f"{path}: unsupported GGUF version {version} (need 2 or 3)")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    if n_tensors > 1_000_000 or n_kv > 1_000_000:
        raise ModelError(f"{path}: corrupt GGUF header (implausible counts)")
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for _ in range(n_kv):
        key = r.string()
        value = r.value(r.take("<I"))
        if isinstance(value, _Array):
            lengths[key] = value.total
            value = list(value)
        metadata[key] = value
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        shape = tuple(r.take("<Q") for _ in range(n_dims))
        tensors.append(TensorInfo(name, shape, r.take("<I"), r.take("<Q")))
    align = int(metadata.get("general.alignment", 32)) or 32
    data_offset = (r.pos + align - 1) // align * align
    gguf = GGUFFile(path, version, metadata, tensors, data_offset, size, lengths)
    if gguf.expected_size > size:
        raise ModelError(
            f"{path}: truncated GGUF file ({size:,} bytes, tensors need {gguf.expected_size:,}); "
            "copy it again")
    return gguf
