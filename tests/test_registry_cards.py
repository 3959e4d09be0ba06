"""A registry that explains itself, against a real sqlite MLflow: run tags (domain, profile, git commit,
Dagster run, parent), per-step metrics, evaluation metrics on the run, version descriptions and model
cards beside a real PEFT adapter, and evaluation history kept on a version."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from models.tracking import (
    GIT_COMMIT_TAG,
    HISTORY_PREFIX,
    PARENT_RUN_TAG,
    SUMMARY_PREFIX,
    WARM_START_RUN_TAG,
    ModelCard,
    Tracker,
    TrackingConfig,
    git_commit,
    run_tags,
    write_model_card,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tracker]:
    # The sqlite file in RAM where there is one: MLflow's ~60 schema migrations each sync to disk.
    shm = Path("/dev/shm")
    db_dir = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    artifacts = tmp_path_factory.mktemp("artifacts")
    try:
        yield Tracker(TrackingConfig(tracking_uri=f"sqlite:///{db_dir}/mlflow.db", artifact_root=str(artifacts)))
    finally:
        shutil.rmtree(db_dir, ignore_errors=True)


def test_run_tags_say_what_a_run_is(tracker: Tracker) -> None:
    sha = git_commit(ROOT)
    expected = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert sha is not None and sha.removesuffix("-dirty") == expected
    assert git_commit(tempfile.mkdtemp()) is None  # not a work tree
    with tracker.start_run(
        "sft-craigslist-v0", tags=run_tags(domain="craigslist-v0", profile="smoke", stage="sft")
    ) as parent:
        pass
    tags = run_tags(
        domain="craigslist-v0", profile="smoke", git_commit=sha, dagster_run_id="abc123", parent_run_id=parent.run_id,
        stage="ppo", extra={"socialrl.seat": "buyer", "empty": ""},
    )  # fmt: skip
    assert "empty" not in tags and tags[PARENT_RUN_TAG] == parent.run_id
    with tracker.start_run("ppo-craigslist-v0", tags=tags) as run:
        pass
    stored = tracker.client.get_run(run.run_id).data.tags
    assert stored["socialrl.domain"] == "craigslist-v0" and stored["socialrl.profile"] == "smoke"
    assert stored[GIT_COMMIT_TAG] == sha and stored["dagster.run_id"] == "abc123"
    assert stored["socialrl.stage"] == "ppo" and stored["socialrl.seat"] == "buyer"
    # MLflow itself sees the nesting.
    children = tracker.client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{parent.run_id}'")
    assert [r.info.run_id for r in children] == [run.run_id]


def test_a_ppo_run_names_its_warm_start_without_hiding_under_it(tracker: Tracker) -> None:
    """The PPO asset tags its warm-start's run instead of nesting under it: MLflow lists it at top level, and its
    description names the warm-start run beside the Dagster run that launched it."""
    with tracker.start_run("sft-craigslist-v0", tags=run_tags(stage="sft")) as warm:
        pass
    tags = run_tags(
        stage="ppo", warm_start_run_id=warm.run_id, dagster_run_id="abc12345", dagster_run_url="http://dagster/r"
    )
    assert PARENT_RUN_TAG not in tags and tags[WARM_START_RUN_TAG] == warm.run_id
    with tracker.start_run("ppo-craigslist-v0", tags=tags) as run:
        pass
    nested = tracker.client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{warm.run_id}'")
    assert nested == []
    note = tracker.client.get_run(run.run_id).data.tags["mlflow.note.content"]
    assert "[abc12345](http://dagster/r)" in note and warm.run_id in note


def test_per_step_history_and_evaluation_metrics(tracker: Tracker) -> None:
    # What transformers' Trainer keeps in state.log_history: one record per logging step, then a summary.
    history = [
        {"loss": 2.5, "learning_rate": 1e-3, "epoch": 0.25, "step": 1},
        {"loss": 2.1, "learning_rate": 8e-4, "epoch": 0.5, "step": 2, "grad_norm": float("nan")},
        {"eval_loss": 2.3, "step": 2},
        {"loss": 1.7, "learning_rate": 6e-4, "epoch": 0.75, "step": 3},
        {"train_runtime": 12.0, "train_loss": 2.1, "step": 3, "note": "text is skipped"},
        {"loss": 9.9},  # no step: skipped
    ]
    with tracker.start_run("sft") as run:
        logged = run.log_history(history, prefix="sft/")
        on_run = run.log_evaluation(
            {"n": 12, "mean_reward": 0.41, "ci_low": 0.3, "ci_high": 0.52, "pareto_optimal_rate": math.nan, "ci_method": "bootstrap"}
        )  # fmt: skip
    client = tracker.client
    assert [(m.step, m.value) for m in client.get_metric_history(run.run_id, "sft/loss")] == [
        (1, 2.5),
        (2, 2.1),
        (3, 1.7),
    ]
    assert [m.step for m in client.get_metric_history(run.run_id, "sft/eval_loss")] == [2]
    assert client.get_metric_history(run.run_id, "sft/grad_norm") == []  # NaN left out
    assert logged == 3 * 3 + 1 + 2  # loss, lr, epoch at 3 steps; eval_loss; train_runtime, train_loss
    assert set(on_run) == {"eval/n", "eval/mean_reward", "eval/ci_low", "eval/ci_high"}
    # After the run ended (the evaluation of a training run happens later, in another asset).
    later = tracker.log_run_metrics(run.run_id, {"mean_reward": 0.45, "agreement_rate": 0.5}, prefix="heldout/")
    assert later == {"heldout/mean_reward": 0.45, "heldout/agreement_rate": 0.5}
    metrics = client.get_run(run.run_id).data.metrics
    assert metrics["eval/mean_reward"] == 0.41 and metrics["heldout/mean_reward"] == 0.45
    assert tracker.run_status(run.run_id) == "FINISHED"


def _register(tracker: Tracker, adapter: Path, name: str) -> tuple[str, int]:
    with tracker.start_run("ppo") as run:
        run.log_artifact_dir(adapter, "adapter")
    return run.run_id, tracker.register_adapter(run.run_id, "adapter", name)


def test_versions_get_a_description_and_a_real_model_card(
    tracker: Tracker, tiny_lora_adapter: Path, tiny_model_dir: Path
) -> None:
    template = (tiny_lora_adapter / "README.md").read_text()
    assert str(tiny_model_dir) in template and "More Information Needed" in template  # PEFT's empty card
    run_id, version = _register(tracker, tiny_lora_adapter, "socialrl-craigslist-specialist")
    card = ModelCard(
        name="socialrl-craigslist-specialist",
        base_model="tiny-random-llama",
        domain="craigslist-v0",
        profile="smoke",
        seat="buyer",
        training="PPO, 2 iterations x 4 episodes, from the SFT warm-start",
        training_data="4 teacher traces of 8 training scenarios (seed 0)",
        evaluation={"n": 12, "mean_reward": 0.4123, "ci_low": 0.31, "ci_high": 0.52, "pareto_optimal_rate": math.nan},
        evaluation_suite="heldout(n=4, seed=0) vs boulware, conceder, reciprocal",
        parent="SFT warm-start",
        versus_parent={"mean": 0.051, "ci_low": -0.02, "ci_high": 0.12, "n": 12},
        git_commit="deadbeef",
    )
    info = tracker.document_version("socialrl-craigslist-specialist", version, card)
    mv = tracker.client.get_model_version("socialrl-craigslist-specialist", str(version))
    assert "Trained on: 4 teacher traces" in mv.description and "+0.051 [-0.020, +0.120]" in mv.description
    assert (
        "mean reward 0.412 [0.310, 0.520] (n=12), heldout" in mv.description and "`tiny-random-llama`" in mv.description
    )
    assert info.tags["socialrl.base_model"] == "tiny-random-llama" and info.tags["socialrl.parent"] == "SFT warm-start"
    # The card lies beside the adapter the registry serves; no path of this machine is left in it.
    local = tracker.lookup("socialrl-craigslist-specialist", alias=None, version=version)
    readme = (local.path / "README.md").read_text()
    config = json.loads((local.path / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "tiny-random-llama" and config["r"] == 8
    assert str(tiny_model_dir) not in readme and "More Information Needed" not in readme
    assert readme.startswith('---\nbase_model: "tiny-random-llama"') and "# socialrl-craigslist-specialist v" in readme
    assert "| pareto_optimal_rate | n/a |" in readme and run_id in readme
    assert (local.path / "adapter_model.safetensors").is_file()
    # Bad input says what is wrong.
    with pytest.raises(ValueError, match="is a path"):
        ModelCard("m", str(tiny_model_dir), "craigslist-v0", "smoke", "PPO", "traces")
    with pytest.raises(ValueError, match="training_data"):
        ModelCard("m", "tiny-random-llama", "craigslist-v0", "smoke", "PPO", " ")


def test_write_model_card_on_a_local_adapter(tiny_lora_adapter: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_lora_adapter, tmp_path / "adapter"))
    card = ModelCard("yoao-seed", "Qwen/Qwen3-14B", "red-black-v0", "paper", "LoRA SFT", "filtered seed traces")
    readme = write_model_card(copy, card)
    assert json.loads((copy / "adapter_config.json").read_text())["base_model_name_or_path"] == "Qwen/Qwen3-14B"
    assert "Not evaluated when this card was written." in readme.read_text()
    with pytest.raises(NotADirectoryError):
        write_model_card(tmp_path / "missing", card)


def test_evaluation_history_is_kept_on_the_version(tracker: Tracker, tiny_lora_adapter: Path) -> None:
    name = "socialrl-dnd-specialist"
    _, version = _register(tracker, tiny_lora_adapter, name)
    tracker.record_evaluation(name, version, {"mean_reward": 0.1775})  # the promotion value (held-out suite)
    day1 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    first = tracker.record_evaluation_history(
        name,
        version,
        {"mean_reward": 0.20, "n": 12, "pareto_optimal_rate": math.nan},
        when=day1,
        source="nightly-20261201",
    )
    assert first == {"mean_reward": 0.20, "n": 12.0}
    tracker.record_evaluation_history(name, version, {"mean_reward": 0.112, "n": 12}, when=day1 + timedelta(days=1))
    info = tracker.get_version(name, version)
    assert info.evaluation("nightly") == {"mean_reward": 0.112, "n": 12.0}  # the latest is current
    assert info.evaluation() == {"mean_reward": 0.1775}  # the promotion value is not overwritten
    assert info.evaluated_at("nightly") == day1 + timedelta(days=1)
    assert info.tags["evaluated.nightly.count"] == "2" and info.tags["evaluated.nightly.source"] == "nightly-20261201"
    assert info.tags["evaluated.nightly.undefined"] == "-"
    history = tracker.evaluation_history(name, version, "mean_reward", "nightly")
    assert history == [(day1, 0.20), (day1 + timedelta(days=1), 0.112)]
    # MLflow's run page sorts its chart sections (a metric's name before its last "/") by name: the history's
    # section must come after the training curves' and the summary's, not lead the page.
    run_id = tracker.client.get_model_version(name, str(version)).run_id
    history_keys = {k for k in tracker.client.get_run(run_id).data.metrics if k.startswith(HISTORY_PREFIX)}
    assert history_keys == {f"{HISTORY_PREFIX}nightly/mean_reward", f"{HISTORY_PREFIX}nightly/n"}
    sections = sorted(["ppo", "sft", SUMMARY_PREFIX.rstrip("/"), *(k.rsplit("/", 1)[0] for k in history_keys)])
    assert sections[-1] == f"{HISTORY_PREFIX}nightly"
    with pytest.raises(ValueError, match="suite"):
        tracker.record_evaluation_history(name, version, {"mean_reward": 0.1}, suite="Nightly run")
    with pytest.raises(ValueError, match="no finite"):
        tracker.record_evaluation_history(name, version, {"mean_reward": math.nan})


@pytest.mark.slow
def test_the_warm_start_adapter_carries_a_filled_model_card(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The SFT warm-start's adapter in its MLflow run: a README.md that says what it is (not PEFT's blank
    template) and no path of the training machine (stage1.warmstart, smoke profile on the tiny model)."""
    from models.profiles import get_profile
    from models.socialrl import stage1

    profile = get_profile("smoke")
    traces = stage1.teacher_traces("craigslist-v0", profile)
    tracker = Tracker(TrackingConfig(f"sqlite:///{tmp_path}/m.db", str(tmp_path / "artifacts")))
    tags = run_tags(domain="craigslist-v0", profile="smoke", git_commit="cafe123")
    warm = stage1.warmstart("craigslist-v0", traces, profile, tiny_model_dir, tmp_path / "sft", tracker, tags)
    adapter = tracker.latest_run_artifact("sft-craigslist-v0", "adapter")
    assert adapter is not None and warm.mlflow_run_id is not None
    readme = (adapter / "README.md").read_text()
    assert "More Information Needed" not in readme and str(tiny_model_dir) not in readme and "/tmp" not in readme
    assert readme.startswith('---\nbase_model: "tiny-random-llama"') and "# sft-craigslist-v0" in readme
    assert "| Seat | buyer |" in readme and "| Git commit | `cafe123` |" in readme and warm.mlflow_run_id in readme
    assert "| eval_loss_after |" in readme and "teacher traces of the learning seat" in readme
    assert "PPO specialist of craigslist-v0" in readme and "models:/sft-craigslist-v0" not in readme
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "tiny-random-llama"
