"""The PPO learner's LM head on the agent tokens' predicting positions only vs on every position, side by side.

`predicting_logits` (models/training/segments.py) runs the head on the union of the positions that predict
an agent token (transformers' `logits_to_keep`); before, the learner computed the whole sequence's logits
(seq x vocab, most of it prompt) and picked the agent positions out. Both arms run here in one process,
alternating on the same episodes (random-weight models built by benchmarks/bench_learner.py), and time
`PPOLearner.prepare` and one `update`; the arms' old log-probs are compared too (they must agree).

    python -m benchmarks.bench_lm_head [--shapes smollm2,small,tiny] [--rounds 2] [--out lm_head]

Results go to benchmarks/results/<out>.json: per shape, seconds per arm (the median over rounds), the ratio
full / kept, and the size of one micro-batch's logits in each arm.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

import models.training.ppo_learner as ppo_learner
from benchmarks.bench_learner import (
    SMALL_ACTOR,
    SMALL_CRITIC,
    SMOLLM2_135M,
    ModelShape,
    Workload,
    build_models,
    make_episodes,
)
from models.training.config import PPOHyper

RESULTS = Path(__file__).resolve().parent / "results"
TINY_TEST_MODEL = ModelShape(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    vocab_size=49_152,
    rope_theta=10_000.0,
    max_position_embeddings=4_096,
)
"""models/serving/model_store.py's tiny random Llama, as a Qwen3-style config of the same sizes."""
SHAPES = {
    # The cpu profile's actor with a SmolLM2-sized critic: 4 episodes of 4 exchanges, 768-token sequences.
    "smollm2": Workload(
        actor=SMOLLM2_135M,
        critic=SMOLLM2_135M,
        episodes=4,
        turns=4,
        system_tokens=384,
        env_tokens=64,
        agent_tokens=32,
        micro_batch_tokens=4096,
        iterations=1,
    ),
    "small": Workload(
        actor=SMALL_ACTOR,
        critic=SMALL_CRITIC,
        episodes=8,
        turns=4,
        system_tokens=64,
        env_tokens=48,
        agent_tokens=32,
        micro_batch_tokens=2048,
        iterations=1,
    ),
    # The tests' tiny random Llama (2 layers, 128 wide) keeps SmolLM2's 49,152-token vocabulary: the head is
    # nearly all of its matmuls. Smoke-profile sizes (16 new tokens a turn).
    "tiny": Workload(
        actor=TINY_TEST_MODEL,
        critic=TINY_TEST_MODEL,
        episodes=4,
        turns=4,
        system_tokens=384,
        env_tokens=64,
        agent_tokens=16,
        micro_batch_tokens=4096,
        iterations=1,
    ),
}
KEPT = ppo_learner.predicting_logits


def full_head(
    model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: Sequence[Sequence[int]], **kw: Any
) -> tuple[list[torch.Tensor], Any]:
    """The former way: every position through the head, the predicting positions picked out after."""
    out = model(input_ids=ids, attention_mask=mask, **kw)
    rows = [out.logits[row, torch.tensor([p - 1 for p in wanted])] for row, wanted in enumerate(positions)]
    return rows, out


@contextlib.contextmanager
def head_in_learner(head: Callable[..., tuple[list[torch.Tensor], Any]]) -> Iterator[None]:
    """The PPO learner computes its logits with `head` inside the block (it looks the name up at call time)."""
    ppo_learner.predicting_logits = head
    try:
        yield
    finally:
        ppo_learner.predicting_logits = KEPT


def measure(name: str, work: Workload, rounds: int) -> dict[str, Any]:
    device = torch.device("cpu")
    actor, critic = build_models(work, device, gradient_checkpointing=False)
    hyper = PPOHyper(
        actor_lr=2e-6, critic_lr=1e-5, minibatch_episodes=work.episodes, micro_batch_tokens=work.micro_batch_tokens
    )
    learner = ppo_learner.PPOLearner(actor, critic, hyper, pad_id=0, bf16=True)
    samples = make_episodes(work, seed=0)
    arms = {"kept": KEPT, "full": full_head}
    seconds: dict[str, dict[str, list[float]]] = {arm: {"prepare": [], "update": []} for arm in arms}
    old_logprobs: dict[str, list[float]] = {}
    for arm, head in arms.items():  # before any update: both arms read the same weights
        with head_in_learner(head):
            prepared, _ = learner.prepare(samples)
        old_logprobs[arm] = torch.cat([torch.cat(p.old_logprobs) for p in prepared]).tolist()
    for round_ in range(rounds + 1):  # round 0 warms up kernels and the allocator
        for arm, head in arms.items():
            with head_in_learner(head):
                start = time.perf_counter()
                prepared, _ = learner.prepare(samples)
                t_prepare = time.perf_counter() - start
                start = time.perf_counter()
                learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
                t_update = time.perf_counter() - start
            if round_ == 0:
                continue
            seconds[arm]["prepare"].append(t_prepare)
            seconds[arm]["update"].append(t_update)
            print(f"{name} round {round_} {arm}: prepare {t_prepare:.2f} s, update {t_update:.2f} s", flush=True)
    median = {arm: {k: statistics.median(v) for k, v in by.items()} for arm, by in seconds.items()}
    width = max(len(seg.input_ids) for s in samples for seg in s.segments)
    rows = min(work.episodes, max(1, work.micro_batch_tokens // width))
    agent = work.turns * work.agent_tokens
    drift = max(abs(a - b) for a, b in zip(old_logprobs["kept"], old_logprobs["full"], strict=True))
    return {
        "shape": name,
        "episodes": work.episodes,
        "sequence_tokens": work.segment_tokens,
        "agent_tokens_per_sequence": agent,
        "vocab": work.actor.vocab_size,
        "rounds": rounds,
        "seconds": {arm: {k: round(v, 3) for k, v in by.items()} for arm, by in median.items()},
        "full_over_kept": {k: round(median["full"][k] / median["kept"][k], 2) for k in ("prepare", "update")},
        "logits_mib_per_micro_batch": {
            "kept": round(rows * agent * work.actor.vocab_size * 4 / 2**20, 1),
            "full": round(rows * width * work.actor.vocab_size * 4 / 2**20, 1),
        },
        "max_abs_logprob_difference": drift,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="smollm2,small,tiny")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds per arm (after one warm-up)")
    parser.add_argument("--out", default="lm_head", help="results file name (without .json)")
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    rows = [measure(name, SHAPES[name], args.rounds) for name in args.shapes.split(",")]
    result = {
        "benchmark": "lm_head",
        "machine": platform.platform(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "rows": rows,
        "wall_s": round(time.perf_counter() - wall, 1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    for row in rows:
        print(f"{row['shape']}: full / kept = {row['full_over_kept']}, logits MiB {row['logits_mib_per_micro_batch']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
