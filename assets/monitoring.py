"""Re-evaluation of registered models: the nightly champion evaluation and the evaluation of a newly
registered model version (requested by a sensor). Both append to the `evaluations` table, which is the
evaluation history (one run id per evaluation, rows per counterpart and pooled)."""

from datetime import UTC, datetime

from dagster import AssetExecutionContext, Config, MetadataValue, OpExecutionContext, Output, asset, op

from environments import SOCIALRL_ENV_IDS
from models.evaluation.policy import store_evaluation
from models.socialrl import stage1
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

GROUP = "monitoring"


def _env_of(model_name: str) -> str | None:
    for env_id in SOCIALRL_ENV_IDS:
        if stage1.registered_name(env_id) == model_name:
            return env_id
    return None


def _evaluate_version(
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
    model_name: str,
    version: int,
    run_id: str,
    seed: int,
) -> dict[str, float]:
    env_id = _env_of(model_name)
    if env_id is None:
        raise ValueError(f"{model_name} is not a SocialRL specialist name")
    profile = settings.get_profile()
    local = mlflow.tracker().lookup(model_name, alias=None, version=version)
    served = stage1.serve_adapter(engine.client, f"{env_id}-v{version}", local.path)
    result = stage1.evaluate_model(
        env_id, profile, engine.proxy_base_url, served.name, seed=seed, api_key=engine.proxy_api_key
    )
    store_evaluation(store.store(), result, f"{model_name}@v{version}", run_id)
    return result.summary.as_dict()


@asset(group_name=GROUP, kinds={"vllm", "mlflow", "duckdb"})
def champion_evaluations(
    context: AssetExecutionContext,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[dict]:
    """Every registered champion re-evaluated on fresh held-out scenarios (seeded by the date), appended to
    the `evaluations` history. Materialised nightly by a schedule."""
    today = datetime.now(UTC).strftime("%Y%m%d")
    rows = {}
    for version in mlflow.tracker().champion_versions(prefix="socialrl-"):
        summary = _evaluate_version(
            settings, store, engine, mlflow, version.name, version.version, f"nightly-{today}", int(today)
        )
        rows[f"{version.name}@v{version.version}"] = summary["mean_reward"]
    table = "\n".join(f"| {k} | {v:.3f} |" for k, v in rows.items()) or "| (no champions yet) | |"
    return Output(
        rows,
        metadata={
            "champions": len(rows),
            "mean_reward": MetadataValue.md("| model | mean reward |\n|---|---|\n" + table),
        },
    )


class VersionToEvaluate(Config):
    """A registered model version to evaluate."""

    model_name: str
    version: int


@op
def evaluate_model_version(
    context: OpExecutionContext,
    config: VersionToEvaluate,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> dict:
    """Evaluates one registered version on the held-out scenarios and stores the result on the version."""
    run_id = f"version-{config.model_name}-v{config.version}-{context.run_id[:8]}"
    summary = _evaluate_version(settings, store, engine, mlflow, config.model_name, config.version, run_id, 0)
    mlflow.tracker().record_evaluation(config.model_name, config.version, {"mean_reward": summary["mean_reward"]})
    context.log.info(f"{config.model_name} v{config.version}: mean reward {summary['mean_reward']:.3f}")
    return summary
