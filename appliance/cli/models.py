"""`appliance models …`: register, list, choose and verify GGUF models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from appliance.cli.common import ConfigOpt, console, err_console, list_by_default, load_cli_settings

models_app = typer.Typer(no_args_is_help=False, help="Register, inspect and verify GGUF models.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(models_app, name="models")


def _registry(config: Path | None = None):
    from appliance.models.registry import ModelRegistry

    return ModelRegistry(load_cli_settings(config).data_path)


@models_app.command("list")
def models_list(config: ConfigOpt = None) -> None:
    """List registered models with their architecture and quantization."""
    from appliance.models.metadata import human_bytes, human_params

    registry = _registry(config)
    default = registry.default_name()
    table = Table("", "name", "arch", "params", "quant", "bits/w", "KLD", "ctx", "layers", "heads/kv",
                  "KV/tok f16", "KV/tok q8_0", "tmpl", "size")
    for e in registry.list():
        i = e.model_info
        bits = 8 * i.weights_bytes / i.n_params if i.n_params else 0.0
        kld = f"{e.quantized['kld_mean']:.4f}" if e.quantized else "-"  # measured by `appliance quantize`
        table.add_row("*" if e.name == default else "", e.name, i.architecture,
                      human_params(i.n_params), i.quant, f"{bits:.2f}", kld, str(i.context_length), str(i.n_layer),
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


list_by_default(models_app, models_list)
