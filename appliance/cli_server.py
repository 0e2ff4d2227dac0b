"""CLI commands of the server side: serve, ask, users. They only parse and call."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from appliance.cli_common import ConfigOpt, console, err_console, load_cli_settings

users_app = typer.Typer(no_args_is_help=False, help="Accounts and API keys.")
key_app = typer.Typer(no_args_is_help=True, help="API keys of a user.")
users_app.add_typer(key_app, name="key")



def _users(config):
    from appliance.server.auth import UserStore

    return UserStore(load_cli_settings(config).data_path / "users.db")


def serve_command(host: Annotated[str | None, typer.Option(help="Bind address (default from config).")] = None,
                  port: Annotated[int | None, typer.Option(help="Port (default from config).")] = None,
                  no_ui: Annotated[bool, typer.Option("--no-ui", help="API only.")] = False,
                  config: ConfigOpt = None) -> None:
    """Run the appliance: chat UI, OpenAI-compatible API, /metrics and /healthz on one port."""
    import logging

    import uvicorn

    from appliance.server.app import create_app
    from appliance.server.services import build_services, first_start

    settings = load_cli_settings(config)
    if host:
        settings.host = host
    if port:
        settings.port = port
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    err_console.print("loading models…")
    svc = build_services(settings)
    password = first_start(svc)
    if password:
        console.print(f"[bold]First start:[/] created administrator [bold]admin[/] with password "
                      f"[bold]{password}[/] (shown once; change it with `appliance users passwd admin`)")
    app = create_app(settings, svc, ui=not no_ui)
    console.print(f"serving on http://{settings.host}:{settings.port}  (model {svc.engine.model_name})")
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", access_log=False)
    finally:
        svc.close()


def ask_command(question: Annotated[str, typer.Argument(help="The question.")],
                max_tokens: Annotated[int, typer.Option(help="Longest answer in tokens.")] = 512,
                config: ConfigOpt = None) -> None:
    """Ask the knowledge base from the terminal: streamed answer, citations below."""
    from appliance.engine.engine import Engine
    from appliance.engine.sequence import SamplingParams
    from appliance.knowledge_service import open_kb
    from appliance.server.chat import ChatService
    from knowledge.retrieve import Retriever

    settings = load_cli_settings(config)
    kb = open_kb(settings)
    with Engine.from_config(settings) as engine:
        chat = ChatService(engine, Retriever(kb))
        prepared = chat.prepare([{"role": "user", "content": question}])
        for delta in chat.stream(prepared, SamplingParams(max_tokens=max_tokens, temperature=0.3)):
            sys.stdout.write(delta)
            sys.stdout.flush()
    print()
    for c in prepared.citations:
        where = c["source"] + (f" p.{c['page']}" if c["page"] else "") + (f" § {c['heading']}" if c["heading"] else "")
        console.print(f"[dim][{c['n']}] {where}[/]", highlight=False)


def _read_password(stdin: bool, confirm: bool = True) -> str:
    if stdin:
        return sys.stdin.readline().rstrip("\n")
    return typer.prompt("Password", hide_input=True, confirmation_prompt=confirm)


@users_app.callback(invoke_without_command=True)
def users_default(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """Without a sub-command: list users."""
    if ctx.invoked_subcommand is None:
        users_list(config)


@users_app.command("list")
def users_list(config: ConfigOpt = None) -> None:
    """Users, roles and active key counts."""
    for user, keys in _users(config).list():
        console.print(f"{user.name}\t{user.role}\t{keys} active key(s)")


@users_app.command("add")
def users_add(name: str, admin: Annotated[bool, typer.Option("--admin", help="Make an administrator.")] = False,
              password_stdin: Annotated[bool, typer.Option("--password-stdin")] = False,
              config: ConfigOpt = None) -> None:
    """Create an account (prompts for the password, or reads one line from stdin)."""
    user = _users(config).add(name, _read_password(password_stdin), admin)
    err_console.print(f"added {user.name} ({user.role})")


@users_app.command("remove")
def users_remove(name: str, config: ConfigOpt = None) -> None:
    """Delete an account and revoke its keys."""
    _users(config).remove(name)
    err_console.print(f"removed {name}")


@users_app.command("passwd")
def users_passwd(name: str, password_stdin: Annotated[bool, typer.Option("--password-stdin")] = False,
                 config: ConfigOpt = None) -> None:
    """Set a new password."""
    _users(config).set_password(name, _read_password(password_stdin))
    err_console.print(f"password of {name} changed")


@key_app.command("create")
def key_create(name: str, config: ConfigOpt = None) -> None:
    """Print a new API key for NAME on stdout (the only time it is shown)."""
    print(_users(config).create_key(name))


@key_app.command("revoke")
def key_revoke(key: Annotated[str, typer.Argument(help="The key, its id, or a user name (all their keys).")],
               config: ConfigOpt = None) -> None:
    """Revoke API keys."""
    n = _users(config).revoke_key(key)
    err_console.print(f"revoked {n} key(s)")
    if not n:
        raise typer.Exit(1)
