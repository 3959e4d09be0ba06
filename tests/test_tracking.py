"""MLflow tracking and registry against the real sqlite backend in a temporary directory.

MLflow's first connection to a fresh sqlite store creates its tables (~2-3 s), so the tests share one
module-scoped tracker; every test uses its own registered-model name, so they stay independent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.env_version import env_version
from models.tracking import (
    CANDIDATE,
    CHAMPION,
    RegistryError,
    Tracker,
    TrackingConfig,
    attempt_run,
    flatten_params,
    server_command,
)


@pytest.fixture(scope="module", autouse=True)
def no_network() -> Iterator[list[object]]:
    """Fail any attempt to open a non-loopback IP connection while these tests run (MLflow must stay offline)."""
    attempts: list[object] = []
    original = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) else address
            if host not in ("127.0.0.1", "::1", "localhost"):
                attempts.append(address)
                raise OSError(f"network access blocked in tests: {address}")
        return original(self, address)

    socket.socket.connect = guarded  # type: ignore[method-assign]
    try:
        yield attempts
    finally:
        socket.socket.connect = original  # type: ignore[method-assign]
    assert not attempts, f"MLflow tried to reach the network: {attempts}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mlflow")


@pytest.fixture(scope="module")
def db_dir() -> Iterator[Path]:
    """Where the sqlite file lives: RAM (/dev/shm) when there is one, because MLflow's ~60 schema migrations
    each sync to disk (measured 2.5 s on tmpfs vs up to 15 s on a busy disk); same code path either way."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    directory = Path(tempfile.mkdtemp(prefix="socialrl-mlflow-", dir=parent))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def tracker(store: Path, db_dir: Path) -> Tracker:
    config = TrackingConfig(
        tracking_uri=f"sqlite:///{db_dir / 'mlflow.db'}", artifact_root=str(store / "artifacts"), experiment="tests"
    )
    return Tracker(config)


def fake_adapter(directory: Path, marker: str) -> Path:
    """An adapter-like directory: adapter_config.json and a weights file whose bytes carry `marker`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 16, "marker": marker}))
    (directory / "adapter_model.safetensors").write_bytes(b"\x00weights:" + marker.encode() * 64)
    return directory


def train_and_register(tracker: Tracker, tmp_path: Path, name: str, marker: str) -> tuple[str, int]:
    with tracker.start_run(f"train-{marker}", params={"lr": 2e-6}) as run:
        run.log_metrics(0, loss=1.0)
        run.log_artifact_dir(fake_adapter(tmp_path / marker, marker), "adapter")
    return run.run_id, tracker.register_adapter(run.run_id, "adapter", name)


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------- config
def test_config_defaults_to_sqlite_under_the_data_dir(tmp_path: Path) -> None:
    from models.settings import DataPaths

    config = TrackingConfig.for_data(DataPaths(tmp_path))
    assert config.tracking_uri == f"sqlite:///{tmp_path.resolve() / 'mlflow' / 'mlflow.db'}"
    assert config.artifact_root == (tmp_path.resolve() / "mlflow" / "artifacts").as_uri()
    assert config.local_artifact_dir == tmp_path.resolve() / "mlflow" / "artifacts"
    assert config.experiment == "socialrl"


def test_config_rejects_the_file_store_and_normalises_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("", "file:///tmp/mlruns", "/tmp/mlruns", "mlruns", "sqlite://relative.db", "sqlite:///:memory:"):
        with pytest.raises(ValueError):
            TrackingConfig(tracking_uri=bad, artifact_root=str(tmp_path))
    with pytest.raises(ValueError, match="unsupported scheme"):
        TrackingConfig(tracking_uri="ftp://host/x", artifact_root=str(tmp_path))
    with pytest.raises(ValueError, match="experiment"):
        TrackingConfig(tracking_uri="sqlite:////x.db", artifact_root=str(tmp_path), experiment=" ")
    with pytest.raises(ValueError, match="artifact_root"):
        TrackingConfig(tracking_uri="sqlite:////x.db", artifact_root="")
    monkeypatch.chdir(tmp_path)
    config = TrackingConfig(tracking_uri="sqlite:///rel/m.db", artifact_root="arts")
    assert config.tracking_uri == f"sqlite:///{tmp_path.resolve() / 'rel' / 'm.db'}"
    assert config.artifact_root == (tmp_path.resolve() / "arts").as_uri()
    remote = TrackingConfig(tracking_uri="postgresql+psycopg2://u@h/db", artifact_root="s3://bucket/mlflow/")
    assert remote.artifact_root == "s3://bucket/mlflow"
    assert remote.local_artifact_dir is None


def test_from_env_and_server_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOCIALRL_MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/t.db")
    monkeypatch.setenv("SOCIALRL_MLFLOW_ARTIFACT_ROOT", str(tmp_path / "a"))
    from models.settings import DataPaths

    config = TrackingConfig.from_env(DataPaths(tmp_path / "data"), experiment="e")
    assert (config.tracking_uri, config.artifact_root, config.experiment) == (
        f"sqlite:///{tmp_path}/t.db",
        (tmp_path / "a").as_uri(),
        "e",
    )
    argv = server_command(config, port=5055)
    assert argv[1:4] == ["-m", "mlflow", "server"]
    options = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert options == {
        "--backend-store-uri": config.tracking_uri,
        "--default-artifact-root": config.artifact_root,
        "--host": "127.0.0.1",
        "--port": "5055",
    }
    with pytest.raises(ValueError, match="port"):
        server_command(config, port=0)


def test_flatten_params_handles_nesting() -> None:
    assert flatten_params({"ppo": {"lr": 1e-5, "batch": 144}, "domain": "dnd"}) == {
        "ppo.lr": "1e-05",
        "ppo.batch": "144",
        "domain": "dnd",
    }


def test_mlflow_stays_offline_and_quiet(tracker: Tracker) -> None:
    from mlflow.telemetry.client import get_telemetry_client

    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert os.environ["MLFLOW_ENABLE_ASYNC_LOGGING"] == "false"
    assert get_telemetry_client() is None


# ------------------------------------------------------------------------------------------- tracking
def test_run_params_metrics_and_artifacts_read_back(tracker: Tracker, tmp_path: Path) -> None:
    adapter = fake_adapter(tmp_path / "adapter", "run")
    with tracker.start_run("ppo-craigslist", params={"ppo": {"lr": 2e-6}, "steps": 3}, tags={"domain": "x"}) as run:
        for step in range(3):
            run.log_metrics(step, loss=1.0 / (step + 1), metrics={"reward/mean": 0.1 * step})
        run.log_params(seed=7)
        uri = run.log_artifact_dir(adapter, "adapter")
    data = tracker.client.get_run(run.run_id)
    assert data.info.status == "FINISHED"
    assert data.info.run_name == "ppo-craigslist"
    assert data.info.experiment_id == tracker.experiment_id
    assert data.data.params == {"ppo.lr": "2e-06", "steps": "3", "seed": "7"}
    assert data.data.tags["domain"] == "x"
    history = tracker.client.get_metric_history(run.run_id, "loss")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [(0, 1.0), (1, 0.5), (2, 1 / 3)]
    rewards = tracker.client.get_metric_history(run.run_id, "reward/mean")
    assert sorted(m.value for m in rewards) == pytest.approx([0.0, 0.1, 0.2])
    assert uri.startswith(tracker.config.artifact_root)
    names = sorted(f.path for f in tracker.client.list_artifacts(run.run_id, "adapter"))
    assert names == ["adapter/adapter_config.json", "adapter/adapter_model.safetensors"]
    assert files_of(Path(uri.removeprefix("file://"))) == files_of(adapter)


def test_a_failing_run_body_marks_the_run_failed(tracker: Tracker) -> None:
    with pytest.raises(RuntimeError, match="diverged"), tracker.start_run("broken") as run:
        run.log_metrics(0, loss=3.0)
        raise RuntimeError("loss diverged")
    info = tracker.client.get_run(run.run_id)
    assert info.info.status == "FAILED"
    assert "loss diverged" in info.data.tags["socialrl.error"]
    assert tracker.run_status(run.run_id) == "FAILED"


def test_bad_inputs_are_rejected_and_still_end_the_run(tracker: Tracker, tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError), tracker.start_run("no-dir") as run:
        run.log_artifact_dir(tmp_path / "missing", "adapter")
    assert tracker.run_status(run.run_id) == "FAILED"
    with pytest.raises(ValueError, match="step"), tracker.start_run("bad-step") as run:
        run.log_metrics(-1, loss=1.0)
    with pytest.raises(RegistryError, match="no artifacts"):
        tracker.register_adapter(run.run_id, "adapter", "socialrl-empty")


class HardKill(BaseException):
    """What a killed process leaves: an interruption (not an error)."""


def steps_of(tracker: Tracker, run_id: str, metric: str) -> list[int]:
    return [m.step for m in sorted(tracker.client.get_metric_history(run_id, metric), key=lambda m: m.step)]


def runs_named(tracker: Tracker, name: str) -> list:
    return tracker.client.search_runs([tracker.experiment_id], f"attributes.run_name = '{name}'")


def test_an_interrupted_run_ends_killed(tracker: Tracker) -> None:
    for interruption in (KeyboardInterrupt, SystemExit, HardKill):  # Dagster's termination is a BaseException too
        with pytest.raises(interruption), tracker.start_run("interrupted") as run:
            raise interruption()
        assert tracker.run_status(run.run_id) == "KILLED"


def test_a_resumed_attempt_continues_its_run_and_one_that_starts_over_ends_the_killed_one(
    tracker: Tracker, tmp_path: Path
) -> None:
    """A killed PPO step resumed from its checkpoint continues the killed attempt's run: one run whose step
    history goes on from the checkpoint, FINISHED; an attempt that starts over (no checkpoint, or SFT) starts a new
    run and ends the killed attempt's run, which a hard kill leaves RUNNING, as KILLED."""
    record = tmp_path / "work" / "mlflow_run.json"
    with pytest.raises(HardKill), attempt_run(tracker, record, "ppo-resume", {"lr": 2e-6}, {"socialrl.domain": "d"}) as run:  # fmt: skip
        assert not run.resumed
        for step in (0, 1, 2):  # the checkpoint below is at 2: step 2 was logged but not checkpointed
            run.log_metrics(step, loss=1.0 / (step + 1))
        raise HardKill()
    first = run.run_id
    tracker.client.update_run(first, status="RUNNING")  # a SIGKILL ends nothing: the run stays RUNNING
    with attempt_run(tracker, record, "ppo-resume", {"lr": 2e-6}, {"dagster.run_id": "relaunch"}, resume_at=2) as run:
        assert run.resumed and run.run_id == first
        for step in (2, 3):
            run.log_metrics(step, loss=1.0 / (step + 1))
    assert [r.info.run_id for r in runs_named(tracker, "ppo-resume")] == [first]  # one run, not two
    assert steps_of(tracker, first, "loss") == [0, 1, 2, 2, 3]  # after the resume, on from the checkpoint
    info = tracker.client.get_run(first)
    assert info.info.status == "FINISHED" and info.data.tags["socialrl.resumed_at"] == "2"
    assert info.data.tags["dagster.run_id"] == "relaunch" and info.data.tags["socialrl.domain"] == "d"
    assert "Resumed from the checkpoint at step 2" in info.data.tags["mlflow.note.content"]
    assert info.data.params == {"lr": "2e-06"}

    # Starting over (no checkpoint): a new run; the killed attempt's RUNNING run ends KILLED.
    with pytest.raises(HardKill), attempt_run(tracker, record, "sft-over") as killed:
        raise HardKill()
    tracker.client.update_run(killed.run_id, status="RUNNING")
    with attempt_run(tracker, record, "sft-over", resume_at=None) as run:
        assert not run.resumed and run.run_id != killed.run_id
        assert json.loads(record.read_text()) == {"run_id": run.run_id}
    assert tracker.run_status(killed.run_id) == "KILLED" and tracker.run_status(run.run_id) == "FINISHED"
    assert tracker.client.get_run(killed.run_id).data.tags["socialrl.superseded_by"] == run.run_id
    # A record naming a run this tracker does not have is not continued: a new run starts.
    record.write_text(json.dumps({"run_id": "0" * 32}))
    with attempt_run(tracker, record, "elsewhere", resume_at=5) as run:
        assert not run.resumed
    assert not [r for r in tracker.client.search_runs([tracker.experiment_id]) if r.info.status == "RUNNING"]


def test_a_resumed_specialist_keeps_one_mlflow_history(
    tracker: Tracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """train_specialist killed after two PPO iterations (checkpointed) and relaunched in the same work directory:
    the registered version's run holds iterations 0..3 as one history, and no run is left RUNNING."""
    from models.profiles import get_profile
    from models.socialrl import stage1
    from models.training import ppo
    from models.training.config import PPOResult

    output = tmp_path / "ppo"

    def metrics(iteration: int) -> dict:
        return {"iteration": iteration, "reward_mean": 0.1 * iteration, "kl": 0.01, "actor_trained": True}

    def killed(config, base, services, out, critic=None, init=None, on_iteration=None):
        for iteration in (0, 1):
            on_iteration(metrics(iteration))
        checkpoint = out / "checkpoints" / "it00002"
        checkpoint.mkdir(parents=True)
        (checkpoint / "state.json").write_text(json.dumps({"iteration": 2, "history": [metrics(0), metrics(1)]}))
        raise HardKill()

    def resumed(config, base, services, out, critic=None, init=None, on_iteration=None):
        for iteration in (2, 3):
            on_iteration(metrics(iteration))
        adapter = fake_adapter(out / "adapter", "resumed")
        return PPOResult(adapter, "ppo-v4", [metrics(i) for i in range(4)], resumed_from=2)

    profile = get_profile("smoke")
    args = ("casino-v0", profile, tmp_path, tmp_path, None, output, None, tracker, {"socialrl.domain": "c"})
    monkeypatch.setattr(ppo, "train_ppo", killed)
    with pytest.raises(HardKill):
        stage1.train_specialist(*args)
    (first,) = runs_named(tracker, "ppo-casino-v0")
    tracker.client.update_run(first.info.run_id, status="RUNNING")  # as a SIGKILL leaves it
    monkeypatch.setattr(ppo, "train_ppo", resumed)
    specialist = stage1.train_specialist(*args)
    assert specialist.mlflow_run_id == first.info.run_id and specialist.resumed_from == 2
    assert [r.info.run_id for r in runs_named(tracker, "ppo-casino-v0")] == [first.info.run_id]
    assert steps_of(tracker, specialist.mlflow_run_id, "ppo/reward_mean") == [0, 1, 2, 3]
    assert tracker.run_status(specialist.mlflow_run_id) == "FINISHED"
    assert tracker.get_version(specialist.model_name, specialist.model_version).run_id == specialist.mlflow_run_id
    assert not [r for r in tracker.client.search_runs([tracker.experiment_id]) if r.info.status == "RUNNING"]


# ------------------------------------------------------------------------------------------- registry
def test_register_promote_and_lookup(tracker: Tracker, tmp_path: Path) -> None:
    name = "socialrl-craigslist-specialist"
    run1, v1 = train_and_register(tracker, tmp_path, name, "first")
    assert v1 == 1
    assert tracker.aliases(name) == {CANDIDATE: 1}
    info = tracker.get_version(name, v1)
    assert info.run_id == run1 and info.aliases == (CANDIDATE,)

    # The first evaluated version becomes champion.
    assert tracker.promote_if_better(name, v1, "mean_reward", 0.50) is True
    assert tracker.aliases(name) == {CANDIDATE: 1, CHAMPION: 1}
    assert tracker.get_version(name, v1).evaluation() == {"mean_reward": 0.5}

    # A worse second version is registered as candidate but not promoted.
    _, v2 = train_and_register(tracker, tmp_path, name, "second")
    assert v2 == 2
    assert tracker.promote_if_better(name, v2, "mean_reward", 0.40) is False
    assert tracker.aliases(name) == {CANDIDATE: 2, CHAMPION: 1}
    assert tracker.get_version(name, v2).tags["eval.mean_reward"] == "0.4"

    # A better third one is.
    run3, v3 = train_and_register(tracker, tmp_path, name, "third")
    assert tracker.promote_if_better(name, v3, "mean_reward", 0.55) is True
    assert tracker.aliases(name) == {CANDIDATE: 3, CHAMPION: 3}
    assert tracker.get_version(name, v3).tags["socialrl.promoted_over"] == "1"
    # Re-evaluating the champion refreshes its stored value and keeps it.
    assert tracker.promote_if_better(name, v3, "mean_reward", 0.56) is True
    assert tracker.get_version(name, v3).evaluation() == {"mean_reward": 0.56}

    # Lookup by alias gives a local directory whose files are the logged ones.
    champion = tracker.lookup(name, CHAMPION)
    assert (champion.version, champion.run_id) == (3, run3)
    assert champion.adapter_name == f"{name}-v3"
    assert files_of(champion.path) == files_of(tmp_path / "third")
    assert set(champion.aliases) == {CANDIDATE, CHAMPION}
    old = tracker.lookup(name, alias=None, version=1)
    assert files_of(old.path) == files_of(tmp_path / "first")

    with pytest.raises(RegistryError, match="no alias"):
        tracker.lookup(name, "staging")
    with pytest.raises(RegistryError, match="no version"):
        tracker.lookup(name, alias=None, version=99)
    with pytest.raises(ValueError, match="exactly one"):
        tracker.lookup(name, alias=CHAMPION, version=1)


def test_lower_is_better_and_champion_listing(tracker: Tracker, tmp_path: Path) -> None:
    name = "socialrl-dnd-specialist"
    _, v1 = train_and_register(tracker, tmp_path, name, "a")
    _, v2 = train_and_register(tracker, tmp_path, name, "b")
    assert tracker.promote_if_better(name, v1, "invalid_rate", 0.2, higher_is_better=False)
    assert not tracker.promote_if_better(name, v2, "invalid_rate", 0.3, higher_is_better=False)
    assert tracker.promote_if_better(name, v2, "invalid_rate", 0.1, higher_is_better=False)
    with pytest.raises(ValueError, match="finite"):
        tracker.promote_if_better(name, v1, "invalid_rate", float("nan"))
    with pytest.raises(RegistryError):
        tracker.promote_if_better(name, 42, "invalid_rate", 0.0)

    train_and_register(tracker, tmp_path, "yoao-seed", "seed")  # a candidate without champion
    champions = {v.name: v.version for v in tracker.champion_versions()}
    assert champions[name] == v2
    assert "yoao-seed" not in champions
    assert [v.name for v in tracker.champion_versions(prefix="socialrl-dnd")] == [name]
    assert [v.name for v in tracker.champion_versions(alias=CANDIDATE, prefix="yoao")] == ["yoao-seed"]


def test_a_second_tracker_on_the_same_store_sees_the_registry(tracker: Tracker, tmp_path: Path) -> None:
    name = "socialrl-marketplace-specialist"
    _, version = train_and_register(tracker, tmp_path, name, "m")
    tracker.promote_if_better(name, version, "mean_reward", 0.3)
    other = Tracker(tracker.config)
    assert other.experiment_id == tracker.experiment_id
    local = other.lookup(name)
    assert files_of(local.path) == files_of(tmp_path / "m")


def test_model_store_resolves_registry_uris(tracker: Tracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from models.serving.model_store import ModelResolutionError, resolve_model

    _, version = train_and_register(tracker, tmp_path, "socialrl-uri-test", "uri")
    models = tmp_path / "models"
    by_alias = resolve_model("models:/socialrl-uri-test@candidate", models, tracker.config)
    by_version = resolve_model(f"models:/socialrl-uri-test/{version}", models, tracker.config)
    assert by_alias == by_version
    assert files_of(by_alias) == files_of(fake_adapter(tmp_path / "expected", "uri"))
    with pytest.raises(ModelResolutionError, match="cannot resolve"):
        resolve_model("models:/socialrl-uri-test@nonexistent", models, tracker.config)
    with pytest.raises(ModelResolutionError, match="expected models:/"):
        resolve_model("models:/a/b/c", models, tracker.config)
    with pytest.raises(ModelResolutionError, match="tracking configuration"):
        resolve_model("models:/socialrl-uri-test@candidate", models)


def test_plots_go_to_the_run_as_png_artifacts(tracker: Tracker) -> None:
    from models.plots import Series, line_with_band, markdown_image

    png = line_with_band(
        [Series("reward", [0, 1, 2], [0.1, 0.2, 0.4], [0.0, 0.1, 0.3], [0.2, 0.3, 0.5])],
        "learning curve",
        "iteration",
        "reward",
    )
    assert png.startswith(b"\x89PNG")
    with tracker.start_run("plots") as run:
        uri = run.log_file("curve.png", png, "plots")
    assert uri.endswith("/plots/curve.png")
    local = tracker.config.local_artifact_dir
    assert local is not None
    stored = list(local.rglob("plots/curve.png"))
    assert len(stored) == 1 and stored[0].read_bytes() == png
    assert markdown_image(png, "curve").startswith("![curve](data:image/png;base64,")


def test_the_code_state_reads_the_commit_and_uncommitted_changes(tmp_path: Path) -> None:
    """models/provenance.py: a result names the commit and whether tracked files differed; outside git, None."""
    import subprocess

    from models.provenance import code_state, git_commit

    assert code_state(tmp_path).commit is None and git_commit(tmp_path) is None
    run = {"cwd": tmp_path, "check": True, "capture_output": True}
    subprocess.run(["git", "init", "-q"], **run)
    (tmp_path / "a.txt").write_text("one\n")
    subprocess.run(["git", "add", "a.txt"], **run)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "a"], **run)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], text=True, **run).stdout.strip()
    (tmp_path / "untracked.txt").write_text("does not count\n")
    assert code_state(tmp_path).commit == sha and not code_state(tmp_path).uncommitted_changes
    (tmp_path / "a.txt").write_text("two\n")
    assert code_state(tmp_path).uncommitted_changes and git_commit(tmp_path) == f"{sha}-dirty"
    # Every result file's provenance reads the same state, with the machine's speed only where measured.
    from models.provenance import PROVENANCE_KEYS, provenance

    made = provenance(profile="cpu", repo=tmp_path)
    assert tuple(made) == PROVENANCE_KEYS
    assert made["commit"] == sha and made["uncommitted_changes"] and made["machine_update_tok_s"] is None
    assert made["env_version"] == env_version() and made["profile"] == "cpu"
    assert provenance(profile="smoke", machine_update_tok_s=2634.0, repo=tmp_path)["machine_update_tok_s"] == 2634.0


def test_a_failed_speed_measurement_leaves_the_run_its_numbers(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    """`machine_speed_or_none`: a benchmark that fails gives None and a warning, never an exception."""
    import logging

    from models import provenance

    def broken(timeout_s: float = 600.0) -> float:
        raise RuntimeError("bench_learner failed (exit 1)")

    monkeypatch.setattr(provenance, "measure_update_tok_s", broken)
    with caplog.at_level(logging.WARNING):
        assert provenance.machine_speed_or_none(logging.getLogger("socialrl.test")) is None
    assert "not measured: bench_learner failed" in caplog.text


def test_a_benchmark_extends_only_a_result_of_the_current_environment(tmp_path: Path) -> None:
    """`result_to_extend`: a benchmark adds arms or points to its file only where the file was measured on this
    environment version; an older file (or none) starts a new one, since results of two versions are never
    compared."""
    import logging

    from models.provenance import result_to_extend

    log = logging.getLogger("socialrl.test")
    path = tmp_path / "result.json"
    assert result_to_extend(path, log) == {}
    path.write_text(json.dumps({"env_version": "before-audit", "arms": {"a": 1}}))
    assert result_to_extend(path, log) == {}
    current = {"env_version": env_version(), "arms": {"a": 1}}
    path.write_text(json.dumps(current))
    assert result_to_extend(path, log) == current
