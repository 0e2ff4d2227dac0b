"""The `appliance` command line. Commands only parse arguments and call the library.

Domain errors (ApplianceError) become one-line messages in one place, `_ErrorsToMessages`;
APPLIANCE_DEBUG=1 shows the full traceback instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from typer.core import TyperGroup

from appliance.cli_common import ConfigOpt, console, err_console, load_cli_settings
from appliance.errors import ApplianceError
from knowledge.errors import KnowledgeError


class _ErrorsToMessages(TyperGroup):
    """Turns domain errors raised anywhere below this group into a clean CLI error."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (ApplianceError, KnowledgeError) as e:
            if os.environ.get("APPLIANCE_DEBUG") == "1":
                raise
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            err_console.print(f"[red]error:[/] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None


app = typer.Typer(cls=_ErrorsToMessages, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Offline knowledge-base Q&A appliance on llama.cpp.")
models_app = typer.Typer(no_args_is_help=False, help="Register, inspect and verify GGUF models.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect and initialise appliance.toml.")
app.add_typer(models_app, name="models")
app.add_typer(config_app, name="config")


def _register_commands() -> None:
    # The heavier command modules import lazily inside their commands; registering is cheap.
    from appliance import cli_knowledge as k

    app.command("ingest")(k.ingest_command)
    app.command("search")(k.search_command)
    app.add_typer(k.docs_app, name="docs")
    app.add_typer(k.eval_app, name="eval")

    from appliance import cli_server as s

    app.command("serve")(s.serve_command)
    app.command("ask")(s.ask_command)
    app.add_typer(s.users_app, name="users")

    from appliance import cli_measure as m

    app.command("plan")(m.plan_command)
    app.command("bench")(m.bench_command)



def _registry(config: Path | None = None):
    from appliance.models.registry import ModelRegistry

    return ModelRegistry(load_cli_settings(config).data_path)


# -- config -------------------------------------------------------------------------------
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


# -- models -------------------------------------------------------------------------------
@models_app.callback(invoke_without_command=True)
def models_default(ctx: typer.Context, config: ConfigOpt = None) -> None:
    """Without a sub-command: list the registered models."""
    if ctx.invoked_subcommand is None:
        models_list(config)


@models_app.command("list")
def models_list(config: ConfigOpt = None) -> None:
    """List registered models with their architecture and quantization."""
    from appliance.models.metadata import human_bytes, human_params

    registry = _registry(config)
    default = registry.default_name()
    table = Table("", "name", "arch", "params", "quant", "ctx", "layers", "heads/kv",
                  "KV/tok f16", "KV/tok q8_0", "tmpl", "size")
    for e in registry.list():
        i = e.model_info
        table.add_row("*" if e.name == default else "", e.name, i.architecture,
                      human_params(i.n_params), i.quant, str(i.context_length), str(i.n_layer),
                      f"{i.n_head}/{i.n_head_kv}", human_bytes(i.kv_bytes_per_token("f16")),
                      human_bytes(i.kv_bytes_per_token("q8_0")),
                      "yes" if i.has_chat_template else "no", human_bytes(e.size))
    console.print(table)
    for e in registry.list():
        console.print(f"[dim]{e.name}: {e.path}[/]", soft_wrap=True)


@models_app.command("add")
def models_add(path: Path, name: Annotated[str | None, typer.Option(help="Registry name.")] = None,
               config: ConfigOpt = None) -> None:
    """Register a GGUF file (validates the header, records its sha256)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    registry = _registry(config)
    size = path.stat().st_size if path.is_file() else 0
    with Progress("hashing", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("sha256", total=size)
        entry = registry.add(path, name, progress=lambda n: bar.advance(task, n))
    console.print(f"added {entry.name}: {entry.info['architecture']} {entry.info['quant']} "
                  f"sha256 {entry.sha256[:16]}…")


@models_app.command("remove")
def models_remove(name: str, config: ConfigOpt = None) -> None:
    """Forget a model (the file is not deleted)."""
    _registry(config).remove(name)
    console.print(f"removed {name}")


@models_app.command("use")
def models_use(name: str, config: ConfigOpt = None) -> None:
    """Make NAME the default chat model."""
    _registry(config).use(name)
    console.print(f"default chat model: {name}")


@models_app.command("verify")
def models_verify(name: Annotated[str | None, typer.Argument()] = None,
                  config: ConfigOpt = None) -> None:
    """Re-read headers and re-hash files; non-zero exit if any fails."""
    results = _registry(config).verify(name)
    for model, ok, message in results:
        console.print(f"[{'green' if ok else 'red'}]{'ok ' if ok else 'BAD'}[/] {model}: {message}")
    if not all(ok for _, ok, _ in results):
        raise typer.Exit(1)


# -- doctor -------------------------------------------------------------------------------
@app.command()
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


_register_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
