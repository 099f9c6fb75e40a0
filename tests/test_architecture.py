"""The package's shape (docs/architecture.md): no import circles between
modules, nothing below the driver imports it, no backend or op family named
by the driver, and no module a newcomer cannot read in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "aot" / "torchmcu"
MAX_LINES = 600
# Tools that sit above the driver and compile models themselves: the command line, the fuzzer
# (its seed corpus) and the CMSIS-Pack's bundled example.
ABOVE_DRIVER = {"torchmcu.cli", "torchmcu.fuzz", "torchmcu.export.pack", "torchmcu.__init__", "torchmcu.__main__"}


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts)


def _package(mod: str, path: Path) -> str:
    return mod if path.name == "__init__.py" else mod.rpartition(".")[0]


def _exists(known: set[str], name: str) -> bool:
    return name in known or f"{name}.__init__" in known


def imports() -> dict[str, set[str]]:
    """Module -> the torchmcu modules it imports (any import, at any depth:
    function-level imports are edges too)."""
    mods = {_module(p): p for p in PKG.rglob("*.py")}
    known = set(mods)
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        edges: set[str] = set()
        base = _package(mod, path).split(".")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                root = base[:len(base) - node.level + 1] if node.level else []
                prefix = ".".join(root + ([node.module] if node.module else []))
                # `from X import a`: submodule X.a when there is one, else a name from X itself.
                targets = [f"{prefix}.{a.name}" if _exists(known, f"{prefix}.{a.name}") else prefix
                           for a in node.names]
            else:
                continue
            for t in targets:
                t = t.replace(".__init__", "")
                name = t if t in known else (f"{t}.__init__" if f"{t}.__init__" in known else None)
                if name and name != mod:
                    edges.add(name)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (Tarjan's strongly connected components of size > 1)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles() -> None:
    assert cycles(imports()) == []


def packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same graph between the package's top-level parts (frontend, passes, plan, ...)."""
    def part(m: str) -> str:
        parts = m.removesuffix(".__init__").split(".")
        return ".".join(parts[:2])
    out: dict[str, set[str]] = {}
    for m, edges in graph.items():
        out.setdefault(part(m), set()).update(part(e) for e in edges if part(e) != part(m))
    return out


def test_no_circles_between_the_parts() -> None:
    assert cycles(packages(imports())) == []


def test_circles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _driver(m: str) -> bool:
    """The driver: compiler.py (compile and the writers) and driver/ (options, stages, the final record)."""
    return m == "torchmcu.compiler" or m.startswith("torchmcu.driver.")


def test_nothing_below_the_driver_imports_it() -> None:
    importers = sorted(m for m, e in imports().items() if any(_driver(x) for x in e)
                       and not _driver(m) and m not in ABOVE_DRIVER)
    assert importers == []


def test_the_driver_names_no_backend_and_no_family() -> None:
    graph = imports()
    edges = set().union(*(e for m, e in graph.items() if _driver(m)))
    assert len([m for m in graph if _driver(m)]) > 1
    interfaces = {"torchmcu.backends.__init__", "torchmcu.backends.base"}
    named = sorted(e for e in edges if e.startswith(("torchmcu.backends.", "torchmcu.passes.lowering."))
                   and e not in interfaces)
    assert named == []


def test_files_stay_readable() -> None:
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
