"""`appliance config …` and `appliance doctor`: the installation and its settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from appliance.cli.common import ConfigOpt, console, err_console, load_cli_settings

config_app = typer.Typer(no_args_is_help=True, help="Inspect and initialise appliance.toml.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(config_app, name="config")
    app.command("doctor")(doctor)


@config_app.command("init")
def config_init(path: Annotated[Path, typer.Argument(help="Where to write it.")] = Path("appliance.toml"),
                quiet: bool = typer.Option(False, "--quiet", "-q")) -> None:
    """Write a default, commented appliance.toml (never overwrites an existing file)."""
    from appliance.config import write_default_config

    written = write_default_config(path)
    if not quiet or written:
        console.print(f"wrote {path}" if written else f"{path} exists; left unchanged")


@config_app.command("show")
def config_show(config: ConfigOpt = None) -> None:
    """Print the effective settings (file plus APPLIANCE_* overrides) as JSON."""
    settings = load_cli_settings(config)
    console.print_json(settings.model_dump_json())
    console.print(f"# from {settings.config_path or 'defaults + environment'}")


def doctor(config: ConfigOpt = None,
           skip_embedding: bool = typer.Option(False, help="Do not load the embedding model.")) -> None:
    """Check the installation: versions, CPU/GPU, llama.cpp build, models, data dir, offline guard."""
    from appliance.doctor import run_checks

    checks = run_checks(load_cli_settings(config), load_embedder=not skip_embedding)
    table = Table("check", "status", "detail", title="appliance doctor")
    for check in checks:
        status = "[green]ok[/]" if check.ok else ("[yellow]warn[/]" if check.warn_only else "[red]FAIL[/]")
        table.add_row(check.name, status, check.detail)
    console.print(table)
    failed = [c for c in checks if not c.ok and not c.warn_only]
    if failed:
        err_console.print(f"[red]not ready:[/] {', '.join(c.name for c in failed)}")
        raise typer.Exit(1)
    console.print("[green]ready[/]")
