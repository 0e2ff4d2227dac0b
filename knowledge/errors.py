"""Knowledge-base errors. `knowledge` never imports the appliance core; the CLI maps these."""

from __future__ import annotations


class KnowledgeError(Exception):
    """A problem the user can act on (message says what to do)."""


class LoaderError(KnowledgeError):
    """One file could not be read; the ingest records the reason and goes on."""
