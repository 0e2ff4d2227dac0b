"""GGUF headers through llama.cpp's own `gguf` package: metadata, tensor table, truncation check.

We read the header in Python (instead of loading the model through llama.cpp) so that the registry,
`doctor` and `plan` can describe a 13B file without mapping its weights into a context, and so that
a truncated or foreign file is a clear `ModelError` rather than a crash in C code. The `gguf`
package follows new tensor and file types as llama.cpp adds them; this module only adapts its
reader to the small view the appliance needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance.errors import ModelError

# Arrays longer than this (tokenizer vocabularies) keep only their length.
_ARRAY_KEEP = 64

# Bytes per element of the KV cache types we support (the ledger's arithmetic, not a file format).
KV_TYPE_BYTES: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32,
                                   "q4_0": 18 / 32}


@dataclass
class TensorInfo:
    """One entry of the tensor table."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    n_elements: int
    n_bytes: int


@dataclass
class GGUFFile:
    """Parsed header of a GGUF file."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    file_size: int
    array_lengths: dict[str, int] = field(default_factory=dict)


def file_type_name(ftype: int) -> str | None:
    """llama_ftype (`general.file_type`) → the quantization name users know (Q4_K_M, F16, …)."""
    from gguf import LlamaFileType

    try:
        name = LlamaFileType(int(ftype)).name
    except ValueError:
        return None
    return None if name == "GUESSED" else name.removeprefix("MOSTLY_").removeprefix("ALL_")


def read_gguf(path: str | Path) -> GGUFFile:
    """Parse a GGUF file's header and tensor table. Raises ModelError on anything malformed."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    size = path.stat().st_size
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        raise ModelError(f"{path}: not a GGUF file (magic {magic!r})")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except (ValueError, IndexError, KeyError, OverflowError) as e:
        # The reader maps tensor data as it goes: a file cut short fails while building views.
        raise ModelError(f"{path}: truncated or corrupt GGUF file ({size:,} bytes): {e}; copy it again") from None
    metadata, lengths = _metadata(reader)
    tensors = [TensorInfo(t.name, tuple(int(d) for d in t.shape), t.tensor_type.name, int(t.n_elements),
                          int(t.n_bytes)) for t in reader.tensors]
    end = max((t.data_offset + t.n_bytes for t in reader.tensors), default=reader.data_offset)
    if end > size:
        raise ModelError(f"{path}: truncated GGUF file ({size:,} bytes, tensors need {end:,}); copy it again")
    return GGUFFile(path, int(metadata.pop("GGUF.version", 3)), metadata, tensors, size, lengths)


def _metadata(reader) -> tuple[dict[str, Any], dict[str, int]]:
    from gguf import GGUFValueType

    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for key, fld in reader.fields.items():
        if key.startswith("GGUF.") and key != "GGUF.version":
            continue
        if fld.types and fld.types[0] == GGUFValueType.ARRAY:
            lengths[key] = len(fld.data)
            metadata[key] = fld.contents(slice(0, _ARRAY_KEEP))
        else:
            metadata[key] = fld.contents()
    return metadata, lengths
