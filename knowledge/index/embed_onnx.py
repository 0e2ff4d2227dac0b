"""ONNX Runtime embeddings for CPU-only machines: the same sentence-transformers model, exported
once on this machine and quantised to int8.

Embedding is most of an ingest on a CPU. The exported graph is the model's transformer only; the
pooling (mean or CLS, from `1_Pooling/config.json`) and the L2 normalisation are done here in NumPy,
as the sentence-transformers modules do. Export needs torch and `onnx` (both installed); running
needs only onnxruntime and `tokenizers`, so a CPU ingest never imports torch.

    python -m knowledge.index.embed [MODEL_FOLDER]     # export now (install.sh does this)
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np

from knowledge.errors import KnowledgeError

log = logging.getLogger("appliance.knowledge")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class OnnxUnsupported(KnowledgeError):
    """This model folder cannot run on the ONNX backend (the reason says why)."""


def hf_offline_env() -> None:
    """Never let sentence-transformers or transformers reach for the hub, whatever the caller's
    environment; and no progress bars in our logs."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def cache_dir() -> Path:
    """Where exported models live: ~/.cache/appliance/onnx (XDG_CACHE_HOME respected)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "appliance" / "onnx"


def onnx_file(model_dir: Path, fingerprint: str) -> Path:
    """The int8 export of `model_dir` (one per model folder and weights)."""
    name = model_dir.parent.name if model_dir.name == "model" else model_dir.name
    return cache_dir() / f"{name}-{fingerprint}" / "model.int8.onnx"


def pooling_of(model_dir: Path) -> tuple[str, bool]:
    """(pooling mode, normalise) read from the sentence-transformers modules; raises OnnxUnsupported."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise OnnxUnsupported(f"{model_dir} has no readable modules.json") from None
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"}:
        raise OnnxUnsupported(f"modules {kinds}: only Transformer + Pooling (+ Normalize) run on ONNX")
    cfg = json.loads((model_dir / modules[1]["path"] / "config.json").read_text(encoding="utf-8"))
    modes = [k for k in ("pooling_mode_mean_tokens", "pooling_mode_cls_token") if cfg.get(k)]
    if len(modes) != 1 or any(v for k, v in cfg.items() if k.startswith("pooling_mode") and k not in modes):
        raise OnnxUnsupported(f"pooling {cfg}: only mean or CLS pooling run on ONNX")
    if not (model_dir / "tokenizer.json").is_file():
        raise OnnxUnsupported(f"{model_dir} has no tokenizer.json")
    return ("mean" if modes[0] == "pooling_mode_mean_tokens" else "cls"), "Normalize" in kinds


def export(model_dir: Path, out: Path) -> Path:
    """Export the transformer to ONNX, fuse it for ONNX Runtime, quantise weights to int8; atomic.

    Eager attention exports the pattern ONNX Runtime's BERT optimiser fuses into its Attention,
    SkipLayerNorm and BiasGelu kernels; weights are quantised per channel (per tensor cost 0.1 of
    cosine similarity against torch on the embedded model, per channel 0.01).
    """
    pooling_of(model_dir)  # refuse unsupported folders before the slow part
    hf_offline_env()
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    # nosec justification (B615): a local folder (local_files_only): nothing is downloaded, no revision to pin.
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True,  # nosec B615
                                      attn_implementation="eager").eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    fp32, fused, tmp = out.with_suffix(".fp32.tmp"), out.with_suffix(".fused.tmp"), out.with_suffix(".tmp")
    sample = {k: torch.ones((2, 8), dtype=torch.long) for k in _INPUTS}
    axes = {k: {0: "batch", 1: "tokens"} for k in (*_INPUTS, "last_hidden_state")}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about Python control flow in the model
            torch.onnx.export(_hidden_states(model), tuple(sample[k] for k in _INPUTS), str(fp32),
                              input_names=list(_INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                              opset_version=17, dynamo=False)
        _fuse(fp32, fused, model.config)
        _quantize(fused if fused.is_file() else fp32, tmp)
        os.replace(tmp, out)
    finally:
        for path in (fp32, fused, tmp):
            path.unlink(missing_ok=True)
    return out


def _fuse(src: Path, dst: Path, config) -> None:
    """ONNX Runtime's transformer fusions; a model they do not fit is left unfused (still correct)."""
    from onnxruntime.transformers.optimizer import optimize_model

    try:
        fused = optimize_model(str(src), model_type="bert", num_heads=getattr(config, "num_attention_heads", 0),
                               hidden_size=getattr(config, "hidden_size", 0))
        fused.save_model_to_file(str(dst))
    except Exception as e:  # noqa: BLE001 - fusion is an optimisation only
        log.warning("ONNX fusion skipped: %s", e)


def _quantize(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # it logs advice about pre-processing on the root logger
    try:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        root.setLevel(level)


def _hidden_states(model):
    """The transformer as a module with positional tensor inputs and one output (what
    torch.onnx.export traces); defined here because torch is imported only to export."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    return Hidden()


class OnnxEncoder:
    """Tokenise, run the int8 graph, pool, normalise. Not thread-safe: the Embedder serialises calls."""

    def __init__(self, model_dir: Path, path: Path, max_tokens: int, threads: int = 0) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.pooling, self.normalize = pooling_of(model_dir)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or os.cpu_count() or 1
        opts.log_severity_level = 3
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tok.enable_truncation(max_length=max_tokens)
        pad = self._tok.token_to_id("[PAD]")
        self._tok.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        # Counting chunk sizes needs the same vocabulary without truncation or padding.
        self._count_tok = Tokenizer.from_str(self._tok.to_str())
        self._count_tok.no_truncation()
        self._count_tok.no_padding()
        self.dim = int(self._session.get_outputs()[0].shape[-1] or 0) or self._probe_dim()

    def _probe_dim(self) -> int:
        return int(self.encode(["dimension"]).shape[1])

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """float32 (len(texts), dim); batches of similar length, as sentence-transformers does."""
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[np.ndarray] = [None] * len(texts)  # type: ignore[list-item]
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            for i, vec in zip(idx, self._batch([texts[i] for i in idx]), strict=True):
                out[i] = vec
        return np.stack(out).astype(np.float32) if out else np.zeros((0, self.dim), np.float32)

    def _batch(self, texts: list[str]) -> np.ndarray:
        enc = self._tok.encode_batch(texts)
        feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self.pooling == "cls":
            vecs = hidden[:, 0]
        else:
            mask = feed["attention_mask"][..., None].astype(np.float32)
            vecs = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if self.normalize:
            vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
        return vecs

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens of each text without special tokens and without truncation."""
        return [len(e.ids) for e in self._count_tok.encode_batch(texts, add_special_tokens=False)]
