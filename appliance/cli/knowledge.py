"""`appliance ingest`, `docs …`, `search` and `eval …`: the knowledge base. They only parse and call."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from appliance.cli import handoff
from appliance.cli.common import (
    AsUserOpt,
    ConfigOpt,
    JsonOpt,
    NoEngine,
    cli_scope,
    console,
    err_console,
    list_by_default,
    load_cli_settings,
    write_json,
)
from knowledge.errors import KnowledgeError
from knowledge.ingest.report import FileResult
from knowledge.ingest.report import Progress as IngestProgress

docs_app = typer.Typer(no_args_is_help=False, help="List, inspect and remove indexed documents.")
eval_app = typer.Typer(no_args_is_help=True, help="Measure retrieval and answer quality.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("ingest")(ingest_command)
    app.command("search")(search_command)
    app.add_typer(docs_app, name="docs")
    from appliance.cli.eval_loaders import eval_loaders

    eval_app.command("loaders")(eval_loaders)
    app.add_typer(eval_app, name="eval")


def _kb(config: Path | None, reindex: bool = False):
    from appliance.server.services import open_kb

    return open_kb(load_cli_settings(config), reindex=reindex)


def _kb_with_documents(config: Path | None):
    """The knowledge base, or a clear error when nothing is indexed yet: a search or an evaluation of an
    empty index would print nothing, or zeros that read like a measurement."""
    kb = _kb(config)
    if kb.store.count() == 0:
        kb.close()
        raise KnowledgeError("the knowledge base is empty: index documents first (`appliance ingest ./docs`)")
    return kb


def _documents(config: Path | None):
    from appliance.server.services import open_documents

    return open_documents(load_cli_settings(config), on_wait=_say_waiting)


def _say_handing_off(server: dict, what: str) -> None:
    err_console.print(f"the appliance server (pid {server.get('pid', '?')}) owns this knowledge base: "
                      f"it {what}…", highlight=False)


def _say_waiting(holder: str) -> None:
    err_console.print(f"waiting: another process ({holder}) is writing this knowledge base…", highlight=False)


class _RichProgress(IngestProgress):
    """Files bar plus a chunks counter with the embedding rate."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.files = bar.add_task("files", total=None)
        self.chunks = bar.add_task("embedded chunks", total=None)
        self.t0 = time.perf_counter()
        self.n_chunks = 0

    def start(self, total_files: int) -> None:
        self.bar.update(self.files, total=total_files)

    def file_done(self, result: FileResult) -> None:
        if result.status not in ("skipped", "removed"):
            self.bar.advance(self.files)

    def chunks_embedded(self, n: int) -> None:
        self.n_chunks += n
        rate = self.n_chunks / max(1e-6, time.perf_counter() - self.t0)
        self.bar.update(self.chunks, completed=self.n_chunks, description=f"embedded chunks ({rate:.0f}/s)")


def ingest_command(folder: Annotated[Path, typer.Argument(help="Folder of documents.")],
                   strict: bool = typer.Option(False, help="Exit non-zero if any file failed."),
                   reindex: bool = typer.Option(False, help="Rebuild the whole index (after an embedding "
                                                "model change): every folder indexed so far, and FOLDER."),
                   collection: Annotated[str | None, typer.Option(
                       help="The collection the files go to (who may read them: `appliance collections grant`). "
                            "Default: files keep theirs; new files go to `default`, which everyone reads.")] = None,
                   config: ConfigOpt = None) -> None:
    """Index a folder: new and changed files are (re)indexed, removed ones leave the index."""
    from appliance.server.documents import DocumentsService
    from appliance.server.services import indexed_roots
    from knowledge.index.access import check_collection

    settings = load_cli_settings(config)
    folders = [folder.expanduser().resolve()]
    if not folders[0].is_dir():
        raise KnowledgeError(f"{folder}: " + ("not a folder (ingest takes a folder of documents; the Documents tab "
                                               "or POST /v1/documents uploads single files)"
                                               if folders[0].exists() else "no such folder"))
    if collection is not None:
        check_collection(collection)  # before any work, and before handing off
    server = handoff.serving(settings.data_path)
    if server is not None:
        _ingest_through(server, folders[0], reindex, strict, collection)
        return
    if reindex:  # the rebuild drops every folder's entries, so every folder is read again
        folders += [r for r in indexed_roots(settings) if r not in folders]
        err_console.print(f"rebuilding the whole index from {len(folders)} folder(s): "
                          + ", ".join(str(f) for f in folders), highlight=False)
    kb = _kb(config, reindex=reindex)
    documents = DocumentsService(kb, kb.data_dir / "uploads", on_wait=_say_waiting)
    reports = []
    for root in folders:
        if not root.is_dir():
            err_console.print(f"[yellow]skipped {root}: not a folder now; its files left the index[/]")
            continue
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console, transient=True) as bar:
            reports.append(documents.ingest(root, _RichProgress(bar), collection if root == folders[0] else None)
                           .summary())
        print_report(reports[-1])
    if strict and any(r["counts"]["failed"] for r in reports):
        raise typer.Exit(1)


def _ingest_through(server: dict, folder: Path, reindex: bool, strict: bool, collection: str | None) -> None:
    """`appliance ingest` beside a running server: the server does the work (one writer per index)."""
    if reindex:
        raise handoff.HandoffError(f"the appliance server (pid {server.get('pid', '?')}) is running: a full "
                                   "rebuild (usually after an embedding model change) needs it stopped first")
    if not folder.is_dir():
        raise handoff.HandoffError(f"{folder}: not a folder")
    _say_handing_off(server, f"indexes {folder} (progress in its log and the Documents tab)")
    with err_console.status("indexing on the server…"):
        summary = handoff.ingest(server, folder, collection)
    print_report(summary)
    if strict and summary["counts"]["failed"]:
        raise typer.Exit(1)


def print_report(report: dict) -> None:
    """The summary table of `IngestReport.summary()`: counts, problems with reasons, time."""
    if report["problems"]:
        table = Table("file", "status", "reason", title="not indexed")
        for p in report["problems"]:
            table.add_row(p["source"], p["status"], p["reason"])
        console.print(table)
    counts = report["counts"]
    ignored = ", ".join(f"{ext} ×{n}" for ext, n in report["ignored"].items())
    console.print(
        ", ".join(f"{counts[s]} {s}" for s in ("new", "changed", "unchanged", "removed", "failed", "skipped"))
        + f"; {report['chunks']} chunks in {report['seconds']:.1f}s"
        + (f"; {report['deduplicated']} repeated chunks left out" if report["deduplicated"] else "")
        + (f"; {report['shared']} chunks already held by another file (stored once, every copy cited)"
           if report["shared"] else "")
        + (f"; ignored types: {ignored}" if ignored else "")
        + (f"; repaired {report['repaired']} leftovers of an interrupted run" if report["repaired"] else ""))


@docs_app.command("list")
def docs_list(config: ConfigOpt = None) -> None:
    """Every known file with its status, chunk count and error."""
    from knowledge.index.access import EVERYTHING

    table = Table("source", "collection", "kind", "status", "chunks", "error", "root")
    for rec in _documents(config).list(EVERYTHING):
        table.add_row(rec.source, rec.collection, rec.kind or "-", rec.status, str(len(rec.chunk_ids)),
                      rec.error or "", rec.root)
    console.print(table)


@docs_app.command("stats")
def docs_stats(config: ConfigOpt = None) -> None:
    """Totals: files by status, chunks, vectors, embedding model."""
    from knowledge.index.access import EVERYTHING

    console.print_json(json.dumps(_documents(config).stats(EVERYTHING)))


@docs_app.command("remove")
def docs_remove(path: Annotated[str, typer.Argument(help="Absolute path, or source path as listed.")],
                config: ConfigOpt = None) -> None:
    """Remove one document from the index (the file itself is not touched, except an upload's copy)."""
    server = handoff.serving(load_cli_settings(config).data_path)
    if server is not None:
        _say_handing_off(server, f"removes {path}")
        removed = [(r["source"], r["chunks"]) for r in handoff.remove(server, path)]
    else:
        removed = [(r.source, len(r.chunk_ids)) for r in _documents(config).remove(path)]
    for source, chunks in removed:
        console.print(f"removed {source} ({chunks} chunks)")


def search_command(query: Annotated[str, typer.Argument(help="The question.")],
                   k: Annotated[int, typer.Option("-k", help="How many chunks.")] = 5,
                   path: Annotated[str | None, typer.Option(help="Only sources under this path.")] = None,
                   as_json: JsonOpt = False, as_user: AsUserOpt = None,
                   config: ConfigOpt = None) -> None:
    """Retrieve the chunks that best answer a question (hybrid dense + BM25)."""
    from knowledge.retrieve.retriever import Retriever

    scope = cli_scope(load_cli_settings(config), as_user)
    hits = Retriever(_kb_with_documents(config)).search(query, k=k, path_prefix=path, scope=scope)
    if as_json:
        print(json.dumps([{"source": h.source, "page": h.page, "heading": h.heading, "score": h.score,
                           "similarity": h.similarity, "text": h.text, "also_in": h.also_in} for h in hits],
                         ensure_ascii=False))
        return
    for n, h in enumerate(hits, start=1):
        where = h.source + (f" p.{h.page}" if h.page else "") + (f" § {h.heading}" if h.heading else "")
        console.print(f"[bold][{n}][/] {where}  [dim]score {h.score:.4f} sim {h.similarity:.2f}[/]")
        console.print("    " + h.text[:300].replace("\n", " ") + ("…" if len(h.text) > 300 else ""),
                      highlight=False)
        if h.also_in:
            console.print("    [dim]also in: " + escape(", ".join(h.also_in)) + "[/]", highlight=False)


_SuiteOpt = Annotated[Path | None, typer.Option(help="A suite file (TOML, one corpus table per corpus: name, "
                                                 "folder, qa): every corpus, ours against the peer, min and mean.")]
_RootOpt = Annotated[Path | None, typer.Option(help="With --suite: where the corpus folders are.")]
_WorkOpt = Annotated[Path | None, typer.Option(help="With --suite: where each corpus's index is kept "
                                                    "(default: DATA/eval-suite).")]
_PeerOpt = Annotated[bool, typer.Option(help="With --suite: also score the simplest peer.")]
_OutOpt = Annotated[Path | None, typer.Option(help="With --suite: write the figures (JSON) here.")]


@eval_app.command("retrieval")
def eval_retrieval(qa: Annotated[Path | None, typer.Argument(help="JSONL of {question, answer_contains, source}.")]
                   = None,
                   mode: Annotated[str, typer.Option(help="hybrid, dense or lexical (one side alone).")] = "hybrid",
                   suite: _SuiteOpt = None, root: _RootOpt = None, work: _WorkOpt = None, peer: _PeerOpt = True,
                   out: _OutOpt = None, as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
    """Recall@1/5/10 and MRR over a QA file, overall and per language; or over a suite of corpora."""
    from knowledge.eval.evaluate import evaluate, load_qa
    from knowledge.retrieve.retriever import Retriever

    if suite is not None:
        from appliance.cli.eval_suite import run_suite

        run_suite(suite, root, work, peer, as_json, out, config)
        return
    if qa is None:
        raise typer.BadParameter("give a QA file, or --suite FILE")
    items = load_qa(qa)
    result = evaluate(Retriever(_kb_with_documents(config)), items, mode)
    if as_json:
        print(json.dumps(result))
        return
    table = Table("set", "n", "recall@1", "recall@5", "recall@10", "MRR")
    for name, m in [("all", result), *result["by_lang"].items()]:
        table.add_row(name, str(m["n"]), *(f"{m[key]:.3f}" for key in ("recall@1", "recall@5", "recall@10", "mrr")))
    console.print(table)


@eval_app.command("answers")
def eval_answers(qa: Annotated[Path, typer.Argument(help="JSONL of {question, answer_contains, source, lang, "
                                                        "answerable?}.")],
                 limit: Annotated[int | None, typer.Option(help="Only the first N questions.")] = None,
                 max_tokens: Annotated[int, typer.Option(help="Longest answer in tokens.")] = 256,
                 one_user: Annotated[bool, typer.Option("--one-user", help="One question at a time, as one user "
                                                        "waits (median answer time); default 8 at once.")] = False,
                 out: Annotated[Path | None, typer.Option(help="Also write every question's answer and "
                                                          "verdicts (JSON) here.")] = None,
                 as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
    """Run the whole chat (retrieval, prompt, model) per question: answered, declined, cited, correct, loops.

    The figures go to stdout; `--out` keeps the answers themselves, so that a team can read what its
    users would have read for each question that failed."""
    from appliance.engine.backend import open_backend
    from appliance.server.answer_eval import evaluate_answers
    from appliance.server.services import chat_service
    from knowledge.eval.evaluate import load_qa
    from knowledge.retrieve.retriever import Retriever

    settings = load_cli_settings(config)
    items = load_qa(qa)[:limit]
    kb = _kb_with_documents(config)
    with open_backend(settings) as engine, \
            Progress(TextColumn("questions"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     console=err_console, transient=True) as bar:
        task = bar.add_task("answers", total=len(items))
        result = evaluate_answers(chat_service(settings, engine, Retriever(kb)), items,
                                  max_tokens, progress=lambda: bar.advance(task), window=1 if one_user else 8)
    if out:
        write_json(out, result)
    if as_json:
        print(json.dumps({k: v for k, v in result.items() if k != "rows"}, ensure_ascii=False))
        return
    keys = ("style", "full", "partial", "declined", "declined_ok", "unanswerable_unwarned", "cited_source",
            "contains_answer", "grounded", "degenerate", "median_answer_wall_seconds")
    table = Table("set", "answerable", "unanswerable", *keys, title=f"answers ({result['seconds']} s)")
    for name, m in [("all", result), *result["by_lang"].items()]:
        table.add_row(name, str(m["n_answerable"]), str(m["n_unanswerable"]),
                      *("-" if m[k] is None else str(m[k]) for k in keys))
    console.print(table)


@eval_app.command("gate")
def eval_gate(qa: Annotated[Path, typer.Argument(help="JSONL with answerable and \"answerable\": false questions.")],
              as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
    """Balanced accuracy of the "not covered" gate per language, and the threshold that maximises it."""
    from appliance.server.answer_eval import calibrate_gate
    from appliance.server.services import chat_service
    from knowledge.eval.evaluate import load_qa
    from knowledge.retrieve.retriever import Retriever

    settings = load_cli_settings(config)
    model = NoEngine.for_chat_model(settings)  # retrieval and the gate only: the model is not loaded
    items = load_qa(qa)
    result = calibrate_gate(chat_service(settings, model, Retriever(_kb_with_documents(config))), items)
    if as_json:
        print(json.dumps({lang: {k: v for k, v in m.items() if k != "scores"} for lang, m in result.items()}))
        return
    table = Table("lang", "answerable", "unanswerable", "threshold", "balanced acc.", "best threshold", "best acc.")
    for lang, m in result.items():
        table.add_row(lang, str(m["n_answerable"]), str(m["n_unanswerable"]), str(m["threshold"]),
                      str(m["balanced_accuracy"]), str(m["best_threshold"]), str(m["best_balanced_accuracy"]))
    console.print(table)


list_by_default(docs_app, docs_list)
