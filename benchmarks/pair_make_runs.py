"""Two `make run` instances compared episode by episode: the same held-out plan, the same warm-start, one setting
changed (e.g. the PPO passes per iteration).

Each instance's data directory holds its evaluation episodes (tables `episodes` and `episode_roles`). An
evaluation episode's id is `eval:<env>:<tag>:<counterpart>:<index>:<seat>`, where the tag is drawn at random per
evaluation (models/evaluation/policy.py); less the tag, the id names the episode within its plan, so two runs
on one plan hold the same keys, each on the same scenario (checked). The policy's seat reward is paired by that
key with the scenario-clustered bootstrap (models/evaluation/stats.py `paired_difference`). Refused: runs of
different environment versions (their reports' `env_version`) and of different plans (episodes that only one
run has, or that play another scenario). The warm-start's rewards are compared too: equal rewards on every
episode say both PPO runs started from the same policy.

    python -m benchmarks.pair_make_runs --a DATA_A --b DATA_B [--label-a one_pass] [--label-b two_passes] \
        [--policy ppo] --output benchmarks/results/ppo_passes_paired.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import duckdb

from models.evaluation.stats import paired_difference
from models.provenance import provenance


def episode_key(episode_id: str) -> str:
    """An evaluation episode id without its random per-evaluation tag (`eval:<env>:<tag>:<counterpart>:<index>:<seat>`):
    what is left names the episode within its plan."""
    parts = episode_id.split(":")
    return ":".join(parts[:2] + parts[3:]) if len(parts) == 6 else episode_id


def seat_rewards(data: Path, policy: str) -> tuple[dict[str, float], dict[str, str]]:
    """Episode key -> the evaluated policy's reward, and episode key -> scenario, for `policy`'s evaluation runs
    (run ids `eval-<run>-<policy>`) in a make-run data directory."""
    tables = data / "tables"
    rows = duckdb.sql(
        f"""SELECT e.episode_id, e.scenario_id, r.reward
            FROM read_parquet('{tables}/episodes/*.parquet') e
            JOIN read_parquet('{tables}/episode_roles/*.parquet') r USING (episode_id, run_id)
            WHERE e.run_id LIKE 'eval-%-{policy}' AND r.agent_name LIKE 'llm(%'"""
    ).fetchall()
    if not rows:
        raise ValueError(f"no evaluation episodes of {policy!r} under {tables}")
    return {episode_key(r[0]): float(r[2]) for r in rows}, {episode_key(r[0]): r[1] for r in rows}


def report_env_version(data: Path) -> str:
    """The environment version of the newest make-run report in `data`/reports."""
    reports = sorted((data / "reports").glob("make-run-2*.json"))
    if not reports:
        raise ValueError(f"no make-run report under {data / 'reports'}")
    return json.loads(reports[-1].read_text())["env_version"]


def compare(data_a: Path, data_b: Path, policy: str) -> dict[str, Any]:
    """`policy`'s reward in run b minus run a, paired by episode, and whether both runs' warm-starts earned the
    same on every episode."""
    versions = report_env_version(data_a), report_env_version(data_b)
    if versions[0] != versions[1]:
        raise ValueError(f"different environment versions {versions}: results are never compared across them")
    a, scenarios = seat_rewards(data_a, policy)
    b, scenarios_b = seat_rewards(data_b, policy)
    moved = [k for k in scenarios if k in scenarios_b and scenarios_b[k] != scenarios[k]]
    if moved:
        raise ValueError(f"not paired: {len(moved)} episodes play other scenarios in the second run (e.g. {moved[:3]})")
    sft_a, _ = seat_rewards(data_a, "sft")
    sft_b, _ = seat_rewards(data_b, "sft")
    difference = paired_difference(b, a, scenarios)
    return {
        "env_version": versions[0],
        "policy": policy,
        "mean_a": sum(a.values()) / len(a),
        "mean_b": sum(b.values()) / len(b),
        "b_minus_a": difference.as_dict(),
        "warm_start_identical": sft_a == sft_b,
        "warm_start_episodes_differing": sum(sft_a[k] != sft_b.get(k) for k in sft_a),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=Path, required=True, help="first make run's data directory")
    parser.add_argument("--b", type=Path, required=True, help="second make run's data directory")
    parser.add_argument("--label-a", default="a")
    parser.add_argument("--label-b", default="b")
    parser.add_argument("--policy", default="ppo")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    result = {
        **provenance(profile="cpu"),
        "a": args.label_a,
        "b": args.label_b,
        **compare(args.a, args.b, args.policy),
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("mean_a", "mean_b", "b_minus_a", "warm_start_identical")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
