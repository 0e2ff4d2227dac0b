"""The README's command lines, read from the README itself, and a workspace laid out like a checkout
to run them in (a copy of the sample guide as `./docs`, a data directory of its own)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from appliance.bench.server import LocalServer, start_server

from .conftest import ROOT

README = ROOT / "README.md"
# A fenced block is a command block when its first line starts with one of these; the diagram, the
# QA example and the proxies' configuration blocks do not.
COMMAND_PREFIXES = ("appliance", "./install.sh", ".venv/bin/", "scripts/", "tar ", "curl ", "K=",
                    "appliance-bundle/")
# In a case's steps: the README line itself, as written (after the workspace's substitutions);
# "= --flag x" is the line with arguments appended (argparse and typer take the last of a repeated flag,
# so `--mb 50 --mb 0.5` runs a benchmark at a small size).
SAME = "="


def _command_lines(body: str) -> list[str]:
    """A block's command lines without their comments; an indented line continues the one above."""
    lines: list[str] = []
    for raw in body.splitlines():
        text = "" if raw.lstrip().startswith("#") else raw.split("  #")[0].rstrip()
        if raw[:1].isspace() and lines:
            lines[-1] += " " + text.strip() if text.strip() else ""
        elif text:
            lines.append(text.strip())
    return lines


def readme_commands(text: str | None = None) -> list[str]:
    """Every command the README shows: each line of its command blocks, each Python block (by its first
    line, `python: ...`) and each inline `appliance ...` span (`inline: ...`), in README order, once."""
    text = README.read_text() if text is None else text
    found: list[str] = []
    fenced = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)
    for m in fenced.finditer(text):
        lang, body = m.group(2), m.group(3)
        first = body.strip().splitlines()[0] if body.strip() else ""
        if lang == "python":
            found.append("python: " + first)
        elif lang in ("", "bash") and first.startswith(COMMAND_PREFIXES):
            found += _command_lines(body)
    spans = re.finditer(r"`((?:\.venv/bin/)?appliance [^`]+)`", fenced.sub("", text))
    found += ["inline: " + " ".join(m.group(1).split()) for m in spans]
    return list(dict.fromkeys(found))


def python_block(first_line: str) -> str:
    """The README's Python block that starts with `first_line`."""
    for m in re.finditer(r"^```python\n(.*?)^```", README.read_text(), re.M | re.S):
        if m.group(1).startswith(first_line):
            return m.group(1)
    raise KeyError(first_line)


@dataclass
class Workspace:
    """A folder laid out like a checkout (`.venv`, `knowledge`, `scripts` linked; `docs/` a copy of the
    sample guide) with its own data directory; `subs` rewrite README placeholders (host, key, /srv)."""

    root: Path
    subs: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(cls, root: Path) -> Workspace:
        root.mkdir(parents=True, exist_ok=True)
        for name in (".venv", "knowledge", "scripts"):
            (root / name).symlink_to(ROOT / name)
        shutil.copytree(ROOT / "knowledge" / "data" / "sample" / "docs", root / "docs")
        (root / "docs" / "hr").mkdir()
        (root / "docs" / "hr" / "leave.md").write_text(
            "# Parental leave\n\nParental leave is sixteen weeks at full pay; tell HR two months ahead.\n")
        (root / "backup").mkdir()
        env = {"APPLIANCE_DATA_DIR": str(root / "data"), "COLUMNS": "250", "NO_COLOR": "1",
               "PATH": f"{root / '.venv' / 'bin'}:{os.environ['PATH']}"}
        return cls(root, {"/srv/backup": "./backup", "/srv/docs": str(root)}, env)

    def sub(self, line: str) -> str:
        for old, new in self.subs.items():
            line = line.replace(old, new)
        return line

    def sh(self, command: str, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
        """Run one shell line here, as a user whose venv is on PATH would."""
        full = {k: v for k, v in os.environ.items() if not k.startswith("APPLIANCE_")}
        return subprocess.run(["bash", "-c", command], cwd=self.root, capture_output=True, text=True,
                              timeout=timeout, env={**full, **self.env, **env})


Check = Callable[[Workspace, list[subprocess.CompletedProcess]], None]


@dataclass
class Case:
    """What a README line runs as: shell steps (`SAME` = the line as written) and one check of what its
    comment says, on the steps' results. `server` cases run in the workspace of a running server."""

    steps: list[str]
    check: Check
    server: bool = False
    timeout: float = 900


def run_case(ws: Workspace, line: str, case: Case) -> list[subprocess.CompletedProcess]:
    """Each step must exit 0 and print no traceback; returns their results for the case's check."""
    results = []
    for step in case.steps:
        written = line.removeprefix("inline: ")
        command = ws.sub(written + step[1:] if step.startswith(SAME) else step)
        done = ws.sh(command, timeout=case.timeout)
        shown = f"$ {command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == 0, shown
        assert "Traceback" not in done.stdout + done.stderr, shown
        results.append(done)
    return results


def start_serve(ws: Workspace) -> LocalServer:
    """`.venv/bin/appliance serve` as written, run from `ws` with its data directory, on a free port
    (the README's 8000 may be taken in CI), through the launcher the benchmarks and API tests use."""
    return start_server(ws.root, env=ws.env, data=Path(ws.env["APPLIANCE_DATA_DIR"]),
                        command=[".venv/bin/appliance", "serve"], cwd=ws.root)
