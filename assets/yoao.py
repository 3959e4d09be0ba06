"""YOAO as Dagster assets (group `yoao`), in two modules: this one holds the seed pipeline and what the group
shares (its name, the frame partitions, the served adapters' names); assets/yoao_experiments.py the
experiments and the results. Thin: each asset reads the profile's `yoao` settings, calls one function of
models/yoao/, stores tables, logs MLflow runs with plots and returns that function's result.

Seed pipeline: yoao_teacher_selection -> yoao_seed_traces -> yoao_seed_dataset -> yoao_seed_agent, with
yoao_format_warmup (the untrained teammates' format warm-up adapter, which the seed continues); then
yoao_warmstart_imitation (both adapters replayed on their held-out turns).
"""

import time
from dataclasses import replace
from pathlib import Path

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
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
from models.profiles import Profile
from models.serving.adapters import serve_adapter
from models.serving.model_store import resolve_model
from models.yoao import report
from models.yoao.config import YoaoSettings
from models.yoao.experiments import PlayerModels, llm_maker
from models.yoao.imitation import AdapterImitation, WarmstartImitation, replay_adapter
from models.yoao.listening import run_listener_probe
from models.yoao.seed import (
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
from models.yoao.seed_audit import run_seed_audit
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource
from resources.engine import BASE_MODEL_NAME

GROUP = "yoao"
FRAMES = StaticPartitionsDefinition(list_frames("heldout"))
"""The experiments' partitions: the held-out frames (a profile runs those in `yoao.heldout_frames`)."""
UNTRAINED_ADAPTER = "yoao-untrained"
"""Served name of the format warm-up adapter (the untrained teammates)."""
SEED_ADAPTER = "yoao-seed"
"""Served name of the seed adapter."""
SEED_PIPELINE_ASSETS = ("yoao_teacher_selection", "yoao_seed_traces", "yoao_seed_dataset", "yoao_format_warmup",
                        "yoao_seed_agent")  # fmt: skip


def yoao_settings(settings: SettingsResource) -> tuple[Profile, YoaoSettings]:
    """The run's profile and its `yoao` settings."""
    profile = settings.get_profile()
    return profile, profile.yoao


def _base_model_dir(settings: SettingsResource) -> Path:
    profile, yoao = yoao_settings(settings)
    return resolve_model(str(yoao.resolved(profile.base_model).model), settings.paths().models)


def serve_players(
    engine: EngineResource, warmup: FormatWarmup, seed: TrainedAdapter, selection: TeacherSelection | None = None
) -> PlayerModels:
    """Serve both adapters and say where the players are."""
    untrained = serve_adapter(engine.client, UNTRAINED_ADAPTER, Path(warmup.adapter.adapter_dir))
    seeded = serve_adapter(engine.client, SEED_ADAPTER, Path(seed.adapter_dir))
    teacher = selection.selected if selection is not None else None
    return PlayerModels(
        engine.proxy_base_url, untrained, seeded, teacher, engine.proxy_base_url, api_key=engine.proxy_api_key
    )


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
    _, yoao = yoao_settings(settings)
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
    """The selected teacher in team A (its teammates: `yoao.trace_teammates`, by default the warm-up's tutors)
    against the scripted opponents on the training frames, each teacher seat traced as the chat an LLM seat sees;
    to the `traces` table."""
    _, yoao = yoao_settings(settings)
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
            "teammates": yoao.trace_teammates,
            "facing_red_majority": traces.red_majority_share,
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
    _, yoao = yoao_settings(settings)
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
    """The untrained teammates' format warm-up: LoRA SFT of the base model on format-tutor games (by default,
    teammates who lean selfish and are moved by grounded reasons, not by a bare vote or length:
    agents/yoao/persuasion.py) so that they vote validly and can be moved by what is argued; the same adapter for
    every arm, and the one the seed continues. Held-out games give the learning curve. Registered as `yoao-format-warmup`."""
    _, yoao = yoao_settings(settings)
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
    _, yoao = yoao_settings(settings)
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
    whether it plateaued, and a few transcripts; and the listener probe (models/yoao/listening.py): the format
    warm-up writes each untrained seat's statement, then its vote, in the incentive audit's games among the
    tutors, to see whether it weighs an argument above a stated vote as the tutors do; and the seed audit
    (models/yoao/seed_audit.py): the seed in the audit's seed seat among the tutors, paired with its teacher,
    the teacher muted and no seed, to see whether its words persuade as its teacher's do."""
    profile, yoao = yoao_settings(settings)
    start = time.perf_counter()
    models = serve_players(yoao_engine, yoao_format_warmup, yoao_seed_agent)

    def replay(adapter: TrainedAdapter, served: str) -> AdapterImitation:
        return replay_adapter(
            adapter, models.base_url, served, yoao.imitation_conversations, yoao.max_new_tokens, yoao.temperature,
            models.api_key, yoao.concurrency,
        )  # fmt: skip

    listener = run_listener_probe(
        yoao, models.base_url, models.untrained, adapter=yoao_format_warmup.adapter.registered_name,
        games=yoao.listener_games, api_key=models.api_key,
    )  # fmt: skip
    seed_audit = run_seed_audit(
        yoao, llm_maker(models.base_url, models.seed, yoao, api_key=models.api_key),
        name=yoao_seed_agent.registered_name, games=yoao.seed_audit_games,
    )  # fmt: skip
    result = WarmstartImitation(
        replay(yoao_format_warmup.adapter, models.untrained),
        replay(yoao_seed_agent, models.seed),
        1.0 - yoao.max_abstention_rate,
        listener,
        seed_audit,
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
            "warmup_listens": listener.listens,
            "warmup_votes_argue_minus_vote_only": listener.model_comparisons["argue_minus_vote_only"].mean,
            "warmup_statements_argue_minus_vote_only": listener.model_statement_comparisons[
                "argue_minus_vote_only"
            ].mean,
            "seed_persuades_tutors": seed_audit.persuades,
            "seed_minus_vote_only": seed_audit.comparisons["seed_minus_vote_only"].mean,
            "argue_minus_seed": seed_audit.comparisons["argue_minus_seed"].mean,
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
