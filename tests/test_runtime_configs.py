"""Every way of starting an engine serves the same model with the same engine settings, for every profile: the
UI's resources (pipelines/definitions.py), each job the command lines launch (run_lineage, run_stage2, run_tom,
run_yoao, through pipelines/launcher.py), the leaderboard's command line, `make play` and the local teacher. No engine starts: `VLLMEngine.start` hands the
config it was given back, and model references resolve to a directory named after them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from models.profiles import PROFILE_NAMES, get_profile
from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.engine_settings import EngineSettings
from models.settings import DataPaths

IDENTITY = {"model_path", "served_model_name", "api_key", "port"}
"""What differs between entry points by design: the weights' directory (compared as the reference), the served
name, the per-run token and the port."""


class Captured(Exception):
    """Raised by the patched `VLLMEngine.start` with the config the engine would have started with."""

    def __init__(self, config: EngineConfig) -> None:
        super().__init__("engine start captured")
        self.config = config


@pytest.fixture()
def no_engines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[tuple[str, Any]]]:
    """Patches engine starts and model resolution; yields the (reference, tracking config) of every resolution."""
    resolved: list[tuple[str, Any]] = []

    def start(self: VLLMEngine) -> VLLMEngine:
        raise Captured(self.config)

    def resolve(reference: str, models_dir: Path, tracking: Any = None) -> Path:
        resolved.append((reference, tracking))
        path = tmp_path / "resolved" / reference.replace("/", "__")
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text("{}")
        return path

    monkeypatch.setattr(VLLMEngine, "start", start)
    for module in ("resources.engine", "models.serving.local", "models.cli.play", "assets.yoao"):
        monkeypatch.setattr(f"{module}.resolve_model", resolve)
    yield resolved


def captured(start: Callable[[], Any]) -> EngineConfig:
    """The config `start()` would have started an engine with."""
    with pytest.raises(Captured) as caught:
        start()
    return caught.value.config


def served(config: EngineConfig) -> tuple[str, dict[str, Any]]:
    """(model reference, engine settings) of a captured config."""
    settings = {k: v for k, v in dataclasses.asdict(config).items() if k not in IDENTITY}
    return config.model_path.name.replace("__", "/"), settings


def resource_engine(resources: dict[str, Any], key: str) -> EngineConfig:
    from dagster import DagsterInstance, build_init_resource_context

    def start() -> None:
        with (
            DagsterInstance.ephemeral() as instance,
            resources[key].yield_for_execution(build_init_resource_context(instance=instance)),
        ):
            pass

    return captured(start)


@pytest.mark.parametrize("name", PROFILE_NAMES)
def test_every_entry_point_serves_the_profiles_model_and_engine(
    name: str, tmp_path: Path, no_engines: list[tuple[str, Any]]
) -> None:
    from models.cli import evaluate_endpoint, play
    from models.socialrl.teachers import TeacherConfig, open_teacher
    from pipelines.definitions import build_definitions
    from resources import SettingsResource

    profile = get_profile(name)
    data = tmp_path / "data"
    paths = DataPaths(data)
    ui = build_definitions(name, str(data)).resources
    base, yoao = profile.base_model, profile.yoao.resolved(profile.base_model).model
    engines: dict[str, tuple[str, dict[str, Any]]] = {
        "ui engine": served(resource_engine(ui, "engine")),
        "ui yoao_engine": served(resource_engine(ui, "yoao_engine")),
        **{
            f"{command}: {job}": served(resource_engine(launcher.definitions.resources, engine_key(job)))
            for command, launcher, job in launched_jobs(name, data)
            if engine_key(job) in launcher.definitions.resolve_job_def(job).required_resource_keys
        },
        "evaluate_endpoint": served(
            captured(
                lambda: evaluate_endpoint.main(
                    ["--model", base, "--profile", name, "--data-dir", str(data), "--domains", "dnd-v0"]
                )
            )
        ),
        "play": served(captured(lambda: play.local_serving(profile, paths, tracking(paths)).start())),
        "local teacher": served(
            captured(lambda: open_teacher(TeacherConfig(source="local"), profile, paths).__enter__())
        ),
    }
    expected = {f.name: getattr(profile.engine, f.name) for f in dataclasses.fields(EngineSettings)}
    # The YOAO engine: the profile's engine with the YOAO group's KV cache and context length where it sets them.
    yoao_cache = profile.yoao.kv_cache_gib
    yoao_own = {"kv_cache_gib": yoao_cache, "max_model_len": profile.yoao.max_model_len}
    expected_yoao = {**expected, **{k: v for k, v in yoao_own.items() if v is not None}}
    for entry, (model, settings) in engines.items():
        is_yoao = "yoao" in entry
        assert model == (yoao if is_yoao else base), entry
        want = expected_yoao if is_yoao else expected
        assert {k: settings[k] for k in want} == want, entry  # every engine setting of the profile
        assert settings == engines["ui yoao_engine" if is_yoao else "ui engine"][1], entry  # nothing else differs
    if yoao_cache is not None:
        assert engines["ui yoao_engine"][1]["kv_cache_gib"] == yoao_cache != engines["ui engine"][1]["kv_cache_gib"]
    if profile.yoao.max_model_len is not None:
        assert engines["ui yoao_engine"][1]["max_model_len"] == profile.yoao.max_model_len
    # The YOAO seeds train on the model the YOAO engine serves (the paper: Qwen3-14B, not the SocialRL 4B).
    from assets.yoao import _base_model_dir

    seeds = _base_model_dir(SettingsResource(profile=name, data_dir=str(data)))
    assert seeds.name.replace("__", "/") == yoao
    if name == "paper":
        assert (base, yoao) == ("Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-14B")


def engine_key(job: str) -> str:
    return "yoao_engine" if job == "yoao_job" else "engine"


def launched_jobs(profile: str, data: Path) -> list[tuple[str, Any, str]]:
    """(command, its launcher, job) of every job each command line launches (run_lineage, run_stage2, run_tom,
    run_yoao), caught at `Launcher.run` (which answers that the run failed, so each command stops early)."""
    from pipelines.launcher import LaunchedRun, Launcher
    from pipelines.run_lineage import run_lineage
    from pipelines.run_stage2 import run_stage2
    from pipelines.run_tom import run_tom
    from pipelines.run_yoao import run_yoao

    launched: list[tuple[str, Any, str]] = []

    def run(self: Launcher, job: str, partition: str | None = None, *args: Any, **kwargs: Any) -> LaunchedRun:
        launched.append((self.launched_by, self, job))
        return LaunchedRun(
            job=job, partition=partition, success=False, seconds=0.0, run_id="", error="stopped by the test"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Launcher, "run", run)
        run_lineage(profile, ("craigslist-v0",), with_monitoring=True, data=data)
        run_stage2(profile, ("craigslist-v0",), data)
        run_tom(profile, ("craigslist-v0",), data)
        run_yoao(profile, data, data / "yoao.json")
    jobs = {(command, job) for command, _, job in launched}
    assert {("make run", "stage1_job"), ("make run", "champion_evaluation_job"), ("run_stage2", "stage2_job"),
            ("run_tom", "tom_job"), ("run_yoao", "yoao_job")} <= jobs  # fmt: skip
    return launched


def tracking(paths: DataPaths):
    from models.tracking import TrackingConfig

    return TrackingConfig.from_env(paths)


def test_each_job_uses_the_engine_of_its_paper() -> None:
    """yoao_job's assets use `yoao_engine` only; no other job starts it."""
    from pipelines.definitions import JOBS, build_definitions

    defs = build_definitions("smoke", "")
    for job in JOBS:
        keys = defs.resolve_job_def(job.name).required_resource_keys
        if job.name == "yoao_job":
            assert "yoao_engine" in keys and "engine" not in keys
        else:
            assert "yoao_engine" not in keys, job.name


def test_the_engine_resource_looks_models_up_in_the_mlflow_resources_registry(
    tmp_path: Path, no_engines: list[tuple[str, Any]]
) -> None:
    """One derivation of the tracking config (`TrackingConfig.from_env`): the MLflow resource's URI is where the
    engine resource resolves `models:/` references, and the command lines derive the same default."""
    from models.tracking import TrackingConfig
    from pipelines.definitions import build_resources
    from resources import EngineResource, MlflowResource

    data = tmp_path / "data"
    resources = build_resources("smoke", str(data))
    resource_engine(resources, "engine")
    assert no_engines[-1] == ("tiny-random-llama", resources["mlflow"].config())
    assert resources["mlflow"].config() == TrackingConfig.from_env(DataPaths(data))  # the command lines' derivation
    elsewhere = f"sqlite:///{tmp_path}/elsewhere.db"
    mlflow = MlflowResource(settings=resources["settings"], tracking_uri=elsewhere)
    engine = EngineResource(
        settings=resources["settings"], mlflow=mlflow, model="models:/socialrl-dnd-specialist@champion"
    )
    resource_engine({"engine": engine}, "engine")
    reference, tracking = no_engines[-1]
    assert reference == "models:/socialrl-dnd-specialist@champion" and tracking.tracking_uri == elsewhere
