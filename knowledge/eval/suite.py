"""Retrieval measured over several corpora at once: per corpus and language, ours against the
simplest peer, and the minimum and mean across corpora (the minimum is the figure that counts).

A suite file (TOML) lists corpora:

    [[corpus]]
    name = "install-guide"      # also the name of its index under the work folder
    folder = "install-guide"    # under --root
    qa = "install-guide.jsonl"  # beside the suite file

Each corpus gets an index of its own (ingested incrementally, so a second run only checks hashes),
so one corpus's documents never answer another's questions.
"""

from __future__ import annotations

import statistics
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from knowledge.errors import KnowledgeError, LoaderError
from knowledge.eval.evaluate import KS, answerable, evaluate, expected_sources, load_qa, normalise
from knowledge.eval.peer import DenseWindows
from knowledge.index.kb import KnowledgeBase
from knowledge.ingest.folder import ingest
from knowledge.loaders import read_text
from knowledge.retrieve.retriever import Retriever

METRICS = tuple(f"recall@{k}" for k in KS) + ("mrr",)


@dataclass(frozen=True)
class Corpus:
    """One corpus of a suite: its documents and its questions."""

    name: str
    folder: Path
    qa: Path


def load_suite(path: Path, root: Path) -> list[Corpus]:
    """The corpora a suite file lists, with paths resolved (folders under `root`, QA beside the file)."""
    path = Path(path)
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("corpus", [])
        corpora = [Corpus(e["name"], Path(root) / e["folder"], path.parent / e["qa"]) for e in entries]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise KnowledgeError(f"{path}: not a suite file ([[corpus]] with name, folder, qa): {e}") from None
    if not corpora:
        raise KnowledgeError(f"{path}: lists no [[corpus]]")
    missing = [str(c.folder) for c in corpora if not c.folder.is_dir()]
    missing += [str(c.qa) for c in corpora if not c.qa.is_file()]
    if missing:
        raise KnowledgeError("not found: " + ", ".join(missing) + " (build the corpora first, for example "
                             "scripts/make_outside_corpora.sh DIR, and pass --root DIR)")
    return corpora


def check_labels(corpus: Corpus, items: list[dict]) -> list[str]:
    """Questions whose answer string is in none of their listed sources, as the loaders read them:
    such a label can never be met, so the suite refuses to score it."""
    texts: dict[str, str] = {}

    def text(source: str) -> str:
        if source not in texts:
            try:
                texts[source] = normalise(read_text(corpus.folder / source))
            except (OSError, LoaderError):
                texts[source] = ""
        return texts[source]

    problems = []
    for item in filter(answerable, items):
        wanted = [normalise(a) for a in item["answer_contains"]]
        if not any(w in text(s) for s in expected_sources(item) for w in wanted):
            problems.append(f"{corpus.name}: {item['question']!r}: no listed source contains {item['answer_contains']}")
    return problems


def run_corpus(corpus: Corpus, kb: KnowledgeBase, peer: bool = True,
               gate: Callable[[KnowledgeBase, list[dict]], dict] | None = None) -> dict:
    """Ingest (incrementally), then score ours (hybrid and dense alone), the peer and the gate."""
    items = load_qa(corpus.qa)
    problems = check_labels(corpus, items)
    if problems:
        asked = sum(1 for _ in filter(answerable, items))
        hint = (f"; is {corpus.folder} the folder the `source` paths start from?" if len(problems) == asked
                else "")
        raise KnowledgeError(f"{corpus.name}: {len(problems)} of {asked} labels cannot be met (no listed "
                             f"source, as the loaders read it, contains the answer){hint}\n  "
                             + "\n  ".join(problems))
    t0 = time.perf_counter()
    report = ingest(kb, corpus.folder)
    ingest_s = time.perf_counter() - t0
    retriever = Retriever(kb)
    out: dict = {"chunks": kb.db.chunk_count(kb.cfg.name), "ingest": {
        "seconds": round(ingest_s, 1), "new_chunks": report.chunks, "skipped": len(report.problems),
        "ms_per_new_chunk": round(1000 * report.timings["total"] / report.chunks, 2) if report.chunks else None}}
    out["ours"] = evaluate(retriever, items)
    out["ours_dense"] = evaluate(retriever, items, mode="dense")
    if peer:
        windows = DenseWindows(corpus.folder, kb.embedder)
        out["peer"] = evaluate(windows, items)
        out["peer"]["windows"] = len(windows.windows)
    if gate and not all(answerable(i) for i in items):
        out["gate"] = gate(kb, items)
    return out


def summarise(results: dict[str, dict], side: str = "ours") -> dict:
    """Per language and metric: the minimum across corpora (and which corpus), and the mean."""
    by_lang: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for name, res in results.items():
        for lang, m in res.get(side, {}).get("by_lang", {}).items():
            for key in METRICS:
                by_lang.setdefault(lang, {}).setdefault(key, []).append((m[key], name))
    return {lang: {key: {**_spread(v), "corpora": len(v)} for key, v in metrics.items()}
            for lang, metrics in sorted(by_lang.items())}


def gate_summary(results: dict[str, dict]) -> dict:
    """Per language: the gate's balanced accuracy at the minimum across corpora, and the mean."""
    values: dict[str, list[tuple[float, str]]] = {}
    for name, res in results.items():
        for lang, m in res.get("gate", {}).items():
            values.setdefault(lang, []).append((m["balanced_accuracy"], name))
    return {lang: _spread(v) for lang, v in sorted(values.items())}


def _spread(values: list[tuple[float, str]]) -> dict:
    """The minimum of (figure, corpus) pairs, which corpus gives it, and the mean."""
    low, corpus = min(values)
    return {"min": low, "min_corpus": corpus, "mean": round(statistics.fmean(x for x, _ in values), 4)}
