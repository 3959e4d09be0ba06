"""The PPO specialist of a domain: PPO from the warm-start, an MLflow run with learning curves, registered."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from models import plots
from models.profiles import Profile
from models.socialrl.stage1.common import STAGE1, TRAINED_BY_TAG, registered_name, specialist_seat
from models.tracking import Tracker, attempt_run
from models.training.config import PPOResult, Services

RUN_RECORD = "mlflow_run.json"
"""The file in a PPO run's work directory naming its MLflow run (`attempt_run`), so a relaunch continues it."""


@dataclass(frozen=True)
class CurvePoint:
    """One PPO iteration: the rollouts' reward with its bootstrap interval, and the learner's diagnostics."""

    iteration: int
    reward_mean: float
    reward_ci_low: float
    reward_ci_high: float
    episodes: int
    agreement_rate: float
    actor_trained: bool
    kl: float
    value_loss: float
    entropy: float
    policy_loss: float
    time_rollout_s: float
    time_train_s: float
    time_sync_s: float
    rollout_tokens_per_s: float
    update_tokens_per_s: float
    invalid_actions_per_episode: float = math.nan
    """Invalid actions of the learning seat per rollout episode."""
    failed_calls: float = 0.0
    """Calls of the learning seat that failed (e.g. the engine's HTTP 400), counted by the proxy's records."""
    episodes_without_calls: float = 0.0
    """Rollout episodes with no recorded call of the learning seat: left out of the update, counted."""
    training_reward_mean: float = math.nan
    """Mean reward the update trained on (the outcome minus any invalid-action penalty)."""

    @classmethod
    def from_history(cls, m: Mapping[str, Any]) -> CurvePoint:
        names = [f.name for f in cls.__dataclass_fields__.values()]
        return cls(**{n: (m.get(n, math.nan) if n != "actor_trained" else bool(m.get(n, True))) for n in names})

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True, kw_only=True)
class Specialist:
    """A trained PPO specialist and where it is registered."""

    env_id: str
    seat: str
    adapter_dir: str
    run_name: str
    served_name: str
    init_adapter_dir: str | None
    """The warm-start PPO started from (and the KL reference), None when it started from the base model."""
    curve: tuple[CurvePoint, ...]
    mlflow_run_id: str | None = None
    model_name: str = ""
    model_version: int | None = None
    resumed_from: int | None = None
    trained_by: str = STAGE1
    """`STAGE1` (`make run`) or `STAGE2` (`run_stage2`'s own, smaller specialists); tag `socialrl.trained_by`."""


def learning_curve_plots(curve: Sequence[CurvePoint], title: str) -> tuple[bytes, bytes]:
    """The reward per iteration with its interval, and the learner's diagnostics, as two PNGs."""
    xs = [p.iteration for p in curve]
    reward = plots.line_with_band(
        [
            plots.Series(
                "rollout reward",
                xs,
                [p.reward_mean for p in curve],
                [p.reward_ci_low for p in curve],
                [p.reward_ci_high for p in curve],
            )
        ],
        f"{title}: reward per PPO iteration (95% CI)",
        "iteration",
        "mean reward",
        (0.0, 1.0),
    )
    diagnostics = plots.multi_line(
        {
            "KL to the warm-start": plots.Series("kl", xs, [p.kl for p in curve]),
            "value loss": plots.Series("value loss", xs, [p.value_loss for p in curve]),
            "entropy": plots.Series("entropy", xs, [p.entropy for p in curve]),
            "agreement rate": plots.Series("agreement", xs, [p.agreement_rate for p in curve]),
        },
        f"{title}: PPO diagnostics",
        "iteration",
    )
    return reward, diagnostics


def train_specialist(
    env_id: str,
    profile: Profile,
    base_model_dir: Path,
    critic_model_dir: Path,
    services: Services,
    output: Path,
    init_adapter: Path | None,
    tracker: Tracker | None = None,
    run_tags: Mapping[str, str] | None = None,
    trained_by: str = STAGE1,
) -> Specialist:
    """PPO from the warm-start (or from scratch); with a tracker: an MLflow run with per-iteration metrics
    and learning-curve plots, the adapter registered as a `candidate` version tagged with `trained_by`.
    A relaunch in the same `output` resumes PPO from its newest checkpoint and the MLflow run of the killed
    attempt (named in `output/RUN_RECORD`, `attempt_run`) from the checkpoint's iteration, so the run's history
    is one curve; iterations the killed attempt logged after its last checkpoint are logged again at the same
    steps (MLflow keeps both values there)."""
    from models.training.ppo import checkpoint_iteration, train_ppo  # loads torch: only when training runs

    config = profile.ppo_for(env_id)
    seat = specialist_seat(env_id, profile)

    def done(result: PPOResult, **registry: Any) -> Specialist:
        curve = tuple(CurvePoint.from_history(m) for m in result.history)
        return Specialist(
            env_id=env_id,
            seat=seat,
            adapter_dir=str(result.adapter_dir),
            run_name=config.run_name,
            served_name=result.served_name,
            init_adapter_dir=str(init_adapter) if init_adapter else None,
            curve=curve,
            resumed_from=result.resumed_from,
            trained_by=trained_by,
            **registry,
        )

    if tracker is None:
        return done(train_ppo(config, base_model_dir, services, output, critic_model_dir, init_adapter))
    with attempt_run(
        tracker,
        output / RUN_RECORD,
        f"ppo-{env_id}",
        params={"ppo": asdict(config), "profile": profile.name},
        tags=run_tags,
        resume_at=checkpoint_iteration(output),
    ) as run:

        def log_iteration(m: Mapping[str, Any]) -> None:
            run.log_metrics(int(m["iteration"]), iteration_metrics(m))

        result = train_ppo(
            config, base_model_dir, services, output, critic_model_dir, init_adapter, on_iteration=log_iteration
        )
        if result.resumed_from and not run.resumed:  # a checkpoint without its run: its history goes on this one
            for m in result.history[: result.resumed_from]:
                log_iteration(m)
        specialist = done(result)
        reward_png, diagnostics_png = learning_curve_plots(specialist.curve, env_id)
        run.log_file("learning_curve.png", reward_png, "plots")
        run.log_file("ppo_diagnostics.png", diagnostics_png, "plots")
        run.log_artifact_dir(result.adapter_dir, "adapter")
        run_id = run.run_id
    name = registered_name(env_id)
    version = tracker.register_adapter(run_id, "adapter", name, tags={TRAINED_BY_TAG: trained_by})
    return done(result, mlflow_run_id=run_id, model_name=name, model_version=version)


def iteration_metrics(m: Mapping[str, Any]) -> dict[str, float]:
    """One PPO iteration's finite numbers as MLflow metrics `ppo/<name>` (logged at step = the iteration)."""
    return {
        f"ppo/{k}": float(v)
        for k, v in m.items()
        if isinstance(v, int | float) and k != "iteration" and math.isfinite(float(v))
    }
