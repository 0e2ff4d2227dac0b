"""The air-gap guard: telemetry off, hubs offline, and no non-loopback socket connections.

`install_guard()` is called once at process start by the CLI (and by the server and tests).
It sets the environment switches that libraries read (Hugging Face, Gradio, Chroma), then
installs a `sys.addaudithook` that refuses, for any host that is not loopback or allow-listed:
`socket.connect`, `sendto` and `sendmsg`, and name resolution (`getaddrinfo`, `gethostbyname*`,
`gethostbyaddr`), since a DNS query itself leaves the machine. Allow-listed names are resolved
once, at install time, and their addresses admitted (clients resolve before they connect).
Audit hooks cannot be removed, so the policy lives in a module-level `_POLICY` that a later
`install_guard()` call may update. It covers Python sockets only: native code that opens its own
sockets is not seen, which is why the README's systemd unit (IPAddressDeny) is the real control.
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
    _POLICY.enabled = False  # resolving the allow-list below must not trip the guard
    _POLICY.allow = resolve_allowed(allow_hosts)
    _POLICY.enabled = offline
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


def resolve_allowed(hosts, resolve=None) -> set[str]:
    """The allow-list as names plus the addresses they resolve to now (unresolvable names are kept,
    with a warning: the guard then admits them by name only)."""
    resolve = resolve or (lambda h: {info[4][0] for info in socket.getaddrinfo(h, None)})
    allowed: set[str] = set()
    for host in (h.lower().strip() for h in hosts):
        if not host:
            continue
        allowed.add(host)
        try:
            ipaddress.ip_address(host)
            continue
        except ValueError:
            pass
        try:
            allowed.update(a.lower() for a in resolve(host))
        except OSError as e:
            log.warning("offline_allow_hosts: %s does not resolve (%s); admitted by name only", host, e)
    return allowed


_RESOLVE_EVENTS = ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr")


def _audit(event: str, args: tuple) -> None:
    if not _POLICY.enabled:
        return
    if event in _RESOLVE_EVENTS:
        return _check_lookup(args[0])
    if event not in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        return
    sock, address = args[0], args[-1]
    if address is None:  # sendmsg on a connected socket: the connect was checked
        return
    if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        return  # Unix sockets and netlink stay on this machine.
    host = str(address[0]) if isinstance(address, tuple) and address else str(address)
    if not is_allowed(host):
        _refuse("a network connection to", address)


def _check_lookup(host) -> None:
    if host is None:
        return
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    try:
        ipaddress.ip_address(name.strip("[]").split("%")[0])
        return  # a numeric address needs no DNS; connect() decides whether it may be reached
    except ValueError:
        pass
    if not is_allowed(name):
        _refuse("a name lookup (DNS) of", name)


def _refuse(what: str, target) -> None:
    stack = "".join(traceback.format_stack(limit=12)[:-2])
    log.warning("offline guard refused %s %s", what, target)
    raise OfflineViolation(
        f"offline mode refused {what} {target!r}; set offline = false or add the host to "
        f"offline_allow_hosts if this is intended.\nAttempted from:\n{stack}"
    )
