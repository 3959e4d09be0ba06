"""`env_version`: a fingerprint of the environments and the code counterparts, carried by every result file.

Results measured against one version of the rules and counterparts are never compared with, or reported as
one with, results of another (the papers' report marks older ones stale). The fingerprint is the sha256 of
the syntax trees (`ast.dump`, so comments and formatting do not count; docstrings do) of every module that
decides what an episode pays: the whole `environments/` package (rules, scenarios, rewards, grammars) and the
counterparts' modules listed in `COUNTERPART_MODULES`. One version covers every domain, so that stage 1, stage
2, the audit and YOAO results can be checked against each other with one string.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (this file is agents/env_version.py)."""
COUNTERPART_MODULES = (
    "agents/socialrl/code_agents.py",
    "agents/socialrl/price_counterpart.py",
    "agents/socialrl/price_reading.py",
    "agents/yoao",
)
"""Counterpart code beside `environments/` (files, or folders whose .py files all count)."""


def _sources(root: Path) -> list[Path]:
    paths = sorted((root / "environments").rglob("*.py"))
    for name in COUNTERPART_MODULES:
        path = root / name
        paths += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return paths


@functools.lru_cache(maxsize=4)
def env_version(root: Path = ROOT) -> str:
    """`env-<12 hex digits>`: the fingerprint of the environment and counterpart code under `root`."""
    digest = hashlib.sha256()
    for path in _sources(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(ast.dump(ast.parse(path.read_text(encoding="utf-8"))).encode())
    return f"env-{digest.hexdigest()[:12]}"
