"""YOAO's experiments and results as Dagster assets (group `yoao`, with the seed pipeline of assets/yoao.py).

Experiments, partitioned by held-out frame: propagation_by_seed_count -> propagation_mute,
propagation_persistence, propagation_prompting_baseline. Then sugarscape_zero_shot, and yoao_results, which
pools the frames of the profile, writes the report and moves the seed's `champion` alias.
"""

import json
import math
import time
from collections.abc import Sequence
from dataclasses import replace

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    MetadataValue,
    Output,
    asset,
    asset_check,
)

from assets.common import execution_id, mlflow_links
from assets.yoao import FRAMES, GROUP, SEED_PIPELINE_ASSETS, serve_players, yoao_settings
from models.plots import markdown_image
from models.tracking import Tracker
from models.yoao import experiments, report
from models.yoao import plots as yoao_plots
from models.yoao.experiments import PROMPTING_BASELINE_OFF, ExperimentResult, ExperimentSetup, PlayerModels
from models.yoao.games import summarise_records
from models.yoao.imitation import WarmstartImitation
from models.yoao.incentives import run_yoao_incentives
from models.yoao.seed import (
    SEED_MODEL_NAME,
    FormatWarmup,
    SeedDataset,
    TeacherSelection,
    TraceSet,
    TrainedAdapter,
    dataset_summary,
)
from models.yoao.sugarscape import SugarscapeResult
from models.yoao.sugarscape import sugarscape_zero_shot as run_sugarscape
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

EXPERIMENTS = ("propagation_by_seed_count", "propagation_mute", "propagation_persistence",
               "propagation_prompting_baseline")  # fmt: skip


def _image(png: bytes, alt: str) -> MetadataValue:
    return MetadataValue.md(markdown_image(png, alt))


# ------------------------------------------------------------------------------------------- experiments
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
    profile, yoao = yoao_settings(settings)
    models = serve_players(engine, warmup, seed, selection)
    return ExperimentSetup(
        frame=context.partition_key,
        settings=yoao,
        models=models,
        profile=profile.name,
        seed_version=seed.version,
        store=store.store(),
        run_id=execution_id(context),
    )


def _experiment_output(
    result: ExperimentResult, settings: SettingsResource, mlflow: MlflowResource, png: bytes
) -> Output[ExperimentResult]:
    profile, _ = yoao_settings(settings)
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
    yoao_teacher_selection: TeacherSelection,
    settings: SettingsResource,
    yoao_engine: EngineResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[ExperimentResult]:
    """k = 0..5 seeds among untrained teammates (base model + the format warm-up) on this held-out frame against
    the scripted opponent teams: team cooperation, decided cooperation (not carried by ties or abstentions),
    collective welfare, influence of the first seed, every arm's abstention and invalid-vote rates. The selected
    teacher is at hand so that, with `batch_arms`, the prompting baseline's arms join the same batch."""
    setup = _setup(context, settings, yoao_engine, store, yoao_format_warmup, yoao_seed_agent, yoao_teacher_selection)
    result = experiments.propagation_by_seed_count(setup)
    return _experiment_output(result, settings, mlflow, yoao_plots.seed_count_plot([result]))


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
    return _experiment_output(result, settings, mlflow, yoao_plots.arms_plot("Mute test", result.arms))


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
    png = yoao_plots.arms_plot("Persistence test", result.arms, result.window)
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
    profile, yoao = yoao_settings(settings)
    if not yoao.prompting_baseline:
        setup = ExperimentSetup(frame=context.partition_key, settings=yoao, models=PlayerModels("", "", ""), profile=profile.name,
                                seed_version=yoao_seed_agent.version)  # fmt: skip
        result = experiments.not_played("propagation_prompting_baseline", setup, PROMPTING_BASELINE_OFF)
        return Output(result, metadata={"skipped": result.skipped})
    setup = _setup(context, settings, yoao_engine, store, yoao_format_warmup, yoao_seed_agent, yoao_teacher_selection)
    result = experiments.propagation_prompting_baseline(setup, propagation_by_seed_count)
    return _experiment_output(result, settings, mlflow, yoao_plots.arms_plot("Prompting baseline", result.arms))


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
    profile, yoao = yoao_settings(settings)
    if yoao.sugarscape.skip:
        result = run_sugarscape(yoao.sugarscape, "", "", "")
        return Output(result, metadata={"skipped": result.skipped})
    models = serve_players(yoao_engine, yoao_format_warmup, yoao_seed_agent)
    result = run_sugarscape(yoao.sugarscape, models.base_url, models.seed, models.untrained, models.api_key)
    png = yoao_plots.sugarscape_plot(result)
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
    """The profile's held-out frames pooled, and the tutors' incentive audit (models/yoao/incentives.py): the
    result file's content (`benchmark`, exactly the keys of models/yoao/report.py) and the full report, written under <data>/reports; plots to MLflow; the seed's
    `champion` alias moves when its pooled k=1 cooperation beats the champion's."""
    start = time.perf_counter()
    profile, yoao = yoao_settings(settings)
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
        warmstarts=yoao_warmstart_imitation.summary(), incentives=run_yoao_incentives(yoao).as_json(),
    )  # fmt: skip
    wall["yoao_results"] = time.perf_counter() - start
    results = replace(results, wall_s=wall)
    paths = settings.paths()
    benchmark = results.benchmark()
    report.write_json(paths.reports / f"yoao-{profile.name}.json", results.full())
    report.write_json(paths.reports / f"yoao_{profile.name}.json", benchmark)
    seed_counts = report.current(propagation_by_seed_count, profile.name, version, yoao.heldout_frames)
    pngs = yoao_plots.pooled_plots(results, seed_counts)
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
            **{
                name.removesuffix(".png"): _image(png, name.removesuffix(".png").replace("_", " "))
                for name, png in pngs.items()
            },
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


def _promote_seed(tracker: Tracker, version: int | None, results: report.YoaoResults) -> bool | None:
    """Move the seed's `champion` alias when its pooled k=1 cooperation beats the champion's (None: no k=1 games
    or no registered seed)."""
    k1 = next((a for a in results.by_seed_count if a.arm == "k=1"), None)
    if version is None or k1 is None or not k1.games:
        return None
    return tracker.promote_if_better(SEED_MODEL_NAME, version, "heldout_cooperation_k1", k1.cooperation.mean)
