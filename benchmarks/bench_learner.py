"""PPO learner throughput and model FLOPs utilisation (MFU) on random-weight models of the paper's shapes.

    python benchmarks/bench_learner.py --device cuda --shape paper     # a GPU: actor Qwen3-4B + LoRA, critic Qwen3-1.7B
    python benchmarks/bench_learner.py --device cpu --shape small      # seconds on a CPU

Needs torch, transformers and peft only (nothing of this project pip-installed: the repository root is put on
sys.path and models.training.ppo_learner is imported from the checkout; no model is downloaded, the models
are built from the configs written below with random weights). Prints one JSON line; `--output` also writes it.

What is timed (each after one warm-up iteration), on packed multi-turn episodes (one prefix-stable sequence
per episode, `turns` exchanges of environment tokens then agent tokens, only agent tokens in the loss):
- prepare: `PPOLearner.prepare` (actor forward for old log-probs and entropy, critic forward for values);
- update: `PPOLearner.update(train_actor=True)`, one minibatch of all episodes (actor and critic forward +
  backward, both optimizer steps);
- critic update: `PPOLearner.update(train_actor=False)` (the critic's share of the update);
- actor update = update - critic update (the two run the same critic work).

Model FLOPs counted (per token of a sequence of S tokens; N_lin = matmul weights of the decoder layers, the
embedding lookup is not a matmul; the LM head h x V runs on the agent tokens' predicting positions only, as
the learner computes it (`predicting_logits`), and adds 2 h V per agent token to a forward and 4 h V to an
update; N_lora = r x (in + out) over the adapted projections;
attn = 2 x layers x heads x head_dim x (S + 1): QK^T and PV over the causal half, what flash attention computes):
- actor forward: 2 N_lin + 2 N_lora + attn
- actor backward: 2 N_lin + 2 N_lora + 2 attn (gradients of the activations through the frozen base) plus
  2 N_lora (the adapter weights' gradients). The frozen base gets no weight gradients, so the usual
  6 x params x tokens over-counts a LoRA update by about half: an actor update is 4 N_lin + 6 N_lora + 3 attn.
- critic (every weight trained): forward 2 N_c + attn_c, backward 4 N_c + 2 attn_c (no LM head: a value head).
Padding tokens, activation recomputation (gradient checkpointing) and the optimizer steps are not counted.
MFU = counted FLOPs / (seconds x peak). The peak defaults to 790 TFLOP/s on CUDA (an H200's measured dense
bf16 matmul rate; pass --peak-tflops for other GPUs); on a CPU it is measured here (a matmul in what the
learner computes in: bf16 autocast where the CPU has native bf16, else fp32, models/hardware.py).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402

from models.training.config import LoraSettings, PPOHyper  # noqa: E402
from models.training.device import autocast, train_in_bf16, weights_dtype  # noqa: E402
from models.training.ppo_learner import PPOLearner, ValueModel  # noqa: E402
from models.training.segments import RecordedTurn, episode_samples  # noqa: E402

H200_BF16_PEAK_TFLOPS = 790.0
"""Dense bf16 matmul rate measured on an H200 (the spec sheet says 989)."""
TARGET_ACTOR_MFU = 0.40


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """The numbers of a decoder-only transformer's config.json."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool = True
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 40_960

    def config(self) -> transformers.PretrainedConfig:
        return transformers.Qwen3Config(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            vocab_size=self.vocab_size,
            tie_word_embeddings=self.tie_word_embeddings,
            rope_theta=self.rope_theta,
            rms_norm_eps=self.rms_norm_eps,
            max_position_embeddings=self.max_position_embeddings,
            use_cache=False,
        )

    def layer_matmul_params(self) -> int:
        h, d = self.hidden_size, self.head_dim
        q_and_o = 2 * h * self.num_attention_heads * d
        k_and_v = 2 * h * self.num_key_value_heads * d
        return q_and_o + k_and_v + 3 * h * self.intermediate_size

    def matmul_params(self, lm_head: bool) -> int:
        """Weights used in matmuls per token (decoder layers, plus the LM head when it is computed)."""
        return self.num_hidden_layers * self.layer_matmul_params() + (
            self.hidden_size * self.vocab_size if lm_head else 0
        )

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        h, d, i = self.hidden_size, self.head_dim, self.intermediate_size
        shapes = {
            "q_proj": (h, self.num_attention_heads * d),
            "k_proj": (h, self.num_key_value_heads * d),
            "v_proj": (h, self.num_key_value_heads * d),
            "o_proj": (self.num_attention_heads * d, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }
        return self.num_hidden_layers * sum(rank * (a + b) for a, b in (shapes[t] for t in targets))

    def attention_flops(self, length: int) -> float:
        """Forward attention FLOPs of one sequence (QK^T and PV, causal half)."""
        per_token_pair = 2 * 2 * self.num_attention_heads * self.head_dim
        return self.num_hidden_layers * per_token_pair * length * (length + 1) / 2


# Qwen/Qwen3-4B-Instruct-2507 and Qwen/Qwen3-1.7B config.json (the paper's actor and critic).
QWEN3_4B = ModelShape(
    hidden_size=2560,
    intermediate_size=9728,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151_936,
    rope_theta=5_000_000.0,
    max_position_embeddings=262_144,
)
QWEN3_1_7B = ModelShape(
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151_936,
)
SMALL_ACTOR = ModelShape(
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    vocab_size=4096,
)
SMOLLM2_135M = ModelShape(
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    vocab_size=49_152,
    rope_theta=100_000.0,
    max_position_embeddings=8_192,
)
"""The cpu profile's actor (SmolLM2-135M-Instruct's config.json), as a Qwen3-style config of the same sizes."""
SMALL_CRITIC = ModelShape(
    hidden_size=192,
    intermediate_size=512,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=48,
    vocab_size=4096,
)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Shapes and sizes of one benchmark."""

    actor: ModelShape
    critic: ModelShape
    episodes: int
    """Episodes per update (one minibatch)."""
    turns: int
    """Exchanges per episode."""
    system_tokens: int
    env_tokens: int
    """Environment tokens per exchange (counterpart message, observation)."""
    agent_tokens: int
    """Agent tokens per exchange (trained)."""
    micro_batch_tokens: int
    iterations: int
    """Timed iterations of prepare + update."""
    lora_rank: int = 16

    @property
    def segment_tokens(self) -> int:
        return self.system_tokens + self.turns * (self.env_tokens + self.agent_tokens)


WORKLOADS = {
    # The paper's models; episodes of 8 exchanges packed into 4,096-token sequences, a quarter agent tokens.
    "paper": Workload(
        actor=QWEN3_4B,
        critic=QWEN3_1_7B,
        episodes=16,
        turns=8,
        system_tokens=512,
        env_tokens=320,
        agent_tokens=128,
        micro_batch_tokens=8192,
        iterations=3,
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
        iterations=3,
    ),
}


def build_models(
    work: Workload, device: torch.device, gradient_checkpointing: bool
) -> tuple[torch.nn.Module, ValueModel]:
    """Random-weight actor (bf16 base where the device has native bf16, else fp32, + fp32 LoRA adapter, as
    models/training/sft.py loads it) and critic
    (fp32 master weights, as ValueModel.from_pretrained loads it), built on the device directly."""
    from peft import get_peft_model

    lora = LoraSettings(r=work.lora_rank, alpha=2 * work.lora_rank)
    torch.manual_seed(0)
    with torch.device(device):
        base = transformers.AutoModelForCausalLM.from_config(
            work.actor.config(), dtype=weights_dtype(True, device), attn_implementation="sdpa"
        )
        backbone = transformers.AutoModel.from_config(
            work.critic.config(), dtype=torch.float32, attn_implementation="sdpa"
        )
    actor = get_peft_model(base, lora.peft_config())
    critic = ValueModel(backbone, work.critic.hidden_size).to(device)
    if gradient_checkpointing:
        from models.training.device import enable_gradient_checkpointing

        enable_gradient_checkpointing(actor)
        enable_gradient_checkpointing(critic.backbone)
    return actor, critic


def make_episodes(work: Workload, seed: int) -> list:
    """Packed multi-turn episodes with random token ids and engine log-probs."""
    rng = torch.Generator().manual_seed(seed)
    vocab = work.actor.vocab_size
    samples = []
    for e in range(work.episodes):
        prompt = torch.randint(1, vocab, (work.system_tokens,), generator=rng).tolist()
        turns = []
        for _ in range(work.turns):
            prompt = prompt + torch.randint(1, vocab, (work.env_tokens,), generator=rng).tolist()
            completion = torch.randint(1, vocab, (work.agent_tokens,), generator=rng).tolist()
            logprobs = (-math.log(vocab) + 0.1 * torch.randn(work.agent_tokens, generator=rng)).tolist()
            turns.append(RecordedTurn(tuple(prompt), tuple(completion), tuple(logprobs)))
            prompt = prompt + completion
        samples.append(episode_samples(f"bench{e}", turns, reward=float(e % 2)))
    return samples


def flops(work: Workload, lengths: list[int], head_tokens: int) -> dict[str, float]:
    """Model FLOPs of one prepare / actor update / critic update over sequences of `lengths` with
    `head_tokens` agent tokens (their predicting positions go through the LM head; module docstring)."""
    tokens = sum(lengths)
    lora = LoraSettings(r=work.lora_rank)
    n_lin = work.actor.matmul_params(lm_head=False)
    n_head = work.actor.hidden_size * work.actor.vocab_size
    n_lora = work.actor.lora_params(work.lora_rank, lora.target_modules)
    n_critic = work.critic.matmul_params(lm_head=False) + work.critic.hidden_size  # + the value head
    attn = sum(work.actor.attention_flops(n) for n in lengths)
    attn_c = sum(work.critic.attention_flops(n) for n in lengths)
    actor_forward = (2 * n_lin + 2 * n_lora) * tokens + 2 * n_head * head_tokens + attn
    critic_forward = 2 * n_critic * tokens + attn_c
    return {
        "prepare": actor_forward + critic_forward,
        "actor_update": (4 * n_lin + 6 * n_lora) * tokens + 4 * n_head * head_tokens + 3 * attn,
        "critic_update": 6 * n_critic * tokens + 3 * attn_c,
        "actor_forward_per_token": actor_forward / tokens,
        "n_lin": n_lin,
        "n_head": n_head,
        "n_lora": n_lora,
        "n_critic": n_critic,
    }


def measured_peak_tflops(device: torch.device, size: int = 1024, repeats: int = 10) -> float:
    """Dense matmul rate on this device in what the learner computes in (`autocast`: bf16 where native)."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    with autocast(device, True):
        a @ b
        _sync(device)
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        _sync(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e12


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device: torch.device, fn) -> tuple[float, object]:
    _sync(device)
    start = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - start, out


def run(args: argparse.Namespace) -> dict:
    wall = time.perf_counter()
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    base = WORKLOADS[args.shape]
    work = Workload(
        actor=base.actor,
        critic=base.critic,
        episodes=args.episodes or base.episodes,
        turns=base.turns,
        system_tokens=base.system_tokens,
        env_tokens=base.env_tokens,
        agent_tokens=base.agent_tokens,
        micro_batch_tokens=args.micro_batch_tokens or base.micro_batch_tokens,
        iterations=args.iterations or base.iterations,
    )
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.cuda.reset_peak_memory_stats(device)
    actor, critic = build_models(work, device, args.gradient_checkpointing)
    hyper = PPOHyper(
        actor_lr=2e-6,
        critic_lr=1e-5,
        minibatch_episodes=work.episodes,
        micro_batch_tokens=work.micro_batch_tokens,
        kl_coef=0.0,
    )
    learner = PPOLearner(actor, critic, hyper, pad_id=0, bf16=True)
    generator = torch.Generator().manual_seed(0)
    lengths = []
    seconds = {"prepare": 0.0, "update": 0.0, "critic_update": 0.0}
    for iteration in range(work.iterations + 1):  # iteration 0 warms up kernels and the allocator
        samples = make_episodes(work, seed=iteration)
        t_prepare, (prepared, _) = _timed(device, lambda samples=samples: learner.prepare(samples))
        t_update, _ = _timed(device, lambda p=prepared: learner.update(p, train_actor=True, generator=generator))
        t_critic, _ = _timed(device, lambda p=prepared: learner.update(p, train_actor=False, generator=generator))
        if iteration == 0:
            continue
        lengths += [len(seg.input_ids) for s in samples for seg in s.segments]
        seconds["prepare"] += t_prepare
        seconds["update"] += t_update
        seconds["critic_update"] += t_critic
    seconds["actor_update"] = max(seconds["update"] - seconds["critic_update"], 1e-9)
    tokens = sum(lengths)
    agent_tokens = work.iterations * work.episodes * work.turns * work.agent_tokens
    counted = flops(work, lengths, agent_tokens)
    if args.peak_tflops is not None:
        peak, peak_source = args.peak_tflops, "argument"
    elif device.type == "cuda":
        peak, peak_source = H200_BF16_PEAK_TFLOPS, "H200 bf16 dense, measured (default)"
    else:
        computes_in = "bf16 autocast" if train_in_bf16(True, device) else "fp32 (no native bf16)"
        peak, peak_source = measured_peak_tflops(device), f"{computes_in} matmul measured on this CPU"

    def mfu(flop: float, secs: float) -> float:
        return flop / secs / (peak * 1e12)

    actor_mfu = mfu(counted["actor_update"], seconds["actor_update"])
    total_params = sum(p.numel() for p in actor.parameters())
    result = {
        "benchmark": "learner",
        "shape": args.shape,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "gradient_checkpointing": args.gradient_checkpointing,
        "actor_params": total_params,
        "actor_trainable_params": sum(p.numel() for p in actor.parameters() if p.requires_grad),
        "critic_params": sum(p.numel() for p in critic.parameters()),
        "episodes_per_update": work.episodes,
        "sequence_tokens": work.segment_tokens,
        "agent_tokens_per_sequence": work.turns * work.agent_tokens,
        "micro_batch_tokens": work.micro_batch_tokens,
        "timed_iterations": work.iterations,
        "tokens": tokens,
        "agent_tokens": agent_tokens,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "tokens_per_s": {k: round(tokens / v, 1) for k, v in seconds.items()},
        "tflop": {k: round(counted[k] / 1e12, 2) for k in ("prepare", "actor_update", "critic_update")},
        "achieved_tflops": {
            "prepare": round(counted["prepare"] / seconds["prepare"] / 1e12, 3),
            "update": round((counted["actor_update"] + counted["critic_update"]) / seconds["update"] / 1e12, 3),
            "actor_update": round(counted["actor_update"] / seconds["actor_update"] / 1e12, 3),
            "critic_update": round(counted["critic_update"] / seconds["critic_update"] / 1e12, 3),
        },
        "peak_tflops": round(peak, 3),
        "peak_source": peak_source,
        "mfu": {
            "prepare": round(mfu(counted["prepare"], seconds["prepare"]), 4),
            "update": round(mfu(counted["actor_update"] + counted["critic_update"], seconds["update"]), 4),
            "actor_update": round(actor_mfu, 4),
            "critic_update": round(mfu(counted["critic_update"], seconds["critic_update"]), 4),
        },
        "target_actor_mfu": TARGET_ACTOR_MFU,
        "meets_target": bool(actor_mfu >= TARGET_ACTOR_MFU) if device.type == "cuda" else None,
        "max_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if device.type == "cuda" else None,
        "wall_s": round(time.perf_counter() - wall, 1),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--shape", choices=sorted(WORKLOADS), default="small")
    parser.add_argument("--peak-tflops", type=float, default=None, help=f"default {H200_BF16_PEAK_TFLOPS} on CUDA")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per update")
    parser.add_argument("--iterations", type=int, default=None, help="timed iterations")
    parser.add_argument("--micro-batch-tokens", type=int, default=None)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    result = run(args)
    line = json.dumps(result)
    print(line, flush=True)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
