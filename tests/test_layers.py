"""Layers import only downward (ARCHITECTURE.md): checked on the source with the ast module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["environments", "agents", "models", "resources", "assets", "pipelines"]
# What each layer may import from the project (itself included).
ALLOWED = {layer: set(LAYERS[: i + 1]) for i, layer in enumerate(LAYERS)}
FORBIDDEN_IN_ENVIRONMENTS = {"torch", "dagster", "transformers", "mlflow", "duckdb", "pandas", "vllm"}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_point_down(layer: str) -> None:
    files = list((ROOT / layer).rglob("*.py"))
    assert files, f"layer {layer} has no modules"
    for path in files:
        ours = imports_of(path) & set(LAYERS)
        bad = ours - ALLOWED[layer]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)} from a higher layer"


def test_environments_stay_pure_python() -> None:
    for path in (ROOT / "environments").rglob("*.py"):
        heavy = imports_of(path) & FORBIDDEN_IN_ENVIRONMENTS
        assert not heavy, f"{path.relative_to(ROOT)} imports {sorted(heavy)}"


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from models.storage import TableStore\nimport agents.code_agents\n")
    assert imports_of(bad) == {"models", "agents"}
