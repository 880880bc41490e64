"""No import cycles among the package's modules (issue 25).

The graph is built from the source by AST, without importing anything: every ``import`` and ``from ... import``
(module level and inside functions, relative ones resolved) and every ``importlib.import_module("...")`` with a
string literal is an edge to the package module it names (``from pkg import name`` names ``pkg.name`` when that
is a module, else ``pkg``). A package's ``__init__`` is the module ``pkg``; importing ``pkg.sub`` also runs
``pkg``, so such an edge also goes to every enclosing package (not to the importer's own packages).
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import humaneval_power

ROOT = Path(humaneval_power.__file__).parent
PACKAGE = "humaneval_power"

#: cycles other helpers of issue 25 are removing in parallel; the lead empties this set at merge (issue 25)
KNOWN_CYCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _resolve(module: str | None, level: int, importer: str, is_package: bool) -> str | None:
    if not level:
        return module
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _dynamic(arg: ast.expr, importer: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The modules ``importlib.import_module(arg)`` may load: a string literal names one (absolute, as the
    package's code never passes ``package=`` with a leading dot here); an f-string starting with a package's
    name (``f"{__name__}.{x}"`` in a package, ``f"humaneval_power.{x}"``) any module directly in it."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {arg.value}
    if not isinstance(arg, ast.JoinedStr) or not arg.values:
        return set()
    head = arg.values[0]
    if isinstance(head, ast.FormattedValue) and isinstance(head.value, ast.Name) and head.value.id == "__name__":
        rest = arg.values[1] if len(arg.values) > 1 else None
        if not (is_package and isinstance(rest, ast.Constant) and rest.value == "."):
            return set()
        package = importer
    elif isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.endswith("."):
        package = head.value[:-1]
    else:
        return set()
    return {m for m in modules if m.rpartition(".")[0] == package}


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, name, is_package)
            if base is None:
                continue
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        elif isinstance(node, ast.Call) and _name(node.func) == "import_module" and node.args:
            targets.update(_dynamic(node.args[0], name, is_package, modules))
    edges = set()
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
    for target in targets:
        parts = target.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            if module in modules and module not in own:
                edges.add(module)
    return edges


@functools.lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its source); built once per session."""
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_cycle_through(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One cycle inside a strongly connected component (breadth-first back to its first module)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return sorted(component)


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "humaneval_power.errors" in graph["humaneval_power.validation"]  # module level, relative
    assert any(graph.values())
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(import_graph())
    unexpected = [c for c in found if frozenset(c) not in KNOWN_CYCLES]
    assert not unexpected, "import cycles:\n" + "\n".join(" -> ".join(c) for c in unexpected)


def test_the_allow_list_holds_only_cycles_that_still_exist():
    """An allowed cycle that is gone is taken off :data:`KNOWN_CYCLES` (so that it cannot come back unseen)."""
    found = {frozenset(c) for c in cycles(import_graph())}
    assert not KNOWN_CYCLES - found, f"no longer cycles, remove them from KNOWN_CYCLES: {KNOWN_CYCLES - found}"
