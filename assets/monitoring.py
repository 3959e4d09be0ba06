"""Re-evaluation of registered models: the nightly champion evaluation and the evaluation of a newly
registered model version (requested by a sensor). Both append to the `evaluations` table (one run id per
evaluation, rows per counterpart and pooled) and record the result on the model version with its history
(`Tracker.record_evaluation_history`: the latest values as version tags `eval.<suite>.<metric>`, every
evaluation as a point of metric `trend/<suite>/<metric>` on the version's training run). Suites: "nightly"
(fresh held-out scenarios seeded by the date) and "heldout" (the profile's held-out scenarios, seed 0).
A specialist is evaluated on its domain; a stage-2 policy (`socialrl-cascade`, `socialrl-mopd`) on each domain
of its `socialrl.domains` tag, summarised over all of them (equal episode counts: the mean of the domains)."""

import dataclasses
import logging
from datetime import UTC, datetime

from dagster import AssetExecutionContext, Config, MetadataValue, OpExecutionContext, Output, asset, op

from assets import socialrl
from assets import stage2 as stage2_assets
from assets.common import mlflow_links
from environments import SOCIALRL_ENV_IDS
from models.display import display_json, display_metadata, format_number
from models.evaluation.policy import EvaluationResult, EvaluationSummary, store_evaluation, summarise
from models.evaluation.transcripts import representative_transcripts, transcripts_markdown
from models.serving.adapters import serve_adapter
from models.socialrl import stage1, stage2
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

GROUP = "monitoring"
log = logging.getLogger("socialrl.monitoring")
"""Progress and results on the console (`make run`) and in the run's Events (a Dagster-managed logger)."""


def _env_of(model_name: str) -> str | None:
    for env_id in SOCIALRL_ENV_IDS:
        if stage1.registered_name(env_id) == model_name:
            return env_id
    return None


def _domains_of(model_name: str, tags: dict[str, str], settings: SettingsResource) -> list[str]:
    """A specialist's own domain; a stage-2 policy's domains (its version tag, else the profile's stage 2)."""
    env_id = _env_of(model_name)
    if env_id is not None:
        return [env_id]
    if model_name in (stage2.CASCADE_MODEL, stage2.MOPD_MODEL):
        tagged = [d for d in tags.get(stage2.DOMAINS_TAG, "").split(",") if d]
        return tagged or list(settings.get_profile().stage2.domains)
    raise ValueError(f"{model_name} is neither a SocialRL specialist nor a stage-2 policy")


def _evaluate_version(
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
    model_name: str,
    version: int,
    run_id: str,
    seed: int,
) -> list[EvaluationResult]:
    """The version on each of its domains (one for a specialist)."""
    profile = settings.get_profile()
    local = mlflow.tracker().lookup(model_name, alias=None, version=version)
    domains = _domains_of(model_name, local.tags, settings)
    served = serve_adapter(engine.client, f"{model_name.removeprefix('socialrl-')}-v{version}", local.path)
    results = []
    for env_id in domains:
        result = stage1.evaluate_model(
            env_id, profile, engine.proxy_base_url, served, seed=seed, api_key=engine.proxy_api_key
        )
        suffix = "" if len(domains) == 1 else f"@{env_id}"
        store_evaluation(store.store(), result, f"{model_name}@v{version}{suffix}", run_id)
        results.append(result)
    return results


def _summary(results: list[EvaluationResult]) -> EvaluationSummary:
    """One domain's summary, or every domain's episodes summarised together (scenarios kept apart as clusters)."""
    if len(results) == 1:
        return results[0].summary
    episodes = [
        dataclasses.replace(e, scenario_index=k * 1_000_000 + e.scenario_index)
        for k, r in enumerate(results)
        for e in r.policy_episodes
    ]
    return summarise(episodes, results[0].summary.confidence, results[0].summary.ci_method, results[0].seed)


# The edges to what it evaluates: the specialists' champion alias (moved by specialist_champion) and the stage-2
# policies' (moved by unified_evaluation). Non-argument dependencies: it reads the registry, not their outputs.
@asset(
    group_name=GROUP,
    kinds={"vllm", "mlflow", "duckdb"},
    deps=[socialrl.specialist_champion, stage2_assets.unified_evaluation],
)
def champion_evaluations(
    context: AssetExecutionContext,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[dict]:
    """Every registered champion re-evaluated on fresh held-out scenarios (seeded by the date), appended to
    the `evaluations` history: each specialist on its domain, the stage-2 cascade and MOPD policies on each of
    their domains (summarised over them). Materialised nightly by a schedule."""
    now = datetime.now(UTC)
    today = now.strftime("%Y%m%d")
    tracker, links = mlflow.tracker(), mlflow.links()
    rows: dict[str, float] = {}
    report: dict[str, dict] = {}
    lines, transcripts = [], []
    champions = tracker.champion_versions(prefix="socialrl-")
    for k, version in enumerate(champions):
        label = f"{version.name}@v{version.version}"
        run_id = f"nightly-{today}"
        log.info("nightly evaluation %d/%d: %s", k + 1, len(champions), label)
        results = _evaluate_version(settings, store, engine, mlflow, version.name, version.version, run_id, int(today))
        summary = _summary(results)
        tracker.record_evaluation_history(version.name, version.version, summary, "nightly", when=now, source=run_id)
        rows[label] = summary.mean_reward
        report[label] = {"run_id": run_id, **summary.as_dict()}
        run_link = (
            f"[{version.run_id[:8]}]({links.mlflow_run(tracker.experiment_id, version.run_id)})"
            if version.run_id
            else ""
        )
        lines.append(
            f"| [{label}]({links.mlflow_version(version.name, version.version)}) | {format_number(summary.mean_reward)} | "
            f"[{format_number(summary.ci_low)}, {format_number(summary.ci_high)}] | {summary.n} | "
            f"{format_number(summary.agreement_rate)} | {run_link} |"
        )
        if version.run_id:
            mlflow_links(context, mlflow, version.run_id)  # the training run links to this nightly run
        for result in results:
            title = label if len(results) == 1 else f"{label} on {result.env_id}"
            transcripts.append(transcripts_markdown(representative_transcripts(result, title), title=title))
        log.info(
            "nightly %s: mean reward %.3f [%.3f, %.3f] (n=%d), agreement %.2f",
            label, summary.mean_reward, summary.ci_low, summary.ci_high, summary.n, summary.agreement_rate,
        )  # fmt: skip
    table = "\n".join(lines) or "| (no champions yet) | | | | | |"
    return Output(
        rows,
        metadata={
            **display_metadata({"champions": len(rows)}),
            "mean_reward": MetadataValue.md(
                "| model | mean reward | 95% CI | n | agreement | MLflow training run |\n|---|---|---|---|---|---|\n"
                + table
            ),
            "transcripts": MetadataValue.md("\n\n".join(transcripts) or "*no champions yet*"),
            "report": MetadataValue.json(display_json(report)),  # make run's report reads it (nightly)
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
    """Evaluates one registered version on the held-out scenarios and stores the result on the version: the
    promotion value `eval.mean_reward`, and the whole summary with its history (suite "heldout")."""
    run_id = f"version-{config.model_name}-v{config.version}-{context.run_id[:8]}"
    results = _evaluate_version(settings, store, engine, mlflow, config.model_name, config.version, run_id, 0)
    summary = _summary(results)
    tracker = mlflow.tracker()
    # A specialist's value is measured on its domain's held-out plan: recorded with it, as specialist_eval does.
    env_id = _env_of(config.model_name)
    measured = stage1.result_measurement(env_id, settings.get_profile(), results[0]) if env_id else None
    tracker.record_evaluation(config.model_name, config.version, {"mean_reward": summary.mean_reward}, measured)
    tracker.record_evaluation_history(config.model_name, config.version, summary, "heldout", source=run_id)
    log.info(
        "%s v%s: held-out mean reward %.3f [%.3f, %.3f] (n=%d)",
        config.model_name, config.version, summary.mean_reward, summary.ci_low, summary.ci_high, summary.n,
    )  # fmt: skip
    return summary.as_dict()
