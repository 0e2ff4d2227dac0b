"""`appliance backup` and `appliance restore`: a consistent snapshot of the data directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from appliance.cli.common import ConfigOpt, JsonOpt, console, err_console, load_cli_settings


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("backup")(backup_command)
    app.command("restore")(restore_command)


def backup_command(out: Annotated[Path, typer.Argument(help="Archive to write: .tar, .tar.gz, .tar.xz or .tar.zst.")],
                   as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
    """Snapshot users, API keys, conversations, documents and the index; safe while the server runs."""
    from appliance.backup import backup

    settings = load_cli_settings(config)
    manifest = backup(settings.data_path, out.resolve(), on_wait=lambda holder: err_console.print(
        f"waiting: another process ({holder}) is writing the index; it finishes first…", highlight=False))
    if as_json:
        print(json.dumps({"archive": str(out), "bytes": out.stat().st_size, **_summary(manifest)}))
        return
    console.print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MB): " + _describe(manifest))


def restore_command(archive: Annotated[Path, typer.Argument(help="An archive written by `appliance backup`.")],
                    as_json: JsonOpt = False, config: ConfigOpt = None) -> None:
    """Restore a backup into the configured data directory, which must be empty; then check the index."""
    from appliance.backup import restore

    settings = load_cli_settings(config)
    manifest = restore(archive, settings.data_path)
    index = _check_index(settings)
    missing = _missing_models(settings.data_path)
    if as_json:
        print(json.dumps({"data_dir": str(settings.data_path), **_summary(manifest), "index": index,
                          "missing_models": missing}))
        return
    console.print(f"restored into {settings.data_path}: " + _describe(manifest))
    console.print(f"index: {index}")
    for line in missing:
        err_console.print(f"[yellow]warning:[/] registered model file missing: {line}", highlight=False)


def _summary(manifest: dict) -> dict:
    return {"created": manifest["created"], "appliance": manifest["appliance"], "counts": manifest["counts"],
            "files": len(manifest["files"])}


def _describe(manifest: dict) -> str:
    c = manifest["counts"]
    return (f"{c.get('users', 0)} users, {c.get('api_keys', 0)} API keys, {c.get('conversations', 0)} "
            f"conversations, {c.get('documents', 0)} documents, {c.get('chunks', 0)} chunks "
            f"(backup of {manifest['created']}, appliance {manifest['appliance']})")


def _check_index(settings) -> str:
    from appliance.server.services import open_kb
    from knowledge.ingest.integrity import check

    if not (settings.data_path / "knowledge.db").exists():
        return "no knowledge base in the backup"
    kb = open_kb(settings)
    try:
        result = check(kb)
    finally:
        kb.close()
    return ("consistent: " if result.ok else "NOT consistent: ") + result.describe()


def _missing_models(data_dir: Path) -> list[str]:
    from appliance.models.registry import ModelRegistry

    try:
        entries = ModelRegistry(data_dir).list()
    except Exception:  # noqa: BLE001 - a registry problem must not hide a successful restore
        return []
    return [f"{e.name}: {e.path}" for e in entries if not Path(e.path).is_file()]
