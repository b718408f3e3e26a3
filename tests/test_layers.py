"""The layers import downward only, as the README draws them:
spec <- format <- writer / reader <- optimizer <- changes <- spark / table / cli.

Checked on the source text (every ``import`` and ``from`` of the package), so a
violation fails here before it turns into an import cycle somewhere else.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "indexeddf"
ALLOWED = {
    "spec": {"spec", "errors", "_version"},
    "format": {"spec", "format", "errors", "_version"},
    "writer": {"spec", "format", "writer", "errors", "_version"},
    "reader": {"spec", "format", "reader", "errors", "_version"},
    "optimizer": {"spec", "format", "reader", "optimizer", "errors", "_version"},
    "changes": {"spec", "format", "writer", "reader", "optimizer", "changes", "errors", "_version"},
}
PYSPARK_FREE = {"spec", "format", "writer", "reader", "optimizer", "changes"}
"""Only spark/ (and the public modules above it) may import pyspark."""


def imports(path: Path) -> list[tuple[str, int]]:
    """(top-level indexeddf module imported, line) for every import in ``path``."""
    layer_depth = len(path.relative_to(PACKAGE).parts) - 1
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "indexeddf":
                    out.append((parts[1] if len(parts) > 1 else "", node.lineno))
                elif parts[0] == "pyspark":
                    out.append(("pyspark", node.lineno))
                continue
            up = node.level - 1  # levels above this file's package
            if up < layer_depth:
                continue  # inside its own layer
            parts = (node.module or "").split(".")
            names = [parts[0]] if parts[0] else [a.name for a in node.names]
            out += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")
                if top[0] == "indexeddf":
                    out.append((top[1] if len(top) > 1 else "", node.lineno))
                elif top[0] == "pyspark":
                    out.append(("pyspark", node.lineno))
    return out


def test_layers_import_downward_only():
    bad = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for name, line in imports(path):
                if name == "pyspark":
                    if layer in PYSPARK_FREE:
                        bad.append(f"{path.relative_to(PACKAGE)}:{line} imports pyspark")
                elif name not in allowed:
                    bad.append(f"{path.relative_to(PACKAGE)}:{line} imports indexeddf.{name or '<root>'}")
    assert not bad, "\n".join(bad)


def test_the_command_uses_the_public_api_only():
    import indexeddf

    names = {n for n, _ in imports(PACKAGE / "cli.py")}
    assert names <= {"errors", "_version", *indexeddf.__all__}, names


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines of ``if TYPE_CHECKING:`` blocks: imports there never run."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for sub in node.body:
                lines |= set(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def module_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, at module level or inside a function
    (both run), but not under ``TYPE_CHECKING``. ``from . import x`` names the module
    ``x`` when it is one, else the package."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").startswith("indexeddf"):
                    target = node.module
                else:
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    edges.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def test_no_import_cycles():
    """No module imports itself through others (Python resolves such cycles only by the
    order of first imports, which breaks when a caller imports a different module first)."""
    graph = module_graph()
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "\n".join(cycles)


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: another module that needs it
    calls a public name instead (the package's ``__init__`` re-exporting one of its own
    modules' names included)."""
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("indexeddf")):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                if private:
                    bad.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports {private}")
    assert not bad, "\n".join(bad)
