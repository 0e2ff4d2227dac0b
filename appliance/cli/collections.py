"""`appliance collections …`: which groups may read or write which collection of documents."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from appliance.cli.common import ConfigOpt, console, err_console, list_by_default, load_cli_settings

collections_app = typer.Typer(no_args_is_help=False, help="Collections of documents and who may read them.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(collections_app, name="collections")


def _open(config):
    """(access store, knowledge DB) of the configured data directory; the caller closes the DB."""
    from appliance.server.services import open_access
    from knowledge.index.db import KnowledgeDB

    settings = load_cli_settings(config)
    db = KnowledgeDB(settings.data_path / "knowledge.db")
    return open_access(settings, db), db, settings


@collections_app.command("list")
def collections_list(config: ConfigOpt = None) -> None:
    """Every collection with its file count and the groups that may read or write it."""
    access, db, settings = _open(config)
    try:
        counts = db.collections(settings.knowledge.collection)
    finally:
        db.close()
    grants: dict[str, list[str]] = {}
    for group, _, given in access.groups():
        for collection, level in given:
            grants.setdefault(collection, []).append(f"{group} ({level})")
    table = Table("collection", "files", "groups")
    for name, n in counts.items():
        table.add_row(name, str(n), ", ".join(grants.get(name, [])) or "[dim]administrators only[/]")
    console.print(table)


@collections_app.command("create")
def collections_create(name: str, config: ConfigOpt = None) -> None:
    """Create an empty collection (so it can be granted before anything is ingested into it)."""
    _, db, settings = _open(config)
    try:
        db.add_collection(settings.knowledge.collection, name)
    finally:
        db.close()
    err_console.print(f"collection {name} created; grant it with `appliance collections grant GROUP {name} read`")


@collections_app.command("grant")
def collections_grant(group: str, collection: str,
                      level: Annotated[str, typer.Argument(help="read, or write (read and add documents).")] = "read",
                      config: ConfigOpt = None) -> None:
    """Let GROUP read (or write) COLLECTION; takes effect on each member's next request."""
    access, db, _ = _open(config)
    try:
        access.grant(group, collection, level)
    finally:
        db.close()
    err_console.print(f"group {group} may now {level} collection {collection}")


@collections_app.command("revoke")
def collections_revoke(group: str, collection: str, config: ConfigOpt = None) -> None:
    """Take COLLECTION away from GROUP; open sessions lose it on their next request."""
    access, db, _ = _open(config)
    try:
        access.revoke(group, collection)
    finally:
        db.close()
    err_console.print(f"group {group} no longer has access to collection {collection}")


list_by_default(collections_app, collections_list)
