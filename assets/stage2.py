"""SocialRL stage 2 as Dagster assets: transfer_matrix -> cascade_order -> cascade_policy; transfer_matrix ->
mopd_student; all three -> unified_evaluation. Thin: each asset reads its settings, calls one function of
models/socialrl/stage2/, stores tables and returns that function's frozen dataclass with metadata.

The stage-1 specialists enter through the MLflow registry (`socialrl-<domain>-specialist`): per domain the
version `make run` evaluated on the profile's held-out plan (the champion, else the newest), else one
run_stage2 trained (`stage1.select_specialist`); `transfer_matrix` depends on `specialist_champion` for the
lineage only, so stage 2 runs on whatever stage 1 registered, and fails naming any domain that has none.
"""

from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    Config,
    MetadataValue,
    Output,
    asset,
    asset_check,
)
from pydantic import Field

from assets.common import execution_id, mlflow_links, work_key
from assets.socialrl import specialist_champion
from environments import SOCIALRL_ENV_IDS
from models.plots import markdown_image
from models.serving.model_store import resolve_model
from models.socialrl import stage2
from models.training.config import Services
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource
from resources.engine import BASE_MODEL_NAME

GROUP = "socialrl_stage2"


class Stage2Config(Config):
    """Run configuration of `transfer_matrix` (the later assets take their domains from it)."""

    domains: list[str] = Field(default_factory=list, description="Domains; empty = the profile's stage-2 domains.")


def _services(engine: EngineResource, store: StoreResource) -> Services:
    return Services(engine.client, engine.proxy_base_url, store.store(), engine.proxy_api_key)


@asset(group_name=GROUP, deps=[specialist_champion], kinds={"vllm", "mlflow", "duckdb"})
def transfer_matrix(
    context: AssetExecutionContext,
    config: Stage2Config,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[stage2.TransferMatrixResult]:
    """Every registered specialist and SFT warm-start, and the base model, on every domain's held-out
    scenarios (one plan per domain, so every cell is paired): cell (donor, recipient) = mean per-episode
    reward difference donor - base with a scenario-clustered bootstrap 95% CI. Table `transfer_matrix`,
    heatmap in MLflow and here."""
    profile = settings.get_profile()
    domains = tuple(config.domains) or profile.stage2.domains
    unknown = sorted(set(domains) - set(SOCIALRL_ENV_IDS))
    if unknown:
        raise ValueError(f"unknown domains {unknown}; choose from {', '.join(SOCIALRL_ENV_IDS)}")
    result = stage2.compute_transfer_matrix(
        profile, domains, _services(engine, store), mlflow.tracker(), BASE_MODEL_NAME, execution_id(context)
    )
    matrix = result.matrix
    return Output(
        result,
        metadata={
            "heatmap": MetadataValue.md(markdown_image(result.heatmap_png, "transfer matrix")),
            "donors": MetadataValue.md(matrix.describe_donors()),
            "cells": MetadataValue.md(matrix.markdown()),
            "specialists": MetadataValue.json(result.specialists),
            "specialists_source": MetadataValue.json(result.sources_json()),
            "domains": MetadataValue.json(list(matrix.domains)),
            "wall_s": round(result.wall_s, 1),
            "mlflow_run_id": result.mlflow_run_id or "",
            **mlflow_links(context, mlflow, result.mlflow_run_id),
        },
    )


@asset_check(asset=transfer_matrix)
def transfer_matrix_complete(transfer_matrix: stage2.TransferMatrixResult) -> AssetCheckResult:
    """Every specialist donor has a cell on every domain, all cells over the same number of paired episodes,
    and every cell is what its episodes give: the donor and the base played the same episodes, and the cell's
    means are recomputed from the per-episode rewards the matrix keeps (`stage2.check_transfer_matrix`)."""
    return _check_result(stage2.check_transfer_matrix(transfer_matrix.matrix))


@asset(group_name=GROUP, kinds={"python"})
def cascade_order(
    transfer_matrix: stage2.TransferMatrixResult, settings: SettingsResource
) -> Output[stage2.CascadeOrder]:
    """The cascade's domain order: every order of the domains scored exhaustively from the transfer matrix
    (destructive donors early, mutually beneficial pairs adjacent; the rule is in the metadata), compared
    with the paper's order (Calendar -> CaSiNo -> DnD -> Craigslist -> Marketplace -> Job Interview) and its
    reverse."""
    matrix = transfer_matrix.matrix
    order = stage2.choose_cascade_order(matrix.means(), matrix.domains, settings.get_profile().stage2.adjacency_weight)

    return Output(
        order,
        metadata={
            "order": " -> ".join(order.order),
            "score": order.chosen.score,
            "paper_order_score": order.paper.score,
            "reverse_order_score": order.reverse.score,
            "orders_scored": order.orders_scored,
            "scores": MetadataValue.md(order.markdown()),
            "rule": MetadataValue.md(order.rule),
        },
    )


@asset_check(asset=cascade_order, additional_ins={"transfer_matrix": AssetIn(key=transfer_matrix.key)})
def cascade_order_is_best(
    cascade_order: stage2.CascadeOrder, transfer_matrix: stage2.TransferMatrixResult
) -> AssetCheckResult:
    """Every order of the domains re-scored by brute force from the transfer matrix's cells (apart from the
    asset's scoring): the chosen order is among the best, its recorded score is the recomputed one, and every
    order was scored; fails as "not decidable" when every order scores the same (`stage2.check_cascade_order`)."""
    outcome = stage2.check_cascade_order(cascade_order, transfer_matrix.matrix)
    return _check_result(outcome, orders_scored=cascade_order.orders_scored)


def _check_result(outcome: stage2.CheckOutcome, **extra: Any) -> AssetCheckResult:
    metadata = {k: MetadataValue.json(v) if isinstance(v, list | dict) else v for k, v in outcome.metadata.items()}
    metadata = {k: v for k, v in metadata.items() if v is not None}
    return AssetCheckResult(
        passed=outcome.passed,
        metadata={**metadata, **extra, "problems": MetadataValue.json(list(outcome.problems))},
    )


@asset(group_name=GROUP, kinds={"pytorch", "vllm", "mlflow"})
def cascade_policy(
    context: AssetExecutionContext,
    cascade_order: stage2.CascadeOrder,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[stage2.CascadeResult]:
    """One policy trained by PPO through the domains in the cascade order, each stage from the previous
    stage's adapter (SFT on the domain's teacher traces first where the profile warm-starts it), keeping
    after each stage the checkpoint with the best mean validation reward over the domains seen so far;
    evaluated on every domain's held-out plan after every stage. Registered as `socialrl-cascade`
    (alias candidate). Re-executing a failed run resumes from the failed stage's last checkpoint."""
    profile = settings.get_profile()
    paths = settings.paths()
    result = stage2.train_cascade(
        cascade_order.order,
        profile,
        engine.model_dir,
        resolve_model(profile.critic_model, paths.models),
        _services(engine, store),
        paths.run_dir("cascade", work_key(context)),
        mlflow.tracker(),
        run_id=execution_id(context),
    )
    return Output(
        result,
        metadata={
            "curve": MetadataValue.md(markdown_image(result.curve_png, "cascade forgetting/transfer curve")),
            "stages": MetadataValue.md(result.markdown()),
            "final_mean_reward": stage2.pooled(result.scores).mean,
            "model": f"{result.model_name} v{result.model_version}",
            "resumed_stages": result.resumed_stages,
            "wall_s": round(result.wall_s, 1),
            "mlflow_run_id": result.mlflow_run_id or "",
            **mlflow_links(context, mlflow, result.mlflow_run_id, result.model_name, result.model_version),
        },
    )


@asset_check(asset=cascade_policy)
def cascade_kept_best_checkpoints(cascade_policy: stage2.CascadeResult) -> AssetCheckResult:
    """Every stage kept the candidate with the best mean validation reward over the domains seen so far,
    recomputed from each candidate's recorded per-domain probe rewards, and the kept adapter was evaluated on
    every domain after every stage (`stage2.check_kept_checkpoints`; what it can and cannot catch is in
    models/socialrl/stage2/checks.py)."""
    return _check_result(stage2.check_kept_checkpoints(cascade_policy))


@asset(group_name=GROUP, kinds={"pytorch", "vllm", "mlflow"})
def mopd_student(
    context: AssetExecutionContext,
    transfer_matrix: stage2.TransferMatrixResult,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[stage2.MOPDStudentResult]:
    """Multi-teacher on-policy distillation: the student samples episodes of every domain through the engine
    and proxy, the domain's specialist (a LoRA adapter on the same engine) scores the student's own tokens
    (top-k prompt log-probs), and the loss is the per-token reverse KL from student to teacher; domains are
    drawn by the gap-closed curriculum. The student starts from the first domain's SFT warm-start (a fresh
    LoRA where none exists) and samples at the rollouts' temperature. Reports the share of the specialists'
    summed held-out advantage recovered, with its scenario-bootstrap CI, and every curriculum decision (gaps,
    and whether it fell back to uniform sampling).
    Registered as `socialrl-mopd` (alias candidate). A teacher the engine cannot load fails before training."""
    profile = settings.get_profile()
    result = stage2.train_mopd_student(
        transfer_matrix.matrix,
        profile,
        engine.model_dir,
        _services(engine, store),
        settings.paths().run_dir("mopd", work_key(context)),
        mlflow.tracker(),
        BASE_MODEL_NAME,
        run_id=execution_id(context),
    )
    last = result.history[-1] if result.history else {}
    return Output(
        result,
        metadata={
            "gap_curve": MetadataValue.md(markdown_image(result.gap_png, "MOPD gap per domain")),
            "recovered": MetadataValue.md(result.markdown(transfer_matrix.matrix)),
            "recovered_share": MetadataValue.json(result.share_of(transfer_matrix.matrix).as_dict()),
            "student_init": result.student_init,
            "curriculum": MetadataValue.md(result.curriculum_markdown()),
            "curriculum_uniform_fallbacks": result.uniform_fallbacks,
            "steps": result.steps,
            "final_reverse_kl": float(last.get("reverse_kl", float("nan"))),
            "model": f"{result.model_name} v{result.model_version}",
            "wall_s": round(result.wall_s, 1),
            "mlflow_run_id": result.mlflow_run_id or "",
            **mlflow_links(context, mlflow, result.mlflow_run_id, result.model_name, result.model_version),
        },
    )


@asset_check(asset=mopd_student)
def mopd_teachers_scored_every_token(mopd_student: stage2.MOPDStudentResult) -> AssetCheckResult:
    """Every student token of every step got its teacher's log-probs (none fell outside the teacher's
    context) and the loss stayed finite."""
    unscored = sum(int(m.get("unscored_tokens", 0)) for m in mopd_student.history)
    scored = sum(int(m.get("scored_tokens", 0)) for m in mopd_student.history)
    finite = all(float(m["reverse_kl"]) == float(m["reverse_kl"]) for m in mopd_student.history)
    return AssetCheckResult(
        passed=unscored == 0 and scored > 0 and finite,
        severity=AssetCheckSeverity.WARN,
        metadata={"scored_tokens": scored, "unscored_tokens": unscored},
    )


@asset(group_name=GROUP, kinds={"duckdb", "mlflow"})
def unified_evaluation(
    context: AssetExecutionContext,
    transfer_matrix: stage2.TransferMatrixResult,
    cascade_policy: stage2.CascadeResult,
    mopd_student: stage2.MOPDStudentResult,
    store: StoreResource,
    mlflow: MlflowResource,
    settings: SettingsResource,
) -> Output[stage2.UnifiedEvaluation]:
    """Base, SFT, each specialist on its own domain, the cascade, the MOPD student and the trivial code
    baselines (played here: code, seconds) on the same held-out episodes: mean reward per domain and on
    average with CIs and paired differences to the base and, for the trained policies, to the best baseline
    (table `unified_evaluation`, grouped bar chart). The cascade and the MOPD student become `champion` when
    their mean beats their champion's; the nightly schedule re-evaluates the champions."""
    domains = transfer_matrix.matrix.domains
    baselines = stage2.evaluate_baselines(settings.get_profile(), domains, store.store(), execution_id(context))
    result = stage2.unified_evaluation(
        transfer_matrix.matrix,
        cascade_policy.scores,
        mopd_student.scores,
        baselines,
        {stage2.CASCADE_MODEL: cascade_policy.model_version, stage2.MOPD_MODEL: mopd_student.model_version},
        store.store(),
        mlflow.tracker(),
        execution_id(context),
    )
    means = {r.policy: r.estimate.mean for r in result.rows if r.env_id == stage2.MEAN}
    return Output(
        result,
        metadata={
            "bars": MetadataValue.md(markdown_image(result.bars_png, "unified evaluation")),
            "table": MetadataValue.md(result.markdown()),
            **{f"mean_{policy.replace(':', '_')}": value for policy, value in means.items()},
            **{
                f"{r.policy}_vs_{r.best_baseline.removeprefix(stage2.BASELINE_PREFIX)}": r.vs_best_baseline.mean
                for r in result.rows
                if r.env_id == stage2.MEAN and r.vs_best_baseline is not None
            },
            "promoted": MetadataValue.json(result.promoted),
            "mlflow_run_id": result.mlflow_run_id or "",
            **mlflow_links(context, mlflow, result.mlflow_run_id),
        },
    )


@asset_check(asset=unified_evaluation)
def unified_covers_every_policy(unified_evaluation: stage2.UnifiedEvaluation) -> AssetCheckResult:
    """Base, specialists, cascade and MOPD each have a row on every domain and a mean, over equal episode counts;
    at least one trivial baseline was played, and every trained row carries its difference to the best one."""
    required = ("base", "specialist", stage2.CASCADE, stage2.MOPD)
    missing = [
        (p, d)
        for p in required
        for d in (*unified_evaluation.domains, stage2.MEAN)
        if not any((r.policy, r.env_id) == (p, d) for r in unified_evaluation.rows)
    ]
    sizes = {r.estimate.n for r in unified_evaluation.rows if r.env_id != stage2.MEAN}
    unpaired = [
        [r.policy, r.env_id]
        for r in unified_evaluation.rows
        if r.policy in stage2.TRAINED_POLICIES and r.vs_best_baseline is None
    ]
    baselines = unified_evaluation.baselines()
    return AssetCheckResult(
        passed=not missing and len(sizes) == 1 and bool(baselines) and not unpaired,
        metadata={
            "missing": MetadataValue.json([list(m) for m in missing]),
            "baselines": MetadataValue.json(baselines),
            "trained_rows_without_baseline": MetadataValue.json(unpaired),
            "episode_counts": MetadataValue.json(sorted(sizes)),
        },
    )
