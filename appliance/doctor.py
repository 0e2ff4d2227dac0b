"""`appliance doctor`: one line per thing that must be right for the appliance to run."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from appliance.config import Settings

_PACKAGES = ("llama_cpp_python", "torch", "sentence-transformers", "chromadb", "gradio",
             "fastapi", "typer")
_MIN_FREE_DISK = 2 << 30


@dataclass
class Check:
    """One doctor line."""

    name: str
    ok: bool
    detail: str
    warn_only: bool = False


def run_checks(settings: Settings, load_embedder: bool = True) -> list[Check]:
    """Run every check; each is isolated so one failure never hides the others."""
    probes: list[Callable[[Settings], Check]] = [
        _python, _packages, _cpu, _llama_build, _gpu, _chat_model, _data_dir, _offline]
    if load_embedder:
        probes += [_embedding_model, _index]
    checks = []
    for probe in probes:
        try:
            checks.append(probe(settings))
        except Exception as e:  # noqa: BLE001 - a crashing probe is itself the finding
            checks.append(Check(probe.__name__.strip("_").replace("_", " "), False,
                                f"{type(e).__name__}: {e}".splitlines()[0]))
    return checks


def _python(_: Settings) -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", ok, f"{platform.python_version()} ({sys.executable})")


def _packages(_: Settings) -> Check:
    found, missing = [], []
    for name in _PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    detail = ", ".join(found) + (f"; missing: {', '.join(missing)}" if missing else "")
    return Check("packages", not missing, detail)


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo), else the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The CPU feature flags of this machine (Linux /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _cpu(_: Settings) -> Check:
    flags = cpu_flags()
    wanted = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "amx_int8")
    present = [f for f in wanted if f in flags]
    return Check("cpu", "avx2" in flags or not flags,
                 f"{cpu_model()}, {os.cpu_count()} cores; flags: {' '.join(present) or 'none'}")


def _llama_build(_: Settings) -> Check:
    from appliance.engine.llama import system_info

    info = system_info()
    # AMX kernels crash multi-token decodes on these Xeons unless explicitly opted in.
    risky = "AMX_INT8 = 1" in info
    detail = info.strip()[:300] + ("; AMX is on: multi-token decodes may crash" if risky else "")
    return Check("llama.cpp build", not risky, detail, warn_only=True)


def _gpu(_: Settings) -> Check:
    from appliance.engine.llama import supports_gpu_offload

    offload = supports_gpu_offload()
    smi = shutil.which("nvidia-smi")
    if not smi:
        return Check("gpu", True, f"none (CPU only); llama.cpp GPU offload built: {offload}")
    try:
        out = subprocess.run([smi, "--query-gpu=name,memory.total,memory.used",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("gpu", False, f"nvidia-smi failed: {e}", warn_only=True)
    if out and not offload:
        return Check("gpu", False, f"{out}; but llama.cpp was built without GPU offload: "
                                   "re-run ./install.sh", warn_only=True)
    return Check("gpu", True, f"{out or 'nvidia-smi found, no GPU listed'}; offload: {offload}")


def _chat_model(settings: Settings) -> Check:
    if settings.engine.backend == "openai":
        return _remote_backend(settings)
    from appliance.models.metadata import human_params
    from appliance.models.registry import ModelRegistry

    registry = ModelRegistry(settings.data_path)
    entry = registry.resolve(settings.chat_model)
    if entry.sha256:
        (_, ok, message), = [r for r in registry.verify(entry.name)]
        if not ok:
            return Check("chat model", False, f"{entry.name}: {message}")
    info = entry.model_info
    return Check("chat model", True, f"{entry.name}: {info.architecture} "
                                     f"{human_params(info.n_params)} {info.quant}, verified; {entry.path}")


def _remote_backend(settings: Settings) -> Check:
    """The cluster answers, lists the model, and generates one token."""
    from appliance.engine.remote import RemoteBackend

    with RemoteBackend.from_config(settings) as backend:
        r = backend.check()
    return Check("chat model", True, f"{r['model']} on the cluster at {r['url']}: listed, "
                                     f"{r['tokens']} token generated; prompts counted by {backend.tokens.mode}")


def _embedding_model(settings: Settings) -> Check:
    from knowledge.index.embed import Embedder

    embedder = Embedder(settings.embedding_model or None, backend=settings.knowledge.embed_backend)
    vec = embedder.encode(["appliance doctor"])
    return Check("embedding model", vec.shape == (1, embedder.dim),
                 f"{embedder.path}: dim {embedder.dim}, device {embedder.device}")


def _index(settings: Settings) -> Check:
    from appliance.server.services import open_kb
    from knowledge.ingest.integrity import check

    kb = open_kb(settings)
    try:
        result = check(kb)
    finally:
        kb.close()
    return Check("index", result.ok, result.describe())


def _data_dir(settings: Settings) -> Check:
    path = settings.data_path
    path.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path):
        pass
    free = shutil.disk_usage(path).free
    ok = free >= _MIN_FREE_DISK
    return Check("data dir", ok, f"{path} writable; {free / 2**30:.1f} GiB free"
                 + ("" if ok else " (less than 2 GiB)"), warn_only=not ok)


def _offline(settings: Settings) -> Check:
    from appliance.offline import guard_active

    if not settings.offline:
        return Check("offline guard", True, "off by configuration (offline = false)", warn_only=True)
    return Check("offline guard", guard_active(), "active: non-loopback connections are refused"
                 if guard_active() else "not installed")
