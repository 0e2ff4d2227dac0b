"""Helpers for tests that drive the real llama.cpp engine on the embedded SmolLM2."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from appliance.config import EngineSettings
from appliance.engine.engine import Engine
from appliance.engine.llama import ContextConfig
from appliance.models.gguf import read_gguf
from appliance.models.metadata import model_info

SYSTEM_PROMPT = (
    "You are the help desk assistant of the ACME engineering company. You answer questions "
    "about internal tools, VPN access, laptops, printers, expense reports, travel booking and "
    "the on-call rota. Always answer briefly and politely. If you are not sure, say so, and "
    "point the employee to the right team: IT for hardware and accounts, Finance for expenses, "
    "People Operations for leave and benefits, and the Platform team for servers and deploys. "
) * 4


def make_engine(model: Path, draft: Path | None = None, **knobs) -> Engine:
    """An engine over the embedded model with small, test-friendly defaults (and a draft model)."""
    e = EngineSettings(**{"n_ctx": 2048, "n_seq_max": 8, "n_threads": 2, **knobs})

    def ctx(path: Path) -> ContextConfig:
        return ContextConfig(model_path=path, n_ctx=e.n_ctx, n_seq_max=e.n_seq_max, n_batch=e.n_batch,
                             n_ubatch=e.n_ubatch, n_threads=e.n_threads, type_k=e.type_k, type_v=e.type_v)
    return Engine(ctx(model), e, model_info(read_gguf(model)), "smollm2-test", ctx(draft) if draft else None)


def softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max()
    e = np.exp(z)
    return e / e.sum()


def kl(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    """KL(p || q) between the softmax distributions of two logit vectors."""
    p, q = softmax(p_logits.astype(np.float64)), softmax(q_logits.astype(np.float64))
    return float(np.sum(p * (np.log(p + 1e-12) - np.log(q + 1e-12))))
