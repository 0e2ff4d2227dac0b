"""Hybrid retrieval: dense (Chroma) + lexical (BM25 over FTS5) fused by reciprocal rank fusion.

For Chinese questions the dense side (an English-only embedder by default) is weighed down,
so lexical bigram matches carry the recall. An optional local cross-encoder re-ranks the top.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from knowledge.errors import KnowledgeError
from knowledge.index.access import Scope
from knowledge.index.kb import KnowledgeBase
from knowledge.text import nearcopy
from knowledge.text.everyday import discount
from knowledge.text.terms import is_cjk_text, term_words, terms, weight_share
from knowledge.threads import on_own_thread

RRF_K = 60
MODES = ("hybrid", "dense", "lexical")


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
    also_in: list[str] = field(default_factory=list)  # other files holding the same passage

    def to_dict(self) -> dict:
        return asdict(self)


class Retriever:
    """Search one knowledge base."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self._reranker = None
        if kb.cfg.rerank_model:
            self._reranker = _load_reranker(kb.cfg.rerank_model)

    def search(self, query: str, k: int = 5, path_prefix: str | None = None, mode: str = "hybrid", *,
               scope: Scope) -> list[Hit]:
        """The `k` best chunks for `query` among the collections `scope` may read, optionally only
        from sources under `path_prefix`. `scope` has no default: every caller says who is reading.

        `mode` is "hybrid" (dense + lexical, fused), or "dense" / "lexical" alone (for measuring
        what each side contributes). One file contributes at most `max_per_file` hits, and the same
        passage found in several files is one hit that lists the other files in `also_in`.
        """
        query = query.strip()
        if not query or k < 1 or scope.is_empty:
            return []
        if mode not in MODES:
            raise KnowledgeError(f"search mode must be one of {', '.join(MODES)}, not {mode!r}")
        n = max(self.kb.cfg.candidates, k * 4) * (4 if path_prefix else 1)
        vector = self.kb.embedder.encode([query])[0]
        dense = self.kb.store.query(vector, n, scope) if mode != "lexical" else []
        lexical = self.kb.db.lexical_search(self.kb.cfg.name, terms(query), n, scope) if mode != "dense" else []
        cfg = self.kb.cfg
        w_dense = (cfg.cjk_dense_weight if is_cjk_text(query) else cfg.dense_weight) if mode == "hybrid" else 1.0
        dense_ids, lexical_ids = [h.id for h in dense], [c for c, _ in lexical]
        # The store and the index filtered already; the rows are checked again so that a vector
        # without its collection label (an interrupted upgrade) can never surface elsewhere.
        rows = {c: r for c, r in self.kb.db.chunks_by_id(dense_ids + lexical_ids).items()
                if scope.allows(r["collection"])}
        dense_ids, lexical_ids = [c for c in dense_ids if c in rows], [c for c in lexical_ids if c in rows]
        copies = self.kb.db.copies_of(rows, scope)  # the same passage in other files: stored once, cited for each
        if path_prefix:
            rows = _within(rows, copies, path_prefix.strip("/"))
        passage = nearcopy.fold(_interleave(dense_ids, lexical_ids, rows), {c: r["text"] for c, r in rows.items()})
        fused: dict[str, float] = {}
        for weight, ids in ((w_dense, dense_ids), (1.0, lexical_ids)):
            # Ranks count passages, not copies (three formats of one manual must not push the next
            # passage three places down), and a passage ranks by the copy that represents it, not
            # by the best of its copies on each side (measured on the dev corpus: MRR English
            # 0.749 -> 0.769, Chinese 0.750 -> 0.766).
            for rank, rep in enumerate(dict.fromkeys(c for c in ids if passage.get(c) == c)):
                fused[rep] = fused.get(rep, 0.0) + weight / (RRF_K + rank + 1)
        order = _diverse(sorted(fused, key=fused.__getitem__, reverse=True), passage, rows, copies,
                         self.kb.cfg.max_per_file)
        sims = {h.id: h.similarity for h in dense}
        top = [c for c, _ in order[: max(k, 20) if self._reranker else k]]
        also = dict(order)
        missing = [c for c in top if c not in sims]
        if missing:  # lexical-only hits: their dense similarity (for the gate) from the stored vectors
            stored = self.kb.store.vectors(missing)
            sims.update({c: float(v @ vector) for c, v in stored.items()})
            rest = [c for c in missing if c not in stored]
            if rest:  # not in the vector store (an interrupted write): embed them now
                vecs = self.kb.embedder.encode([rows[c]["text"] for c in rest])
                sims.update({c: float(v @ vector) for c, v in zip(rest, vecs, strict=True)})
        hits = [_hit(c, rows[c], fused[c], sims[c], also[c]) for c in top]
        if self._reranker:
            pairs = [(query, h.text) for h in hits]
            scores = on_own_thread(lambda: self._reranker.predict(pairs), name="rerank")  # torch: see knowledge.threads
            hits = [h for _, h in sorted(zip(scores, hits, strict=True), key=lambda t: -t[0])]
        return hits[:k]


def coverage(retriever: Retriever, question: str, texts: list[str], everyday: bool = False) -> float:
    """The best share, over `texts`, of the question's term weight (IDF over the index) that one
    text contains, 0..1. Rare words decide: "install Microsoft Office" is not covered by a passage
    that only shares "install", which every manual says. With `everyday`, words common in English
    at large and Chinese function words weigh less (knowledge.text.everyday)."""
    pairs = term_words(question)  # split once: the IDF lookup and the discount both need it
    weights = retriever.kb.db.idf([term for term, _ in pairs])
    if everyday:
        weights = discount(weights, pairs)
    return max((weight_share(weights, set(terms(text))) for text in texts), default=0.0)


def _interleave(dense: list[str], lexical: list[str], rows: dict[str, dict]) -> list[str]:
    """Candidates best-first, alternating sides, so the copy that represents a passage is a good one."""
    out: dict[str, None] = {}
    for i in range(max(len(dense), len(lexical))):
        for side in (dense, lexical):
            if i < len(side) and side[i] in rows:
                out.setdefault(side[i])
    return list(out)


def _within(rows: dict[str, dict], copies: dict[str, list[dict]], prefix: str) -> dict[str, dict]:
    """Rows whose passage lies under `prefix`, each shown as a copy there when its stored row is not."""
    out = {}
    for cid, row in rows.items():
        inside = [r for r in (row, *copies.get(cid, [])) if under(r["source"], prefix)]
        if inside:
            out[cid] = inside[0]
    return out


def _diverse(order: list[str], passage: dict[str, str], rows: dict[str, dict], shared: dict[str, list[dict]],
             max_per_file: int) -> list[tuple[str, list[str]]]:
    """Best-first passages, each file capped, each with the other files that hold a copy of it.

    A keyword-stuffed file has thousands of near-identical chunks that all match the lexical side;
    capping what one file may contribute keeps it from filling the list. A copy of a passage in
    another file (the same document saved twice, or as HTML and PDF) is not a second answer: it is
    folded into the first hit, which then cites both files.
    """
    copies: dict[str, list[str]] = {}
    for cid, rep in passage.items():
        for source in [rows[cid]["source"]] + [r["source"] for r in shared.get(cid, [])]:
            if source != rows[rep]["source"] and source not in copies.setdefault(rep, []):
                copies[rep].append(source)
    out: list[tuple[str, list[str]]] = []
    per_file: dict[str, int] = {}
    for cid in order:
        source = rows[cid]["source"]
        if max_per_file and per_file.get(source, 0) >= max_per_file:
            continue
        per_file[source] = per_file.get(source, 0) + 1
        out.append((cid, copies.get(cid, [])))
    return out


def under(source: str, prefix: str) -> bool:
    """Whether `source` is the document `prefix` or lies in the folder `prefix` (source paths)."""
    return source == prefix or source.startswith(prefix + "/")


def _hit(cid: str, row: dict, score: float, similarity: float, also_in: list[str]) -> Hit:
    page = row["page"] if row["page"] not in (None, -1) else None
    return Hit(cid, row["text"], row["source"], page, row["heading"], row["title"], round(score, 6),
               round(similarity, 4), row["start"] or 0, row["end"] or 0, also_in)


def _load_reranker(path: str):
    from sentence_transformers import CrossEncoder

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise KnowledgeError(f"re-ranker model folder not found: {folder}")
    return CrossEncoder(str(folder), local_files_only=True)
