"""What every CLI command module shares: the consoles, the --config option, settings loading."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from appliance.config import Settings

console = Console()
err_console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Config file "
                                                "(default: $APPLIANCE_CONFIG or ./appliance.toml).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def write_json(out: Path, data: object) -> None:
    """A command's `--out` file: the figures (and rows) as JSON, its folder made when missing."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def load_cli_settings(config: Path | None = None) -> Settings:
    """Settings for one command, with the offline guard applied as the process starts work."""
    from appliance.config import load_settings
    from appliance.offline import install_guard

    settings = load_settings(config)
    # The bind address may be a name, and a scaled-out front-end talks to its cluster and vector server.
    install_guard(settings.offline, settings.network_hosts())
    # Old data is migrated forward before anything reads it; data from a newer version is refused.
    if settings.data_path.is_dir():
        from appliance.schema import ensure

        ensure(settings.data_path)
    return settings


def list_by_default(group: typer.Typer, list_command: Callable[[Path | None], None]) -> None:
    """Run `list_command` when `group` is called without a sub-command (`appliance docs`, …)."""

    @group.callback(invoke_without_command=True)
    def _default(ctx: typer.Context, config: ConfigOpt = None) -> None:
        if ctx.invoked_subcommand is None:
            list_command(config)



AsUserOpt = Annotated[str | None, typer.Option("--as", help="Read only what this user may read (their groups' "
                                               "collections); default: everything (the operator).")]


def cli_scope(settings: Settings, as_user: str | None):
    """The collections a command reads: everything for the operator, or what `--as USER` may read."""
    from knowledge.index.access import EVERYTHING

    if as_user is None:
        return EVERYTHING
    from appliance.errors import ApplianceError, no_user
    from appliance.server.auth import UserStore
    from appliance.server.services import open_access
    from knowledge.index.db import KnowledgeDB

    user = UserStore(settings.data_path / "users.db").get(as_user)
    if user is None:
        raise ApplianceError(no_user(as_user))
    db = KnowledgeDB(settings.data_path / "knowledge.db")
    try:
        return open_access(settings, db).scope_for(user)
    finally:
        db.close()


class NoEngine:
    """Stands in for the chat model where only retrieval and the gate run."""

    model_name = "none"

    def __init__(self, info) -> None:
        self.info = info

    @classmethod
    def for_chat_model(cls, settings: Settings) -> NoEngine:
        """The configured chat model's registered facts, without loading it: they size the prompt
        (how many excerpts the gate sees) as the server would. Raises when it is not registered."""
        from appliance.models.registry import ModelRegistry

        return cls(ModelRegistry(settings.data_path).resolve(settings.chat_model).model_info)

    def submit(self, messages: list[dict], params) -> None:
        """A written answer needs the model this stand-in does not load: say so plainly (a quoted
        answer falls back to a written one when no excerpt sentence answers)."""
        from appliance.errors import ApplianceError

        raise ApplianceError("this command runs without the chat model, and this question needs a written answer "
                             "(no excerpt sentence could be quoted)")
