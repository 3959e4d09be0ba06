"""The Dagster code location: one Definitions object (loaded by workspace.yaml and [tool.dagster])."""

import json

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    Definitions,
    EnvVar,
    RunRequest,
    ScheduleDefinition,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    job,
    load_asset_checks_from_modules,
    load_assets_from_modules,
    sensor,
)

from assets import monitoring, socialrl, yoao
from models.profiles import get_profile
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource


def build_resources(profile: str | None = None, data_dir: str = "") -> dict[str, object]:
    """The resources of the code location (profile from $SOCIALRL_PROFILE unless given)."""
    settings = SettingsResource(profile=get_profile(profile).name, data_dir=data_dir)
    engine = EngineResource(settings=settings, remote_api_key=EnvVar("SOCIALRL_REMOTE_API_KEY").get_value("") or "")
    return {
        "settings": settings,
        "store": StoreResource(settings=settings),
        "engine": engine,
        "mlflow": MlflowResource(settings=settings),
    }


all_assets = load_assets_from_modules([socialrl, monitoring, yoao])
all_checks = load_asset_checks_from_modules([socialrl, yoao])

tournament_job = define_asset_job("tournament_job", AssetSelection.assets(socialrl.code_agent_tournament))
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
champion_evaluation_job = define_asset_job(
    "champion_evaluation_job", AssetSelection.assets(monitoring.champion_evaluations)
)
# The YOAO group for one held-out frame partition (pipelines/run_yoao.py runs every frame of the profile).
yoao_job = define_asset_job("yoao_job", AssetSelection.groups(yoao.GROUP), partitions_def=yoao.FRAMES)


@job
def model_version_evaluation_job() -> None:
    """Evaluates one newly registered model version (requested by `new_model_version_sensor`)."""
    monitoring.evaluate_model_version()


nightly_champion_evaluation = ScheduleDefinition(
    name="nightly_champion_evaluation",
    job=champion_evaluation_job,
    cron_schedule="0 2 * * *",
    default_status=DefaultScheduleStatus.RUNNING,
)


@sensor(job=model_version_evaluation_job, minimum_interval_seconds=300, default_status=DefaultSensorStatus.RUNNING)
def new_model_version_sensor(context: SensorEvaluationContext, mlflow: MlflowResource):
    """Requests an evaluation for every specialist version registered since the last tick (the cursor
    holds the newest version seen per model)."""
    seen: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
    requests = []
    for name, versions in mlflow.tracker().version_numbers(prefix="socialrl-").items():
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


defs = Definitions(
    assets=all_assets,
    asset_checks=all_checks,
    jobs=[
        tournament_job,
        traces_job,
        sft_job,
        specialist_job,
        stage1_job,
        champion_evaluation_job,
        model_version_evaluation_job,
        yoao_job,
    ],
    schedules=[nightly_champion_evaluation],
    sensors=[new_model_version_sensor],
    resources=build_resources(),
)
