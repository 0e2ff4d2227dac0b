"""The embedder is safe from any thread: eight threads encode while an ingest runs."""

from __future__ import annotations

import threading

import numpy as np

from knowledge.ingest import ingest

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
