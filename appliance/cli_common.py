"""What every CLI command module shares: the consoles, the --config option, settings loading."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Config file "
                                                "(default: $APPLIANCE_CONFIG or ./appliance.toml).")]


def load_cli_settings(config: Path | None = None):
    """Settings for one command, with the offline guard applied as the process starts work."""
    from appliance.config import load_settings
    from appliance.offline import install_guard

    settings = load_settings(config)
    install_guard(settings.offline, settings.offline_allow_hosts)
    return settings
