"""Knowledge-base errors. `knowledge` never imports the appliance core; the CLI maps these."""

from __future__ import annotations


class KnowledgeError(Exception):
    """A problem the user can act on (message says what to do)."""


class LoaderError(KnowledgeError):
    """One file could not be read; the ingest records the reason and goes on."""


class IndexWriteError(KnowledgeError):
    """Writing the index failed (a full disk, most often). Files committed before it are kept; the
    interrupted write is journalled and repaired by the next ingest or server start."""

    def __init__(self, message: str, disk_full: bool) -> None:
        super().__init__(message)
        self.disk_full = disk_full
