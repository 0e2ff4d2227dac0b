"""The air-gap guard: telemetry off, hubs offline, and no non-loopback socket connections.

`install_guard()` is called once at process start by the CLI (and by the server and tests).
It sets the environment switches that libraries read (Hugging Face, Gradio, Chroma), then
installs a `sys.addaudithook` that refuses `socket.connect`/`sendto` to any address that is
not loopback or allow-listed. Audit hooks cannot be removed, so the policy lives in a
module-level `_POLICY` that a later `install_guard()` call may update.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
import traceback
from dataclasses import dataclass, field

from appliance.errors import ApplianceError

log = logging.getLogger("appliance.offline")

# Read by huggingface_hub/transformers/datasets, Gradio and Chroma at import or call time.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "ANONYMIZED_TELEMETRY": "False",
    "CHROMA_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


class OfflineViolation(ApplianceError, ConnectionRefusedError):
    """A connection to a non-loopback address was attempted while offline mode is on.

    It is also a ConnectionRefusedError so that libraries treat it as an unreachable host
    (and fall back to local files) instead of crashing a worker thread.
    """


@dataclass
class _Policy:
    enabled: bool = False
    allow: set[str] = field(default_factory=set)


_POLICY = _Policy()
_HOOK_INSTALLED = False


def install_guard(offline: bool = True, allow_hosts: list[str] | tuple[str, ...] = ()) -> None:
    """Apply the offline environment and (re)configure the socket guard. Idempotent."""
    global _HOOK_INSTALLED
    if offline:
        for key, value in OFFLINE_ENV.items():
            os.environ[key] = value
    _POLICY.enabled = offline
    _POLICY.allow = {h.lower() for h in allow_hosts}
    if not _HOOK_INSTALLED:
        sys.addaudithook(_audit)
        _HOOK_INSTALLED = True


def guard_active() -> bool:
    """True when the socket guard is installed and refusing non-loopback connections."""
    return _HOOK_INSTALLED and _POLICY.enabled


def is_allowed(host: str) -> bool:
    """Whether offline mode lets a connection to `host` through."""
    host = host.lower().strip("[]")
    if host in _POLICY.allow or host in ("localhost", "localhost.localdomain", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        # A name other than localhost would need DNS, which is itself a network call.
        return False


def _audit(event: str, args: tuple) -> None:
    if not _POLICY.enabled or event not in ("socket.connect", "socket.sendto"):
        return
    sock, address = args[0], args[-1]
    if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        return  # Unix sockets and netlink stay on this machine.
    host = str(address[0]) if isinstance(address, tuple) and address else str(address)
    if is_allowed(host):
        return
    stack = "".join(traceback.format_stack(limit=12)[:-1])
    log.warning("offline guard refused a connection to %s", address)
    raise OfflineViolation(
        f"offline mode refused a network connection to {address!r}; set offline = false or add "
        f"the host to offline_allow_hosts if this is intended.\nAttempted from:\n{stack}"
    )
