"""`appliance batch run`: one fixed instruction over many items of the knowledge base, as background
work beside interactive chat.

The template's instruction is the system prompt of every request, so after the first item the
engine serves it from the prefix cache; items go in with priority 1 (background), a window of them
at a time, so the engine batches them without ever taking every slot from interactive users. With a
JSON schema the output is constrained by llama.cpp's grammar sampler and each line is validated.
Results are appended line by line, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import json
import threading
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from appliance.engine.backend import complete_background
from appliance.engine.sequence import SamplingParams
from appliance.errors import ApplianceError
from knowledge.index.access import Scope
from knowledge.retrieve.retriever import under

_TEMPLATE_KEYS = {"instruction", "item", "over", "max_tokens", "max_chars"}


class BatchError(ApplianceError):
    """A template, schema or output file that cannot be used (the message says which and why)."""


@dataclass
class Template:
    """What to ask of every item: `instruction` (fixed), `item` (filled per item from {source},
    {page}, {heading}, {text}), `over` (chunks or files)."""

    instruction: str
    item: str = "Source: {source}\n\n{text}"
    over: str = "chunks"
    max_tokens: int = 256
    max_chars: int = 6000  # longest item text (a file's text is cut there)

    @classmethod
    def load(cls, path: Path) -> Template:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise BatchError(f"cannot read template {path}: {e}") from None
        unknown = set(data) - _TEMPLATE_KEYS
        if unknown or not isinstance(data.get("instruction"), str):
            extra = f"; unknown: {sorted(unknown)}" if unknown else ""
            raise BatchError(f"template {path}: needs `instruction` (text); allowed keys are "
                             f"{', '.join(sorted(_TEMPLATE_KEYS))}{extra}")
        t = cls(**data)
        if t.over not in ("chunks", "files"):
            raise BatchError(f"template {path}: `over` must be \"chunks\" or \"files\"")
        return t


@dataclass
class Item:
    id: str
    source: str
    page: int | None
    heading: str
    text: str


@dataclass
class Summary:
    """What a run did."""

    items: int = 0
    skipped: int = 0          # done in an earlier run
    ok: int = 0
    failed: int = 0
    generated_tokens: int = 0
    wall_s: float = 0.0
    prefix_hit_rate: float = 0.0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        done = self.ok + self.failed
        return {"items": self.items, "skipped": self.skipped, "ok": self.ok, "failed": self.failed,
                "generated_tokens": self.generated_tokens, "wall_s": round(self.wall_s, 1),
                "items_per_s": round(done / self.wall_s, 2) if self.wall_s else 0.0,
                "tokens_per_s": round(self.generated_tokens / self.wall_s, 1) if self.wall_s else 0.0,
                "prefix_hit_rate": round(self.prefix_hit_rate, 3), "errors": self.errors[:5]}


def select_items(db, kb: str, template: Template, sources: list[str], *, scope: Scope) -> list[Item]:
    """Chunks (or whole files) of the knowledge base that `scope` may read, under any of `sources`
    (prefixes; empty = all)."""
    wanted = [s.strip("/") for s in sources if s.strip("/")]
    rows = [r for r in db.chunks_in_order(kb, scope)
            if not wanted or any(under(r["source"], w) for w in wanted)]
    if template.over == "chunks":
        return [Item(r["id"], r["source"], r["page"] if r["page"] not in (None, -1) else None, r["heading"],
                     r["text"][: template.max_chars]) for r in rows]
    files: dict[str, list[dict]] = {}
    for r in rows:
        files.setdefault(r["source"], []).append(r)
    return [Item(f"file:{source}", source, None, "", "\n\n".join(r["text"] for r in group)[: template.max_chars])
            for source, group in files.items()]


def done_ids(out: Path) -> set[str]:
    """Ids already answered in `out` (a line cut by an interrupt is ignored and redone)."""
    if not out.exists():
        return set()
    ids = set()
    for line in out.read_text(encoding="utf-8").splitlines():
        try:
            ids.add(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            continue
    return ids


def run_batch(backend, template: Template, items: list[Item], out: Path, schema: dict | None = None,
              window: int = 4, progress: Callable[[Summary], None] | None = None,
              stop: threading.Event | None = None) -> Summary:
    """Answer every item not yet in `out`, `window` at a time, appending one JSON line per item."""
    from appliance.engine.grammar import schema_to_grammar

    validator = _validator(schema)
    try:
        grammar = schema_to_grammar(schema) if schema else ""
    except ValueError as e:
        raise BatchError(str(e)) from None
    summary, lock, stop = Summary(items=len(items)), threading.Lock(), stop or threading.Event()
    done = done_ids(out)
    todo = [i for i in items if i.id not in done]
    summary.skipped = len(items) - len(todo)
    before = backend.snapshot()
    t0 = time.perf_counter()
    params = SamplingParams(max_tokens=template.max_tokens, temperature=0.0, grammar=grammar, priority=1,
                            user="batch")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        def one(item: Item) -> None:
            if stop.is_set():
                return
            line = _answer(backend, template, item, params, validator)
            with lock:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                fh.flush()  # every finished item survives an interrupt
                summary.ok += line["ok"]
                summary.failed += not line["ok"]
                summary.generated_tokens += line["tokens"]
                if not line["ok"]:
                    summary.errors.append(f"{item.source}: {line['error']}")
                summary.wall_s = time.perf_counter() - t0
                if progress:
                    progress(summary)

        with ThreadPoolExecutor(max(1, window)) as pool:
            try:
                list(pool.map(one, todo))
            except KeyboardInterrupt:
                stop.set()  # queued items return at once; the ones in flight finish and are written
                raise
    summary.wall_s = time.perf_counter() - t0
    summary.prefix_hit_rate = _hit_rate(before, backend.snapshot())
    return summary


def _answer(backend, template: Template, item: Item, params: SamplingParams, validator) -> dict:
    messages = [{"role": "system", "content": template.instruction},
                {"role": "user", "content": template.item.format(source=item.source, page=item.page or "",
                                                                 heading=item.heading, text=item.text)}]
    line = {"id": item.id, "source": item.source, "page": item.page, "heading": item.heading}
    result = complete_background(backend, messages, params)
    line["tokens"] = result.stats.generated_tokens
    if validator is None:
        return {**line, "ok": True, "output": result.text}
    try:
        value = json.loads(result.text)
        validator(value)
    except Exception as e:  # noqa: BLE001 - JSON or schema error: this item fails, the run goes on
        error = str(e).splitlines()[0][:300]
        if result.finish_reason == "length":  # the grammar keeps it valid, but it was cut short
            error = f"cut at max_tokens ({params.max_tokens}) before the JSON was complete: raise max_tokens"
        return {**line, "ok": False, "error": error, "output": result.text}
    return {**line, "ok": True, "output": value}


def _validator(schema: dict | None):
    if not schema:
        return None
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise BatchError(f"invalid JSON schema: {e.message}") from None
    return jsonschema.Draft202012Validator(schema).validate


def _hit_rate(before: dict, after: dict) -> float:
    cached = after.get("prompt_tokens_cached", 0) - before.get("prompt_tokens_cached", 0)
    computed = after.get("prompt_tokens_computed", 0) - before.get("prompt_tokens_computed", 0)
    return cached / (cached + computed) if cached + computed else 0.0
