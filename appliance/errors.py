"""Domain errors. The CLI turns any of these into a one-line message (tracebacks with APPLIANCE_DEBUG=1)."""

from __future__ import annotations


class ApplianceError(Exception):
    """Base class for errors a user can act on; the message must say what to do."""


class ConfigError(ApplianceError):
    """The configuration file or an APPLIANCE_* variable holds an invalid value."""


class ModelError(ApplianceError):
    """A model file is missing, not a GGUF, truncated, or fails verification."""


def no_user(name: str) -> str:
    """What every command says of a name that is not a user: where the users are, and how to add one.
    Here because the user store, the access store and the CLI all say it, and `auth` imports `access`."""
    return f"no user {name!r} (see `appliance users list`; `appliance users add {name}` creates it)"
