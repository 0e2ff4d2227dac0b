"""The `appliance` command line, assembled from one module per noun.

Each module under `appliance/cli/` owns its commands, which only parse arguments and call the
library. Domain errors (ApplianceError, KnowledgeError) become one-line messages here, in one place
(followed by the list a few of them carry, such as a suite's unmeetable labels);
APPLIANCE_DEBUG=1 shows the full traceback instead.
"""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape
from typer.core import TyperGroup

from appliance.cli import (
    backup,
    batch,
    collections,
    config,
    knowledge,
    longdoc,
    measure,
    models,
    quantize,
    serve,
    users,
)
from appliance.cli.common import err_console
from appliance.errors import ApplianceError
from knowledge.errors import KnowledgeError

MAX_DETAIL_LINES = 20  # lines of an error's list shown below its message


class _ErrorsToMessages(TyperGroup):
    """Turns domain errors raised anywhere below this group into a clean CLI error."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (ApplianceError, KnowledgeError) as e:
            if os.environ.get("APPLIANCE_DEBUG") == "1":
                raise
            lines = str(e).splitlines() or [type(e).__name__]
            err_console.print(f"[red]error:[/] {escape(lines[0])}", highlight=False, soft_wrap=True)
            # A few errors list what they found (a suite's unmeetable labels): show the list, capped
            for line in lines[1:1 + MAX_DETAIL_LINES]:
                err_console.print(line, highlight=False, soft_wrap=True, markup=False)
            if len(lines) > 1 + MAX_DETAIL_LINES:
                err_console.print(f"  … and {len(lines) - 1 - MAX_DETAIL_LINES} more", highlight=False)
            raise typer.Exit(1) from None


app = typer.Typer(cls=_ErrorsToMessages, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Offline knowledge-base Q&A appliance on llama.cpp.")
for module in (config, models, quantize, knowledge, serve, longdoc, users, collections, measure, backup, batch):
    module.register(app)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
