"""`appliance summarize` and `appliance ask --doc`: answers over a whole document (map-reduce)."""

from __future__ import annotations

import json
import sys
import threading
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from appliance.cli.common import AsUserOpt, ConfigOpt, JsonOpt, cli_scope, console, err_console, load_cli_settings


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("summarize")(summarize_command)


def summarize_command(document: Annotated[str, typer.Argument(help="An indexed source (as `docs list` shows it, "
                                                                   "or its file name), or a file on disk.")],
                      max_tokens: Annotated[int, typer.Option(help="Longest summary in tokens.")] = 512,
                      as_json: JsonOpt = False, as_user: AsUserOpt = None, config: ConfigOpt = None) -> None:
    """Summarise one whole document: each section, then the summaries, with page citations."""
    document_answer(document, None, max_tokens, as_json, config, as_user)


def document_answer(document: str, question: str | None, max_tokens: int, as_json: bool, config,
                    as_user: str | None = None) -> None:
    """Map-reduce over `document` (summary when `question` is None): progress on stderr, the answer
    streamed to stdout, its section citations below. Beside a running server its engine does the work
    (map calls as background requests). Ctrl-C cancels the calls in flight."""
    from appliance.cli.handoff import chat_backend
    from appliance.server.longdoc import find_document
    from appliance.server.services import chat_service, longdoc_service, open_kb
    from knowledge.retrieve.retriever import Retriever

    settings = load_cli_settings(config)
    kb = open_kb(settings)
    scope = cli_scope(settings, as_user)
    # A file on disk is the operator's own; `--as USER` answers from that user's documents only.
    chunks = find_document(kb.db, kb.cfg.name, document, as_user is None, scope=scope)
    stop = threading.Event()
    with chat_backend(settings) as engine:
        chat = chat_service(settings, engine, Retriever(kb))
        service = longdoc_service(settings, chat, kb)
        sections = service.split(chunks)
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err_console, transient=True) as bar:
                task = bar.add_task(f"{len(sections)} sections", total=len(sections))

                def progress(stage: str, done: int, total: int) -> None:
                    label = "reading sections" if stage == "map" else "combining notes"
                    bar.update(task, description=label, completed=done, total=total)
                prepared = service.prepare(sections, question, progress, stop, scope=scope)
            params = chat.answer_params("terminal", max_tokens=max_tokens)
            if as_json:
                text = "".join(chat.stream(prepared, params))
                print(json.dumps({"document": chunks[0].source, "sections": len(sections), "answer": text,
                                  "citations": [_cite(c) for c in prepared.citations]}, ensure_ascii=False))
                return
            for delta in chat.stream(prepared, params):
                sys.stdout.write(delta)
                sys.stdout.flush()
        except KeyboardInterrupt:
            stop.set()  # the map calls in flight are cancelled; the engine frees their KV
            raise
    print()
    for c in prepared.citations:
        console.print(f"[dim][{c['n']}] {_where(c)}[/]", highlight=False)


def _cite(c: dict) -> dict:
    return {"n": c["n"], "source": c["source"], "pages": c["pages"], "heading": c["heading"], "text": c["text"]}


def _where(c: dict) -> str:
    from appliance.server.chat import page_label

    return ", ".join(p for p in (c["source"], page_label(c)) if p) + (f" § {c['heading']}" if c["heading"] else "")
