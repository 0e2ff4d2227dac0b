"""`appliance eval loaders FOLDER`: what our loaders keep of each file, against an independent reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from appliance.cli.common import JsonOpt, console, err_console

FolderArg = Annotated[Path, typer.Argument(help="A folder of documents (nothing is indexed).")]
WORST_SHOWN = 15  # files in the table (those that lose most first); --json has every file


def eval_loaders(folder: FolderArg, as_json: JsonOpt = False) -> None:
    """Share of each file's content sentences (as an independent extractor reads them: lxml, pypdf,
    the Office XML) missing from what our loaders keep, the lost blocks by element, and the
    navigation dropped on purpose, counted apart."""
    from knowledge.errors import KnowledgeError
    from knowledge.eval.fidelity import folder_fidelity

    if not folder.is_dir():
        raise KnowledgeError(f"{folder}: no such folder")
    with Progress(TextColumn("reading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("files", total=None)
        result = folder_fidelity(folder, progress=lambda total: bar.update(task, total=total, advance=1))
    if as_json:
        print(json.dumps(result, ensure_ascii=False))
        return
    _print(result)


def _print(result: dict) -> None:
    rows = sorted((r for r in result["rows"] if "content" in r), key=lambda r: -r["lost"])
    table = Table("file", "content sentences", "lost", "lost %", "navigation dropped",
                  "lost blocks (element: first words)", title=f"loader fidelity: {result['folder']}")
    for r in rows[:WORST_SHOWN]:
        blocks = "; ".join(f"{b['element']}: {b['first_words']}" for b in r["lost_blocks"][:3])
        table.add_row(escape(r["source"]), str(r["content"]), str(r["lost"]), f"{100 * r['lost_share']:.1f}",
                      f"{r['navigation_dropped']}/{r['navigation']}", escape(blocks))
    console.print(table)
    unread = [r for r in result["rows"] if "content" not in r or r["status"] != "loaded"]
    for r in unread:
        console.print(f"  {escape(r['source'])}: {escape(r['status'])}", highlight=False)
    console.print(f"{result['measured']} of {result['files']} files measured: {result['lost']} of {result['content']} "
                  f"content sentences lost ({100 * result['lost_share']:.2f} %); navigation dropped on purpose: "
                  f"{result['navigation_dropped']} of {result['navigation']} sentences", highlight=False)
