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
    bad.write_text("from models.storage import TableStore\nimport agents.socialrl.code_agents\n")
    assert imports_of(bad) == {"models", "agents"}


# Inside a layer the two papers' packages (socialrl/, yoao/) never import each other, and the core of the
# environments layer imports neither.
PAPERS = ("socialrl", "yoao")


def _project_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] in LAYERS}


@pytest.mark.parametrize("layer", ["environments", "agents", "models"])
def test_paper_packages_do_not_import_each_other(layer: str) -> None:
    for path in (ROOT / layer).rglob("*.py"):
        parts = path.relative_to(ROOT / layer).parts
        own = parts[0] if parts[0] in PAPERS else None
        for name in _project_imports(path):
            segments = name.split(".")
            other = segments[1] if len(segments) > 1 and segments[1] in PAPERS else None
            if other is None or other == own:
                continue
            core_reaching_in = own is None and layer == "environments"
            assert not core_reaching_in and own is None, f"{path.relative_to(ROOT)} imports {name}"


def test_loading_the_code_location_does_not_import_torch() -> None:
    """Configs live in modules without torch (models/training/config.py): the webserver and daemon load
    the Definitions without the learner."""
    import subprocess
    import sys

    code = "import sys, pipelines.definitions; print(sorted(m for m in ('torch', 'trl', 'peft') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
