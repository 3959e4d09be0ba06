"""The SFT warm-start, measured: trained tokens per second by row shape, and the imitation curve.

Both parts use the cpu profile's model (SmolLM2-135M-Instruct, bf16, LoRA r=16 on every projection) and the
warm-start's own data: the strategic code teacher's Craigslist buyer conversations on training scenarios
(models/socialrl/stage1.py `teacher_traces`, the learning seat only).

`rows`: the same conversations trained `--row-steps` optimiser steps per row shape, side by side in one run:
packed rows of 1,024 and 2,048 tokens (TRL's best-fit packing, padding-free; a conversation longer than the
row is split into windows of whole exchanges that each repeat the system prompt), one conversation per row,
and four conversations per forward padded to the longest; with TRL's loss (its fused LM head scores every
position on the CPU) and with the loss at the trained positions only. Reported per shape: tokens fed per
second, and loss tokens (assistant tokens, what SFT learns from) per second, the figure that decides.

`curve`: one SFT run with a held-out loss and an adapter checkpoint every `--checkpoint-every` steps; each
checkpoint is served by vLLM and played on the same held-out Craigslist episodes as the teacher (paired):
command rate, reward and its paired difference with the teacher, opening over target, agreement,
invalid actions. Results: benchmarks/results/sft_curve.json (`points`: SFT tokens -> held-out loss, command
rate, reward) and sft_curve.png.

    python -m benchmarks.bench_sft rows [--episodes 96] [--row-steps 4]
    python -m benchmarks.bench_sft evaluate --checkpoints DIR [--eval-scenarios 16] [--no-base]
    python -m benchmarks.bench_sft curve [--episodes 480] [--epochs 3] [--learning-rate 1e-3] [--checkpoint-every 20] [--eval-scenarios 16]

`evaluate` plays the checkpoints of a stopped curve run's, or a `make run` warm-start's, `trainer/` directory.
Every result carries its provenance (`env_version`, commit, `machine_update_tok_s` with `--machine-speed`); a
file measured on another environment version is replaced, never merged.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ENV = "craigslist-v0"
log = logging.getLogger("socialrl.bench")

ROW_SHAPES: dict[str, dict[str, Any]] = {
    "packed_2048_trl_loss": {"max_length": 2048, "batch_size": 1, "grad_accumulation": 2, "packing": True},
    "packed_2048": {
        "max_length": 2048,
        "batch_size": 1,
        "grad_accumulation": 2,
        "packing": True,
        "trained_positions_only": True,
    },
    "packed_1024": {
        "max_length": 1024,
        "batch_size": 1,
        "grad_accumulation": 4,
        "packing": True,
        "trained_positions_only": True,
    },
    "conversation_x1": {
        "max_length": 2048,
        "batch_size": 1,
        "grad_accumulation": 4,
        "packing": False,
        "trained_positions_only": True,
    },
    "conversation_x4": {
        "max_length": 2048,
        "batch_size": 4,
        "grad_accumulation": 1,
        "packing": False,
        "trained_positions_only": True,
    },
}
"""Row shapes compared by `rows` (about 4,400 tokens per optimiser step each), all but the first with the loss
on the trained positions only (SFTSettings.trained_positions_only; the first is TRL's own loss)."""


def teacher_conversations(episodes: int, heldout_share: float = 0.1) -> tuple[list, list, dict[str, Any]]:
    """The warm-start's training and held-out conversations (as `stage1.warmstart` splits them)."""
    from agents.traces import filter_traces
    from models.profiles import get_profile
    from models.socialrl import stage1

    profile = dataclasses.replace(get_profile("cpu"), teacher_episodes=episodes)
    traces = filter_traces(stage1.teacher_traces(ENV, profile), profile.trace_min_reward)
    cut = max(1, round(len(traces) * heldout_share))
    held_out, train = traces[:cut], traces[cut:]
    info = {"episodes": episodes, "kept": len(traces), "train": len(train), "held_out": len(held_out)}
    return [t.messages for t in train], [t.messages for t in held_out], info


def measure_rows(episodes: int, steps: int, work: Path) -> dict[str, Any]:
    from models.profiles import get_profile
    from models.serving.model_store import resolve_model
    from models.settings import DataPaths
    from models.training.sft import run_sft

    train, _, info = teacher_conversations(episodes)
    base = resolve_model(get_profile("cpu").base_model, DataPaths.from_env().models)
    shapes = {}
    for name, shape in ROW_SHAPES.items():
        settings = dataclasses.replace(get_profile("cpu").sft, max_steps=steps, eval_windows=0, **shape)
        result = run_sft(base, train, work / name, settings)
        # Loss tokens fed: the share of assistant tokens in one pass, applied to the tokens fed.
        per_pass = result.loss_tokens / max(1, _tokens_per_pass(base, train, shape))
        shapes[name] = {
            **shape,
            "steps": result.steps,
            "tokens_fed": result.train_tokens,
            "train_seconds": round(result.train_seconds, 1),
            "tokens_per_s": round(result.tokens_per_second, 1),
            "loss_tokens_per_s": round(result.tokens_per_second * per_pass, 1),
        }
        log.info("rows %s: %s", name, shapes[name])
    best = max(shapes, key=lambda k: shapes[k]["loss_tokens_per_s"])
    return {"data": info, "shapes": shapes, "best_loss_tokens_per_s": best}


def _tokens_per_pass(base: Path, conversations: list, shape: dict[str, Any]) -> int:
    from transformers import AutoTokenizer

    from models.training.sft import tokenise_conversations

    tokenizer = AutoTokenizer.from_pretrained(base)
    return tokenise_conversations(conversations, tokenizer, shape["max_length"]).tokens


def measure_curve(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Train with a checkpoint every `--checkpoint-every` steps, then evaluate every checkpoint."""
    from models.profiles import get_profile
    from models.serving.model_store import resolve_model
    from models.settings import DataPaths
    from models.training.sft import run_sft

    profile = get_profile("cpu")
    train, held_out, info = teacher_conversations(args.episodes or 480)
    base = resolve_model(profile.base_model, DataPaths.from_env().models)
    settings = dataclasses.replace(
        profile.sft,
        learning_rate=args.learning_rate,
        epochs=args.epochs,
        max_steps=-1,
        checkpoint_every=args.checkpoint_every,
        eval_windows=64,
    )
    started = time.perf_counter()
    sft = run_sft(base, train, work / "sft", settings, held_out)
    log.info("SFT %d steps in %.0f s, %d checkpoints", sft.steps, sft.train_seconds, len(sft.checkpoints))
    points: list[dict[str, Any]] = [
        {"step": 0, "tokens": 0, "eval_loss": sft.eval_loss_before, "adapter": None},
        *(
            {"step": c.step, "tokens": c.tokens, "eval_loss": c.eval_loss, "adapter": str(c.adapter_dir)}
            for c in sft.checkpoints
        ),
    ]
    curve = evaluate_points(points, args.eval_scenarios, work)
    return {
        "data": info,
        "sft": {
            "learning_rate": args.learning_rate,
            "epochs": args.epochs,
            "steps": sft.steps,
            "loss_tokens_per_pass": sft.loss_tokens,
            "train_tokens": sft.train_tokens,
            "train_seconds": round(sft.train_seconds, 1),
            "tokens_per_s": round(sft.tokens_per_second, 1),
            "eval_loss_before": sft.eval_loss_before,
            "eval_loss_after": sft.eval_loss_after,
        },
        **curve,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def evaluate_points(points: list[dict[str, Any]], eval_scenarios: int, work: Path) -> dict[str, Any]:
    """Serve each point's adapter (None: the base model) and play the held-out plan with it; the teacher plays
    the same episodes. Adds each point's imitation metrics in place."""
    from agents.socialrl.teacher import make_teacher
    from models.evaluation.policy import evaluate_policy
    from models.evaluation.scenarios import held_out_scenarios
    from models.profiles import get_profile
    from models.serving.engine import VLLMEngine, new_token
    from models.serving.model_store import resolve_model
    from models.settings import DataPaths
    from models.socialrl import stage1
    from models.socialrl.imitation import imitation_report

    profile = get_profile("cpu")
    base = resolve_model(profile.base_model, DataPaths.from_env().models)
    scenarios = held_out_scenarios(ENV, eval_scenarios, 0, profile.scenario_source)
    plan = stage1.evaluation_plan(ENV, profile, scenarios=scenarios)
    teacher = evaluate_policy(plan, make_teacher)
    token = new_token()
    config = profile.engine.engine_config(base, served_model_name="base", api_key=token)
    with VLLMEngine(config, log_path=work / "vllm.log") as engine:
        for point in points:
            name = "base" if point["adapter"] is None else f"sft-{point['step']}"
            if point["adapter"] is not None:
                engine.client.load_adapter(name, point["adapter"])
            t0 = time.perf_counter()
            result = stage1.evaluate_model(ENV, profile, engine.base_url, name, api_key=token, plan=plan)
            report = imitation_report(result, teacher)
            if point["adapter"] is not None:
                engine.client.unload_adapter(name)
            point.update(_point_metrics(report, time.perf_counter() - t0))
            point["transcripts"] = report.transcripts_markdown
            log.info("curve step %s: %s", point["step"], {k: point[k] for k in ("eval_loss", "command_rate", "reward")})
    return {
        "evaluation": {
            "scenarios": len(scenarios),
            "counterparts": list(plan.counterparts),
            "episodes": teacher.summary.n,
        },
        "teacher": {"reward": teacher.summary.mean_reward, "agreement": teacher.summary.agreement_rate},
        "points": points,
    }


def points_from_checkpoints(trainer_dir: Path) -> list[dict[str, Any]]:
    """The points of a curve run stopped before its end: its saved checkpoints, each with the held-out loss and
    the tokens fed that the trainer's own state recorded (the base model's loss is not in it: None)."""
    points: list[dict[str, Any]] = [{"step": 0, "tokens": 0, "eval_loss": None, "adapter": None}]
    for checkpoint in sorted(trainer_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1])):
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        step = int(state["global_step"])
        losses = [h["eval_loss"] for h in state["log_history"] if "eval_loss" in h and h.get("step") == step]
        points.append(
            {
                "step": step,
                "tokens": int(state.get("num_input_tokens_seen") or 0),
                "eval_loss": losses[-1] if losses else None,
                "adapter": str(checkpoint),
            }
        )
    return points


def _point_metrics(report: Any, seconds: float) -> dict[str, Any]:
    def mean(metric: str) -> float | None:
        estimate = report.student.get(metric)
        return estimate.mean if estimate is not None and math.isfinite(estimate.mean) else None

    reward = report.student["reward"]
    return {
        "command_rate": mean("command_rate"),
        "reward": reward.as_dict(),
        "reward_minus_teacher": report.reward_minus_teacher.as_dict(),
        "reward_over_teacher": report.reward_over_teacher if math.isfinite(report.reward_over_teacher) else None,
        "offer_over_target_median": mean("opening_over_target"),
        "offer_rate": mean("offer_rate"),
        "agreement": mean("agreement"),
        "invalid_per_turn": mean("invalid_per_turn"),
        "leak": mean("leak"),
        "eval_seconds": round(seconds, 1),
    }


def curve_plot(curve: dict[str, Any]) -> bytes:
    from models import plots

    points = [p for p in curve["points"] if p.get("command_rate") is not None]
    xs = [p["tokens"] / 1000 for p in points]
    series = {
        "held-out loss": plots.Series(
            "loss", xs, [p["eval_loss"] if p["eval_loss"] is not None else math.nan for p in points]
        ),
        "command rate": plots.Series("command rate", xs, [p["command_rate"] for p in points]),
        "reward (teacher's share)": plots.Series(
            "reward / teacher",
            xs,
            [p["reward_over_teacher"] if p["reward_over_teacher"] is not None else math.nan for p in points],
        ),
    }
    return plots.multi_line(series, "SFT warm-start: imitation against SFT tokens (thousands)", "SFT tokens (k)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=("rows", "curve", "evaluate"))
    parser.add_argument(
        "--checkpoints", type=Path, default=None, help="evaluate: a stopped curve run's trainer directory"
    )
    parser.add_argument("--episodes", type=int, default=0, help="teacher episodes (rows: 96, curve: 480)")
    parser.add_argument("--row-steps", type=int, default=4)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=int, default=20)
    parser.add_argument("--eval-scenarios", type=int, default=16)
    parser.add_argument("--work", type=Path, default=Path("data/bench/sft"))
    parser.add_argument("--output", type=Path, default=RESULTS / "sft_curve.json")
    parser.add_argument(
        "--no-base", action="store_true", help="evaluate: leave out step 0 (the base model; it scores 0 on this plan)"
    )
    parser.add_argument(
        "--machine-speed", action="store_true", help="also measure the machine's PPO update speed (a few seconds)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)

    from models.provenance import machine_speed_or_none, provenance, result_to_extend

    started = time.perf_counter()
    existing = result_to_extend(args.output, log)
    if args.part == "rows":
        existing["row_shapes"] = measure_rows(args.episodes or 96, args.row_steps, args.work / "rows")
    elif args.part == "evaluate":
        if args.checkpoints is None:
            parser.error("evaluate needs --checkpoints <trainer dir>")
        points = points_from_checkpoints(args.checkpoints)
        if args.no_base:
            points = [p for p in points if p["adapter"] is not None]
        curve = evaluate_points(points, args.eval_scenarios, args.work / "evaluate")
        existing["curve"] = {**existing.get("curve", {}), **curve, "checkpoints": str(args.checkpoints)}
        args.output.with_suffix(".png").write_bytes(curve_plot(existing["curve"]))
    else:
        existing["curve"] = measure_curve(args, args.work / "curve")
        args.output.with_suffix(".png").write_bytes(curve_plot(existing["curve"]))
    if "curve" in existing:
        # The figure a reader (and a check) wants first: SFT tokens -> held-out loss, command rate, reward.
        existing["points"] = [
            {
                "step": p["step"],
                "tokens": p["tokens"],
                "eval_loss": p["eval_loss"],
                "command_rate": p.get("command_rate"),
                "reward": (p.get("reward") or {}).get("mean"),
                "reward_over_teacher": p.get("reward_over_teacher"),
            }
            for p in existing["curve"]["points"]
        ]
    speed = machine_speed_or_none(log) if args.machine_speed else None
    existing.update(provenance(profile="cpu", machine_update_tok_s=speed))
    existing["wall_s"] = round(time.perf_counter() - started, 1)
    args.output.write_text(json.dumps(existing, indent=2) + "\n")
    log.info("wrote %s", args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
