"""The SFT warm-start of a domain: LoRA SFT on the teacher's traces of the learning seat, as an MLflow run."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from agents.traces import Trace, filter_traces
from models import plots
from models.evaluation.transcripts import Transcript, representative_transcripts
from models.profiles import Profile
from models.socialrl.episode_metrics import paired_metric
from models.socialrl.imitation import ImitationReport, imitation_report
from models.socialrl.stage1.common import specialist_seat
from models.socialrl.stage1.data import MIN_SFT_TRACES
from models.socialrl.stage1.evaluation import (
    PolicyResult,
    StoreResult,
    evaluate_code_policies,
    evaluate_served,
    evaluation_plan,
)
from models.tracking import GIT_COMMIT_TAG, SUMMARY_PREFIX, ModelCard, Tracker, attempt_run, write_model_card
from models.training.config import SFTResult
from models.training.sft import run_sft

log = logging.getLogger("socialrl.evaluation")


@dataclass(frozen=True)
class WarmStart:
    """A domain's SFT warm-start, or why it has none."""

    env_id: str
    adapter_dir: str | None
    """The trained adapter; None when the profile does not warm-start this domain."""
    mlflow_run_id: str | None = None
    sft: SFTResult | None = None
    traces_used: int = 0
    """Teacher episodes kept by the filter (90% train, 10% held out for the loss)."""
    skipped: str = ""
    """Why there is no warm-start (empty when there is one)."""


def warmstart(
    env_id: str,
    traces: Sequence[Trace],
    profile: Profile,
    base_model_dir: Path,
    output: Path,
    tracker: Tracker | None = None,
    run_tags: Mapping[str, str] | None = None,
    run_record: Path | None = None,
) -> WarmStart:
    """LoRA SFT on the filtered traces (90/10 train/held-out split); logged as an MLflow run with the loss
    per step, the held-out loss before and after, and a loss-curve plot. `run_record`: a file the attempts of
    this step share (`attempt_run`): SFT starts over, so the run of a killed attempt, if still RUNNING,
    is ended KILLED instead of staying RUNNING beside the new one."""
    if env_id not in profile.sft_domains:
        return WarmStart(env_id, None, skipped=f"{env_id} is not warm-started in profile {profile.name}")
    kept = filter_traces(traces, profile.trace_min_reward)
    if len(kept) < MIN_SFT_TRACES:
        raise ValueError(
            f"{env_id}: only {len(kept)} usable traces after filtering (min reward {profile.trace_min_reward})"
        )
    cut = max(1, len(kept) // 10)
    held_out, train = kept[:cut], kept[cut:]
    conversations, eval_conversations = [t.messages for t in train], [t.messages for t in held_out]
    if tracker is None:
        result = run_sft(base_model_dir, conversations, output, profile.sft, eval_conversations)
        return WarmStart(env_id, str(result.adapter_dir), None, result, len(kept))
    params = {"sft": asdict(profile.sft), "profile": profile.name, "env_id": env_id, "traces": len(kept)}
    attempt = (
        attempt_run(tracker, run_record, f"sft-{env_id}", params, run_tags)
        if run_record is not None
        else tracker.start_run(f"sft-{env_id}", params=params, tags=run_tags)
    )
    with attempt as run:
        result = run_sft(
            base_model_dir,
            conversations,
            output,
            profile.sft,
            eval_conversations,
            on_step=lambda m: run.log_metrics(int(m["step"]), {f"sft/{k}": v for k, v in m.items() if k != "step"}),
        )
        summary = {
            "train_loss": result.train_loss,
            "eval_loss_before": result.eval_loss_before,
            "eval_loss_after": result.eval_loss_after,
            "examples": result.examples,
            "tokens_per_s": result.tokens_per_second,
            "wall_seconds": result.wall_seconds,
        }
        run.log_metrics(result.steps, {f"{SUMMARY_PREFIX}{k}": float(v) for k, v in summary.items() if v is not None})
        if result.loss_curve:
            steps = list(range(1, len(result.loss_curve) + 1))
            png = plots.line_with_band([plots.Series("train loss", steps, result.loss_curve)], "SFT", "step", "loss")
            run.log_file("sft_loss.png", png, "plots")
        # PEFT's README.md is an empty template naming this machine's path to the base model: fill it in.
        write_model_card(
            result.adapter_dir, _card(env_id, profile, result, len(train), len(held_out), run.run_id, run_tags)
        )
        run.log_artifact_dir(result.adapter_dir, "adapter")
        run_id = run.run_id
    return WarmStart(env_id, str(result.adapter_dir), run_id, result, len(kept))


def _card(
    env_id: str,
    profile: Profile,
    result: SFTResult,
    train: int,
    held_out: int,
    run_id: str,
    tags: Mapping[str, str] | None,
) -> ModelCard:
    """The warm-start's model card (README.md beside its adapter in the MLflow run)."""
    loss = {"train_loss": result.train_loss, "eval_loss_before": result.eval_loss_before}
    loss["eval_loss_after"] = result.eval_loss_after
    return ModelCard(
        name=f"sft-{env_id}",
        base_model=profile.base_model,
        domain=env_id,
        profile=profile.name,
        seat=specialist_seat(env_id, profile),
        training=f"LoRA SFT warm-start (r={profile.sft.lora.r}), {result.steps} steps on {result.examples} examples",
        training_data=(
            f"{train} teacher traces of the learning seat (reward >= {profile.trace_min_reward}); "
            f"{held_out} more held out for the loss"
        ),
        evaluation={k: float(v) for k, v in loss.items() if v is not None and math.isfinite(float(v))},
        evaluation_suite=f"loss on {held_out} held-out teacher traces (before and after training)",
        git_commit=(tags or {}).get(GIT_COMMIT_TAG, ""),
        run_id=run_id,
        usage=(
            f"The artifact `adapter` of MLflow run `{run_id}`: serve it on `{profile.base_model}` with vLLM's "
            f"runtime LoRA loading. It is the warm-start (and the KL reference) of the PPO specialist of {env_id}."
        ),
    )


# ---------------------------------------------------------------------------------------- imitation
@dataclass(frozen=True, kw_only=True)
class WarmStartImitation:
    """The warm-start, its teacher and the trivial baselines on the domain's held-out plan: has the warm-start
    learned its teacher (models/socialrl/imitation.py)? The records are reused by the specialist's evaluation,
    which plays the same plan."""

    env_id: str
    seat: str
    run_id: str
    plan: str
    """The plan in words: scenarios, counterparts, seed."""
    sft: PolicyResult
    teacher: PolicyResult
    baselines: Mapping[str, PolicyResult]
    report: ImitationReport
    transcripts: tuple[Transcript, ...] = ()
    """The representative episodes (best, median, worst, most refused) of the warm-start (`policy` "sft") and the
    teacher ("teacher"), for the specialist's evaluation to show beside its own; empty in results stored before
    they were kept."""

    @property
    def passed(self) -> bool:
        return self.report.passed()


def measure_imitation(
    env_id: str,
    profile: Profile,
    base_url: str,
    served_sft: str,
    run_id: str,
    api_key: str | None = None,
    store_result: StoreResult | None = None,
) -> WarmStartImitation:
    """Play the served warm-start, the teacher and the baselines on the domain's held-out plan; compare the
    warm-start with its teacher episode by episode."""
    plan = evaluation_plan(env_id, profile)
    sft, sft_result = evaluate_served("sft", plan, profile, base_url, served_sft, api_key, store_result)
    code = evaluate_code_policies(plan, store_result=store_result)
    teacher, teacher_result = code["teacher"]
    report = imitation_report(sft_result, teacher_result, sft.records, teacher.records)
    log.info(
        "warm-start imitation %s: command rate %.2f (teacher %.2f), reward %.3f = %.0f%% of the teacher's, %s",
        env_id,
        report.command_rate,
        teacher.metrics["command_rate"].mean,
        sft.summary.mean_reward,
        100 * report.reward_over_teacher if math.isfinite(report.reward_over_teacher) else math.nan,
        "passed" if report.passed() else "FAILED",
    )
    described = f"{len(plan.scenario_list())} held-out {profile.scenario_source} scenarios x {', '.join(plan.counterparts)}, seat {plan.seat}, seed {plan.seed}"
    return WarmStartImitation(
        env_id=env_id,
        seat=plan.seat or "",
        run_id=run_id,
        plan=described,
        sft=sft,
        teacher=teacher,
        baselines={label: policy for label, (policy, _) in code.items() if label != "teacher"},
        report=report,
        transcripts=(
            *representative_transcripts(sft_result, "sft"),
            *representative_transcripts(teacher_result, "teacher"),
        ),
    )


def imitation_plot(imitation: WarmStartImitation) -> bytes:
    """The warm-start, its teacher and the trivial baselines' mean reward with their intervals, beside the paired
    differences warm-start - teacher and warm-start - each baseline (models/plots.py `policy_comparison`)."""
    policies = {"sft": imitation.sft, "teacher": imitation.teacher, **imitation.baselines}
    differences = {"sft_minus_teacher": imitation.report.reward_minus_teacher}
    for label, baseline in imitation.baselines.items():
        differences[f"sft_minus_{label}"] = paired_metric(imitation.sft.records, baseline.records, "reward")
    return plots.policy_comparison(
        {label: (p.summary.mean_reward, p.summary.ci_low, p.summary.ci_high) for label, p in policies.items()},
        {name: (e.mean, e.ci_low, e.ci_high) for name, e in differences.items()},
        f"{imitation.env_id}: warm-start on the held-out plan (95% CI)",
        "mean reward",
        "paired reward difference (same episodes)",
    )
