"""Collections and the scope of a reader: which collections a query may see.

Every document belongs to one collection (`default` unless an ingest names another). Who may read
which collection is decided by the server (groups and grants, `appliance.server.access`); the
knowledge layer only receives the answer as a `Scope` and applies it inside its own queries (the
vector store's `where`, the SQL of the lexical index, the manifest and the chunk rows), so a caller
cannot forget it: every read that returns document text or names takes one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from knowledge.errors import KnowledgeError

DEFAULT_COLLECTION = "default"
# Lower-case letters, digits, '-' and '_': a collection name ends up in folder names (uploads),
# SQL parameters and vector metadata, and must never be read as a path.
COLLECTION_NAME = r"^[a-z0-9][a-z0-9_-]{0,62}$"
COLLECTION_FIELD = r"^([a-z0-9][a-z0-9_-]{0,62})?$"  # a form field: empty means the default collection
_NAME = re.compile(COLLECTION_NAME)


def check_collection(name: str) -> str:
    """`name` if it is a valid collection name, else a KnowledgeError that says what is allowed."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise KnowledgeError(f"invalid collection name {name!r}: 1-63 lower-case letters, digits, '-' or '_', "
                             "starting with a letter or digit (no '/', '.', spaces)")
    return name


@dataclass(frozen=True)
class Scope:
    """The collections a reader may see; `names is None` means all of them (admins, the command line)."""

    names: frozenset[str] | None

    @classmethod
    def everything(cls) -> Scope:
        return cls(None)

    @classmethod
    def of(cls, names: Iterable[str]) -> Scope:
        return cls(frozenset(names))

    @property
    def is_everything(self) -> bool:
        return self.names is None

    @property
    def is_empty(self) -> bool:
        return self.names is not None and not self.names

    def allows(self, collection: str) -> bool:
        return self.names is None or collection in self.names

    def sql(self, column: str) -> tuple[str, list[str]]:
        """(" AND column IN (?, …)", params) restricting a query; ("", []) for everything."""
        if self.names is None:
            return "", []
        names = sorted(self.names)
        if not names:
            return " AND 0", []
        return f" AND {column} IN ({','.join('?' * len(names))})", names

    def where(self) -> dict | None:
        """The vector store's metadata filter, None for everything."""
        if self.names is None:
            return None
        return {"collection": {"$in": sorted(self.names)}}


EVERYTHING = Scope.everything()
