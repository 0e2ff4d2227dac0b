"""The data directory's schema version: upgrades migrate it forward, a downgrade is refused.

`data/SCHEMA` holds one integer. Every command that opens a data directory calls `ensure()`: an
older schema is migrated (each step a function below, applied in order, the version written after
each), a newer one stops with a clear message instead of letting old code misread new files. A data
directory from before versioning (no file) is schema 1.

    python -m appliance.schema DATA_DIR      # install.sh runs this after an upgrade
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from appliance.errors import ApplianceError

CURRENT = 1
FILE = "SCHEMA"
_MARKERS = ("users.db", "knowledge.db", "models.json", "chroma")

# Schema N -> N+1. SQLite schema changes of a release go here (tables already migrate themselves on
# open where they can: see knowledge.db's FTS layout); empty while the schema is 1.
MIGRATIONS: dict[int, Callable[[Path], None]] = {}


class SchemaTooNew(ApplianceError):
    """The data directory was written by a newer appliance."""


def read(data_dir: Path) -> int | None:
    """The directory's schema (1 for unversioned data), or None when it holds no appliance data."""
    path = Path(data_dir) / FILE
    if path.is_file():
        try:
            return int(path.read_text().strip())
        except ValueError:
            raise ApplianceError(f"{path} is damaged (expected one integer)") from None
    return 1 if any((Path(data_dir) / m).exists() for m in _MARKERS) else None


def ensure(data_dir: Path, current: int = CURRENT, migrations: dict | None = None) -> str:
    """Migrate `data_dir` forward to `current` or refuse a newer one; returns what was done."""
    migrations = MIGRATIONS if migrations is None else migrations
    found = read(data_dir)
    if found is None:
        return "no data yet"
    if found > current:
        raise SchemaTooNew(f"the data directory {data_dir} has schema {found}, written by a newer appliance; "
                           f"this one reads up to {current}: install that version again, or restore a backup "
                           "made by this one")
    start = found
    while found < current:
        migrations[found](Path(data_dir))
        found += 1
        _write(data_dir, found)
    if not (Path(data_dir) / FILE).is_file():
        _write(data_dir, current)
    return f"schema {current}" + (f" (migrated from {start})" if start < current else " (current)")


def _write(data_dir: Path, version: int) -> None:
    tmp = Path(data_dir) / (FILE + ".tmp")
    tmp.write_text(f"{version}\n")
    tmp.replace(Path(data_dir) / FILE)


if __name__ == "__main__":
    print(f"data directory: {ensure(Path(sys.argv[1]))}")
