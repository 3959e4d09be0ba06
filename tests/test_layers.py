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


# The cores of agents/ and models/ (everything outside their socialrl/ and yoao/ packages and models/cli/) use a
# paper's parts only where listed: the SocialRL code agents (and an `llm` counterpart, agents/socialrl/counterparts.py)
# are the counterpart population of every negotiation rollout and evaluation, the Red-Black opponents play the play
# page's YOAO games (the leaderboard's are played in models/cli/leaderboard.py, an edge), and the profiles carry the
# YOAO settings. A new core module that imports a paper fails here; one that stops needing it leaves the list
# (docs/architecture.md).
CORE_PAPER_IMPORTS = {
    "agents/play.py": {"agents.socialrl.code_agents"},
    "agents/traces.py": {"agents.socialrl.code_agents"},
    "agents/web_play.py": {"agents.socialrl.code_agents", "agents.yoao.red_black_strategies"},
    "models/evaluation/policy.py": {"agents.socialrl.code_agents"},
    "models/profiles.py": {"models.yoao.config"},
    "models/training/config.py": {"agents.socialrl.counterparts"},
    "models/training/mopd_config.py": {"agents.socialrl.code_agents"},
    "models/training/rollouts.py": {"agents.socialrl.counterparts"},
}


EDGES = {"models": "cli"}
"""models/cli/: the command lines that need no Dagster and the leaderboard (leaderboard.py: every SocialRL domain
and the Red-Black game, which assets/leaderboard.py and the evaluate_endpoint command run). Like pipelines/ they are
edges that join both papers' parts and wire them to the shell (the tournament command runs the SocialRL code
agents), not core library code."""


def test_core_modules_use_a_paper_only_where_listed() -> None:
    found = {}
    for layer in ("agents", "models"):
        for path in (ROOT / layer).rglob("*.py"):
            top = path.relative_to(ROOT / layer).parts[0]
            if top in PAPERS or top == EDGES.get(layer):
                continue
            paper = {n for n in _project_imports(path) if len(n.split(".")) > 1 and n.split(".")[1] in PAPERS}
            if paper:
                found[path.relative_to(ROOT).as_posix()] = paper
    assert found == CORE_PAPER_IMPORTS


def _module_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports, at module level or inside a function."""
    modules = {}
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]  # fmt: skip
            else:
                continue
            graph[name] |= {t for t in map(resolve, targets) if t is not None and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(component)
    return cycles


def test_no_import_cycle() -> None:
    """No cycle anywhere: the base contract imports the leakage detector and its PrivateFact (not the other way),
    and the registry does not import the package that registers the built-in environments."""
    assert import_cycles(_module_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [{"a", "b", "c"}]


# Inside models/ the packages (and the modules at its top) are layered too, lowest floor first: a module imports
# its own package and those of lower floors only, never one of its floor or above (module-level and function-level
# imports both, as `_module_graph` reads them). evaluation/ (plans, statistics, scenario splits) sits below tracking/
# (the promotion rule's paired bootstrap) and training/ (rollouts, PPO's intervals); report/ below the papers, whose
# paper_claims.py fill its `PaperSpec` (it takes the profiles as an argument); yoao/ below profiles.py, which carries
# its settings (it reads its `YoaoSettings`, never the profile); socialrl/ above profiles.py; cli/ (the command lines
# and the leaderboard, which join both papers) on top (docs/architecture.md).
MODELS_FLOORS = (
    ("hub", "settings", "hardware", "display", "records", "plots", "progress"),  # import nothing of models/
    ("storage", "__init__", "provenance"),  # models/__init__.py imports hub; provenance, settings
    ("evaluation",),
    ("tracking",),
    ("serving", "report"),
    ("training", "play"),
    ("yoao",),
    ("profiles",),
    ("socialrl",),
    ("cli",),
)


def _models_unit(module: str) -> str | None:
    """The package (or top-level module) of models/ that `module` belongs to; None outside models/."""
    parts = module.split(".")
    if parts[0] != "models":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def models_back_edges(graph: dict[str, set[str]]) -> list[str]:
    """'module -> imported' for every import of a models/ module that reaches its own floor or one above (another
    package) or a package no floor lists."""
    floor = {unit: i for i, units in enumerate(MODELS_FLOORS) for unit in units}
    found = []
    for module, targets in sorted(graph.items()):
        own = _models_unit(module)
        if own is None:
            continue
        for target in sorted(targets):
            other = _models_unit(target)
            if other is not None and other != own and floor.get(other, len(floor)) >= floor.get(own, -1):
                found.append(f"{module} -> {target}")
    return found


def test_every_models_package_has_one_floor() -> None:
    listed = [unit for units in MODELS_FLOORS for unit in units]
    assert len(listed) == len(set(listed))
    assert {_models_unit(m) for m in _module_graph()} - {None} == set(listed)


def test_models_packages_import_only_lower_floors() -> None:
    assert models_back_edges(_module_graph()) == []


def test_the_floor_check_catches_an_upward_import() -> None:
    graph = {
        "models.report.build": {"models.profiles", "models.report.claims", "models.tracking.links"},
        "models.storage": {"models.records"},
        "models.records": {"models.settings"},  # the same floor
        "models.evaluation.policy": {"models.newcomer", "agents.llm_agent"},  # a package no floor lists
    }
    assert models_back_edges(graph) == [
        "models.evaluation.policy -> models.newcomer",
        "models.records -> models.settings",
        "models.report.build -> models.profiles",
    ]


SIZE_RULED = ("models", "assets", "pipelines", "resources")
"""The folders of the size rule (docs/architecture.md): no file over 600 lines, no function over 80."""


def test_upper_floors_keep_the_size_rule() -> None:
    too_long = []
    for layer in SIZE_RULED:
        for path in (ROOT / layer).rglob("*.py"):
            text = path.read_text()
            name = path.relative_to(ROOT).as_posix()
            if len(text.splitlines()) > 600:
                too_long.append(f"{name}: {len(text.splitlines())} lines")
            for node in ast.walk(ast.parse(text, filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 80:
                    too_long.append(f"{name}: {node.name} {node.end_lineno - node.lineno + 1} lines")
    assert too_long == []
