"""Run a real appliance server in a subprocess on a free port, for API and browser tests."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from .conftest import ROOT, venv_python


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    data: Path
    admin_password: str
    key: str
    log: Path

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([venv_python(), "-m", "appliance.cli", *args], cwd=ROOT, input=stdin, text=True,
                              capture_output=True, env={**os.environ, "APPLIANCE_DATA_DIR": str(self.data)},
                              timeout=120)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp: Path, *extra: str, env: dict | None = None, timeout: float = 240) -> Server:
    data, port, log = tmp / "data", free_port(), tmp / "server.log"
    full_env = {**os.environ, "APPLIANCE_DATA_DIR": str(data), "APPLIANCE_ENGINE__N_CTX": "4096",
                "APPLIANCE_ENGINE__N_SEQ_MAX": "4", **(env or {})}
    full_env.pop("APPLIANCE_CONFIG", None)
    out = log.open("w")
    proc = subprocess.Popen([venv_python(), "-m", "appliance.cli", "serve", "--port", str(port), *extra],
                            cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code in (200, 503):
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError(f"server did not start: {log.read_text()[-3000:]}")
    text = log.read_text()
    m = re.search(r"password\s+(\S+)\s+\(shown", text.replace("\n", " "))
    password = m.group(1) if m else ""
    server = Server(url, proc, data, password, "", log)
    server.key = server.cli("users", "key", "create", "admin").stdout.strip()
    return server
