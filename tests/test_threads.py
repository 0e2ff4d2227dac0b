"""The embedder is safe from any thread (eight threads encode while an ingest runs), and OpenMP work
leaves no team on the threads that asked for it (knowledge.threads)."""

from __future__ import annotations

import threading

import numpy as np

from knowledge.ingest.folder import ingest

from .kb_helpers import open_kb

TEXTS = ["How do I back up the appliance?", "默认情况下服务监听哪个端口？", "Rotate the VPN certificate.",
         "Visitors wear a red badge."]


def test_eight_threads_encode_during_an_ingest(tmp_path, embedder, sample_docs):
    expected = embedder.encode(TEXTS)
    kb = open_kb(tmp_path / "data", embedder)
    errors: list[BaseException] = []
    results: list[np.ndarray] = []

    def encode_many() -> None:
        try:
            for _ in range(5):
                results.append(embedder.encode(TEXTS))
                embedder.count_tokens_batch(TEXTS)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=encode_many) for _ in range(8)]
    ingester = threading.Thread(target=lambda: results.append(ingest(kb, sample_docs)))
    for t in [ingester, *threads]:
        t.start()
    for t in [ingester, *threads]:
        t.join(timeout=600)
    assert not errors, errors[:3]
    vectors = [r for r in results if isinstance(r, np.ndarray)]
    assert len(vectors) == 40
    assert all(np.allclose(v, expected, atol=1e-4) for v in vectors)
    assert kb.store.count() == kb.db.chunk_count(kb.cfg.name) > 0


def test_on_own_thread_returns_and_raises_on_the_caller():
    from knowledge.threads import on_own_thread

    caller = threading.get_ident()
    assert on_own_thread(lambda: threading.get_ident()) != caller
    try:
        on_own_thread(lambda: 1 / 0)
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the worker's exception was not raised on the caller")


def _tids() -> set[int]:
    import os

    return {int(tid) for tid in os.listdir("/proc/self/task")}


def _left_behind(work) -> tuple[object, set[int]]:
    """Run `work()` on a fresh, long-lived thread (the main one may hold a team from other tests) and
    return its result and the OS threads it left alive besides itself, counted while it still lives
    (an ended thread's OpenMP team exits just after it: wait a few seconds for the count to settle)."""
    import time

    done, release, me, out = threading.Event(), threading.Event(), set(), []

    def caller() -> None:
        me.add(threading.get_native_id())
        out.append(work())
        done.set()
        release.wait(60)

    before = _tids()
    t = threading.Thread(target=caller)
    t.start()
    done.wait(120)
    for _ in range(50):
        left = _tids() - before - me
        if not left:
            break
        time.sleep(0.1)
    release.set()
    t.join()
    return out[0] if out else None, left


def test_torch_embedding_leaves_no_openmp_team_on_a_request_thread():
    """A long-lived request thread that embeds on torch must not keep an OpenMP team alive: with more
    OpenMP threads than CPUs libgomp stops spinning, and the engine's decodes (same libgomp) slow down
    (knowledge.threads). Counted as OS threads while the request thread is still alive."""
    import torch

    from knowledge.index.embed import Embedder

    torch.set_num_threads(2)  # a team of two even on a one-core machine
    emb = Embedder(backend="torch")
    emb.encode(["warm up"])
    _, left = _left_behind(lambda: emb.encode(["How do I keep one package from being upgraded?"] * 4))
    assert left == set()  # nothing the request thread's embedding left behind


def test_ceiling_measurement_leaves_no_openmp_team_behind(chat_model_path):
    """The ceiling's decodes run on a thread that ends: an OpenMP team left on the caller's thread
    would slow every later decode of an engine in the same process (knowledge.threads)."""
    from appliance.bench.ceiling import measure
    from appliance.engine.llama import ContextConfig

    cfg = ContextConfig(model_path=chat_model_path, n_ctx=1024, n_threads=2)
    measure(cfg, batches=(1,))  # threads llama.cpp keeps once loaded are not what this counts
    rates, left = _left_behind(lambda: measure(cfg, batches=(1,)))
    assert rates.decode_tok_s[1] > 0
    assert left == set()  # no team the caller kept


def test_quantize_checks_leave_no_openmp_team_behind(chat_model_path):
    """`appliance quantize` runs the importance matrix and the quality check in the CLI's process and
    then times decoding: a team left by either would slow that timing (it did: 71 against 185 tok/s)."""
    from appliance.quant import imatrix, quality

    windows = [list(range(1000, 1064))]
    quality.reference(chat_model_path, windows)  # threads llama.cpp keeps once loaded are not what this counts

    def both():
        return imatrix.compute(chat_model_path, windows, 64), quality.reference(chat_model_path, windows)

    (matrix, ref), left = _left_behind(both)
    assert matrix and len(ref.target_logp) == 31  # the second half of 64 tokens, less the last
    assert left == set()
