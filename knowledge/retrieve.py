"""Hybrid retrieval: dense (Chroma) + lexical (BM25 over FTS5) fused by reciprocal rank fusion.

For Chinese questions the dense side (an English-only embedder by default) is weighed down,
so lexical bigram matches carry the recall. An optional local cross-encoder re-ranks the top.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from knowledge.kb import KnowledgeBase
from knowledge.terms import is_cjk_text, terms

RRF_K = 60


@dataclass
class Hit:
    """One retrieved chunk with everything a citation needs."""

    id: str
    text: str
    source: str
    page: int | None
    heading: str
    title: str
    score: float            # fused score (higher is better)
    similarity: float       # dense cosine similarity of this chunk to the question (-1..1)
    start: int = 0
    end: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class Retriever:
    """Search one knowledge base."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self._reranker = None
        if kb.cfg.rerank_model:
            self._reranker = _load_reranker(kb.cfg.rerank_model)

    def search(self, query: str, k: int = 5, path_prefix: str | None = None) -> list[Hit]:
        """The `k` best chunks for `query`, optionally only from sources under `path_prefix`."""
        query = query.strip()
        if not query or k < 1:
            return []
        n = max(self.kb.cfg.candidates, k * 4) * (4 if path_prefix else 1)
        vector = self.kb.embedder.encode([query])[0]
        dense = self.kb.store.query(vector, n)
        lexical = self.kb.db.lexical_search(self.kb.cfg.name, terms(query), n)
        w_dense = self.kb.cfg.cjk_dense_weight if is_cjk_text(query) else 1.0
        fused: dict[str, float] = {}
        for rank, hit in enumerate(dense):
            fused[hit.id] = fused.get(hit.id, 0.0) + w_dense / (RRF_K + rank + 1)
        for rank, (cid, _score) in enumerate(lexical):
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank + 1)
        rows = self.kb.db.chunks_by_id(fused)
        if path_prefix:
            prefix = path_prefix.strip("/")
            fused = {c: s for c, s in fused.items() if c in rows and _under(rows[c]["source"], prefix)}
        order = sorted((c for c in fused if c in rows), key=fused.__getitem__, reverse=True)
        sims = {h.id: h.similarity for h in dense}
        top = order[: max(k, 20) if self._reranker else k]
        missing = [c for c in top if c not in sims]
        if missing:  # lexical-only hits: compute their dense similarity for the relevance gate
            vecs = self.kb.embedder.encode([rows[c]["text"] for c in missing])
            sims.update({c: float(v @ vector) for c, v in zip(missing, vecs, strict=True)})
        hits = [_hit(c, rows[c], fused[c], sims[c]) for c in top]
        if self._reranker:
            scores = self._reranker.predict([(query, h.text) for h in hits])
            hits = [h for _, h in sorted(zip(scores, hits, strict=True), key=lambda t: -t[0])]
        return hits[:k]


def _under(source: str, prefix: str) -> bool:
    return source == prefix or source.startswith(prefix + "/")


def _hit(cid: str, row: dict, score: float, similarity: float) -> Hit:
    page = row["page"] if row["page"] not in (None, -1) else None
    return Hit(cid, row["text"], row["source"], page, row["heading"], row["title"], round(score, 6),
               round(similarity, 4), row["start"] or 0, row["end"] or 0)


def _load_reranker(path: str):
    from sentence_transformers import CrossEncoder

    folder = Path(path).expanduser()
    if not folder.is_dir():
        from knowledge.errors import KnowledgeError

        raise KnowledgeError(f"re-ranker model folder not found: {folder}")
    return CrossEncoder(str(folder), local_files_only=True)
