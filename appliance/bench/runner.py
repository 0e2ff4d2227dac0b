"""`appliance bench`: concurrency sweeps and the optimisation ladder, over HTTP.

Ladder: the bench starts its own server per rung, each rung one engine switch on the same
workload (sequential → continuous batching → + prefix cache → + speculative decoding by prompt
lookup, 4 draft tokens; the request policy still decides per request whether drafting pays).
With a source model (`--ladder-source`, e.g. the F16 file `appliance quantize` started from), a
first rung serves that unquantized model sequentially: the reference story's quantization step.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from appliance.bench.load import RunResult, Target, run_load
from appliance.bench.server import start_server
from appliance.bench.workloads import get
from appliance.engine.remote import FRONT_MODELS

RUNGS: list[tuple[str, dict[str, str]]] = [
    ("sequential", {"APPLIANCE_ENGINE__CONTINUOUS_BATCHING": "false", "APPLIANCE_ENGINE__PREFIX_CACHE": "false"}),
    ("batching", {"APPLIANCE_ENGINE__CONTINUOUS_BATCHING": "true", "APPLIANCE_ENGINE__PREFIX_CACHE": "false"}),
    ("batching+prefix", {"APPLIANCE_ENGINE__CONTINUOUS_BATCHING": "true", "APPLIANCE_ENGINE__PREFIX_CACHE": "true"}),
    ("batching+prefix+speculative", {"APPLIANCE_ENGINE__CONTINUOUS_BATCHING": "true",
                                     "APPLIANCE_ENGINE__PREFIX_CACHE": "true", "APPLIANCE_ENGINE__SPECULATIVE": "4"}),
]
NOT_AVAILABLE: list[str] = []  # rungs the engine cannot run yet (reported, never faked)


@dataclass
class BenchOptions:
    workload: str = "chat"
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 16])
    requests: int = 2                  # per simulated user
    ladder: bool = False
    url: str | None = None             # another OpenAI-compatible server
    model: str = "smollm2-135m"
    key: str = ""
    with_appliance: bool = False       # with --url: also run the appliance, for one comparison table
    server_env: dict[str, str] = field(default_factory=dict)
    source_model: str = ""             # ladder: an unquantized GGUF (path) served first, sequentially


def run_bench(opts: BenchOptions, on_request: Callable | None = None, stop: threading.Event | None = None,
              runs: list[RunResult] | None = None) -> list[RunResult]:
    """Every run the options ask for, in order, appended to `runs` as each ends (so an interrupt
    keeps what ran); stops early when `stop` is set."""
    stop = stop or threading.Event()
    workload = get(opts.workload)
    runs = [] if runs is None else runs
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        if opts.ladder:
            top = max(opts.concurrency)
            for rung, env in ladder_rungs(opts.source_model):
                if stop.is_set():
                    break
                with _local(Path(tmp) / re.sub(r"[^A-Za-z0-9+._-]+", "-", rung), {**opts.server_env, **env},
                            top) as server:
                    model = workload.model_override or server_model(server)
                    target = Target(rung, server.url + "/v1", model, server.key)
                    runs.append(run_load(target, workload, top, opts.requests, on_request, stop))
            return runs
        targets = []
        if opts.url:
            targets.append((Target(opts.model, opts.url, opts.model, opts.key), None))
        if not opts.url or opts.with_appliance:
            targets.append((None, Path(tmp) / "appliance"))
        for target, workdir in targets:
            if target is None:
                with _local(workdir, opts.server_env, max(opts.concurrency)) as server:
                    target = Target("appliance", server.url + "/v1", workload.model_override or server_model(server),
                                    server.key)
                    _sweep(target, workload, opts, on_request, stop, runs)
            else:
                _sweep(target, workload, opts, on_request, stop, runs)
    return runs


def ladder_rungs(source_model: str = "") -> list[tuple[str, dict[str, str]]]:
    """The ladder's rungs, with the unquantized source model first when one is given."""
    if not source_model:
        return list(RUNGS)
    from appliance.quant.quantize import source_quant

    first = (f"source {source_quant(Path(source_model))}, sequential",
             {**RUNGS[0][1], "APPLIANCE_CHAT_MODEL": source_model})
    return [first, *RUNGS]


def _sweep(target: Target, workload, opts: BenchOptions, on_request, stop, runs: list[RunResult]) -> None:
    for c in opts.concurrency:
        if stop.is_set():
            break
        runs.append(run_load(target, workload, c, opts.requests, on_request, stop))


def sizing(concurrency: int) -> dict[str, str]:
    """Engine sizes the bench gives its own servers: a slot and ~640 cells per simulated user."""
    return {"APPLIANCE_ENGINE__N_SEQ_MAX": str(max(4, concurrency)),
            "APPLIANCE_ENGINE__N_CTX": str(max(4096, 640 * concurrency)),
            "APPLIANCE_ENGINE__MAX_QUEUE": str(max(64, 4 * concurrency)),
            "APPLIANCE_ENGINE__PER_USER_QUEUE": str(max(16, 4 * concurrency))}


def _local(workdir: Path, env: dict[str, str], concurrency: int):
    return start_server(workdir, "--no-ui", env={**sizing(concurrency), **env})


def server_model(server) -> str:
    import httpx

    data = httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {server.key}"}).json()["data"]
    return next(m["id"] for m in data if m["id"] not in FRONT_MODELS)
