"""What the appliance needs to know about a model, derived from its GGUF header."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from appliance.models.gguf import KV_TYPE_BYTES, GGUFFile, file_type_name, read_gguf


@dataclass
class ModelInfo:
    """Architecture facts of one model; the KV ledger and `plan` are computed from these."""

    architecture: str
    name: str
    n_params: int
    quant: str
    weights_bytes: int
    context_length: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_embd: int
    head_dim_k: int
    head_dim_v: int
    has_chat_template: bool
    n_vocab: int = 0

    def kv_bytes_per_token(self, type_k: str = "f16", type_v: str | None = None) -> int:
        """KV cache bytes one token costs over all layers: n_layer × n_kv_head × (K + V) dims."""
        type_v = type_v or type_k
        per_layer = self.n_head_kv * (self.head_dim_k * KV_TYPE_BYTES[type_k]
                                      + self.head_dim_v * KV_TYPE_BYTES[type_v])
        return int(round(self.n_layer * per_layer))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first(value: Any, default: int) -> int:
    # Some architectures store per-layer head counts as arrays; the ledger uses the largest.
    if isinstance(value, list):
        return int(max(value)) if value else default
    return int(value) if value is not None else default


def model_info(gguf: GGUFFile) -> ModelInfo:
    """Summarise a parsed GGUF file."""
    md = gguf.metadata
    arch = str(md.get("general.architecture", "unknown"))

    def key(name: str, default: Any = None) -> Any:
        return md.get(f"{arch}.{name}", default)

    n_embd = _first(key("embedding_length"), 0)
    n_head = _first(key("attention.head_count"), 1) or 1
    n_head_kv = _first(key("attention.head_count_kv"), n_head) or n_head
    head_k = _first(key("attention.key_length"), n_embd // n_head if n_head else 0)
    head_v = _first(key("attention.value_length"), head_k)
    return ModelInfo(
        architecture=arch,
        name=str(md.get("general.name", gguf.path.stem)),
        n_params=sum(t.n_elements for t in gguf.tensors),
        quant=_quant_name(gguf),
        weights_bytes=sum(t.n_bytes for t in gguf.tensors),
        context_length=_first(key("context_length"), 0),
        n_layer=_first(key("block_count"), 0),
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_embd=n_embd,
        head_dim_k=head_k,
        head_dim_v=head_v,
        has_chat_template=bool(md.get("tokenizer.chat_template")),
        n_vocab=gguf.array_lengths.get("tokenizer.ggml.tokens", 0),
    )


_CACHE_LOCK = threading.Lock()


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "appliance" / "model-info.json"


def model_info_for(path: str | Path) -> ModelInfo:
    """`model_info(read_gguf(path))`, remembered per (path, size, mtime) on this machine.

    The gguf package parses every vocabulary entry (seconds for a large tokenizer); the facts we
    derive are a few numbers, so each file version is parsed once. A cache that cannot be read or
    written is simply skipped.
    """
    path = Path(path).resolve()
    st = path.stat() if path.is_file() else None
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}" if st else None
    cache = _cache_file()
    with _CACHE_LOCK:
        try:
            known = json.loads(cache.read_text()) if key and cache.is_file() else {}
        except (OSError, ValueError):
            known = {}
        if key in known:
            return ModelInfo(**known[key])
    info = model_info(read_gguf(path))  # raises ModelError for missing, foreign or truncated files
    with _CACHE_LOCK:
        try:
            known[key] = info.to_dict()
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(dict(list(known.items())[-64:])))
            os.replace(tmp, cache)
        except OSError:
            pass
    return info


def _quant_name(gguf: GGUFFile) -> str:
    ftype = gguf.metadata.get("general.file_type")
    name = file_type_name(ftype) if ftype is not None else None
    if name:
        return name
    # No (known) file_type key: name the most common tensor type by bytes.
    by_type: dict[str, int] = {}
    for t in gguf.tensors:
        by_type[t.type_name] = by_type.get(t.type_name, 0) + t.n_bytes
    return max(by_type, key=by_type.__getitem__) if by_type else "unknown"


def human_params(n: int) -> str:
    """135M, 13.0B, ..."""
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    return f"{n / 1e6:.0f}M"


def human_bytes(n: float) -> str:
    """Bytes as KiB/MiB/GiB with one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
