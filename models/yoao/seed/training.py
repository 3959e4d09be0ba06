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

from models.training.config import SFTResult, SFTSettings
from models.yoao.config import YoaoSettings
from models.yoao.seed.dataset import SeedDataset, assert_no_held_out_frames
from models.yoao.seed.traces import format_warmup_traces, vote_balance

log = logging.getLogger("socialrl.yoao")

SEED_MODEL_NAME = "yoao-seed"
"""Registry name of the seed adapter."""
WARMUP_MODEL_NAME = "yoao-format-warmup"
"""Registry name of the untrained teammates' format-only warm-up adapter."""


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


def split_eval(conversations: Sequence[Sequence[dict[str, str]]]) -> tuple[list, list]:
    """(train, eval): with 20 or more conversations, 2 of them measure the loss before and after (each eval
    pass costs a forward over every turn of them); fewer conversations are all trained on."""
    n_eval = 2 if len(conversations) >= 20 else 0
    return [list(c) for c in conversations[n_eval:]], [list(c) for c in conversations[:n_eval]]


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
) -> TrainedAdapter:
    """LoRA SFT through `run_sft` (continuing `init_adapter_dir` when given); logged and registered as a new
    version of `registered_name` (alias `candidate`) when a tracker is given."""
    from models.training.sft import run_sft  # loads torch: only when training runs

    train, held_out = split_eval(conversations)
    if not train:
        raise ValueError(f"{registered_name}: no training conversations")

    def fit() -> SFTResult:
        return run_sft(base_model_dir, train, output, sft, held_out, init_adapter_dir=init_adapter_dir)

    run_id = version = None
    if tracker is None:
        result = fit()
    else:
        with tracker.start_run(registered_name, params={"sft": asdict(sft), **(params or {})}) as run:
            result = fit()
            run.log_metrics(
                result.steps,
                train_loss=result.train_loss,
                eval_loss_before=result.eval_loss_before or 0.0,
                eval_loss_after=result.eval_loss_after or 0.0,
                examples=result.examples,
                wall_seconds=result.wall_seconds,
            )
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
    )


@dataclass(frozen=True)
class FormatWarmup:
    """The untrained teammates' format-only warm-up adapter and what it was trained on."""

    adapter: TrainedAdapter
    traces: int
    black_votes: int
    red_votes: int
    """Votes in the training data (balanced by construction: a fair coin per round)."""
    frames: tuple[str, ...]
    wall_s: float

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
    adapter = train_adapter(
        base_model_dir,
        [t.messages for t in traces.traces],
        output,
        settings.warmup_sft,
        WARMUP_MODEL_NAME,
        tracker,
        params={"games": traces.games, "frames": ",".join(traces.frames), "black_votes": black, "red_votes": red},
        description="Format-only warm-up of the untrained YOAO teammates (neutral data, votes balanced).",
    )
    return FormatWarmup(adapter, len(traces.traces), black, red, traces.frames, time.perf_counter() - start)


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
    )
