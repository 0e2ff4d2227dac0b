"""`appliance eval retrieval --suite FILE`: retrieval over several corpora, the weakest one counts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from appliance.cli.common import NoEngine, console, err_console, load_cli_settings, write_json
from appliance.config import Settings


def run_suite(suite: Path, root: Path | None, work: Path | None, peer: bool, as_json: bool,
              out: Path | None, config: Path | None) -> dict:
    """Ingest each corpus into its own index under `work`, score it, print the table (or JSON)."""
    from appliance.server.services import kb_config
    from knowledge.eval.suite import gate_summary, load_suite, run_corpus, summarise
    from knowledge.index.kb import KnowledgeBase

    settings = load_cli_settings(config)
    corpora = load_suite(suite, root or suite.parent)
    work = work or settings.data_path / "eval-suite"
    # Each corpus's index is local, under `work`: a configured Chroma server would hold every
    # corpus in one collection, and one corpus's documents would answer another's questions.
    cfg = replace(kb_config(settings), chroma_url="")
    model = settings.resolve(settings.embedding_model) if settings.embedding_model else None
    embedder = None  # built by the first corpus's knowledge base, as `open_kb` would; the rest share it
    gate = _gate(settings)
    results: dict[str, dict] = {}
    for corpus in corpora:
        err_console.print(f"[bold]{corpus.name}[/]: ingest {corpus.folder} into {work / corpus.name}, then "
                          f"{'ours and the peer' if peer else 'ours'}…", highlight=False)
        kb = KnowledgeBase(work / corpus.name, cfg, embedder=embedder, embedding_model=model)
        embedder = kb.embedder
        try:
            results[corpus.name] = run_corpus(corpus, kb, peer=peer, gate=gate)
        finally:
            kb.close()
    report = {"suite": str(suite), "corpora": results, "ours": summarise(results),
              "ours_dense": summarise(results, "ours_dense"), "gate": gate_summary(results)}
    if peer:
        report["peer"] = summarise(results, "peer")
    if out:
        write_json(out, report)
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        _print(report, peer)
        if out:
            console.print(f"written: {out}", highlight=False)
    return report


def _gate(settings: Settings):
    """The not-covered gate's balanced accuracy per language, as the server would judge (no model loaded)."""
    from appliance.server.answer_eval import calibrate_gate
    from appliance.server.services import chat_service
    from knowledge.retrieve.retriever import Retriever

    try:
        model = NoEngine.for_chat_model(settings)
    except Exception as e:  # noqa: BLE001 - no chat model registered: retrieval is still measured
        err_console.print(f"gate not measured: {e}", highlight=False)
        return None
    return lambda kb, items: calibrate_gate(chat_service(settings, model, Retriever(kb)), items)


def _print(report: dict, peer: bool) -> None:
    cols = ["corpus", "lang", "n", "recall@1", "recall@5", "recall@10", "MRR"]
    table = Table(*cols, *(["peer r@5", "peer MRR"] if peer else []), "gate b.acc.", "chunks",
                  title="retrieval per corpus (ours: hybrid; peer: 1,000-char windows, dense top-k)")
    for name, res in report["corpora"].items():
        for lang, m in res["ours"]["by_lang"].items():
            row = [name, lang, str(m["n"]), *(f"{m[k]:.2f}" for k in ("recall@1", "recall@5", "recall@10")),
                   f"{m['mrr']:.3f}"]
            if peer:
                p = res["peer"]["by_lang"][lang]
                row += [f"{p['recall@5']:.2f}", f"{p['mrr']:.3f}"]
            g = res.get("gate", {}).get(lang)
            table.add_row(*row, f"{g['balanced_accuracy']:.2f}" if g else "-", str(res["chunks"]))
    for label in ("min", "mean"):
        for lang, m in report["ours"].items():
            row = [f"[bold]{label}[/]", lang, "",
                   *(f"{m[k][label]:.2f}" for k in ("recall@1", "recall@5", "recall@10")), f"{m['mrr'][label]:.3f}"]
            if peer:
                p = report["peer"][lang]
                row += [f"{p['recall@5'][label]:.2f}", f"{p['mrr'][label]:.3f}"]
            g = report["gate"].get(lang)
            table.add_row(*row, f"{g[label]:.2f}" if g else "-", "")
    console.print(table)
