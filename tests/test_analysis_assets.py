"""The ToM study, behaviour report, privacy red team and endpoint leaderboard assets on the smoke profile with
the real resources (the rollout proxy, DuckDB tables, MLflow on sqlite) but the stand-in engine serving the tiny
model (tests/conftest.py `standin_engine`; the stage-1 lineage keeps the real vLLM)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_tom_behaviour_and_leaderboard_assets_materialise_with_real_resources(
    tmp_path: Path, tiny_model_dir: Path, standin_engine: str
) -> None:
    from dagster import AssetSelection, DagsterInstance, RunConfig, materialize

    from assets.configs import EndpointConfig, LeaderboardConfig, RedTeamConfig
    from models.settings import DataPaths
    from models.storage import TableStore
    from models.tracking import Tracker, TrackingConfig
    from pipelines.definitions import all_assets, build_resources
    from pipelines.run_tom import run_tom

    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, data / "models" / "tiny-random-llama")

    start = time.perf_counter()
    results = run_tom("smoke", ("craigslist-v0",), data)  # the entry point: two runs on the data's instance
    print(f"ToM study (craigslist, smoke): {time.perf_counter() - start:.0f} s")
    result = results["craigslist-v0"]
    assert not isinstance(result, str), result
    episodes = 2 * 3  # smoke: 2 held-out scenarios x 3 counterparts
    arms = ("base", "base_tom_prompt", "sft_act", "sft_act_tom_prompt", "sft_tom")
    assert {arm: e.n for arm, e in result.arms.items()} == dict.fromkeys(arms, episodes)
    assert "r(infer, reward)" in result.markdown()  # what tom_analysis shows and run_tom prints
    store = TableStore(data / "tables")
    evaluated = store.query("SELECT DISTINCT policy_name FROM evaluations")
    assert {f"craigslist-v0:tom:{arm}" for arm in arms} == set(evaluated.policy_name)
    # smoke: 4 teacher episodes, traced in the seat the students learn (the buyer) only
    traces = store.query("SELECT seat, count(*) AS n FROM traces WHERE starts_with(run_id, 'tom-') GROUP BY seat")
    assert dict(zip(traces.seat, traces.n.astype(int), strict=True)) == {"buyer": 4}
    # The details file's timeline is the two runs' own step stats (pipelines/run_tom.py `tom_timeline`).
    from pipelines.run_tom import tom_timeline

    [(domain, runs)] = tom_timeline("smoke", ("craigslist-v0",), data).items()
    assert domain == "craigslist-v0" and [r["stage"] for r in runs] == ["students", "analysis"]
    assert {"tom_traces", "tom_student"} <= set(runs[0]["step_seconds"]) and "tom_analysis" in runs[1]["step_seconds"]
    assert runs[0]["run_id"] != runs[1]["run_id"]
    # What each arm said: its representative held-out episodes, in the analysis' metadata and in MLflow.
    from dagster import AssetKey

    from models.evaluation.safe_text import md_text

    event = DagsterInstance.from_config(str(data / "dagster_home")).get_latest_materialization_event(
        AssetKey("tom_analysis")
    )
    shown = event.asset_materialization.metadata["transcripts"].value
    titles = [f"### {md_text(f'{arm} on craigslist-v0', 200, 1)}" for arm in arms]  # as escaped for markdown
    assert all(title in shown for title in titles) and shown.count("**Outcome**") >= len(arms)
    adapters = sorted((data / "runs" / "tom" / "craigslist-v0").glob("*/sft_act/adapter"))
    assert len(adapters) == 1 and (adapters[0] / "adapter_config.json").is_file()

    start = time.perf_counter()
    student = str(adapters[0])
    config = RunConfig(
        {
            "privacy_red_team": RedTeamConfig(
                policies={"base": "base", "student": student, "missing": "sft_warmstart"}
            ),
            "endpoint_leaderboard": LeaderboardConfig(
                endpoints=[EndpointConfig(name="base", model="base"), EndpointConfig(name="student", model=student)]
            ),
        }
    )
    analysis = materialize(
        all_assets,
        selection=AssetSelection.groups("behaviour", "leaderboard"),
        resources=build_resources(profile="smoke", data_dir=str(data)),
        instance=DagsterInstance.from_config(str(data / "dagster_home")),
        run_config=config,
    )
    print(f"behaviour report, red team, leaderboard (smoke): {time.perf_counter() - start:.0f} s")
    assert analysis.success
    red = analysis.output_for_node("privacy_red_team")
    assert [d.env_id for d in red.domains] == ["marketplace-v0", "calendar-v0"]
    assert all(set(d.leak_rate) == {"base", "student"} and "student - base" in d.leak_difference for d in red.domains)
    assert set(red.skipped) == {"marketplace-v0:missing", "calendar-v0:missing"}
    board = analysis.output_for_node("endpoint_leaderboard")
    assert sorted(r.endpoint for r in board.rows) == ["base", "student"]
    assert all(len(r.domains) == 6 and r.red_black is not None and r.calls > 0 for r in board.rows)
    rows = json.loads((data / "reports" / "leaderboard-smoke.json").read_text())
    assert {r["endpoint"] for r in rows} == {"base", "student"}
    # The behaviour report runs after them and reads every policy the tables hold.
    policies = {s.policy for s in analysis.output_for_node("behaviour_report").summaries}
    assert {"craigslist-v0:tom:sft_tom", "redteam:student", "leaderboard:base", "leaderboard:student"} <= policies
    tracker = Tracker(TrackingConfig.for_data(DataPaths(data)))
    names = {r.info.run_name for r in tracker.client.search_runs([tracker.experiment_id])}
    assert {"tom-sft_act-craigslist-v0", "tom-sft_tom-craigslist-v0", "tom-analysis-craigslist-v0", "behaviour-report",
            "privacy-red-team", "endpoint-leaderboard"} <= names  # fmt: skip
