"""`appliance batch run`: structured extraction over the knowledge base, in the background."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from appliance.cli import handoff
from appliance.cli.common import AsUserOpt, ConfigOpt, JsonOpt, cli_scope, console, err_console, load_cli_settings

batch_app = typer.Typer(no_args_is_help=True, help="Batch jobs over the knowledge base.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(batch_app, name="batch")


@batch_app.command("run")
def batch_run(template: Annotated[Path, typer.Argument(help="TOML with `instruction`, `item`, `over`, `max_tokens`.")],
              out: Annotated[Path, typer.Option("--out", help="JSON lines; re-running skips items already in it.")],
              over: Annotated[list[str] | None, typer.Option("--over", help="Source prefix (repeatable); "
                                                              "default: the whole knowledge base.")] = None,
              schema: Annotated[Path | None, typer.Option("--schema", help="JSON schema every answer must "
                                                           "follow (grammar-constrained, then validated).")] = None,
              window: Annotated[int, typer.Option(help="Items in flight at once.")] = 4,
              as_json: JsonOpt = False, as_user: AsUserOpt = None, config: ConfigOpt = None) -> None:
    """Ask one instruction of every chunk or file; beside a running server its requests queue behind users'."""
    from appliance.batch import BatchError, Template, run_batch, select_items
    from knowledge.index.db import KnowledgeDB

    settings = load_cli_settings(config)
    tmpl = Template.load(template)
    shape = None
    if schema is not None:
        try:
            shape = json.loads(schema.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BatchError(f"cannot read the JSON schema {schema}: {e}") from None
    scope = cli_scope(settings, as_user)
    db = KnowledgeDB(settings.data_path / "knowledge.db")
    try:
        items = select_items(db, settings.knowledge.collection, tmpl, over or [], scope=scope)
    finally:
        db.close()
    if not items:
        raise BatchError("no items: the knowledge base has nothing under " + (", ".join(over or []) or "it"))
    with handoff.chat_backend(settings) as backend, Progress(
            TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task("items", total=len(items), rate="")

        def progress(s) -> None:
            d = s.as_dict()
            bar.update(task, completed=s.skipped + s.ok + s.failed,
                       rate=f"{d['items_per_s']} items/s, {d['tokens_per_s']} tok/s, {s.failed} failed")
        summary = run_batch(backend, tmpl, items, out, shape, window=window, progress=progress)
    result = summary.as_dict()
    if as_json:
        print(json.dumps(result))
        return
    console.print(f"{result['ok']} ok, {result['failed']} failed, {result['skipped']} already done of "
                  f"{result['items']} items in {result['wall_s']} s ({result['items_per_s']} items/s, "
                  f"{result['tokens_per_s']} tok/s, prefix cache hit rate {result['prefix_hit_rate']:.0%}) → {out}")
    for line in result["errors"]:
        err_console.print(f"[yellow]failed:[/] {line}", highlight=False)

