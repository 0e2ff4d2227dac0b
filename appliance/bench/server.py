"""Start a real appliance server in a subprocess on a free port (bench rungs, tests)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LocalServer:
    """A running `appliance serve` child process."""

    url: str
    proc: subprocess.Popen
    data: Path
    admin_password: str
    key: str
    log: Path
    env: dict = field(default_factory=dict)  # the APPLIANCE_* overrides it was started with

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        """Run `appliance ARGS` against this server's data directory."""
        return subprocess.run([sys.executable, "-m", "appliance.cli", *args], cwd=ROOT, input=stdin, text=True,
                              capture_output=True, timeout=300,
                              env={**os.environ, **self.env, "APPLIANCE_DATA_DIR": str(self.data)})

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workdir: Path, *extra: str, env: dict | None = None, timeout: float = 300,
                 data: Path | None = None, port: int | None = None, command: list[str] | None = None,
                 cwd: Path = ROOT) -> LocalServer:
    """Start `appliance serve` with `env` overrides; returns once /healthz answers, with an admin key.
    `command` replaces `python -m appliance.cli serve` (the README test runs `.venv/bin/appliance
    serve` as written, from `cwd`)."""
    workdir.mkdir(parents=True, exist_ok=True)
    data, port, log = data or workdir / "data", port or free_port(), workdir / f"server-{time.time_ns()}.log"
    full_env = {**os.environ, "APPLIANCE_DATA_DIR": str(data), **(env or {})}
    out = log.open("w")
    argv = command or [sys.executable, "-m", "appliance.cli", "serve"]
    # start_new_session: Ctrl-C on the bench must not kill it mid-run
    proc = subprocess.Popen([*argv, "--port", str(port), *extra], cwd=cwd, env=full_env, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
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
        raise RuntimeError(f"server did not start within {timeout}s: {log.read_text()[-3000:]}")
    m = re.search(r"password\s+(\S+)\s+\(shown", log.read_text().replace("\n", " "))
    server = LocalServer(url, proc, data, m.group(1) if m else "", "", log, dict(env or {}))
    server.key = server.cli("users", "key", "create", "admin").stdout.strip()
    return server


def start_chroma(path: Path, timeout: float = 60) -> tuple[subprocess.Popen, str]:
    """`chroma run` (the vector-store server) on loopback with telemetry off; returns (process, url)
    once its heartbeat answers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), path.parent / "chroma.log"
    chroma = Path(sys.executable).parent / "chroma"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen([str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/v2/heartbeat", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"chroma did not start: {log.read_text()[-2000:]}")


def scale_out_env(cluster: LocalServer, chroma_url: str) -> dict[str, str]:
    """Settings of a front-end appliance using `cluster` for inference and a Chroma server for vectors."""
    return {"APPLIANCE_ENGINE__BACKEND": "openai", "APPLIANCE_ENGINE__REMOTE_URL": cluster.url + "/v1",
            "APPLIANCE_ENGINE__REMOTE_KEY": cluster.key, "APPLIANCE_KNOWLEDGE__CHROMA_URL": chroma_url}
