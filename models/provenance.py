"""Where a result came from, in one place: the code's state in git and the machine's speed. Result files (the
main run's report, the audits' benchmarks, the test suite's timing) and MLflow's commit tag take them from
here, so that every result says which code and how fast a machine made it.

| function | gives |
| --- | --- |
| `code_state()` | `CodeState`: the commit checked out and whether tracked files differ from it |
| `git_commit()` | the commit as MLflow's tag writes it (`<sha>` or `<sha>-dirty`), None outside git |
| `measure_update_tok_s()` | the machine's PPO update speed: `benchmarks/bench_learner.py --shape small` in a subprocess |
| `machine_speed_or_none()` | the same, or None (with a warning) where the benchmark fails: a run's numbers matter more |
| `result_to_extend(path)` | a result file's contents for a benchmark that adds to it, or {} where it is absent or was measured on another environment version (never merged) |
| `provenance()` | the keys every result file carries (`PROVENANCE_KEYS`): `env_version`, `commit`, `uncommitted_changes`, `profile`, `measured_at`, `machine_update_tok_s` |

Each runner writes its own `wall_s` beside them (seconds, or asset -> seconds where a runner times its assets).
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from models.settings import REPO_ROOT

PROVENANCE_KEYS = ("env_version", "commit", "uncommitted_changes", "profile", "measured_at", "machine_update_tok_s")
"""Where a result came from: the keys `provenance()` gives every result file (the papers' report reads them)."""

LEARNER = REPO_ROOT / "benchmarks" / "bench_learner.py"
MACHINE_SPEED_ARGS = ("--device", "cpu", "--shape", "small", "--iterations", "1")
"""bench_learner's smallest run: the small shape, one timed iteration after the warm-up (seconds on a CPU)."""


@dataclass(frozen=True, kw_only=True)
class CodeState:
    """The code a result was made with."""

    commit: str | None
    """`git rev-parse HEAD` of the work tree; None outside a git work tree or without git."""
    uncommitted_changes: bool
    """Whether tracked files differ from `commit` (the result then does not follow from the commit alone)."""

    def tag(self) -> str | None:
        """`<sha>`, or `<sha>-dirty` with uncommitted changes (MLflow's `mlflow.source.git.commit`)."""
        if self.commit is None:
            return None
        return f"{self.commit}-dirty" if self.uncommitted_changes else self.commit


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def code_state(repo: str | Path = REPO_ROOT) -> CodeState:
    """The commit checked out in `repo` and whether tracked files changed (untracked files do not count)."""
    try:
        sha = _git(Path(repo), "rev-parse", "HEAD")
        dirty = _git(Path(repo), "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return CodeState(commit=None, uncommitted_changes=False)
    return CodeState(commit=sha or None, uncommitted_changes=bool(dirty))


def git_commit(repo: str | Path = REPO_ROOT) -> str | None:
    """The commit checked out in `repo` (full sha, with "-dirty" when tracked files changed), or None when it is
    not a git work tree or git is missing."""
    return code_state(repo).tag()


def measure_update_tok_s(timeout_s: float = 600.0, args: Sequence[str] = MACHINE_SPEED_ARGS) -> float:
    """The PPO update's tokens/s on this machine: `benchmarks/bench_learner.py` with `args` (default
    `MACHINE_SPEED_ARGS`) in a subprocess (its own torch, its default threads unless `args` set them), read from
    the JSON line it prints (`tokens_per_s.update`). Raises RuntimeError when the benchmark fails."""
    done = subprocess.run(
        [sys.executable, str(LEARNER), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO_ROOT,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"bench_learner failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return float(json.loads(lines[-1])["tokens_per_s"]["update"])


def reference_settings_args(reference: Mapping[str, Any]) -> tuple[str, ...]:
    """bench_learner's arguments that repeat a stored learner result's run (its shape, timed iterations and
    threads: the reference machine's benchmarks/results/learner_cpu.json ran one thread, three iterations)."""
    return (
        "--device", "cpu", "--shape", str(reference["shape"]),
        "--iterations", str(reference["timed_iterations"]), "--threads", str(reference["threads"]),
    )  # fmt: skip


def measure_like(reference: Mapping[str, Any], repeats: int = 3) -> float:
    """This machine's PPO update tokens/s measured as `reference` was (`reference_settings_args`), the median
    of `repeats` runs: single runs of the machine-speed benchmark read 2,567 to 3,736 within minutes here."""
    return statistics.median(measure_update_tok_s(args=reference_settings_args(reference)) for _ in range(repeats))


def machine_speed_or_none(log: logging.Logger) -> float | None:
    """`measure_update_tok_s()`, or None with a warning on `log` when the benchmark fails."""
    try:
        return measure_update_tok_s()
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        log.warning("the machine's speed was not measured: %s", exc)
        return None


def provenance(
    *, profile: str, machine_update_tok_s: float | None = None, repo: str | Path = REPO_ROOT
) -> dict[str, Any]:
    """The `PROVENANCE_KEYS` of a result made now by the code in `repo` with `profile`: the environment version
    (agents/env_version.py), the commit and whether tracked files differed from it, the UTC time, and the
    machine's PPO update speed when measured (None otherwise)."""
    code = code_state(repo)
    return {
        "env_version": env_version(),
        "commit": code.commit,
        "uncommitted_changes": code.uncommitted_changes,
        "profile": profile,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine_update_tok_s": machine_update_tok_s,
    }


def result_to_extend(path: Path, log: logging.Logger) -> dict[str, Any]:
    """The JSON result at `path` for a benchmark that adds to it (arms, curve points), or {} where there is none
    or it was measured on another environment version: such results are never compared, so never merged."""
    existing = json.loads(path.read_text()) if path.exists() else {}
    if existing.get("env_version") != env_version():
        log.info("%s holds env_version %s, not %s: not merged", path, existing.get("env_version"), env_version())
        return {}
    return existing
