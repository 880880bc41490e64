"""The completed-study package has no import cycle among its modules (function-level imports and
importlib strings included), found from the source by AST, without importing anything."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "humaneval_power.completed_study"
ROOT = Path(__file__).resolve().parents[1] / "humaneval_power" / "completed_study"


def imported_modules(source: str, modules: set[str]) -> set[str]:
    """The package's modules one module's source imports: ``from .x import``, ``from . import x``, absolute
    imports of ``humaneval_power.completed_study.x`` and such names in strings (importlib, registries)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1:
                names = [base] if base else [a.name for a in node.names]
            elif base.startswith(PACKAGE + "."):
                names = [base[len(PACKAGE) + 1:]]
            elif base == PACKAGE:
                names = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name[len(PACKAGE) + 1:] for a in node.names if a.name.startswith(PACKAGE + ".")]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PACKAGE + "."):
            names = [node.value[len(PACKAGE) + 1:].split(":")[0]]
        found |= {n.split(".")[0] for n in names} & modules
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> modules it imports) as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycle_in_the_package() -> None:
    sources = {p.stem: p.read_text() for p in ROOT.glob("*.py") if p.stem != "__init__"}
    assert {"ratings", "model_ladder", "backends", "inference", "bayesian", "judgments", "report"} <= set(sources)
    graph = {name: imported_modules(src, set(sources)) - {name} for name, src in sources.items()}
    assert graph["ratings"] >= {"model_ladder", "inference", "bayesian"}  # the parser sees the real edges
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_a_cycle_is_found_through_any_kind_of_import() -> None:
    """The check fails on a cycle closed by a function-level import, an absolute import or an importlib string."""
    modules = {"a", "b", "c"}
    for closing in ("def f():\n    from .a import x\n", f"import {PACKAGE}.a\n",
                    f"FIT = '{PACKAGE}.a:fit'\n", "from . import a\n"):
        graph = {"a": imported_modules("from .b import y\n", modules),
                 "b": imported_modules("from .c import z\n", modules),
                 "c": imported_modules(closing, modules)}
        assert find_cycle(graph) == ["a", "b", "c", "a"], closing
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
