"""The Dagster code location: one Definitions object (loaded by workspace.yaml and [tool.dagster]).

What runs on its own once the daemon is up (`make ui`):

| automation | default | what it starts |
| --- | --- | --- |
| schedule `nightly_champion_evaluation` | RUNNING | every day at 02:00 UTC, `nightly_job`: `champion_evaluations` (one vLLM engine, every champion on fresh held-out scenarios; the point of the nightly re-evaluation), then `paper_report` (the papers' report regenerated from what the instance holds, seconds) |
| sensor `new_model_version_sensor` | STOPPED, unless $SOCIALRL_EVALUATE_NEW_VERSIONS is 1/true (`make ui EVALUATE_NEW_VERSIONS=1`) | one evaluation run (its own vLLM engine) per model version (specialists, `socialrl-cascade`, `socialrl-mopd`) registered after the sensor's first tick |

On its first tick the sensor only notes the versions already registered (a registry filled by `make run`
does not turn into a burst of evaluation runs when the sensor is switched on); later ticks request every
version registered since, once each (the cursor holds the newest version seen per model).
"""

import json
import logging
import re
import warnings
from pathlib import Path

from dagster import (
    AssetSelection,
    BetaWarning,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    EnvVar,
    Field,
    RunRequest,
    ScheduleDefinition,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    in_process_executor,
    job,
    load_asset_checks_from_modules,
    load_assets_from_modules,
    logger,
    sensor,
)
from dagster._loggers import colored_console_logger

from assets import (
    behaviour,
    incentives,
    leaderboard,
    monitoring,
    report,
    socialrl,
    stage2,
    tom,
    yoao,
    yoao_experiments,
)
from models.profiles import get_profile
from models.tracking.links import DAGSTER_UI_URL, MLFLOW_UI_URL
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

# Binding the sensor to its job, Dagster copies it with its own (empty) owners and then warns that the `owners`
# parameter is in beta, once per load of the code location on `make ui`'s console; no owners are set here.
warnings.filterwarnings(
    "ignore", message=re.escape("Parameter `owners` of initializer `SensorDefinition.__init__`"), category=BetaWarning
)


def build_resources(
    profile: str | None = None, data_dir: str = "", stage2_specialists: bool = False
) -> dict[str, object]:
    """The resources of the code location (profile from $SOCIALRL_PROFILE unless given; `stage2_specialists`:
    stage 1 sized as `run_stage2` trains its specialists). Two engines: `engine` serves the profile's base model
    to the SocialRL groups, `yoao_engine` the YOAO group's (`yoao.model`, which its seeds train on); a run
    starts only the one its assets use."""
    settings = SettingsResource(
        profile=get_profile(profile).name, data_dir=data_dir, stage2_specialists=stage2_specialists
    )
    links = {  # where `make ui` serves the two UIs (pipelines/ui.py passes its ports)
        "ui_url": EnvVar(MLFLOW_UI_URL_ENV).get_value("") or MLFLOW_UI_URL,
        "dagster_ui_url": EnvVar(DAGSTER_UI_URL_ENV).get_value("") or DAGSTER_UI_URL,
    }
    mlflow = MlflowResource(settings=settings, **links)
    remote_api_key = EnvVar("SOCIALRL_REMOTE_API_KEY").get_value("") or ""
    return {
        "settings": settings,
        "store": StoreResource(settings=settings),
        "engine": EngineResource(settings=settings, mlflow=mlflow, remote_api_key=remote_api_key),
        "yoao_engine": EngineResource(settings=settings, mlflow=mlflow, for_yoao=True, remote_api_key=remote_api_key),
        "mlflow": mlflow,
    }


EVALUATE_NEW_VERSIONS_ENV = "SOCIALRL_EVALUATE_NEW_VERSIONS"
"""Set to 1/true to start `new_model_version_sensor` RUNNING (the code location's edge reads it)."""
MLFLOW_UI_URL_ENV = "SOCIALRL_MLFLOW_UI_URL"
"""The MLflow UI that asset metadata links to (default http://127.0.0.1:5000; `make ui` sets it)."""
DAGSTER_UI_URL_ENV = "SOCIALRL_DAGSTER_UI_URL"
"""The Dagster UI that MLflow runs link back to (default http://127.0.0.1:3000; `make ui` sets it)."""


def new_version_sensor_status(value: str | None) -> DefaultSensorStatus:
    """RUNNING when `value` (of $SOCIALRL_EVALUATE_NEW_VERSIONS) says yes, else STOPPED."""
    yes = (value or "").strip().lower() in ("1", "true", "yes", "on")
    return DefaultSensorStatus.RUNNING if yes else DefaultSensorStatus.STOPPED


all_assets = load_assets_from_modules(
    [incentives, socialrl, stage2, monitoring, tom, behaviour, leaderboard, yoao, yoao_experiments, report]
)
all_checks = load_asset_checks_from_modules([incentives, socialrl, stage2, yoao, yoao_experiments])

tournament_job = define_asset_job("tournament_job", AssetSelection.assets(socialrl.code_agent_tournament))
# The incentive audit of the price environments (code only, seconds): before anything is trained on them.
incentives_job = define_asset_job("incentives_job", AssetSelection.groups(incentives.GROUP))
traces_job = define_asset_job("traces_job", AssetSelection.assets(socialrl.scenarios, socialrl.teacher_traces))
sft_job = define_asset_job("sft_job", AssetSelection.assets(socialrl.sft_warmstart))
specialist_job = define_asset_job(
    "specialist_job",
    AssetSelection.assets(socialrl.specialist, socialrl.specialist_eval, socialrl.specialist_champion),
)
stage1_job = define_asset_job(
    "stage1_job",
    AssetSelection.groups(socialrl.GROUP) - AssetSelection.assets(socialrl.code_agent_tournament),
)
# In one process, so the five assets share one vLLM engine and proxy (a process per step would start one each).
stage2_job = define_asset_job("stage2_job", AssetSelection.groups(stage2.GROUP), executor_def=in_process_executor)
champion_evaluation_job = define_asset_job(
    "champion_evaluation_job", AssetSelection.assets(monitoring.champion_evaluations)
)
# The papers' report alone (`make report`): it reads the instance, so it needs no stage in its run.
report_job = define_asset_job("report_job", AssetSelection.assets(report.paper_report))
# The nightly re-evaluation, then the report over its results (paper_report's one edge orders the two).
nightly_job = define_asset_job(
    "nightly_job",
    AssetSelection.assets(monitoring.champion_evaluations, report.paper_report),
    executor_def=in_process_executor,
)
tom_job = define_asset_job("tom_job", AssetSelection.groups(tom.GROUP))
behaviour_job = define_asset_job("behaviour_job", AssetSelection.groups(behaviour.GROUP))
leaderboard_job = define_asset_job("leaderboard_job", AssetSelection.assets(leaderboard.endpoint_leaderboard))
# The YOAO group for one held-out frame partition (pipelines/run_yoao.py runs every frame of the profile).
yoao_job = define_asset_job("yoao_job", AssetSelection.groups(yoao.GROUP), partitions_def=yoao.FRAMES)


@job
def model_version_evaluation_job() -> None:
    """Evaluates one newly registered model version (requested by `new_model_version_sensor`)."""
    monitoring.evaluate_model_version()


nightly_champion_evaluation = ScheduleDefinition(
    name="nightly_champion_evaluation",
    job=nightly_job,
    cron_schedule="0 2 * * *",
    default_status=DefaultScheduleStatus.RUNNING,
)


@sensor(
    job=model_version_evaluation_job,
    minimum_interval_seconds=300,
    default_status=new_version_sensor_status(EnvVar(EVALUATE_NEW_VERSIONS_ENV).get_value("")),
)
def new_model_version_sensor(context: SensorEvaluationContext, mlflow: MlflowResource):
    """Requests an evaluation for every specialist version registered since the last tick (the cursor holds
    the newest version seen per model). The first tick (no cursor) only notes what is registered already."""
    seen: dict[str, int] | None = json.loads(context.cursor) if context.cursor else None
    current = mlflow.tracker().version_numbers(prefix="socialrl-")
    if seen is None:
        baseline = {name: versions[-1] for name, versions in current.items() if versions}
        context.update_cursor(json.dumps(baseline, sort_keys=True))
        count = sum(len(v) for v in current.values())
        return SkipReason(f"first tick: {count} versions registered earlier are not evaluated; new ones will be")
    requests = []
    for name, versions in current.items():
        for version in versions:
            if version > seen.get(name, 0):
                config = {"model_name": name, "version": version}
                requests.append(
                    RunRequest(
                        run_key=f"{name}-v{version}",
                        run_config={"ops": {"evaluate_model_version": {"config": config}}},
                    )
                )
        if versions:
            seen[name] = max(versions[-1], seen.get(name, 0))
    context.update_cursor(json.dumps(seen, sort_keys=True))
    return requests or SkipReason("no new model versions")


@logger(
    config_schema={
        "path": Field(str, description="File the run's events are appended to."),
        "log_level": Field(str, default_value="DEBUG"),
    },
    description="Every event of a run appended to a file (`make run` keeps the console for people).",
)
def file_logger(init_context) -> logging.Logger:
    config = init_context.logger_config
    path = Path(config["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    events = logging.Logger(f"dagster-file-{path.name}", level=config["log_level"].upper())
    events.addHandler(handler)
    return events


JOBS = [
    tournament_job,
    incentives_job,
    traces_job,
    sft_job,
    specialist_job,
    stage1_job,
    stage2_job,
    champion_evaluation_job,
    model_version_evaluation_job,
    report_job,
    nightly_job,
    tom_job,
    behaviour_job,
    leaderboard_job,
    yoao_job,
]

LINEAGE = (
    ("tournament_job", False),
    ("incentives_job", False),
    ("stage1_job", True),
    ("champion_evaluation_job", False),
)
"""What `make run` launches, in order: (job, partitioned by domain). The UI runs the same jobs."""


def build_definitions(profile: str | None = None, data_dir: str = "", stage2_specialists: bool = False) -> Definitions:
    """The code location with resources for `profile` and `data_dir` (defaults: $SOCIALRL_PROFILE and
    $SOCIALRL_DATA_DIR, read at this edge); `make run` and `run_stage2` build it for their own arguments."""
    return Definitions(
        assets=all_assets,
        asset_checks=all_checks,
        jobs=JOBS,
        schedules=[nightly_champion_evaluation],
        sensors=[new_model_version_sensor],
        resources=build_resources(profile, data_dir, stage2_specialists),
        loggers={"console": colored_console_logger, "file": file_logger},
    )


defs = build_definitions()
