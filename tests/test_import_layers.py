"""The project's modules import one way: no import cycles, and nothing imports upward in the layers
pools <- coba_env <- agents <- train, eval <- coba_cli (read with ``ast`` from the package sources, function-level
imports included; imports under ``if TYPE_CHECKING:`` are annotations only and do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Layer of each top-level package: a module may import only from its own layer or lower ones.
LAYERS = {"pools": 0, "coba_env": 1, "agents": 2, "train": 3, "eval": 3, "coba_cli": 4}


def module_name(path: Path) -> str:
    """Dotted module name of a source file under ROOT (a package's __init__ is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Every module of the project's packages."""
    return {module_name(p): p for pkg in LAYERS for p in sorted((ROOT / pkg).rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that module ``name`` imports (at any level of its code)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in modules and t != name)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_known_imports() -> None:
    graph = import_graph()
    assert "coba_env.rules.fusion" in graph["coba_env.env"]
    assert "pools.store" in graph["coba_env.compiled"]
    assert "agents.learned_sb3" in graph["agents.learned"]  # a function-level import counts


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``src imports dst`` for every import of a higher layer's module."""
    layer = lambda name: LAYERS[name.split(".")[0]]  # noqa: E731
    return [f"{src} imports {dst}" for src, dsts in sorted(graph.items()) for dst in sorted(dsts)
            if layer(dst) > layer(src)]


def test_nothing_imports_upward() -> None:
    assert upward_imports(import_graph()) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"pools.store": {"coba_env.env"}, "coba_env.env": {"pools.store"}, "eval.bench": {"train.lodo"},
             "agents.coba": {"coba_env.env"}}
    assert upward_imports(graph) == ["pools.store imports coba_env.env"]  # eval/train are one layer
