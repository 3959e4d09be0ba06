"""Behaviour analysis as Dagster assets: `behaviour_report` over every policy's recorded episodes, and the
privacy red team `privacy_red_team` (models/socialrl/behaviour.py and red_team.py document them)."""

import json
from pathlib import Path

from dagster import AssetExecutionContext, AssetKey, AssetRecordsFilter, MetadataValue, Output, asset

from agents.llm_agent import LLMAgent, LLMAgentConfig
from assets.common import execution_id, mlflow_links
from assets.configs import RedTeamConfig
from assets.leaderboard import endpoint_leaderboard
from environments.core.runtime import Agent
from models.evaluation.policy import store_evaluation
from models.plots import markdown_image
from models.serving.adapters import serve_adapter
from models.serving.model_store import ModelResolutionError, resolve_model
from models.socialrl import behaviour, red_team
from models.tracking import RegistryError, Tracker
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

GROUP = "behaviour"


def _sft_adapter(context: AssetExecutionContext, tracker: Tracker, domain: str) -> Path | None:
    """The adapter of the latest `sft_warmstart` of `domain` (logged to MLflow by that run)."""
    records = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey("sft_warmstart"), asset_partitions=[domain]), limit=1
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    entry = records[0].asset_materialization.metadata.get("mlflow_run_id")
    run_id = getattr(entry, "value", None)
    if not run_id:
        return None
    uri = tracker.client.get_run(run_id).info.artifact_uri
    path = Path(uri.removeprefix("file://")) / "adapter"
    return path if (path / "adapter_config.json").is_file() else None


def _resolve(
    context: AssetExecutionContext, reference: str, domain: str, settings: SettingsResource, tracker: Tracker
) -> Path | str | None:
    """ "base", or the adapter directory a policy reference names for `domain` (None: it does not exist yet)."""
    if reference == "base":
        return "base"
    if reference == "sft_warmstart":
        return _sft_adapter(context, tracker, domain)
    try:
        return resolve_model(
            reference.format(domain=domain.removesuffix("-v0")), settings.paths().models, tracker.config
        )
    except (ModelResolutionError, RegistryError):
        return None


@asset(group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def privacy_red_team(
    context: AssetExecutionContext,
    config: RedTeamConfig,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[red_team.RedTeamReport]:
    """Leak rate of each policy (base, SFT warm-start, specialist champion) as the principal in the SRBench
    whimsical-privacy marketplace and calendar scenarios, against an adversary that asks, pressures and
    tricks for the private values (the code extractor, or an LLM through any endpoint); paired CIs against
    the base model on the same episodes."""
    profile = settings.get_profile()
    tracker = mlflow.tracker()
    run_tag = execution_id(context)
    adversary, name = None, "extractor"
    if config.extractor_base_url:
        adversary = red_team.llm_adversary(
            config.extractor_base_url, config.extractor_model, profile.red_team.max_new_tokens,
            config.extractor_api_key or None,
        )  # fmt: skip
        name = f"llm-extractor({config.extractor_model})"
    domains, skipped = [], {}
    for env_id in red_team.RED_TEAM_DOMAINS:
        policies: dict[str, object] = {}
        for label, reference in config.policies.items():
            target = _resolve(context, reference, env_id, settings, tracker)
            if target is None:
                skipped[f"{env_id}:{label}"] = f"{reference} does not resolve yet"
                continue
            served = "base" if target == "base" else serve_adapter(
                engine.client, f"redteam-{label}-{env_id}", Path(target)
            )  # fmt: skip

            def make(seed: int, model: str = served) -> Agent:
                return LLMAgent(
                    LLMAgentConfig(
                        base_url=engine.proxy_base_url, model=model, api_key_env=None, api_key=engine.proxy_api_key,
                        temperature=0.7,
                        max_tokens=profile.red_team.max_new_tokens, seed=seed, fail_on_request_error=False,
                    )
                )  # fmt: skip

            policies[label] = make
        if not policies:
            continue
        scenarios = red_team.red_team_scenarios(env_id, profile.red_team.scenarios, config.seed)
        summary, results = red_team.red_team_domain(env_id, scenarios, policies, adversary, name, config.seed)
        for label, evaluations in results.items():
            for result in evaluations:  # one per principal seat; one run id, so the behaviour report reads both
                store_evaluation(store.store(), result, f"redteam:{label}", f"redteam-{run_tag}-{label}-{env_id}")
        domains.append(summary)
    report = red_team.RedTeamReport(tuple(domains), skipped)
    with tracker.start_run("privacy-red-team", params={"profile": profile.name, "extractor": name}) as run:
        run.log_file("red_team.json", json.dumps(report.as_dict(), indent=1), "results")
    return Output(
        report,
        metadata={
            "leak_rates": MetadataValue.md(report.markdown()),
            "skipped": MetadataValue.json(skipped),
            "extractor": name,
            "mlflow_run_id": run.run_id,
            **mlflow_links(context, mlflow, run.run_id),
        },
    )


@asset(group_name=GROUP, kinds={"duckdb", "mlflow"}, deps=[privacy_red_team, endpoint_leaderboard])
def behaviour_report(
    context: AssetExecutionContext, settings: SettingsResource, store: StoreResource, mlflow: MlflowResource
) -> Output[behaviour.BehaviourReport]:
    """Per policy and domain, over each policy's latest evaluation in the tables (base, SFT, PPO, ToM arms,
    leaderboard endpoints, red team): anchoring of the opening offer, the concession curve, rejection and
    counter-offer rates, commitment language, leaks and over-conceding; plots per domain. It reads the tables,
    so it covers whatever was evaluated; the red team and the leaderboard come first when run together."""
    report = behaviour.behaviour_report(store.store())
    plots = behaviour.behaviour_plots(report)
    path = settings.paths().reports / f"behaviour-{context.run.run_id[:8]}.json"
    path.write_text(json.dumps(report.as_dict(), indent=1))
    with mlflow.tracker().start_run("behaviour-report", params={"profile": settings.get_profile().name}) as run:
        for name, png in plots.items():
            run.log_file(name, png, "plots")
        run.log_file("behaviour.json", json.dumps(report.as_dict(), indent=1), "results")
    return Output(
        report,
        metadata={
            "episodes": report.episodes,
            "policies": len({s.policy for s in report.summaries}),
            "behaviour": MetadataValue.md(report.markdown()),
            **{name.removesuffix(".png"): MetadataValue.md(markdown_image(png, name)) for name, png in plots.items()},
            "report": str(path),
            "mlflow_run_id": run.run_id,
            **mlflow_links(context, mlflow, run.run_id),
        },
    )
