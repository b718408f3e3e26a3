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
