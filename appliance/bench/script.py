"""What the step benchmarks in scripts/ share: their common options and how they hand results out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def step_parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser with the options every step benchmark takes: --model, --repeat, --json, --out."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="", help="GGUF path or registry name (default: the chat model)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (medians are reported)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON on the last line")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    return ap


def emit(args: argparse.Namespace, name: str, result: dict, table: list[str]) -> None:
    """Write `result` to <out>/<name>.json, print the table, and the JSON last when --json."""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2))
    print("\n".join(table))
    if args.json:
        print(json.dumps(result))
