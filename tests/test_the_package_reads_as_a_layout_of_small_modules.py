"""The package's layout (docs/architecture.md): modules a newcomer reads whole, and imports that
run one way. A module that imports another must not be imported back by it, directly or
through others, even for type hints only (``if TYPE_CHECKING:``): a circle means neither can
be read, nor changed, without the other.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parent.parent / "submarine_py"
MOST_LINES = 500


def modules() -> Dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: Dict[str, Path]) -> Set[str]:
    """The package's modules that ``name`` imports anywhere in its text (TYPE_CHECKING included)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in known and m != name}


def circles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back_through_others():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


def test_the_finder_sees_a_circle_made_only_for_type_hints():
    graph = {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}
    assert circles(graph) == [["p.a", "p.b"]]


def test_no_module_is_longer_than_a_newcomer_reads_whole():
    long = {str(path.relative_to(PACKAGE.parent)): n for path in modules().values()
            if (n := len(path.read_text().splitlines())) > MOST_LINES}
    assert long == {}


def test_the_yarn_backends_submitting_side_and_its_am_live_apart():
    """As skein keeps its driver's client apart from its AM's: what runs where the user submits
    (``backends/yarn/client``) imports nothing of what runs in the AM's container
    (``backends/yarn/am``), nor the other way round; and what both stand on (``backends/yarn/hadoop``:
    where the cluster is and how to call it) imports neither."""
    known = modules()
    yarn = "submarine_py.backends.yarn."
    crossings = []
    for name, path in known.items():
        for side, forbidden in (("client", ("am",)), ("am", ("client",)), ("hadoop", ("am", "client"))):
            if name.startswith(yarn + side):
                crossings += [(name, target) for target in sorted(imports(name, path, known))
                              if any(target.startswith(yarn + other) for other in forbidden)]
    assert crossings == []
