"""SocialRL stage 1 as Dagster assets: scenarios -> teacher_traces -> sft_warmstart -> specialist ->
specialist_eval -> specialist_champion, plus the code-agent tournament. Thin: each asset reads its
settings, calls one function of models/socialrl/stage1.py or agents/, stores tables and returns a summary.
"""

import json
import uuid
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    MetadataValue,
    Output,
    StaticPartitionsDefinition,
    asset,
    asset_check,
)

from agents.socialrl.tournament import TournamentConfig, run_tournament
from assets.configs import TeacherSourceConfig
from environments import SOCIALRL_ENV_IDS
from models.evaluation.reports import environment_summary
from models.records import rows_for
from models.serving.model_store import resolve_model
from models.socialrl import stage1, teachers
from models.training.config import Services
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

DOMAINS = StaticPartitionsDefinition(list(SOCIALRL_ENV_IDS))
GROUP = "socialrl"


def _run_id(context: AssetExecutionContext) -> str:
    return f"{context.run.run_id[:8]}-{uuid.uuid4().hex[:4]}"


def _work_dir(settings: SettingsResource, *parts: str) -> Path:
    return settings.paths().run_dir(*parts)


def _markdown_chat(messages: list[dict[str, str]], limit: int = 12) -> str:
    lines = []
    for message in messages[:limit]:
        content = message["content"].replace("\n", "  \n")
        lines.append(f"**{message['role']}**: {content}")
    return "\n\n".join(lines)


@asset(group_name=GROUP, kinds={"python", "duckdb"})
def code_agent_tournament(
    context: AssetExecutionContext, settings: SettingsResource, store: StoreResource
) -> Output[dict]:
    """Every ordered pair of code agents (Boulware, conceder, reciprocal, accommodating, random) on the same
    seeded scenarios of all six SocialRL environments; episodes to the episode tables."""
    profile = settings.get_profile()
    results = run_tournament(TournamentConfig(scenarios_per_pairing=2 if profile.name == "smoke" else 8))
    run_id = f"tournament-{_run_id(context)}"
    table = store.store()
    table.append_all(rows_for(results, run_id))
    summary = environment_summary(table, run_id)
    return Output(
        {"run_id": run_id, "episodes": len(results)},
        metadata={
            "episodes": len(results),
            "run_id": run_id,
            "summary": MetadataValue.md(summary.to_markdown(index=False, floatfmt=".3f")),
        },
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"python", "duckdb"})
def scenarios(context: AssetExecutionContext, settings: SettingsResource, store: StoreResource) -> Output[dict]:
    """Generated training and held-out scenarios of a domain (disjoint by content), stored in the
    `scenarios` table. Later assets regenerate the same lists from the profile and check the ids."""
    env_id = context.partition_key
    profile = settings.get_profile()
    split = stage1.domain_scenarios(env_id, profile)
    run_id = _run_id(context)
    store.store().append("scenarios", stage1.scenario_rows(env_id, split, run_id))
    ids = {name: [s.scenario_id for s in items] for name, items in split.items()}
    return Output(
        {"run_id": run_id, **ids},
        metadata={"train": len(ids["train"]), "heldout": len(ids["heldout"]), "run_id": run_id},
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"python", "duckdb"})
def teacher_traces(
    context: AssetExecutionContext,
    config: TeacherSourceConfig,
    scenarios: dict,
    settings: SettingsResource,
    store: StoreResource,
) -> Output[dict]:
    """The configured teacher in every seat against the fixed counterparts: by default the strategic code
    teacher (Bayesian opponent model, anchoring, selective concessions, no leaks); or a local model or any
    OpenAI-compatible endpoint (models/socialrl/teachers.py; failed episodes are counted and left out).
    Each episode rendered as the chat the seat saw, with the INFER -> ACT -> ANTICIPATE reasoning, to `traces`."""
    env_id = context.partition_key
    profile = settings.get_profile()
    run_id = _run_id(context)
    collection = teachers.teacher_traces(
        env_id, profile, config.teacher(), settings.paths(), run_tag=f"traces-{run_id}"
    )
    traces = list(collection.traces)
    store.store().append("traces", [t.row(run_id) for t in traces])
    summary = stage1.trace_summary(traces)
    best = max(traces, key=lambda t: t.reward)
    return Output(
        {"run_id": run_id, "episodes": len(traces), **summary, "collection": collection.summary()},
        metadata={
            **{k: float(v) for k, v in summary.items()},
            "teacher": collection.teacher,
            "failed_episodes": collection.failed,
            "run_id": run_id,
            "sample_negotiation": MetadataValue.md(_markdown_chat(best.messages)),
        },
    )


@asset_check(asset=teacher_traces, partitions_def=DOMAINS)
def traces_rewards_in_range(context, store: StoreResource) -> AssetCheckResult:
    """Every stored trace reward lies in [0, 1] and every trace has an assistant turn."""
    frame = store.store().query(
        "SELECT count(*) AS n, count(*) FILTER (WHERE reward < 0 OR reward > 1) AS bad, "
        "count(*) FILTER (WHERE assistant_turns = 0) AS silent FROM traces WHERE env_id = ?",
        [context.partition_key],
    )
    bad, silent, n = int(frame.bad[0]), int(frame.silent[0]), int(frame.n[0])
    return AssetCheckResult(passed=n > 0 and bad == 0, metadata={"traces": n, "out_of_range": bad, "silent": silent})


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"pytorch", "mlflow"})
def sft_warmstart(
    context: AssetExecutionContext,
    teacher_traces: dict,
    settings: SettingsResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[dict]:
    """LoRA SFT (TRL SFTTrainer, loss on assistant turns only) of the base model on the domain's filtered
    teacher traces; skipped for domains the profile does not warm-start. Logged as an MLflow run."""
    env_id = context.partition_key
    profile = settings.get_profile()
    if env_id not in profile.sft_domains:
        return Output({"adapter_dir": None}, metadata={"skipped": f"{env_id} is not warm-started in {profile.name}"})
    from agents.traces import Trace

    frame = store.store().query(
        "SELECT * FROM traces WHERE env_id = ? AND run_id = ?", [env_id, teacher_traces["run_id"]]
    )
    traces = [
        Trace(r.episode_id, r.env_id, r.seat, r.agent, r.counterpart, r.scenario_id, json.loads(r.messages),
              json.loads(r.reasoning), float(r.reward), bool(r.agreement), tuple(json.loads(r.leaked)))
        for r in frame.itertuples(index=False)
    ]  # fmt: skip
    traces = teachers.sft_traces(traces, "act")  # the lineage prompts without the scaffold: train on ACT only
    base_dir = resolve_model(profile.base_model, settings.paths().models)
    output = _work_dir(settings, "sft", env_id, _run_id(context))
    result, run_id = stage1.warmstart(env_id, traces, profile, base_dir, output, mlflow.tracker())
    return Output(
        {"adapter_dir": str(result.adapter_dir), "mlflow_run_id": run_id},
        metadata={
            "train_loss": result.train_loss,
            "eval_loss_before": result.eval_loss_before or float("nan"),
            "eval_loss_after": result.eval_loss_after or float("nan"),
            "examples": result.examples,
            "steps": result.steps,
            "wall_seconds": result.wall_seconds,
            "mlflow_run_id": run_id or "",
        },
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"pytorch", "vllm", "mlflow"})
def specialist(
    context: AssetExecutionContext,
    sft_warmstart: dict,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[dict]:
    """Multi-turn PPO with a critic (ours: TRL has no PPOTrainer), starting from the SFT adapter when there is
    one; rollouts through vLLM and the rollout proxy. Registered in MLflow as socialrl-<domain>-specialist
    with alias `candidate`."""
    env_id = context.partition_key
    profile = settings.get_profile()
    init = Path(sft_warmstart["adapter_dir"]) if sft_warmstart.get("adapter_dir") else None
    # Keyed by the root run, so "re-execute from failure" resumes PPO from its last checkpoint.
    output = _work_dir(settings, "ppo", env_id, (context.run.root_run_id or context.run.run_id)[:8])
    services = Services(engine.client, engine.proxy_base_url, store.store())
    critic_dir = resolve_model(profile.critic_model, settings.paths().models)
    result, run_id, version = stage1.train_specialist(
        env_id, profile, engine.model_dir, critic_dir, services, output, init, mlflow.tracker()
    )
    curve = [round(float(m["reward_mean"]), 4) for m in result.history]
    last = result.history[-1]
    return Output(
        {
            "adapter_dir": str(result.adapter_dir),
            "run_name": profile.ppo_for(env_id).run_name,
            "mlflow_run_id": run_id,
            "model_name": stage1.registered_name(env_id),
            "model_version": version,
            "seat": stage1.specialist_seat(env_id, profile),
            "iterations": [
                {k: m[k] for k in ("iteration", "reward_mean", "time_rollout_s", "time_train_s", "time_sync_s")}
                for m in result.history
            ],
        },
        metadata={
            "reward_curve": MetadataValue.json(curve),
            "final_reward_mean": float(last["reward_mean"]),
            "logprob_mismatch_mean_abs": float(last["logprob_mismatch_mean_abs"]),
            "seconds_rollout_train_sync": MetadataValue.json(
                [round(last["time_rollout_s"], 1), round(last["time_train_s"], 1), round(last["time_sync_s"], 1)]
            ),
            "mlflow_run_id": run_id or "",
            "model": f"{stage1.registered_name(env_id)} v{version}",
        },
    )


@asset_check(asset=specialist, partitions_def=DOMAINS)
def completions_have_token_ids(context, specialist: dict, store: StoreResource) -> AssetCheckResult:
    """Every recorded completion of the specialist's rollouts has engine token ids and one log-prob per token."""
    frame = store.store().query(
        """SELECT count(*) AS n,
                  count(*) FILTER (WHERE completion_token_ids IS NULL OR len(completion_token_ids) = 0
                                   OR len(completion_logprobs) <> len(completion_token_ids)) AS bad
           FROM recorded_calls WHERE starts_with(episode_id, ?) AND error IS NULL""",
        [specialist["run_name"] + ":"],
    )
    n, bad = int(frame.n[0]), int(frame.bad[0])
    return AssetCheckResult(passed=n > 0 and bad == 0, metadata={"recorded_calls": n, "incomplete": bad})


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"vllm", "duckdb"})
def specialist_eval(
    context: AssetExecutionContext,
    sft_warmstart: dict,
    specialist: dict,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[dict]:
    """Base model, SFT warm-start and PPO specialist on the domain's held-out scenarios against the fixed
    counterparts, all in the specialist's seat: mean reward with a 95% CI, agreement, Pareto-optimal,
    invalid-action and leakage rates (Craigslist: the buyer's below-target opening rate too), stored in the
    `evaluations` table and on the model version."""
    from models.evaluation.policy import store_evaluation

    env_id = context.partition_key
    profile = settings.get_profile()
    run_id = _run_id(context)
    policies: dict[str, str] = {"base": "base"}
    if sft_warmstart.get("adapter_dir"):
        policies["sft"] = stage1.serve_adapter(engine.client, f"{env_id}-sft", Path(sft_warmstart["adapter_dir"])).name
    policies["ppo"] = stage1.serve_adapter(engine.client, f"{env_id}-ppo", Path(specialist["adapter_dir"])).name
    summaries: dict[str, Any] = {}
    for label, model in policies.items():
        result = stage1.evaluate_model(env_id, profile, engine.proxy_base_url, model)
        store_evaluation(store.store(), result, f"{env_id}:{label}", f"eval-{run_id}-{label}")
        summaries[label] = {
            **{k: v for k, v in result.summary.as_dict().items() if isinstance(v, int | float)},
            **stage1.behaviour_metrics(result),
        }
    # Held-out evaluation of the candidate, kept on the model version (the champion comparison reads it).
    mlflow.tracker().record_evaluation(
        specialist["model_name"],
        specialist["model_version"],
        {"candidate_mean_reward": summaries["ppo"]["mean_reward"]},
    )
    table = "| policy | mean reward | 95% CI | agreement | invalid | leak |\n|---|---|---|---|---|---|\n" + "\n".join(
        f"| {k} | {v['mean_reward']:.3f} | [{v['ci_low']:.3f}, {v['ci_high']:.3f}] | {v['agreement_rate']:.2f} | "
        f"{v['invalid_action_rate']:.2f} | {v['leakage_rate']:.2f} |"
        for k, v in summaries.items()
    )
    behaviour = {
        f"{label}_{name}": value
        for label, summary in summaries.items()
        for name, value in summary.items()
        if name in ("below_target_opening_rate", "buyer_offer_rate")
    }
    return Output(
        {**specialist, "evaluation": summaries, "eval_run_id": run_id},
        metadata={
            "evaluation": MetadataValue.md(table),
            "seat": specialist["seat"],
            "ppo_mean_reward": summaries["ppo"]["mean_reward"],
            **behaviour,
        },
    )


@asset_check(asset=specialist_eval, partitions_def=DOMAINS, blocking=True)
def beats_champion(context, specialist_eval: dict, mlflow: MlflowResource) -> AssetCheckResult:
    """Blocking: the candidate's held-out mean reward must beat the current champion's (or there is none)."""
    tracker = mlflow.tracker()
    name = specialist_eval["model_name"]
    mine = specialist_eval["evaluation"]["ppo"]["mean_reward"]
    champion_version = tracker.aliases(name).get("champion")
    if champion_version is None:
        theirs, version = float("-inf"), None
    else:
        version = champion_version
        theirs = tracker.get_version(name, version).evaluation().get("mean_reward", float("-inf"))
    passed = version == specialist_eval["model_version"] or mine > theirs
    return AssetCheckResult(
        passed=passed,
        severity=AssetCheckSeverity.ERROR,
        metadata={"candidate": mine, "champion": theirs if version else "none", "champion_version": str(version)},
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"mlflow"})
def specialist_champion(context: AssetExecutionContext, specialist_eval: dict, mlflow: MlflowResource) -> Output[dict]:
    """Moves the registry alias `champion` to the evaluated specialist (runs only when `beats_champion` passed)."""
    tracker = mlflow.tracker()
    promoted = tracker.promote_if_better(
        specialist_eval["model_name"],
        specialist_eval["model_version"],
        "mean_reward",
        specialist_eval["evaluation"]["ppo"]["mean_reward"],
    )
    name, version = specialist_eval["model_name"], specialist_eval["model_version"]
    return Output(
        {"model_name": name, "version": version, "champion": promoted},
        metadata={"champion": f"{name} v{version}" if promoted else "unchanged"},
    )
