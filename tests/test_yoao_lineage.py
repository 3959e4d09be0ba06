"""The YOAO group's smoke lineage end to end with the real resources: the tiny model on the stand-in engine
(tests/conftest.py `standin_engine`) behind the rollout proxy, Parquet/DuckDB tables, MLflow on sqlite, the Dagster
instance (pipelines/run_yoao.py)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest


@pytest.mark.slow
def test_smoke_yoao_group_materialises_end_to_end(
    tmp_path: Path, tiny_model_dir: Path, standin_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from models.profiles import get_profile
    from models.provenance import PROVENANCE_KEYS
    from models.storage import TableStore
    from models.tracking import Tracker, TrackingConfig
    from models.yoao.report import BENCHMARK_KEYS, SUGARSCAPE_KEYS
    from pipelines.run_yoao import EXPERIMENTS, SEED_PIPELINE, run_yoao

    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, data / "models" / "tiny-random-llama")
    settings = get_profile("smoke").yoao
    start = time.perf_counter()
    # The engine dies when the games start (as the OOM killer took a cpu run's): the run fails after the seed
    # pipeline; the next `make yoao` goes on from there instead of training the warm-starts again.
    import assets.yoao_experiments as experiments

    def engine_gone(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(experiments, "_setup", engine_gone)
        failed, none, nothing = run_yoao("smoke", data, tmp_path / "yoao_smoke.json")
    assert [r.success for r in failed] == [False] and none is None and nothing is None
    runs, results, written = run_yoao("smoke", data, tmp_path / "yoao_smoke.json")
    print(f"smoke YOAO group, killed and resumed: {time.perf_counter() - start:.0f} s")
    assert [r.success for r in runs] == [True, True], [r.error for r in runs]
    assert runs[0].run_id == failed[0].run_id and set(runs[0].assets) == set(SEED_PIPELINE)  # not redone
    assert set(runs[1].step_seconds) & set(SEED_PIPELINE) == set()

    # The result file: the provenance, then exactly BENCHMARK_KEYS; every seed count, every seed share, every
    # asset's wall time.
    benchmark = json.loads(written.read_text())
    assert tuple(benchmark) == (*PROVENANCE_KEYS, *BENCHMARK_KEYS[1:])  # env_version leads both
    assert benchmark["profile"] == "smoke" and benchmark["machine_update_tok_s"] is None
    assert set(benchmark["cooperation_by_seed_count"]) == {str(k) for k in settings.seed_counts}
    for entry in benchmark["cooperation_by_seed_count"].values():
        assert set(entry) == {"mean", "ci_low", "ci_high", "games"} and entry["games"] == settings.games_per_arm
    assert set(benchmark["mute"]) == {"k=0", "k=1", "k=1 muted"}
    assert set(benchmark["persistence"]) == {"k=0", "k=1", "k=1 removed"}
    assert set(benchmark["prompting_baseline"]) == {"k=0", "k=1", "k=1 teacher", "k=1 prompted"}
    # The primary outcome on every arm the profile plays, paired with k = 0; persuadability at k = 0.
    arms = {"0", "1", "3", "1_muted", "1_removed", "1_teacher", "1_prompted"}
    assert set(benchmark["untrained_cooperation"]) == arms and set(benchmark["abstention"]) == arms
    assert set(benchmark["untrained_cooperation_paired"]) == arms - {"0"}
    for entry in benchmark["untrained_cooperation_paired"].values():
        assert set(entry) == {"mean", "ci_low", "ci_high", "games"}
    assert {"mean", "games", "votes"} <= set(benchmark["persuadability_k0"])
    assert set(benchmark["team"]["1"]) >= {"team_cooperation", "vote_arithmetic_null", "observed_minus_null"}
    assert set(benchmark["warmstarts"]) == {"format_warmup", "seed", "passed", "listener_probe", "seed_audit"}
    assert benchmark["warmstarts"]["seed"]["eval_curve"]  # the held-out loss before and after
    # The listener probe asked the served warm-up every untrained seat round of the audit's games (smoke: teams
    # of 3, 2 rounds, 2 games per arm: 3 untrained seats at k = 0, 2 beside the seed in the four other arms).
    listener = benchmark["warmstarts"]["listener_probe"]
    assert listener["rounds"] == 2 * 2 * (3 + 4 * 2) and listener["games"] == 2
    assert set(listener["model_comparisons"]) == set(listener["tutor_comparisons"])
    # The seed audit seated the served seed among the tutors: a statement and a vote per round at least (2 games
    # of 2 rounds), every statement counted by the choice it states.
    audit = benchmark["warmstarts"]["seed_audit"]
    assert audit["games"] == 2 and audit["llm_calls"] >= 2 * 2 * 2 and sum(audit["stated"].values()) <= 2 * 2
    assert set(audit["untrained_cooperation"]) == {"none", "argue", "vote_only", "seed"}
    assert set(benchmark["sugarscape"]) == {"0", "0.2", "0.5", "1"}
    for share in benchmark["sugarscape"].values():
        assert set(share) == set(SUGARSCAPE_KEYS)
    assert benchmark["sugarscape"]["0"]["leaning_shift_seed"] is None  # no seeds at 0%
    assert set(benchmark["wall_s"]) == {*SEED_PIPELINE, *EXPERIMENTS, "yoao_results"}

    # Every arm reports its abstention and invalid-vote rates; the tiny model's off-format answers are
    # retried, then abstain, and the games still finish.
    full = json.loads((data / "reports" / "yoao-smoke.json").read_text())
    for arms in full["arms"].values():
        for arm in arms:
            assert arm["abstention_rate"] is not None and arm["invalid_vote_rate"] is not None
            assert arm["games"] == settings.games_per_arm
    k1 = full["arms"]["propagation_by_seed_count"][1]
    assert k1["arm"] == "k=1" and k1["seed_abstention_rate"] > 0 and k1["seed_invalid_rate"] > 0  # off-format seed
    k0 = full["arms"]["propagation_by_seed_count"][0]
    assert k0["arm"] == "k=0" and k0["untrained_abstention_rate"] is not None and "decided_cooperation" in k0
    assert full["teacher_selection"][0]["name"] == "code-teacher"
    assert full["seed_data"]["kept"] > 0 and full["seed_data"]["frames"]

    # Tables: traces and seed turns from training frames only; the experiments' games; calls of both adapters.
    store = TableStore(data / "tables")
    frames = store.query("SELECT DISTINCT frame, split FROM yoao_seed_turns")
    assert set(frames.split) == {"train"} and not set(frames.frame) & {"trade_war", "gpu_contention"}
    judged = store.query("SELECT DISTINCT judge FROM yoao_seed_turns WHERE kind = 'opinion' AND choice = 'BLACK'")
    assert set(judged.judge) <= {"KEEP", "DROP", "unparsed"} and len(judged) > 0  # the smoke profile's LLM judge
    games = store.query("SELECT experiment, count(*) AS n FROM yoao_games GROUP BY experiment")
    assert set(games.experiment) == set(EXPERIMENTS)
    calls = store.query(
        "SELECT model, count(*) AS n, count(*) FILTER (WHERE len(completion_token_ids) = 0) AS n_empty "
        "FROM recorded_calls WHERE error IS NULL GROUP BY model"
    )
    assert {"yoao-seed", "yoao-untrained"} <= set(calls.model)
    assert int(calls.n_empty.sum()) == 0
    assert int(store.query("SELECT count(*) AS n FROM traces WHERE env_id = 'red-black-v0'").n[0]) > 0

    # The registry: the seed and the warm-up adapters, with aliases.
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{data}/mlflow/mlflow.db", artifact_root=str(data / "mlflow" / "artifacts")
        )
    )
    assert tracker.aliases("yoao-seed") == {"candidate": 1, "champion": 1}
    assert len(tracker.client.search_model_versions("name='yoao-seed'")) == 1  # trained once, not on resuming
    assert tracker.aliases("yoao-format-warmup") == {"candidate": 1}
    assert (tracker.lookup("yoao-seed", alias="champion").path / "adapter_config.json").is_file()
    assert results is not None and results.seed_version == 1

    # The result file rebuilt after a report change replays nothing: only yoao_results runs again, from the
    # experiments the run above materialised, and the file keeps their numbers and asset times.
    games_before = int(store.query("SELECT count(*) AS n FROM yoao_games").n[0])
    again, _, rebuilt = run_yoao("smoke", data, tmp_path / "yoao_rebuilt.json", rebuild_results=True)
    assert [r.success for r in again] == [True, True, True]  # the two runs that made the assets, the rebuild
    assert {r.run_id for r in again[:2]} == {r.run_id for r in runs}
    assert int(store.query("SELECT count(*) AS n FROM yoao_games").n[0]) == games_before
    second = json.loads(rebuilt.read_text())
    for key in ("untrained_cooperation", "untrained_cooperation_paired", "seed_statements", "warmstarts"):
        assert second[key] == benchmark[key], key
    assert {k: v for k, v in second["wall_s"].items() if k != "yoao_results"} == {
        k: v for k, v in benchmark["wall_s"].items() if k != "yoao_results"
    }
    assert set(second["wall_s"]) == set(benchmark["wall_s"])
