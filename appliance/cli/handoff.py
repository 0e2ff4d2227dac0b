"""Command-line writes while `appliance serve` owns the data directory: handed to the server.

Two processes must never write one index (`appliance.locks`), so when a server is running,
`appliance ingest` and `appliance docs remove` do not open the index at all: they send the job to
the server's documents API with the local token the server left in `server.json`, wait for its
report and print it as if they had done the work themselves.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import httpx

from appliance.errors import ApplianceError
from appliance.locks import running_server, server_url

# Ingesting a large folder can take hours on a CPU: no read timeout, a short connect timeout.
_TIMEOUT = httpx.Timeout(10.0, read=None)


class HandoffError(ApplianceError):
    """The running server could not take the job."""


def serving(data_dir: Path) -> dict | None:
    """The running server that owns `data_dir`, or None."""
    return running_server(data_dir)


def ingest(server: dict, folder: Path, collection: str | None = None) -> dict:
    """Index `folder` (into `collection`) through the server; returns its report (`IngestReport.summary()`)."""
    return _call(server, "POST", "/v1/documents/ingest", json={"folder": str(folder), "collection": collection})


def remove(server: dict, ref: str) -> list[dict]:
    """Remove the documents matching `ref` through the server; returns their records."""
    return _call(server, "DELETE", "/v1/documents/" + quote(ref, safe=""))["removed"]


def _call(server: dict, method: str, path: str, **kwargs) -> dict:
    token = server.get("token")
    if not token:
        raise HandoffError(f"the server (pid {server.get('pid', '?')}) owns this data directory but left no "
                           f"token for the command line (is it an older version? restart it)")
    url = server_url(server)
    # The guard allows loopback; the server's own address is what `serve` was told to bind.
    try:
        with httpx.Client(timeout=_TIMEOUT, trust_env=False) as client:
            r = client.request(method, url + path, headers={"Authorization": f"Bearer {token}"}, **kwargs)
    except httpx.HTTPError as e:
        raise HandoffError(f"the server (pid {server.get('pid', '?')}) owns this data directory but did not "
                           f"answer at {url}: {e}. Wait until it has started, or stop it.") from None
    if r.status_code >= 400:
        try:
            message = r.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = r.text[:300]
        raise HandoffError(f"the server refused: {message} (HTTP {r.status_code})")
    return r.json()


def chat_backend(settings):
    """The running server's engine, through its API (requests then queue behind interactive users'
    and no second copy of the model is loaded), else a local engine."""
    from appliance.cli.common import err_console
    from appliance.engine.backend import open_backend

    server = running_server(settings.data_path)
    if server and server.get("token"):
        from appliance.engine.remote import RemoteBackend, RemoteOptions

        err_console.print(f"using the running server (pid {server.get('pid', '?')}) at low priority", highlight=False)
        return RemoteBackend(RemoteOptions(url=server_url(server), key=server["token"]))
    return open_backend(settings)
