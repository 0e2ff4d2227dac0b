"""`appliance serve` and `appliance ask`: the chat service, over HTTP or in the terminal."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from appliance.cli.common import AsUserOpt, ConfigOpt, NoEngine, cli_scope, console, err_console, load_cli_settings

if TYPE_CHECKING:
    from appliance.config import Settings
    from appliance.engine.backend import ChatBackend


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("serve")(serve_command)
    app.command("ask")(ask_command)


def serve_command(host: Annotated[str | None, typer.Option(help="Bind address (default from config).")] = None,
                  port: Annotated[int | None, typer.Option(help="Port (default from config).")] = None,
                  no_ui: Annotated[bool, typer.Option("--no-ui", help="API only.")] = False,
                  config: ConfigOpt = None) -> None:
    """Run the appliance: chat UI, OpenAI-compatible API, /metrics and /healthz on one port."""
    import logging

    import uvicorn

    from appliance.compose import build_app
    from appliance.locks import ServerLease
    from appliance.server.services import build_services, first_start

    settings = load_cli_settings(config)
    if host:
        from appliance.offline import install_guard

        settings.host = host
        install_guard(settings.offline, settings.network_hosts())  # --host may be a name
    if port:
        settings.port = port
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # Chroma's HTTP client logs every call at INFO
    # The server owns the data directory while it runs: command-line writers refuse meanwhile.
    with ServerLease(settings.data_path, settings.host, settings.port) as lease:
        err_console.print("loading models…")
        svc = build_services(settings)
        svc.local_token = lease.token
        password = first_start(svc)
        if password:
            console.print(f"[bold]First start:[/] created administrator [bold]admin[/] with password "
                          f"[bold]{password}[/] (shown once; change it with `appliance users passwd admin`)")
        app = build_app(settings, svc, ui=not no_ui)
        console.print(f"serving on http://{settings.host}:{settings.port}  (model {svc.engine.model_name})")
        try:
            uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)
        finally:
            svc.close()


def terminal_backend(settings: Settings) -> ChatBackend:
    """The chat backend for one terminal question: the local model is loaded only if it writes."""
    from appliance.engine.backend import LazyBackend, open_backend

    if settings.engine.backend == "openai":
        return open_backend(settings)  # nothing to load here
    return LazyBackend(settings, NoEngine.for_chat_model(settings).info)


def ask_command(question: Annotated[str, typer.Argument(help="The question.")],
                max_tokens: Annotated[int, typer.Option(help="Longest answer in tokens.")] = 512,
                doc: Annotated[str | None, typer.Option("--doc", help="Answer from this whole document (every "
                                                        "section read, not the top chunks): an indexed source "
                                                        "or a file.")] = None,
                as_user: AsUserOpt = None, config: ConfigOpt = None) -> None:
    """Ask the knowledge base from the terminal: streamed answer, citations below."""
    if doc is not None:
        from appliance.cli.longdoc import document_answer

        return document_answer(doc, question, max_tokens, False, config, as_user)
    from appliance.server.services import chat_service, open_kb
    from knowledge.retrieve.retriever import Retriever

    settings = load_cli_settings(config)
    kb = open_kb(settings)
    with terminal_backend(settings) as engine:
        chat = chat_service(settings, engine, Retriever(kb))
        prepared = chat.prepare([{"role": "user", "content": question}], scope=cli_scope(settings, as_user))
        answer = ""
        for delta in chat.stream(prepared, chat.answer_params("terminal", max_tokens=max_tokens)):
            answer += delta
            sys.stdout.write(delta)
            sys.stdout.flush()
    print()
    for c in chat.ground(prepared, answer):
        if c.supported is False:
            console.print(f"[yellow]⚠ not in the cited excerpts:[/] {c.text}", highlight=False)
    print_sources(prepared.citations, answer)


def print_sources(citations: list[dict], answer: str) -> None:
    """The sources under a terminal answer: those it cites first, then the other excerpts it was
    given (a quote cites only the excerpts it quotes; an answer citing nothing lists them all)."""
    from knowledge.answer.grounding import cited_numbers

    cited = cited_numbers(answer)
    used = [c for c in citations if c["n"] in cited] or citations
    rest = [c for c in citations if c not in used]
    labels = [_where(c) for c in used + rest]
    for n, (c, where) in enumerate(zip(used + rest, labels, strict=True)):
        if n == len(used):
            console.print("[dim]searched, not cited:[/]", highlight=False)
        if labels.count(where) > 1:  # two excerpts of one headingless file: tell them apart by their words
            where += f' "{_opening(c.get("snippet") or c.get("text", ""))}"'
        console.print(f"[dim][{c['n']}] {where}[/]", highlight=False)


def _where(c: dict) -> str:
    return c["source"] + (f" p.{c['page']}" if c["page"] else "") + (f" § {c['heading']}" if c["heading"] else "")


def _opening(text: str, chars: int = 50) -> str:
    """The first words of `text` on one line, cut at a word boundary."""
    flat = " ".join(text.split())
    if len(flat) <= chars:
        return flat
    return flat[:chars].rsplit(" ", 1)[0] + "…"
