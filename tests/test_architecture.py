"""The dependency rules of docs/architecture.md, checked on the source (no module is imported).

Every import counts, also one inside a function: a cycle hidden behind a lazy import is still a
cycle (only `if TYPE_CHECKING:` blocks are left out, since they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("appliance", "knowledge", "ui")

# (importer prefix, imported prefix): an arrow that must not exist.
FORBIDDEN = [
    ("appliance.server", "ui"),
    ("appliance.engine", "ui"),
    ("appliance.engine", "knowledge"),
    ("appliance.engine", "appliance.server"),
    ("knowledge", "ui"),
    ("knowledge", "appliance"),
    ("appliance.engine", "knowledge.eval"),
    ("ui", "knowledge.eval"),
]

# knowledge/ is its pipeline: a stage may import itself and the stages before it, never one after
# it, so evaluation (last) may import the whole pipeline and nothing in the pipeline imports it.
STAGES = ["knowledge.text", "knowledge.loaders", "knowledge.index", "knowledge.ingest",
          "knowledge.retrieve", "knowledge.answer", "knowledge.eval"]
COMMON = ["knowledge.errors", "knowledge.threads"]  # used by every stage; they import no stage
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, modules: set[str]) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:  # `from pkg import module` imports the module itself
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module_name(p) for p in files}
    return {_module_name(p): _imports(ast.parse(p.read_text(encoding="utf-8")), modules) - {_module_name(p)}
            for p in files}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_graph_sees_the_packages():
    graph = _graph()
    assert "appliance.engine.scheduler" in graph and "knowledge.ingest.folder" in graph and "ui.app" in graph
    assert "knowledge.ingest.report" in graph["knowledge.ingest.walk"]  # the walker's one project import is seen


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_forbidden_arrows(importer, imported):
    bad = sorted(f"{m} -> {t}" for m, targets in _graph().items() if _under(m, importer)
                 for t in targets if _under(t, imported))
    assert not bad, f"{importer} must not import {imported}: {bad}"


def _stage(module: str) -> int | None:
    """The index of `module`'s stage in STAGES, -1 for a COMMON module, None outside knowledge."""
    if any(_under(module, c) for c in COMMON) or module == "knowledge":
        return -1
    return next((i for i, s in enumerate(STAGES) if _under(module, s)), None)


def test_every_knowledge_module_is_in_a_stage():
    stray = sorted(m for m in _graph() if _under(m, "knowledge") and _stage(m) is None)
    assert not stray, f"modules of knowledge/ outside every stage: {stray}"


def test_stages_import_only_earlier_stages():
    bad = sorted(f"{m} -> {t}" for m, targets in _graph().items() if _under(m, "knowledge")
                 for t in targets if _under(t, "knowledge") and _stage(t) > _stage(m))
    assert not bad, f"a stage imports a later stage: {bad}"


def test_stage_checker_refuses_a_backward_arrow():
    """The checker itself: retrieval importing evaluation, or a shared module importing a stage, is later."""
    assert _stage("knowledge.eval.suite") > _stage("knowledge.retrieve.retriever")
    assert _stage("knowledge.index.db") > _stage("knowledge.errors")
    assert _stage("knowledge.sample") is None


def test_knowledge_files_are_short():
    long = sorted(f"{p.relative_to(ROOT)} ({n})" for p in (ROOT / "knowledge").rglob("*.py")
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_no_import_cycles():
    graph = _graph()
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[list[str]] = []

    def dfs(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                dfs(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            dfs(start, [start])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_cycle_finder_finds_a_cycle(tmp_path):
    """The checker itself: a two-module cycle written to disk is reported."""
    a = ast.parse("from appliance.b import x\n")
    b = ast.parse("def f():\n    import appliance.a\n")
    modules = {"appliance.a", "appliance.b"}
    assert _imports(a, modules) == {"appliance.b"} and _imports(b, modules) == {"appliance.a"}
    guarded = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import appliance.a\n")
    assert _imports(guarded, modules) == set()
