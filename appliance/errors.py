"""Domain errors. The CLI turns any of these into a one-line message (tracebacks with APPLIANCE_DEBUG=1)."""

from __future__ import annotations


class ApplianceError(Exception):
    """Base class for errors a user can act on; the message must say what to do."""


class ConfigError(ApplianceError):
    """The configuration file or an APPLIANCE_* variable holds an invalid value."""


class ModelError(ApplianceError):
    """A model file is missing, not a GGUF, truncated, or fails verification."""
