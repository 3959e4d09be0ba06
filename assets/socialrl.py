"""SocialRL stage 1 as Dagster assets: scenarios -> teacher_traces -> sft_warmstart -> specialist ->
specialist_eval -> specialist_champion, plus the code-agent tournament. Thin: each asset reads its
settings, calls one function of models/socialrl/stage1.py (or agents/), stores tables and returns that
function's frozen dataclass with display metadata (numbers rounded; full precision stays in the tables).
"""

from dataclasses import dataclass
from pathlib import Path

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
from agents.traces import Trace
from assets.common import dagster_run_id, execution_id, mlflow_links, work_key
from assets.configs import TeacherSourceConfig
from environments import SOCIALRL_ENV_IDS
from models.display import display_json, display_metadata
from models.evaluation.policy import EvaluationResult, store_evaluation
from models.evaluation.reports import environment_summary
from models.plots import markdown_image
from models.profiles import Profile
from models.records import rows_for
from models.serving.adapters import serve_adapter
from models.serving.model_store import resolve_model
from models.socialrl import stage1, teachers
from models.socialrl.imitation import MIN_COMMAND_RATE, MIN_REWARD_SHARE
from models.tracking import Tracker, git_commit, run_tags
from models.training.config import Services
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

DOMAINS = StaticPartitionsDefinition(list(SOCIALRL_ENV_IDS))
GROUP = "socialrl"


def _tags(
    context: AssetExecutionContext,
    settings: SettingsResource,
    mlflow: MlflowResource,
    stage: str,
    warm_start: str | None = None,
) -> dict:
    dagster = dagster_run_id(context)
    return run_tags(
        domain=context.partition_key if context.has_partition_key else None,
        profile=settings.get_profile().name,
        git_commit=git_commit(),
        dagster_run_id=dagster,
        warm_start_run_id=warm_start,
        stage=stage,
        dagster_run_url=mlflow.links().dagster_run(dagster) if dagster != "direct" else None,
    )


def _markdown_chat(messages: list[dict[str, str]], limit: int = 12) -> str:
    lines = []
    for message in messages[:limit]:
        content = message["content"].replace("\n", "  \n")
        lines.append(f"**{message['role']}**: {content}")
    return "\n\n".join(lines)


@dataclass(frozen=True)
class TournamentRun:
    """Where the tournament's episodes went."""

    run_id: str
    episodes: int


@asset(group_name=GROUP, kinds={"python", "duckdb"})
def code_agent_tournament(
    context: AssetExecutionContext, settings: SettingsResource, store: StoreResource
) -> Output[TournamentRun]:
    """Every ordered pair of code agents (Boulware, conceder, reciprocal, accommodating, random) on the same
    seeded scenarios of all six SocialRL environments; episodes to the episode tables."""
    profile = settings.get_profile()
    results = run_tournament(TournamentConfig(scenarios_per_pairing=2 if profile.name == "smoke" else 8))
    run_id = f"tournament-{execution_id(context)}"
    table = store.store()
    table.append_all(rows_for(results, run_id))
    summary = environment_summary(table, run_id)
    return Output(
        TournamentRun(run_id, len(results)),
        metadata={
            "episodes": len(results),
            "run_id": run_id,
            "summary": MetadataValue.md(summary.to_markdown(index=False, floatfmt=".3f")),
        },
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"python", "duckdb"})
def scenarios(
    context: AssetExecutionContext, settings: SettingsResource, store: StoreResource
) -> Output[stage1.ScenarioSplit]:
    """Training and held-out scenarios of a domain (disjoint by content; real data where the domain has it
    and the profile says so), stored in the `scenarios` table."""
    split = stage1.split_scenarios(context.partition_key, settings.get_profile(), execution_id(context))
    store.store().append("scenarios", split.rows)
    return Output(
        split,
        metadata={
            "train": len(split.train_ids),
            "heldout": len(split.heldout_ids),
            "source": split.source,
            "run_id": split.run_id,
        },
    )


@dataclass(frozen=True)
class TeacherTraceSet:
    """A domain's teacher traces (rows in the `traces` table under `run_id`)."""

    env_id: str
    run_id: str
    episodes: int
    """Traces kept (episode x seat)."""
    teacher: str = "teacher"
    """Which teacher played: the code teacher, or the configured model or endpoint."""
    failed: int = 0
    """Episodes the teacher could not finish (request errors), left out."""


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"python", "duckdb"})
def teacher_traces(
    context: AssetExecutionContext,
    config: TeacherSourceConfig,
    scenarios: stage1.ScenarioSplit,
    settings: SettingsResource,
    store: StoreResource,
) -> Output[TeacherTraceSet]:
    """The configured teacher in every seat against the fixed counterparts: by default the strategic code
    teacher (Bayesian opponent model, anchoring, selective concessions, no leaks); or a local model or any
    OpenAI-compatible endpoint (models/socialrl/teachers.py; failed episodes are counted and left out).
    Each episode rendered as the chat the seat saw, with the INFER -> ACT -> ANTICIPATE reasoning, to `traces`."""
    env_id = context.partition_key
    run_id = execution_id(context)
    collection = teachers.teacher_traces(
        env_id, settings.get_profile(), config.teacher(), settings.paths(), run_tag=f"traces-{run_id}"
    )
    traces = list(collection.traces)
    store.store().append("traces", [t.row(run_id) for t in traces])
    summary = stage1.trace_summary(traces)
    best = max(traces, key=lambda t: t.reward)
    return Output(
        TeacherTraceSet(env_id, run_id, len(traces), collection.teacher, collection.failed),
        metadata={
            **display_metadata(summary),
            "teacher": collection.teacher,
            "failed_episodes": collection.failed,
            "run_id": run_id,
            "sample_negotiation": MetadataValue.md(_markdown_chat(best.messages)),
        },
    )


def traces_usable(traces: list[Trace], profile: Profile) -> AssetCheckResult:
    """`stage1.trace_usability` of a run's traces with the profile's SFT filter, as a check result."""
    usability = stage1.trace_usability(traces, profile.trace_min_reward)
    return AssetCheckResult(
        passed=usability.passed,
        metadata={
            **display_metadata(
                {
                    "traces": usability.traces,
                    "silent": usability.silent,
                    "kept_by_sft_filter": usability.kept,
                    "refused_replies": usability.refused,
                    "replies": usability.replies,
                    "refused_share": usability.refused_share,
                    "kept_mean_reward": usability.kept_mean_reward,
                }
            ),
            "problems": MetadataValue.json(list(usability.problems())),
        },
    )


@asset_check(asset=teacher_traces, partitions_def=DOMAINS)
def traces_are_usable(
    context, teacher_traces: TeacherTraceSet, settings: SettingsResource, store: StoreResource
) -> AssetCheckResult:
    """The traces can teach a warm-start: every trace has a reply, the warm-start's filter keeps at least two,
    the environment refused at most 10% of the teacher's replies (the warm-start must end 90% of its own in a
    command) and the kept traces earn a reward above 0 (`stage1.trace_usability`)."""
    return traces_usable(_load_traces(store, teacher_traces.env_id, teacher_traces.run_id), settings.get_profile())


def _load_traces(store: StoreResource, env_id: str, run_id: str) -> list[Trace]:
    frame = store.store().query("SELECT * FROM traces WHERE env_id = ? AND run_id = ?", [env_id, run_id])
    return teachers.traces_from_rows(list(frame.itertuples(index=False)))


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"pytorch", "mlflow"})
def sft_warmstart(
    context: AssetExecutionContext,
    teacher_traces: TeacherTraceSet,
    settings: SettingsResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[stage1.WarmStart]:
    """LoRA SFT (TRL SFTTrainer, whole conversations packed, loss on assistant turns only) of the base model
    on the domain's filtered teacher traces; skipped for domains the profile does not warm-start. Logged
    as an MLflow run with the loss per step."""
    env_id, profile = context.partition_key, settings.get_profile()
    # The lineage prompts without the INFER/ANTICIPATE scaffold: train on the ACT replies only.
    traces = teachers.sft_traces(_load_traces(store, env_id, teacher_traces.run_id), "act")
    base_dir = resolve_model(profile.base_model, settings.paths().models)
    output = settings.paths().run_dir("sft", env_id, execution_id(context))
    # Shared by the attempts of one run chain (as PPO's work directory), so a relaunch ends a killed attempt's run;
    # an asset invoked directly (no Dagster run) has no chain.
    record = None
    if dagster_run_id(context) != "direct":
        record = settings.paths().run_dir("sft", env_id) / f"{work_key(context)}.mlflow_run.json"
    warm = stage1.warmstart(
        env_id, traces, profile, base_dir, output, mlflow.tracker(), _tags(context, settings, mlflow, "sft"), record
    )
    if warm.sft is None:
        return Output(warm, metadata={"skipped": warm.skipped})
    result = warm.sft
    return Output(
        warm,
        metadata={
            **display_metadata(
                {
                    "train_loss": result.train_loss,
                    "eval_loss_before": result.eval_loss_before,
                    "eval_loss_after": result.eval_loss_after,
                    "examples": result.examples,
                    "steps": result.steps,
                    "tokens_per_s": result.tokens_per_second,
                    "wall_seconds": result.wall_seconds,
                }
            ),
            "mlflow_run_id": warm.mlflow_run_id or "",
            **mlflow_links(context, mlflow, warm.mlflow_run_id),
        },
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"pytorch", "vllm", "mlflow"})
def specialist(
    context: AssetExecutionContext,
    sft_warmstart: stage1.WarmStart,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[stage1.Specialist]:
    """Multi-turn PPO with a critic (ours: TRL has no PPOTrainer), starting from the SFT adapter when there is
    one (also the KL reference); rollouts through vLLM and the rollout proxy. Registered in MLflow as
    socialrl-<domain>-specialist with alias `candidate`; learning curves as plots."""
    env_id, profile = context.partition_key, settings.get_profile()
    init = Path(sft_warmstart.adapter_dir) if sft_warmstart.adapter_dir else None
    # Keyed by the run it resumes (or the root run), so a relaunch resumes PPO from its last checkpoint.
    output = settings.paths().run_dir("ppo", env_id, work_key(context))
    services = Services(engine.client, engine.proxy_base_url, store.store(), proxy_api_key=engine.proxy_api_key)
    critic_dir = resolve_model(profile.critic_model, settings.paths().models)
    trained = stage1.train_specialist(
        env_id,
        profile,
        engine.model_dir,
        critic_dir,
        services,
        output,
        init,
        mlflow.tracker(),
        _tags(context, settings, mlflow, "ppo", warm_start=sft_warmstart.mlflow_run_id),
        # run_stage2's own, smaller specialists are tagged apart: they never become champion.
        trained_by=stage1.STAGE2 if settings.stage2_specialists else stage1.STAGE1,
    )
    reward_png, diagnostics_png = stage1.learning_curve_plots(trained.curve, env_id)
    last = trained.curve[-1]
    return Output(
        trained,
        metadata={
            "learning_curve": MetadataValue.md(markdown_image(reward_png, "reward per iteration")),
            "diagnostics": MetadataValue.md(markdown_image(diagnostics_png, "PPO diagnostics")),
            "reward_curve": MetadataValue.json(display_json([p.reward_mean for p in trained.curve])),
            **display_metadata(
                {
                    "final_reward_mean": last.reward_mean,
                    "rollout_tokens_per_s": last.rollout_tokens_per_s,
                    "update_tokens_per_s": last.update_tokens_per_s,
                    "seconds_rollout": last.time_rollout_s,
                    "seconds_train": last.time_train_s,
                    "seconds_sync": last.time_sync_s,
                }
            ),
            "mlflow_run_id": trained.mlflow_run_id or "",
            "model": f"{trained.model_name} v{trained.model_version}",
            **mlflow_links(context, mlflow, trained.mlflow_run_id, trained.model_name, trained.model_version),
        },
    )


@asset_check(asset=specialist, partitions_def=DOMAINS)
def completions_have_token_ids(context, specialist: stage1.Specialist, store: StoreResource) -> AssetCheckResult:
    """Every recorded completion of the specialist's rollouts has engine token ids and one log-prob per token."""
    frame = store.store().query(
        """SELECT count(*) AS n,
                  count(*) FILTER (WHERE completion_token_ids IS NULL OR len(completion_token_ids) = 0
                                   OR len(completion_logprobs) <> len(completion_token_ids)) AS bad
           FROM recorded_calls WHERE starts_with(episode_id, ?) AND error IS NULL""",
        [specialist.run_name + ":"],
    )
    n, bad = int(frame.n[0]), int(frame.bad[0])
    return AssetCheckResult(passed=n > 0 and bad == 0, metadata={"recorded_calls": n, "incomplete": bad})


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"vllm", "duckdb"})
def warmstart_imitation(
    context: AssetExecutionContext,
    sft_warmstart: stage1.WarmStart,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[stage1.WarmStartImitation | None]:
    """Has the warm-start learned its teacher? The warm-start, the strategic teacher and the trivial baselines
    (accept the first offer, hold the target, split the difference) on the domain's held-out plan, paired:
    command rate, offer rate, opening over target, reward and its paired difference with the teacher,
    agreement, leaks, representative transcripts, a plot (also on the warm-start's MLflow run). The
    specialist's evaluation reuses these episodes (same plan)."""
    env_id, profile = context.partition_key, settings.get_profile()
    if not sft_warmstart.adapter_dir:
        return Output(None, metadata={"skipped": sft_warmstart.skipped})
    run_id = execution_id(context)
    served = serve_adapter(engine.client, f"{env_id}-sft", Path(sft_warmstart.adapter_dir))
    table = store.store()

    def store_result(result: EvaluationResult, label: str) -> None:
        store_evaluation(table, result, f"{env_id}:{label}", f"eval-{run_id}-{label}")

    imitation = stage1.measure_imitation(
        env_id, profile, engine.proxy_base_url, served, run_id, engine.proxy_api_key, store_result
    )
    report = imitation.report
    png = stage1.imitation_plot(imitation)
    if sft_warmstart.mlflow_run_id:
        mlflow.tracker().log_artifact_file(sft_warmstart.mlflow_run_id, "imitation.png", png, "plots")
    return Output(
        imitation,
        metadata={
            "imitation": MetadataValue.md(report.markdown()),
            "plot": MetadataValue.md(markdown_image(png, "warm-start vs teacher and baselines")),
            "transcripts": MetadataValue.md(report.transcripts_markdown or "*no episodes*"),
            "report": MetadataValue.json(display_json(report.as_json())),
            "plan": imitation.plan,
            **display_metadata(
                {
                    "command_rate": report.command_rate,
                    "reward_over_teacher": report.reward_over_teacher,
                    "sft_mean_reward": imitation.sft.summary.mean_reward,
                    "teacher_mean_reward": imitation.teacher.summary.mean_reward,
                }
            ),
            "mlflow_run_id": sft_warmstart.mlflow_run_id or "",
            **mlflow_links(context, mlflow, sft_warmstart.mlflow_run_id),
        },
    )


@asset_check(asset=warmstart_imitation, partitions_def=DOMAINS)
def warmstart_imitates_teacher(context, warmstart_imitation: stage1.WarmStartImitation | None) -> AssetCheckResult:
    """At least 90% of the warm-start's held-out replies end in a valid command line, and its reward is at least
    half the teacher's on the same episodes (models/socialrl/imitation.py: a format-only pass is not imitation)."""
    if warmstart_imitation is None:
        return AssetCheckResult(passed=True, metadata={"skipped": "no warm-start in this profile's domain"})
    report = warmstart_imitation.report
    return AssetCheckResult(
        passed=report.passed(),
        severity=AssetCheckSeverity.ERROR,
        metadata=display_metadata(
            {
                "command_rate": report.command_rate,
                "min_command_rate": MIN_COMMAND_RATE,
                "reward_over_teacher": report.reward_over_teacher,
                "min_reward_share": MIN_REWARD_SHARE,
            }
        ),
    )


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"vllm", "duckdb"})
def specialist_eval(
    context: AssetExecutionContext,
    sft_warmstart: stage1.WarmStart,
    warmstart_imitation: stage1.WarmStartImitation | None,
    specialist: stage1.Specialist,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[stage1.SpecialistEvaluation]:
    """Every policy of the domain on the same held-out episodes (scenarios, counterparts and seeds), in the
    specialist's seat: the base model (on the first `base_heldout_scenarios` scenarios), the SFT warm-start,
    the PPO specialist, the teacher and the trivial baselines (the last three from `warmstart_imitation`, same
    plan). Paired differences of reward (ppo-sft, sft-base, ppo-base, ppo-best baseline, ppo-teacher) and of
    every behaviour metric with scenario-clustered bootstrap CIs; representative transcripts of the base and the
    specialist (markdown), and of sft, ppo and teacher as JSON (`representative_episodes`, which `make run`
    writes to its transcripts file). Stored in the `evaluations` table, on the model version (description, model
    card) and its MLflow run."""
    env_id, profile = context.partition_key, settings.get_profile()
    run_id = execution_id(context)
    served = {"base": "base"}
    if sft_warmstart.adapter_dir and warmstart_imitation is None:
        served["sft"] = serve_adapter(engine.client, f"{env_id}-sft", Path(sft_warmstart.adapter_dir))
    served["ppo"] = serve_adapter(engine.client, f"{env_id}-ppo", Path(specialist.adapter_dir))
    table = store.store()

    def store_result(result: EvaluationResult, label: str) -> None:
        store_evaluation(table, result, f"{env_id}:{label}", f"eval-{run_id}-{label}")

    evaluation = stage1.evaluate_specialist(
        env_id,
        profile,
        engine.proxy_base_url,
        served,
        specialist,
        run_id,
        warmstart_imitation,
        store_result,
        api_key=engine.proxy_api_key,
    )
    tracker = mlflow.tracker()
    png = stage1.evaluation_plot(evaluation)
    if specialist.mlflow_run_id:
        tracker.log_artifact_file(specialist.mlflow_run_id, "evaluation.png", png, "plots")
        tracker.log_artifact_file(
            specialist.mlflow_run_id, "transcripts.html", evaluation.transcripts_html, "transcripts"
        )
    stage1.document_specialist(tracker, evaluation, profile, sft_warmstart, git_commit() or "")
    # The candidate's held-out mean reward with its plan and episodes, on the version (the champion rule and
    # stage 2's choice of specialists read them).
    stage1.record_heldout(tracker, evaluation)
    return Output(
        evaluation,
        metadata={
            "evaluation": MetadataValue.md(evaluation.markdown()),
            "plot": MetadataValue.md(markdown_image(png, "held-out reward")),
            "transcripts": MetadataValue.md(evaluation.transcripts_markdown or "*no episodes*"),
            "report": MetadataValue.json(display_json(evaluation.report())),
            # Best, median, worst (and most refused) of sft, ppo and teacher: `make run`'s transcripts file.
            "representative_episodes": MetadataValue.json(display_json(evaluation.representative_episodes())),
            "seat": evaluation.seat,
            **display_metadata(
                {
                    "ppo_mean_reward": evaluation.policies["ppo"].summary.mean_reward,
                    **{name: e.mean for name, e in evaluation.paired.items()},
                }
            ),
            "mlflow_run_id": specialist.mlflow_run_id or "",
            **mlflow_links(context, mlflow, specialist.mlflow_run_id, specialist.model_name, specialist.model_version),
        },
    )


def champion_check(tracker: Tracker, evaluation: stage1.SpecialistEvaluation, bars: bool = True) -> AssetCheckResult:
    """The one champion rule (`stage1.champion_comparison`: the promotion bars when `bars`, then the same plan,
    paired, or refused) as a blocking check result; the reason says which case decided, and each bar is shown
    whether required or not."""
    comparison = stage1.champion_comparison(tracker, evaluation, bars)
    paired = comparison.paired
    return AssetCheckResult(
        passed=comparison.wins,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            **display_metadata(
                {
                    "candidate": comparison.candidate_value,
                    "champion": comparison.champion_value if comparison.champion_version else "none",
                    "champion_version": str(comparison.champion_version),
                    "paired_difference": paired.mean if paired is not None else "not paired",
                }
            ),
            "basis": comparison.basis,
            "reason": comparison.reason,
            "bars": MetadataValue.md(
                "\n".join(
                    f"- {'beaten' if bar.beaten else 'NOT beaten'}: {bar.text()}"
                    for bar in stage1.promotion_bars(evaluation)
                )
                + ("" if bars else "\n\n(not required in this profile)")
            ),
            "plan": evaluation.plan_identity.text if evaluation.plan_identity else "not recorded",
        },
    )


@asset_check(asset=specialist_eval, partitions_def=DOMAINS, blocking=True)
def beats_champion(
    context, specialist_eval: stage1.SpecialistEvaluation, settings: SettingsResource, mlflow: MlflowResource
) -> AssetCheckResult:
    """Blocking: the candidate must beat, paired on its held-out plan, the policy it started from and the best
    trivial rule (the profile's `champion_bars`), then the current champion on the same plan (by the paired
    difference where both kept their episodes), or there is none; a champion on another plan refuses it, and
    a specialist trained by run_stage2 never passes. The same rule `specialist_champion` applies when it promotes."""
    return champion_check(mlflow.tracker(), specialist_eval, settings.get_profile().champion_bars)


@dataclass(frozen=True)
class ChampionUpdate:
    """The registry alias after a promotion attempt."""

    model_name: str
    version: int | None
    champion: bool


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"mlflow"})
def specialist_champion(
    context: AssetExecutionContext,
    specialist_eval: stage1.SpecialistEvaluation,
    settings: SettingsResource,
    mlflow: MlflowResource,
) -> Output[ChampionUpdate]:
    """Moves the registry alias `champion` to the evaluated specialist (runs only when `beats_champion` passed;
    `stage1.promote_specialist` applies the same rule again)."""
    s = specialist_eval.specialist
    promoted = stage1.promote_specialist(mlflow.tracker(), specialist_eval, settings.get_profile().champion_bars)
    return Output(
        ChampionUpdate(s.model_name, s.model_version, promoted),
        metadata={
            "champion": f"{s.model_name} v{s.model_version}" if promoted else "unchanged",
            **mlflow_links(context, mlflow, None, s.model_name, s.model_version),
        },
    )
