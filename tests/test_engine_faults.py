"""The engine survives failures: one request's failure ends that request only, and a broken context
is rebuilt (the requests in flight fail with the error, later ones are served)."""

from __future__ import annotations

import pytest

from appliance.engine.errors import DecodeError
from appliance.engine.sequence import SamplingParams

from .engine_helpers import make_engine

GREEDY = {"temperature": 0.0, "max_tokens": 24}


def _chat(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


@pytest.fixture
def engine(chat_model_path):
    eng = make_engine(chat_model_path)
    yield eng
    eng.shutdown()


def test_a_failing_request_does_not_take_the_others_down(engine, monkeypatch):
    victim = engine.submit(_chat("Tell me about printers."), SamplingParams(**GREEDY))
    real = engine.runner.sample

    def sample(key, row):
        if key == victim._seq.id:
            raise RuntimeError("sampler exploded for this request")
        return real(key, row)

    monkeypatch.setattr(engine.runner, "sample", sample)
    other = engine.submit(_chat("Tell me about laptops."), SamplingParams(**GREEDY))
    with pytest.raises(RuntimeError, match="exploded"):
        victim.result(timeout=60)
    assert other.result(timeout=60).text.strip()
    assert engine.snapshot()["healthy"]
    assert engine.submit(_chat("And phones?"), SamplingParams(**GREEDY)).result(timeout=60).text.strip()
    assert engine.wait_idle(30) and engine.snapshot()["kv_cells_live"] == 0


def test_a_broken_context_is_rebuilt_and_serving_resumes(engine, monkeypatch):
    def decode(items):
        raise DecodeError("llama_decode failed: simulated GPU reset")

    monkeypatch.setattr(engine.runner, "decode", decode)
    doomed = engine.submit(_chat("Tell me about printers."), SamplingParams(**GREEDY))
    with pytest.raises(DecodeError, match="simulated"):
        doomed.result(timeout=60)
    assert engine.wait_idle(60)
    res = engine.submit(_chat("Tell me about laptops."), SamplingParams(**GREEDY)).result(timeout=120)
    assert res.text.strip() and len(engine.restarts) == 1
    assert engine.snapshot()["healthy"]
