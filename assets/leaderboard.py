"""`endpoint_leaderboard`: any OpenAI-compatible endpoint, the engine's base model and the registered champions
in every SocialRL domain and the Red-Black game (models/cli/leaderboard.py)."""

import dataclasses
import json
from pathlib import Path

from dagster import AssetExecutionContext, MetadataValue, Output, asset

from assets.common import execution_id, mlflow_links
from assets.configs import LeaderboardConfig
from models.cli.leaderboard import Endpoint, Leaderboard, evaluate_endpoint, markdown_table, merge_rows
from models.evaluation.policy import store_evaluation
from models.records import rows_for
from models.serving.adapters import serve_adapter
from models.serving.local import is_adapter
from models.serving.model_store import ModelResolutionError, resolve_model
from models.tracking import RegistryError
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

GROUP = "leaderboard"


@asset(group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def endpoint_leaderboard(
    context: AssetExecutionContext,
    config: LeaderboardConfig,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[Leaderboard]:
    """One row per endpoint: mean reward per SocialRL domain with its CI on the held-out scenarios against the
    fixed code counterparts, agreement, leak and invalid-action rates, and Red-Black welfare on the held-out
    frames. Local entries (the base model, adapters, `models:/...@champion`) are served by the engine;
    episodes go to the tables, the rows to <data>/reports/leaderboard-<profile>.json."""
    profile = settings.get_profile()
    tracker = mlflow.tracker()
    run_tag = execution_id(context)
    endpoints = [c.endpoint() for c in config.endpoints]
    if config.include_champions:
        for version in tracker.champion_versions(prefix="socialrl-"):
            endpoints.append(Endpoint(f"{version.name}@champion", f"models:/{version.name}@champion"))
    rows, skipped = [], {}
    for index, endpoint in enumerate(endpoints):
        url, model = None, None
        if endpoint.local:
            url, model = engine.proxy_base_url, "base"
            endpoint = dataclasses.replace(endpoint, api_key=engine.proxy_api_key)  # the proxy's per-run token
            if endpoint.model != "base":
                try:
                    path = resolve_model(endpoint.model, settings.paths().models, tracker.config)
                except (ModelResolutionError, RegistryError) as exc:
                    skipped[endpoint.name] = str(exc)
                    continue
                if not is_adapter(Path(path)):
                    skipped[endpoint.name] = "a full checkpoint other than the engine's base: use the command line"
                    continue
                model = serve_adapter(engine.client, f"leaderboard-{index}", Path(path))
        context.log.info(f"leaderboard: evaluating {endpoint.name}")
        evaluation = evaluate_endpoint(endpoint, profile, url, model, seed=config.seed)
        for env_id, result in evaluation.domains.items():
            store_evaluation(
                store.store(), result, f"leaderboard:{endpoint.name}", f"leaderboard-{run_tag}-{index}-{env_id}"
            )
        store.store().append_all(rows_for(evaluation.red_black, f"leaderboard-{run_tag}-{index}-red-black"))
        rows.append(evaluation.row)
    board = Leaderboard(tuple(rows), skipped)
    path = settings.paths().reports / f"leaderboard-{profile.name}.json"
    existing = json.loads(path.read_text()) if path.is_file() else []
    merged = merge_rows(existing, board.as_rows())
    path.write_text(json.dumps(merged, indent=2) + "\n")
    with tracker.start_run("endpoint-leaderboard", params={"profile": profile.name}) as run:
        run.log_file("leaderboard.json", json.dumps(board.as_rows(), indent=2), "results")
    return Output(
        board,
        metadata={
            "leaderboard": MetadataValue.md(markdown_table(board.as_rows())),
            "skipped": MetadataValue.json(skipped),
            "file": str(path),
            "mlflow_run_id": run.run_id,
            **mlflow_links(context, mlflow, run.run_id),
        },
    )
