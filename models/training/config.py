"""Settings and results of the training stages (SFT, PPO), in a module that does not import torch: profiles,
Dagster resources and assets read them without loading the learner (a GPU box may have no TRL; loading the
code location should not load torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.socialrl.counterparts import check_counterparts
from environments import sample_scenarios, seats

if TYPE_CHECKING:  # the learner imports this module on GPU boxes that have torch, transformers and peft only
    from models.serving.engine import EngineClient
    from models.storage import TableStore

DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter shape (shared by SFT and PPO, so PPO can continue an SFT adapter)."""

    r: int = 16
    """Adapter rank (the engine's --max-lora-rank must be at least this)."""
    alpha: int = 32
    """LoRA scaling numerator (effective scale alpha / r)."""
    dropout: float = 0.0
    """Dropout on the adapter input; 0 keeps trainer and engine log-probs comparable."""
    target_modules: tuple[str, ...] = DEFAULT_LORA_TARGETS
    """Linear layers that get adapters."""

    def __post_init__(self) -> None:
        if self.r < 1:
            raise ValueError(f"LoRA r must be >= 1, got {self.r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout must be in [0, 1), got {self.dropout}")
        if not self.target_modules:
            raise ValueError("target_modules must not be empty")

    def peft_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(
            r=self.r,
            lora_alpha=self.alpha,
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            task_type="CAUSAL_LM",
        )


DEVICES = ("auto", "cpu", "cuda")
ATTENTION_KERNELS = ("sdpa", "eager", "flash_attention_2")


@dataclass(frozen=True)
class ComputeSettings:
    """Where and how a training stage runs its models (models/training/device.py)."""

    device: str = "auto"
    """'auto' (CUDA when present, else the CPU), 'cpu', 'cuda' or 'cuda:N'."""
    attn_implementation: str = "sdpa"
    """transformers' attention kernel: 'sdpa' (torch's scaled_dot_product_attention: flash or memory-efficient
    kernels on GPU), 'eager', or 'flash_attention_2' (needs the flash-attn package)."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass: activation memory of one layer instead of
    all of them, for about a third more compute. For long packed episodes on GPUs that do not fit."""

    def __post_init__(self) -> None:
        base, _, index = self.device.partition(":")
        if base not in DEVICES or (index and (base != "cuda" or not index.isdigit())):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        if self.attn_implementation not in ATTENTION_KERNELS:
            raise ValueError(
                f"attn_implementation must be one of {ATTENTION_KERNELS}, got {self.attn_implementation!r}"
            )


@dataclass(frozen=True)
class DataParallelSettings:
    """Data-parallel training on Ray (models/training/distributed.py). One worker (the default) is the
    embedded path: no Ray, no process group."""

    workers: int = 1
    """Learner ranks: the caller's process is rank 0, the others are Ray actors. Each prepares a share of
    the episodes and, in every minibatch, a share of the micro-batches; gradients are summed across ranks."""
    rollout_workers: int = 1
    """Ray tasks the rollout episodes are spread over (1 = in-process)."""
    ray_address: str | None = None
    """Cluster to join ("auto", "ray://host:10001", ...); None = $RAY_ADDRESS when set, else a local cluster."""
    backend: str = "auto"
    """torch.distributed backend: 'auto' (nccl with CUDA, else gloo), 'gloo' or 'nccl'."""
    cpus_per_worker: float = 1.0
    """CPUs reserved for each Ray worker."""
    gpus_per_worker: float = 0.0
    """GPUs reserved for each learner actor (1 on a GPU cluster)."""
    local_cpus: int = 2
    """CPUs of a local cluster started for the run (ignored when joining one)."""
    object_store_mib: int = 256
    """Object store of a local cluster in MiB (ignored when joining one)."""

    def __post_init__(self) -> None:
        if self.workers < 1 or self.rollout_workers < 1:
            raise ValueError("workers and rollout_workers must be >= 1")
        if self.backend not in ("auto", "gloo", "nccl"):
            raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {self.backend!r}")
        if self.cpus_per_worker < 0 or self.gpus_per_worker < 0 or self.local_cpus < 1:
            raise ValueError("cpus_per_worker and gpus_per_worker must be >= 0, local_cpus >= 1")
        if self.object_store_mib < 80:
            raise ValueError(f"object_store_mib must be >= 80 (Ray's minimum), got {self.object_store_mib}")

    @property
    def enabled(self) -> bool:
        return self.workers > 1 or self.rollout_workers > 1


@dataclass(frozen=True)
class SFTSettings:
    """One supervised warm-start (models/training/sft.py)."""

    learning_rate: float = 2e-4
    """AdamW learning rate of the adapter."""
    epochs: float = 1.0
    """Passes over the training data (ignored when max_steps > 0)."""
    max_steps: int = -1
    """Optimiser steps; -1 means use `epochs`."""
    batch_size: int = 1
    """Packed sequences per forward pass. On CPU keep 1: padding-free batches are one long row whose
    block-diagonal attention costs grow with the square of the row (use grad_accumulation instead)."""
    grad_accumulation: int = 4
    """Forward passes per optimiser step."""
    max_length: int = 2048
    """Length of a packed sequence; a conversation longer than this is split into windows of whole
    exchanges (system prompt + consecutive user/assistant turns), as the LLM agent trims its prompts."""
    packing: bool = True
    """Pack examples into `max_length` sequences (TRL best-fit-decreasing, padding-free)."""
    trained_positions_only: bool = False
    """Run the LM head at the trained (assistant) positions only (models/training/sft.py `trainer_class`):
    TRL's fused head scores every position where Triton is missing (the CPU)."""
    eval_windows: int = 16
    """Held-out examples evaluated before and after training (a small fixed set, not the whole split)."""
    checkpoint_every: int = 0
    """Every this many optimiser steps, measure the held-out loss and save the adapter as a checkpoint (the
    learning curve's points; 0: only before and after training)."""
    bf16: bool = False
    """bfloat16: base weights loaded in bf16 (LoRA weights stay fp32) and bf16 autocast."""
    seed: int = 0
    """Seeds data order and adapter initialisation."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """Adapter shape."""
    compute: ComputeSettings = field(default_factory=ComputeSettings)
    """Device, attention kernel and gradient checkpointing."""

    def __post_init__(self) -> None:
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps must be -1 or > 0, got {self.max_steps}")
        if self.batch_size < 1 or self.grad_accumulation < 1:
            raise ValueError("batch_size and grad_accumulation must be >= 1")
        if self.max_length < 32:
            raise ValueError(f"max_length must be >= 32, got {self.max_length}")
        if self.eval_windows < 0 or self.checkpoint_every < 0:
            raise ValueError(
                f"eval_windows and checkpoint_every must be >= 0, got {self.eval_windows}, {self.checkpoint_every}"
            )


@dataclass(frozen=True)
class SFTCheckpoint:
    """The adapter after `step` optimiser steps (SFTSettings.checkpoint_every)."""

    step: int
    """Optimiser steps taken."""
    tokens: int
    """Training tokens fed so far (every pass counted)."""
    eval_loss: float | None
    """Loss on the held-out windows at this step (None without held-out data)."""
    adapter_dir: Path
    """The adapter saved at this step."""


@dataclass(frozen=True, kw_only=True)
class SFTResult:
    """What a warm-start produced."""

    adapter_dir: Path
    """The trained adapter (and its tokenizer)."""
    train_loss: float
    """Mean training loss over the run."""
    eval_loss_before: float | None
    """Loss on the held-out windows before training (None without held-out data)."""
    eval_loss_after: float | None
    """Loss on the held-out windows after training."""
    steps: int
    """Optimiser steps taken."""
    examples: int
    """Training examples (conversation windows) before packing."""
    wall_seconds: float
    """Whole call, model loading included."""
    train_tokens: int = 0
    """Tokens of the training examples (every pass counted), loss tokens and context tokens alike."""
    train_seconds: float = 0.0
    """Wall time of the optimisation loop alone."""
    loss_curve: tuple[float, ...] = ()
    """Training loss per optimiser step."""
    loss_tokens: int = 0
    """Assistant tokens of one pass over the training examples (the tokens that carry the loss)."""
    checkpoints: tuple[SFTCheckpoint, ...] = ()
    """The adapters saved every `checkpoint_every` steps, with their held-out loss."""
    pass_tokens: int = 0
    """Tokens of one pass over the training examples (`train_tokens / pass_tokens` = passes made)."""

    @property
    def tokens_per_second(self) -> float:
        return self.train_tokens / self.train_seconds if self.train_seconds > 0 else 0.0


@dataclass(frozen=True)
class PPOHyper:
    """The PPO update's hyper-parameters (the rollout side lives in models/training/ppo.py)."""

    actor_lr: float = 2e-6
    """Actor (LoRA adapter) learning rate; the paper's 2e-6."""
    critic_lr: float = 1e-5
    """Critic learning rate; the paper's 1e-5."""
    minibatch_episodes: int = 36
    """Episodes per optimiser step."""
    ppo_epochs: int = 1
    """Passes over an iteration's batch."""
    clip_range: float = 0.2
    """PPO ratio clip epsilon."""
    value_clip_range: float | None = 0.2
    """Clip of the value update around the old values (None disables)."""
    gamma: float = 1.0
    """Discount over the credit steps (agent tokens or turns, see `credit`)."""
    lam: float = 1.0
    """GAE lambda. 1 (with gamma 1) gives every agent token the return minus its value, so the terminal
    reward reaches the opening turn undamped; at 0.95 over agent tokens the reward's weight fell to
    0.95^n after n tokens (about 0.04 after one 64-token reply), leaving early turns to the critic alone."""
    credit: str = "token"
    """'token': GAE over the agent's tokens; 'turn': GAE over the agent's turns (the value at a turn's first
    token), each turn's advantage given to all of its tokens."""
    critic: str = "separate"
    """'separate': a critic model of its own (the paper's smaller model); 'shared': a value head on the
    actor's last hidden state, one forward for both (the value loss also trains the adapter, by vf_coef)."""
    advantage: str = "gae"
    """'gae': advantages from the critic's values (GAE, `credit`); 'group': each episode's return minus the
    mean return of the other episodes of its group (same scenario and counterpart, other sampling seeds;
    `PPOConfig.group_size`), given to every agent token. The group baseline needs no critic warm-up and
    cancels scenario difficulty; the critic is then trained for its diagnostics only (on detached hidden
    states when shared, so it does not move the policy)."""
    vf_coef: float = 0.5
    """Weight of the value loss in the joint loss of a shared critic."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy: the policy PPO started from (the SFT warm-start
    when there is one, else the base model without an adapter)."""
    max_grad_norm: float = 5.0
    """Gradient-norm clip for actor and critic."""
    whiten_advantages: bool = True
    """Normalise advantages over the batch."""
    micro_batch_tokens: int = 8192
    """Most padded tokens per forward pass; larger minibatches accumulate gradients over micro-batches."""
    old_logprobs: str = "engine"
    """'engine': the recorded engine log-probs are the old policy (as specified); 'trainer': recomputed."""

    def __post_init__(self) -> None:
        if self.actor_lr <= 0 or self.critic_lr <= 0:
            raise ValueError("learning rates must be > 0")
        if self.minibatch_episodes < 1 or self.ppo_epochs < 1 or self.micro_batch_tokens < 1:
            raise ValueError("minibatch_episodes, ppo_epochs and micro_batch_tokens must be >= 1")
        if not 0 < self.clip_range < 1:
            raise ValueError(f"clip_range must lie in (0, 1), got {self.clip_range}")
        if not 0 <= self.gamma <= 1 or not 0 <= self.lam <= 1:
            raise ValueError("gamma and lam must lie in [0, 1]")
        if self.old_logprobs not in ("engine", "trainer"):
            raise ValueError(f"old_logprobs must be 'engine' or 'trainer', got {self.old_logprobs!r}")
        if self.credit not in ("token", "turn"):
            raise ValueError(f"credit must be 'token' or 'turn', got {self.credit!r}")
        if self.critic not in ("separate", "shared"):
            raise ValueError(f"critic must be 'separate' or 'shared', got {self.critic!r}")
        if self.advantage not in ("gae", "group"):
            raise ValueError(f"advantage must be 'gae' or 'group', got {self.advantage!r}")
        if self.vf_coef <= 0 or self.kl_coef < 0:
            raise ValueError("vf_coef must be > 0 and kl_coef >= 0")


@dataclass(frozen=True)
class PPOConfig:
    """A PPO specialist run."""

    env_id: str
    """Environment the specialist is trained on."""
    seat: str | None = None
    """Learning seat; None = the environment's first seat."""
    counterparts: tuple[str, ...] = ("boulware", "conceder", "reciprocal")
    """Counterparts the policy plays against, cycled over the episode groups: code agents, or `llm`
    (agents/socialrl/counterparts.py: `counterpart_model` through the rollout proxy)."""
    counterpart_model: str = "base"
    """The served model an `llm` counterpart plays (the engine serves its base model as "base")."""
    iterations: int = 10
    """PPO iterations (rollout + update + sync); the paper runs <= 200 steps."""
    episodes_per_iteration: int = 16
    """Episodes per rollout batch (the paper's batch is 144)."""
    group_size: int = 1
    """Episodes per (scenario, counterpart) in a rollout batch, differing only in the policy's sampling seed
    (the groups of `PPOHyper.advantage='group'`, which needs >= 2); divides `episodes_per_iteration`."""
    invalid_action_penalty: float = 0.0
    """Training only: subtracted from an episode's reward per invalid action of the learning seat (the
    paper's reward is outcome-only, so its profile keeps 0; evaluation never applies it)."""
    critic_warmup_iterations: int = 0
    """Iterations that train only the critic, actor frozen (the paper warms the critic 30 steps)."""
    checkpoint_every: int = 1
    """Write a resumable checkpoint every this many iterations."""
    keep_checkpoints: int = 2
    """Newest checkpoints kept on disk."""
    temperature: float = 1.0
    """Sampling temperature of the policy during rollouts."""
    max_new_tokens: int = 64
    """Most tokens per policy reply."""
    concurrency: int = 16
    """Episodes in flight at once (their calls batch in the engine)."""
    turn_timeout_s: float = 600.0
    """Seconds a seat may take per turn."""
    sampling_extra: dict[str, Any] = field(default_factory=dict)
    """Extra request fields for the policy's calls (e.g. vLLM's allowed_token_ids for toy tasks)."""
    pack_episodes: bool = True
    """Pack prefix-stable episodes into one sequence (see models/training/ppo_learner.py)."""
    bf16: bool = False
    """Train under bfloat16 autocast."""
    seed: int = 0
    """Seeds scenarios, sampling, minibatch order and adapter initialisation."""
    scenario_source: str = "generated"
    """Where rollout scenarios come from: "generated", or "dataset" (the real data's training partition,
    models/evaluation/scenarios.py); never the held-out partition either way."""
    run_name: str = "ppo"
    """Prefix of the adapter names served by the engine."""
    progress_interval_s: float = 60.0
    """Most seconds between the progress lines logged inside an update (micro-batches done of the total,
    tokens/s, time left): an update runs for minutes on CPU between its other lines."""
    hyper: PPOHyper = field(default_factory=PPOHyper)
    """Update hyper-parameters."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """Adapter shape (ignored when starting from an SFT adapter, whose shape is kept)."""
    compute: ComputeSettings = field(default_factory=ComputeSettings)
    """Device, attention kernel and gradient checkpointing of the learner's models."""
    data_parallel: DataParallelSettings = field(default_factory=DataParallelSettings)
    """Learner ranks and rollout workers on Ray (one of each by default: no Ray)."""

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.episodes_per_iteration < 1:
            raise ValueError("iterations and episodes_per_iteration must be >= 1")
        if not 0 <= self.critic_warmup_iterations < self.iterations:
            raise ValueError("critic_warmup_iterations must lie in [0, iterations)")
        if self.group_size < 1 or self.episodes_per_iteration % self.group_size:
            raise ValueError(
                f"group_size must be >= 1 and divide episodes_per_iteration, got {self.group_size} "
                f"and {self.episodes_per_iteration}"
            )
        if self.hyper.advantage == "group" and self.group_size < 2:
            raise ValueError("advantage='group' needs group_size >= 2 (a baseline from the other episodes)")
        if self.invalid_action_penalty < 0:
            raise ValueError(f"invalid_action_penalty must be >= 0, got {self.invalid_action_penalty}")
        if self.checkpoint_every < 1 or self.keep_checkpoints < 1:
            raise ValueError("checkpoint_every and keep_checkpoints must be >= 1")
        if self.progress_interval_s < 0:
            raise ValueError(f"progress_interval_s must be >= 0, got {self.progress_interval_s}")
        check_counterparts(self.counterparts)
        if not self.counterpart_model.strip():
            raise ValueError("counterpart_model must name a served model")
        if self.scenario_source not in ("generated", "dataset"):
            raise ValueError(f"scenario_source must be 'generated' or 'dataset', got {self.scenario_source!r}")
        if not self.run_name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"run_name must be alphanumeric with - or _, got {self.run_name!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PPOConfig:
        data = dict(data)
        data["hyper"] = PPOHyper(**data.get("hyper", {}))
        lora = dict(data.get("lora", {}))
        if "target_modules" in lora:
            lora["target_modules"] = tuple(lora["target_modules"])
        data["lora"] = LoraSettings(**lora)
        data["compute"] = ComputeSettings(**data.get("compute", {}))
        data["data_parallel"] = DataParallelSettings(**data.get("data_parallel", {}))
        data["counterparts"] = tuple(data.get("counterparts", cls.counterparts))
        return cls(**data)


@dataclass(frozen=True)
class Services:
    """The running parts a PPO run talks to."""

    engine: EngineClient
    """The vLLM engine serving the base model (adapters are loaded into it)."""
    proxy_base_url: str
    """The rollout proxy's OpenAI base URL (…/v1); it records into `store`."""
    store: TableStore
    """Where the proxy's recorded calls are read from and episodes are written to."""
    proxy_api_key: str | None = field(default=None, repr=False)
    """The proxy's bearer token (EngineResource.proxy_api_key), sent by the rollout agents; None = none."""


@dataclass(frozen=True)
class PPOResult:
    """A finished run."""

    adapter_dir: Path
    """The final adapter."""
    served_name: str
    """The name the final adapter is served under."""
    history: list[dict[str, Any]]
    """Per-iteration metrics."""
    resumed_from: int | None
    """The iteration a resumed run started from (None for a fresh run)."""


def adapter_name(config: PPOConfig, iteration: int) -> str:
    return f"{config.run_name}-v{iteration}"


def learning_seat(config: PPOConfig) -> str:
    """The seat the policy learns in: the configured one, else the environment's first seat."""
    if config.seat is not None:
        return config.seat
    return seats(config.env_id, sample_scenarios(config.env_id, 1, 0)[0])[0]
