"""YOAO as Dagster assets (group `yoao`). Thin: each asset reads the profile's `yoao` settings, calls one
function of models/yoao/, stores tables, logs MLflow runs with plots and returns that function's result.

Seed pipeline: yoao_teacher_selection -> yoao_seed_traces -> yoao_seed_dataset -> yoao_seed_agent, with
yoao_format_warmup (the untrained teammates' format warm-up adapter, which the seed continues); then
yoao_warmstart_imitation (both adapters replayed on their held-out turns).
Experiments, partitioned by held-out frame: propagation_by_seed_count -> propagation_mute,
propagation_persistence, propagation_prompting_baseline. Then sugarscape_zero_shot, and yoao_results, which
pools the frames of the profile, writes the report and moves the seed's `champion` alias.
"""

import json
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    Config,
    MetadataValue,
    Output,
    StaticPartitionsDefinition,
    asset,
    asset_check,
)
from pydantic import Field

from assets.common import execution_id, mlflow_links
from assets.configs import EndpointConfig
from environments.yoao.red_black import list_frames
from models.plots import markdown_image
from models.profiles import Profile
from models.serving.adapters import serve_adapter
from models.serving.model_store import resolve_model
from models.tracking import Tracker
from models.yoao import experiments, report
from models.yoao.config import YoaoSettings
from models.yoao.experiments import PROMPTING_BASELINE_OFF, ExperimentResult, ExperimentSetup, PlayerModels
from models.yoao.games import summarise_records
from models.yoao.imitation import AdapterImitation, WarmstartImitation, replay_adapter
from models.yoao.seed import (
    SEED_MODEL_NAME,
    FormatWarmup,
    SeedDataset,
    TeacherSelection,
    TraceSet,
    TrainedAdapter,
    build_seed_dataset,
    dataset_summary,
    format_warmup,
    judge_for,
    seed_traces,
    select_teacher,
    teacher_candidates,
    trace_rows,
    train_seed,
)
from models.yoao.sugarscape import SugarscapeResult
from models.yoao.sugarscape import sugarscape_zero_shot as run_sugarscape
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource
from resources.engine import BASE_MODEL_NAME

GROUP = "yoao"
FRAMES = StaticPartitionsDefinition(list_frames("heldout"))
"""The experiments' partitions: the held-out frames (a profile runs those in `yoao.heldout_frames`)."""
UNTRAINED_ADAPTER = "yoao-untrained"
"""Served name of the format warm-up adapter (the untrained teammates)."""
SEED_ADAPTER = "yoao-seed"
"""Served name of the seed adapter."""
EXPERIMENTS = ("propagation_by_seed_count", "propagation_mute", "propagation_persistence",
               "propagation_prompting_baseline")  # fmt: skip


def _yoao(settings: SettingsResource) -> tuple[Profile, YoaoSettings]:
    profile = settings.get_profile()
    return profile, profile.yoao


def _base_model_dir(settings: SettingsResource) -> Path:
    profile, yoao = _yoao(settings)
    return resolve_model(str(yoao.resolved(profile.base_model).model), settings.paths().models)


def _image(png: bytes, alt: str) -> MetadataValue:
    return MetadataValue.md(markdown_image(png, alt))


class TeacherSelectionConfig(Config):
    endpoints: list[EndpointConfig] = Field(default_factory=list)
    """More teacher candidates for this run, besides the profile's `yoao.teacher_endpoints`."""


# ------------------------------------------------------------------------------------------ seed pipeline
@asset(group_name=GROUP, kinds={"python", "vllm"})
def yoao_teacher_selection(
    context: AssetExecutionContext,
    config: TeacherSelectionConfig,
    settings: SettingsResource,
    yoao_engine: EngineResource,
) -> Output[TeacherSelection]:
    """Candidate teachers (the code teacher, the engine's base model with and without the cooperative
    meta-prompt, configured endpoints) play team A on the training frames against the scripted opponents; the
    eligible one with the highest collective welfare is selected. Failing endpoints are skipped with a reason."""
    _, yoao = _yoao(settings)
    extra = tuple(e.teacher_endpoint() for e in config.endpoints)
    yoao = replace(yoao, teacher_endpoints=yoao.teacher_endpoints + extra)
    selection = select_teacher(
        teacher_candidates(yoao, yoao_engine.proxy_base_url, BASE_MODEL_NAME, yoao_engine.proxy_api_key), yoao
    )
    return Output(
        selection,
        metadata={
            "selected": selection.selected.name,
            "candidates": MetadataValue.md(selection.table_markdown()),
            "wall_s": round(selection.wall_s, 1),
        },
    )


@asset(group_name=GROUP, kinds={"python", "duckdb"})
def yoao_seed_traces(
    context: AssetExecutionContext,
    yoao_teacher_selection: TeacherSelection,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
) -> Output[TraceSet]:
    """The selected teacher in team A (with untrained-like followers) against the scripted opponents on the
    training frames, each teacher seat traced as the chat an LLM seat sees; to the `traces` table."""
    _, yoao = _yoao(settings)
    traces = seed_traces(
        yoao_teacher_selection.selected, yoao, yoao_engine.proxy_base_url, engine_key=yoao_engine.proxy_api_key
    )
    run_id = execution_id(context)
    store.store().append("traces", trace_rows(traces.traces, run_id))
    return Output(
        traces,
        metadata={
            "traces": len(traces.traces),
            "games": traces.games,
            "frames": ", ".join(traces.frames),
            "team_cooperation": traces.team_cooperation,
            "welfare_points": traces.welfare_points,
            "run_id": run_id,
        },
    )


@asset(group_name=GROUP, kinds={"python", "duckdb"})
def yoao_seed_dataset(
    context: AssetExecutionContext,
    yoao_seed_traces: TraceSet,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
) -> Output[SeedDataset]:
    """Keeps the teacher's principled cooperative turns, drops retaliation and outcome-only reasoning (the
    rule-based classifier of models/yoao/seed/dataset.py; an LLM judge when `yoao.judge` is set); kept/dropped counts
    and an example per reason; every turn's decision to `yoao_seed_turns`. Held-out frames never appear."""
    _, yoao = _yoao(settings)
    dataset = build_seed_dataset(
        yoao_seed_traces.traces, judge_for(yoao, yoao_engine.proxy_base_url, yoao_engine.proxy_api_key)
    )
    run_id = execution_id(context)
    store.store().append("yoao_seed_turns", [{"run_id": run_id, **row} for row in dataset.turns])
    examples = "\n\n".join(f"**{reason}**: {text}" for reason, text in sorted(dataset.examples.items()))
    return Output(
        dataset,
        metadata={
            **{k: v for k, v in dataset_summary(dataset).items() if isinstance(v, int | float)},
            "dropped": MetadataValue.json(dataset.dropped),
            "examples": MetadataValue.md(examples),
            "run_id": run_id,
        },
    )


@asset_check(asset=yoao_seed_dataset)
def seed_data_has_no_held_out_frames(context, store: StoreResource) -> AssetCheckResult:
    """No stored seed-data turn comes from a held-out frame (or any frame outside the training split)."""
    held_out = list_frames("heldout")
    frame = store.store().query(
        "SELECT count(*) AS n, count(*) FILTER (WHERE split <> 'train' OR list_contains(?, frame)) AS bad "
        "FROM yoao_seed_turns",
        [held_out],
    )
    n, bad = int(frame.n[0]), int(frame.bad[0])
    return AssetCheckResult(passed=n > 0 and bad == 0, metadata={"turns": n, "held_out_turns": bad})


@asset(group_name=GROUP, kinds={"pytorch", "mlflow"})
def yoao_format_warmup(
    context: AssetExecutionContext, settings: SettingsResource, mlflow: MlflowResource
) -> Output[FormatWarmup]:
    """The untrained teammates' format warm-up: LoRA SFT of the base model on format-tutor games (tutors that
    vote with what the discussion said, or with a prior of their own; votes balanced between colours) so that
    they vote validly and can be moved by words without learning to cooperate; the same adapter for every arm,
    and the one the seed continues. Held-out games give the learning curve. Registered as `yoao-format-warmup`."""
    _, yoao = _yoao(settings)
    output = settings.paths().run_dir("yoao", "warmup", execution_id(context))
    warmup = format_warmup(yoao, _base_model_dir(settings), output, mlflow.tracker())
    adapter = warmup.adapter
    return Output(
        warmup,
        metadata={
            "black_vote_share": warmup.black_share,
            "data_follows_majority": warmup.follows_majority,
            "tutors": ", ".join(warmup.tutors),
            "traces": warmup.traces,
            "eval_curve": MetadataValue.json([[step, loss] for step, loss in adapter.eval_curve]),
            "plateaued": adapter.plateaued(),
            "train_loss": adapter.train_loss,
            "steps": adapter.steps,
            "examples": adapter.examples,
            "model": f"{adapter.registered_name} v{adapter.version}",
            "wall_s": round(warmup.wall_s, 1),
            **mlflow_links(context, mlflow, None, adapter.registered_name, adapter.version),
        },
    )


@asset(group_name=GROUP, kinds={"pytorch", "mlflow"})
def yoao_seed_agent(
    context: AssetExecutionContext,
    yoao_seed_dataset: SeedDataset,
    yoao_format_warmup: FormatWarmup,
    settings: SettingsResource,
    mlflow: MlflowResource,
) -> Output[TrainedAdapter]:
    """LoRA SFT of the seed on the filtered dataset, continuing the format warm-up adapter (run_sft);
    registered as `yoao-seed` with alias `candidate` (`yoao_results` moves `champion`)."""
    _, yoao = _yoao(settings)
    output = settings.paths().run_dir("yoao", "seed", execution_id(context))
    adapter = train_seed(
        yoao_seed_dataset, yoao_format_warmup, yoao, _base_model_dir(settings), output, mlflow.tracker()
    )
    return Output(
        adapter,
        metadata={
            "train_loss": adapter.train_loss,
            "eval_loss_before": adapter.eval_loss_before if adapter.eval_loss_before is not None else float("nan"),
            "eval_loss_after": adapter.eval_loss_after if adapter.eval_loss_after is not None else float("nan"),
            "eval_curve": MetadataValue.json([[step, loss] for step, loss in adapter.eval_curve]),
            "plateaued": adapter.plateaued(),
            "steps": adapter.steps,
            "examples": adapter.examples,
            "model": f"{adapter.registered_name} v{adapter.version}",
            "wall_s": round(adapter.wall_s, 1),
            **mlflow_links(context, mlflow, None, adapter.registered_name, adapter.version),
        },
    )


@asset(group_name=GROUP, kinds={"vllm", "mlflow"})
def yoao_warmstart_imitation(
    context: AssetExecutionContext,
    yoao_format_warmup: FormatWarmup,
    yoao_seed_agent: TrainedAdapter,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[WarmstartImitation]:
    """Have the warm-starts learned their data? The format warm-up and the seed replayed on their held-out
    turns with their teachers' own contexts (models/yoao/imitation.py): valid-vote rate, votes and statements
    that follow the teacher, the seed-data filter's verdict on their statements, the held-out loss curve and
    whether it plateaued, and a few transcripts."""
    profile, yoao = _yoao(settings)
    start = time.perf_counter()
    models = _players(yoao_engine, yoao_format_warmup, yoao_seed_agent)

    def replay(adapter: TrainedAdapter, served: str) -> AdapterImitation:
        return replay_adapter(
            adapter, models.base_url, served, yoao.imitation_conversations, yoao.max_new_tokens, yoao.temperature,
            models.api_key, yoao.concurrency,
        )  # fmt: skip

    result = WarmstartImitation(
        replay(yoao_format_warmup.adapter, models.untrained),
        replay(yoao_seed_agent, models.seed),
        1.0 - yoao.max_abstention_rate,
    )
    metrics = {
        f"{label}.{name}": e.mean
        for label, a in (("warmup", result.format_warmup), ("seed", result.seed))
        for name, e in a.metrics.items()
    }
    run_id = report.log_run(
        mlflow.tracker(),
        "yoao_warmstart_imitation",
        {"profile": profile.name, "seed_version": yoao_seed_agent.version or 0},
        {**metrics, "wall_s": time.perf_counter() - start},
        {"yoao_warmstart_imitation.md": result.markdown()},
    )
    return Output(
        result,
        metadata={
            "imitation": MetadataValue.md(result.markdown()),
            "warmup_valid_vote_rate": result.format_warmup.valid_vote_rate,
            "seed_valid_vote_rate": result.seed.valid_vote_rate,
            "passed": result.passed,
            "mlflow_run_id": run_id,
            "wall_s": round(time.perf_counter() - start, 1),
        },
    )


@asset_check(asset=yoao_warmstart_imitation)
def warm_starts_learned_their_data(context, yoao_warmstart_imitation: WarmstartImitation) -> AssetCheckResult:
    """Both warm-starts write a valid vote on at least 1 - `max_abstention_rate` of their held-out vote turns and
    their held-out loss has plateaued."""
    r = yoao_warmstart_imitation
    return AssetCheckResult(
        passed=r.passed,
        severity=AssetCheckSeverity.WARN,
        metadata={
            "warmup_valid_vote_rate": r.format_warmup.valid_vote_rate,
            "seed_valid_vote_rate": r.seed.valid_vote_rate,
            "warmup_plateau_gain": r.format_warmup.plateau_gain,
            "seed_plateau_gain": r.seed.plateau_gain,
            "min_valid_vote_rate": r.min_valid_vote_rate,
        },
    )


# ------------------------------------------------------------------------------------------- experiments
def _players(
    engine: EngineResource, warmup: FormatWarmup, seed: TrainedAdapter, selection: TeacherSelection | None = None
) -> PlayerModels:
    """Serve both adapters and say where the players are."""
    untrained = serve_adapter(engine.client, UNTRAINED_ADAPTER, Path(warmup.adapter.adapter_dir))
    seeded = serve_adapter(engine.client, SEED_ADAPTER, Path(seed.adapter_dir))
    teacher = selection.selected if selection is not None else None
    return PlayerModels(
        engine.proxy_base_url, untrained, seeded, teacher, engine.proxy_base_url, api_key=engine.proxy_api_key
    )


def _setup(
    context: AssetExecutionContext,
    settings: SettingsResource,
    engine: EngineResource,
    store: StoreResource,
    warmup: FormatWarmup,
    seed: TrainedAdapter,
    selection: TeacherSelection | None = None,
) -> ExperimentSetup:
    """This partition's experiment setup, the adapters served."""
    profile, yoao = _yoao(settings)
    models = _players(engine, warmup, seed, selection)
    return ExperimentSetup(
        context.partition_key, yoao, models, profile.name, seed.version, store.store(), execution_id(context)
    )


def _experiment_output(
    result: ExperimentResult, settings: SettingsResource, mlflow: MlflowResource, png: bytes
) -> Output[ExperimentResult]:
    profile, _ = _yoao(settings)
    name = f"{result.experiment}-{result.frame}"
    metrics = {f"{a.arm}.cooperation": a.cooperation.mean for a in result.arms}
    metrics |= {f"{a.arm}.untrained_cooperation": a.untrained_cooperation.mean for a in result.arms}
    metrics |= {f"{a.arm}.abstention_rate": a.abstention_rate for a in result.arms}
    metrics |= {"llm_calls": result.llm_calls, "calls_per_s": result.calls_per_s, "wall_s": result.wall_s}
    run_id = report.log_run(
        mlflow.tracker(),
        name,
        {"profile": profile.name, "frame": result.frame, "seed_version": result.seed_version or 0},
        metrics,
        {f"{name}.png": png, f"{name}.md": result.table_markdown()},
    )
    return Output(
        result,
        metadata={
            "arms": MetadataValue.md(result.table_markdown()),
            "plot": _image(png, result.experiment),
            "llm_calls": result.llm_calls,
            "calls_per_s": round(result.calls_per_s, 2) if result.llm_calls else 0.0,
            "wall_s": round(result.wall_s, 1),
            "mlflow_run_id": run_id,
        },
    )


@asset(partitions_def=FRAMES, group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def propagation_by_seed_count(
    context: AssetExecutionContext,
    yoao_seed_agent: TrainedAdapter,
    yoao_format_warmup: FormatWarmup,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[ExperimentResult]:
    """k = 0..5 seeds among untrained teammates (base model + the format warm-up) on this held-out frame against
    the scripted opponent teams: team cooperation, decided cooperation (not carried by ties or abstentions),
    collective welfare, influence of the first seed, every arm's abstention and invalid-vote rates."""
    setup = _setup(context, settings, yoao_engine, store, yoao_format_warmup, yoao_seed_agent)
    result = experiments.propagation_by_seed_count(setup)
    return _experiment_output(result, settings, mlflow, report.seed_count_plot([result]))


@asset_check(asset=propagation_by_seed_count, partitions_def=FRAMES)
def untrained_teammates_vote_validly(
    context, propagation_by_seed_count: ExperimentResult, settings: SettingsResource
) -> AssetCheckResult:
    """Cooperation is not carried by abstentions: in every arm (those played ahead for the later experiments
    too) the untrained teammates' abstention rate stays at most `yoao.max_abstention_rate` (a tie,
    all-abstention included, counts as BLACK)."""
    limit = settings.get_profile().yoao.max_abstention_rate
    result = propagation_by_seed_count
    k0 = result.arm("k=0")
    ahead = [summarise_records(a, [g for g in result.ahead if g.arm == a.name]) for a in result.ahead_arms]
    rates = {a.arm: a.untrained_abstention_rate for a in (*result.arms, *ahead)}
    measured = {arm: rate for arm, rate in rates.items() if not math.isnan(rate)}
    return AssetCheckResult(
        passed=bool(measured) and all(rate <= limit for rate in measured.values()),
        severity=AssetCheckSeverity.WARN,
        metadata={
            "untrained_abstention_rate": k0.untrained_abstention_rate,
            "by_arm": MetadataValue.json({arm: round(rate, 4) for arm, rate in measured.items()}),
            "invalid_vote_rate": k0.invalid_vote_rate,
            "cooperation": k0.cooperation.mean,
            "decided_cooperation": k0.decided_cooperation.mean,
            "limit": limit,
        },
    )


@asset(partitions_def=FRAMES, group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def propagation_mute(
    context: AssetExecutionContext,
    propagation_by_seed_count: ExperimentResult,
    yoao_seed_agent: TrainedAdapter,
    yoao_format_warmup: FormatWarmup,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[ExperimentResult]:
    """The seed muted (it votes, but only says "I vote BLACK." in the frame's words) vs unmuted vs no seed."""
    setup = _setup(context, settings, yoao_engine, store, yoao_format_warmup, yoao_seed_agent)
    result = experiments.propagation_mute(setup, propagation_by_seed_count)
    return _experiment_output(result, settings, mlflow, report.arms_plot("Mute test", result.arms))


@asset(partitions_def=FRAMES, group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def propagation_persistence(
    context: AssetExecutionContext,
    propagation_by_seed_count: ExperimentResult,
    yoao_seed_agent: TrainedAdapter,
    yoao_format_warmup: FormatWarmup,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[ExperimentResult]:
    """Seeds for the first rounds, then untrained members in their seats: cooperation after the removal vs the
    seeds kept all game and vs no seeds."""
    setup = _setup(context, settings, yoao_engine, store, yoao_format_warmup, yoao_seed_agent)
    result = experiments.propagation_persistence(setup, propagation_by_seed_count)
    png = report.arms_plot("Persistence test", result.arms, result.window)
    return _experiment_output(result, settings, mlflow, png)


@asset(partitions_def=FRAMES, group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def propagation_prompting_baseline(
    context: AssetExecutionContext,
    propagation_by_seed_count: ExperimentResult,
    yoao_teacher_selection: TeacherSelection,
    yoao_seed_agent: TrainedAdapter,
    yoao_format_warmup: FormatWarmup,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[ExperimentResult]:
    """The teacher, and the untrained model with the cooperative meta-prompt, in the seed's seat: does the SFT
    seed beat prompting? (When the profile requests it: `yoao.prompting_baseline`.)"""
    profile, yoao = _yoao(settings)
    if not yoao.prompting_baseline:
        setup = ExperimentSetup(context.partition_key, yoao, PlayerModels("", "", ""), profile.name,
                                yoao_seed_agent.version)  # fmt: skip
        result = experiments.not_played("propagation_prompting_baseline", setup, PROMPTING_BASELINE_OFF)
        return Output(result, metadata={"skipped": result.skipped})
    setup = _setup(context, settings, yoao_engine, store, yoao_format_warmup, yoao_seed_agent, yoao_teacher_selection)
    result = experiments.propagation_prompting_baseline(setup, propagation_by_seed_count)
    return _experiment_output(result, settings, mlflow, report.arms_plot("Prompting baseline", result.arms))


@asset(group_name=GROUP, kinds={"vllm", "mlflow"})
def sugarscape_zero_shot(
    context: AssetExecutionContext,
    yoao_seed_agent: TrainedAdapter,
    yoao_format_warmup: FormatWarmup,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[SugarscapeResult]:
    """LLM traders on Sugarscape under one exploitative prompt, seed shares 0/20/50/100%: trade success,
    survival, mean lifespan, identity-leaning shift of seeds vs untrained (a smaller world on the cpu profile)."""
    profile, yoao = _yoao(settings)
    if yoao.sugarscape.skip:
        result = run_sugarscape(yoao.sugarscape, "", "", "")
        return Output(result, metadata={"skipped": result.skipped})
    models = _players(yoao_engine, yoao_format_warmup, yoao_seed_agent)
    result = run_sugarscape(yoao.sugarscape, models.base_url, models.seed, models.untrained, models.api_key)
    png = report.sugarscape_plot(result)
    metrics = {f"{f.fraction:g}.{k}": v for f in result.fractions for k, v in f.as_dict().items()
               if isinstance(v, float)}  # fmt: skip
    run_id = report.log_run(
        mlflow.tracker(),
        "sugarscape_zero_shot",
        {"profile": profile.name, "seed_version": yoao_seed_agent.version or 0, "world": yoao.sugarscape},
        {**metrics, "llm_calls": result.llm_calls, "wall_s": result.wall_s},
        {"sugarscape_zero_shot.png": png, "sugarscape_zero_shot.md": result.table_markdown()},
    )
    return Output(
        result,
        metadata={
            "shares": MetadataValue.md(result.table_markdown()),
            "plot": _image(png, "sugarscape"),
            "llm_calls": result.llm_calls,
            "wall_s": round(result.wall_s, 1),
            "mlflow_run_id": run_id,
        },
    )


# ------------------------------------------------------------------------------------------------ results
SEED_PIPELINE_ASSETS = ("yoao_teacher_selection", "yoao_seed_traces", "yoao_seed_dataset", "yoao_format_warmup",
                        "yoao_seed_agent")  # fmt: skip
_PARTITIONED = {"metadata": {"allow_missing_partitions": True}}


@asset(
    group_name=GROUP,
    kinds={"python", "mlflow"},
    ins={name: AssetIn(**_PARTITIONED) for name in EXPERIMENTS},
)
def yoao_results(
    context: AssetExecutionContext,
    yoao_teacher_selection: TeacherSelection,
    yoao_seed_traces: TraceSet,
    yoao_seed_dataset: SeedDataset,
    yoao_format_warmup: FormatWarmup,
    yoao_seed_agent: TrainedAdapter,
    yoao_warmstart_imitation: WarmstartImitation,
    propagation_by_seed_count: dict[str, ExperimentResult],
    propagation_mute: dict[str, ExperimentResult],
    propagation_persistence: dict[str, ExperimentResult],
    propagation_prompting_baseline: dict[str, ExperimentResult],
    sugarscape_zero_shot: SugarscapeResult,
    settings: SettingsResource,
    mlflow: MlflowResource,
) -> Output[report.YoaoResults]:
    """The profile's held-out frames pooled: the result file's content (`benchmark`, exactly the keys of
    models/yoao/report.py) and the full report, written under <data>/reports; plots to MLflow; the seed's
    `champion` alias moves when its pooled k=1 cooperation beats the champion's."""
    start = time.perf_counter()
    profile, yoao = _yoao(settings)
    experiments = {
        "propagation_by_seed_count": propagation_by_seed_count,
        "propagation_mute": propagation_mute,
        "propagation_persistence": propagation_persistence,
        "propagation_prompting_baseline": propagation_prompting_baseline,
    }
    version = yoao_seed_agent.version
    seed_pipeline = (yoao_teacher_selection, yoao_seed_traces, yoao_seed_dataset, yoao_format_warmup, yoao_seed_agent)
    wall = _wall_times(seed_pipeline, experiments, sugarscape_zero_shot, profile.name, version, yoao.heldout_frames)
    extra = {
        "teacher_selection": [r.as_dict() for r in yoao_teacher_selection.rows],
        "seed_data": dataset_summary(yoao_seed_dataset),
        "format_warmup": {
            "black_vote_share": yoao_format_warmup.black_share,
            "traces": yoao_format_warmup.traces,
            "tutors": list(yoao_format_warmup.tutors),
            "data_follows_majority": yoao_format_warmup.follows_majority,
        },
        "seed": {"version": version, "train_loss": yoao_seed_agent.train_loss, "steps": yoao_seed_agent.steps},
    }
    results = report.build_results(
        profile.name, yoao.heldout_frames, version, *experiments.values(), sugarscape_zero_shot, wall, extra,
        warmstarts=yoao_warmstart_imitation.summary(),
    )  # fmt: skip
    wall["yoao_results"] = time.perf_counter() - start
    results = replace(results, wall_s=wall)
    paths = settings.paths()
    benchmark = results.benchmark()
    report.write_json(paths.reports / f"yoao-{profile.name}.json", results.full())
    report.write_json(paths.reports / f"yoao_{profile.name}.json", benchmark)
    seed_counts = report.current(propagation_by_seed_count, profile.name, version, yoao.heldout_frames)
    pngs = _pooled_plots(results, seed_counts)
    tracker = mlflow.tracker()
    promoted = _promote_seed(tracker, version, results)
    metrics = {f"cooperation_k{a.arm.removeprefix('k=')}": a.cooperation.mean for a in results.by_seed_count}
    run_id = report.log_run(
        tracker,
        "yoao_results",
        {"profile": profile.name, "frames": ",".join(results.frames), "seed_version": version or 0},
        metrics,
        {**pngs, "yoao_results.md": results.markdown(), "benchmark.json": json.dumps(benchmark, indent=1)},
    )
    results = replace(results, extra={**results.extra, "seed_promoted_to_champion": promoted})
    return Output(
        results,
        metadata={
            "results": MetadataValue.md(results.markdown()),
            "cooperation_by_seed_count": _image(pngs["cooperation_by_seed_count.png"], "cooperation by seed count"),
            "benchmark": MetadataValue.json(benchmark),
            "seed_champion": f"{SEED_MODEL_NAME} v{version}" if promoted else "unchanged",
            "mlflow_run_id": run_id,
            **mlflow_links(context, mlflow, run_id),
        },
    )


def _wall_times(
    seed_pipeline: tuple[TeacherSelection, TraceSet, SeedDataset, FormatWarmup, TrainedAdapter],
    experiments: dict[str, dict[str, ExperimentResult]],
    sugarscape: SugarscapeResult,
    profile: str,
    version: int | None,
    frames: Sequence[str],
) -> dict[str, float]:
    """Each asset's wall time; an experiment's is the sum over the profile's frames of the current seed."""
    return {
        **dict(zip(SEED_PIPELINE_ASSETS, (r.wall_s for r in seed_pipeline), strict=True)),
        **{
            name: sum(r.wall_s for r in report.current(results, profile, version, frames))
            for name, results in experiments.items()
        },
        "sugarscape_zero_shot": sugarscape.wall_s,
    }


def _pooled_plots(results: report.YoaoResults, seed_counts: list[ExperimentResult]) -> dict[str, bytes]:
    """The pooled plots logged with the results (file name -> PNG)."""
    return {
        "cooperation_by_seed_count.png": report.seed_count_plot(seed_counts, results.by_seed_count),
        "mute.png": report.arms_plot("Mute test (pooled)", results.mute),
        "persistence.png": report.arms_plot("Persistence (pooled)", results.persistence, results.persistence_window),
        "prompting_baseline.png": report.arms_plot("Prompting baseline (pooled)", results.baseline),
    }


def _promote_seed(tracker: Tracker, version: int | None, results: report.YoaoResults) -> bool | None:
    """Move the seed's `champion` alias when its pooled k=1 cooperation beats the champion's (None: no k=1 games
    or no registered seed)."""
    k1 = next((a for a in results.by_seed_count if a.arm == "k=1"), None)
    if version is None or k1 is None or not k1.games:
        return None
    return tracker.promote_if_better(SEED_MODEL_NAME, version, "heldout_cooperation_k1", k1.cooperation.mean)
