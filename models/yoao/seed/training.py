"""Training: the untrained teammates' format-only warm-up and the seed agent on top of it, each a LoRA SFT
logged and registered in MLflow."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from models import plots
from models.training.config import SFTResult, SFTSettings
from models.yoao.config import YoaoSettings
from models.yoao.seed.dataset import SeedDataset, assert_no_held_out_frames
from models.yoao.seed.traces import format_warmup_traces, vote_balance

log = logging.getLogger("socialrl.yoao")

SEED_MODEL_NAME = "yoao-seed"
"""Registry name of the seed adapter."""
WARMUP_MODEL_NAME = "yoao-format-warmup"
"""Registry name of the untrained teammates' format-only warm-up adapter."""


PLATEAU_TOLERANCE = 0.03
"""A warm-start has plateaued when its held-out loss fell by less than this share over its last checkpoint
interval."""


@dataclass(frozen=True)
class TrainedAdapter:
    """An SFT'd adapter, registered in MLflow when a tracker was given."""

    adapter_dir: str
    registered_name: str
    version: int | None
    mlflow_run_id: str | None
    train_loss: float
    eval_loss_before: float | None
    eval_loss_after: float | None
    steps: int
    examples: int
    conversations: int
    init_adapter_dir: str | None
    wall_s: float
    eval_curve: tuple[tuple[int, float], ...] = ()
    """(optimiser step, held-out loss): before training (step 0), at every checkpoint
    (`SFTSettings.checkpoint_every`) and after training; the learning curve that shows the plateau."""
    train_loss_curve: tuple[float, ...] = ()
    """Training loss per optimiser step."""
    held_out: tuple[tuple[dict[str, str], ...], ...] = ()
    """The conversations held out of training (the loss curve's data; replayed by `yoao_warmstart_imitation`)."""

    @property
    def plateau_gain(self) -> float:
        """Relative drop of the held-out loss between the last two points of the curve (NaN without two)."""
        if len(self.eval_curve) < 2:
            return math.nan
        before, after = self.eval_curve[-2][1], self.eval_curve[-1][1]
        return (before - after) / before if before else math.nan

    def plateaued(self, tolerance: float = PLATEAU_TOLERANCE) -> bool:
        """The held-out loss fell by less than `tolerance` (relative) over the last stretch of training."""
        return bool(self.plateau_gain < tolerance)


def split_eval(conversations: Sequence[Sequence[dict[str, str]]], n_eval: int) -> tuple[list, list]:
    """(train, held out): the first `n_eval` conversations are held out (at least one is always trained on)."""
    n_eval = max(0, min(n_eval, len(conversations) - 1))
    return [list(c) for c in conversations[n_eval:]], [list(c) for c in conversations[:n_eval]]


def heldout_count(items: int, share: float, unit: int = 1) -> int:
    """Held-out conversations: `share` of `items` units (games) rounded, at least one unit, times `unit`
    (conversations per game); none with fewer than 5 units (too few to spare)."""
    return 0 if items < 5 else max(1, round(share * items)) * unit


def train_adapter(
    base_model_dir: Path,
    conversations: Sequence[Sequence[dict[str, str]]],
    output: Path,
    sft: SFTSettings,
    registered_name: str,
    tracker: Any | None = None,
    params: Mapping[str, Any] | None = None,
    init_adapter_dir: Path | None = None,
    description: str = "",
    n_eval: int = 0,
) -> TrainedAdapter:
    """LoRA SFT through `run_sft` (continuing `init_adapter_dir` when given) with the first `n_eval`
    conversations held out (the learning curve: their loss at step 0, every `checkpoint_every` steps and at
    the end); logged and registered as a new version of `registered_name` (alias `candidate`) when a tracker
    is given."""
    from models.training.sft import run_sft  # loads torch: only when training runs

    train, held_out = split_eval(conversations, n_eval)
    if not train:
        raise ValueError(f"{registered_name}: no training conversations")

    def fit() -> SFTResult:
        return run_sft(base_model_dir, train, output, sft, held_out, init_adapter_dir=init_adapter_dir)

    run_id = version = None
    if tracker is None:
        result = fit()
        curve = eval_curve(result)
    else:
        with tracker.start_run(registered_name, params={"sft": asdict(sft), **(params or {})}) as run:
            result = fit()
            curve = eval_curve(result)
            for step, loss in curve:
                run.log_metrics(step, eval_loss=loss)
            for step, loss in enumerate(result.loss_curve, 1):
                run.log_metrics(step, train_loss_step=loss)
            run.log_metrics(
                result.steps,
                train_loss=result.train_loss,
                eval_loss_before=result.eval_loss_before or 0.0,
                eval_loss_after=result.eval_loss_after or 0.0,
                examples=result.examples,
                wall_seconds=result.wall_seconds,
            )
            if curve:
                png = plots.line_with_band(
                    [plots.Series("held-out loss", [s for s, _ in curve], [v for _, v in curve])],
                    f"{registered_name}: held-out loss", "optimiser step", "loss",
                )  # fmt: skip
                run.log_file("eval_loss.png", png, "plots")
            run.log_artifact_dir(result.adapter_dir, "adapter")
            run_id = run.run_id
        version = tracker.register_adapter(run_id, "adapter", registered_name, description=description or None)
    log.info(
        "%s: SFT %d steps on %d examples, loss %.3f, %.0f s%s",
        registered_name,
        result.steps,
        result.examples,
        result.train_loss,
        result.wall_seconds,
        f", registered v{version}" if version else "",
    )
    return TrainedAdapter(
        adapter_dir=str(result.adapter_dir),
        registered_name=registered_name,
        version=version,
        mlflow_run_id=run_id,
        train_loss=result.train_loss,
        eval_loss_before=result.eval_loss_before,
        eval_loss_after=result.eval_loss_after,
        steps=result.steps,
        examples=result.examples,
        conversations=len(train),
        init_adapter_dir=str(init_adapter_dir) if init_adapter_dir else None,
        wall_s=result.wall_seconds,
        eval_curve=curve,
        train_loss_curve=tuple(result.loss_curve),
        held_out=tuple(tuple(dict(m) for m in c) for c in held_out),
    )


def eval_curve(result: SFTResult) -> tuple[tuple[int, float], ...]:
    """(step, held-out loss) before training, at every checkpoint and after training (empty without held-out
    data)."""
    if result.eval_loss_before is None:
        return ()
    points = {0: result.eval_loss_before}
    points.update({c.step: c.eval_loss for c in result.checkpoints if c.eval_loss is not None})
    if result.eval_loss_after is not None:
        points[result.steps] = result.eval_loss_after
    return tuple(sorted((step, float(loss)) for step, loss in points.items()))


@dataclass(frozen=True, kw_only=True)
class FormatWarmup:
    """The untrained teammates' format warm-up adapter and what it was trained on."""

    adapter: TrainedAdapter
    traces: int
    black_votes: int
    red_votes: int
    """Votes in the data (balanced by construction only with `warmup_mirror`; the persuadable tutors lean RED)."""
    frames: tuple[str, ...]
    wall_s: float
    follows_majority: float = math.nan
    """Share of the tutors' votes equal to the majority their teammates stated (what the data teaches)."""
    tutors: tuple[str, ...] = ()
    """Tutor kinds of the data, cycled over seats and games."""

    @property
    def black_share(self) -> float:
        total = self.black_votes + self.red_votes
        return self.black_votes / total if total else math.nan


def format_warmup(
    settings: YoaoSettings, base_model_dir: Path, output: Path, tracker: Any | None = None, seed: int = 0
) -> FormatWarmup:
    """Format-tutor games on the training frames -> LoRA SFT from the base model (module docstring)."""
    start = time.perf_counter()
    traces = format_warmup_traces(settings, seed)
    black, red = vote_balance(traces.traces)
    # Whole games are held out (a game's seats heard the same discussion); the traces come game by game.
    per_game = len(traces.traces) // max(1, traces.games)
    adapter = train_adapter(
        base_model_dir,
        [t.messages for t in traces.traces],
        output,
        settings.warmup_sft,
        WARMUP_MODEL_NAME,
        tracker,
        params={
            "games": traces.games,
            "frames": ",".join(traces.frames),
            "black_votes": black,
            "red_votes": red,
            "tutors": ",".join(settings.warmup_tutors),
            "follows_majority": traces.follows_majority,
        },
        description="Format warm-up of the untrained YOAO teammates (tutors that weigh arguments against a prior "
        "of their own).",
        n_eval=heldout_count(traces.games, settings.heldout_share, per_game),
    )
    return FormatWarmup(
        adapter=adapter, traces=len(traces.traces), black_votes=black, red_votes=red, frames=traces.frames, wall_s=time.perf_counter() - start,
        follows_majority=traces.follows_majority, tutors=settings.warmup_tutors,
    )  # fmt: skip


def train_seed(
    dataset: SeedDataset,
    warmup: FormatWarmup,
    settings: YoaoSettings,
    base_model_dir: Path,
    output: Path,
    tracker: Any | None = None,
) -> TrainedAdapter:
    """The seed: LoRA SFT on the filtered seed data, continuing the format warm-up adapter."""
    assert_no_held_out_frames(dataset)
    return train_adapter(
        base_model_dir,
        dataset.conversations,
        output,
        settings.seed_sft,
        SEED_MODEL_NAME,
        tracker,
        params={
            "kept_turns": dataset.kept,
            "conversations": len(dataset.conversations),
            "frames": ",".join(dataset.frames),
            "warmup_version": warmup.adapter.version or 0,
        },
        init_adapter_dir=Path(warmup.adapter.adapter_dir),
        description="YOAO seed: SFT on principled cooperative teacher turns, on top of the format warm-up.",
        n_eval=heldout_count(len(dataset.conversations), settings.heldout_share),
    )
