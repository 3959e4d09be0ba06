"""Data-parallel PPO on Ray: learner ranks joined by torch.distributed, rollout episodes spread over Ray tasks.

| piece | where it runs | what it does |
| --- | --- | --- |
| rank 0 | the caller's process (the PPO run, a Dagster step) | a plain `PPOLearner`; saves adapters and checkpoints as without Ray |
| ranks 1..N-1 | Ray actors (`cpus_per_worker`, `gpus_per_worker` each) | the same learner, built by the same function from the same settings |
| process group | torch.distributed, TCP rendezvous on rank 0's node | gloo on CPU, NCCL on GPUs |
| rollouts | Ray tasks, each running its share of the iteration's episodes against the proxy | results in episode order |

Why the data-parallel update equals the single-process one (tests/test_distributed.py checks it): every
rank holds the whole iteration's prepared batch (log-probs, values, advantages: a few floats per token) and
walks the same minibatches in the same order (the same generator state). In each minibatch the learner splits
the episodes into micro-batches exactly as one process does, and rank r runs micro-batches r, r + N, ...
Every loss term is a sum over tokens divided by the token count of the WHOLE minibatch (not of the rank's
share), so the gradient of the minibatch is the sum of the micro-batches' gradients; summing (not averaging)
the ranks' gradients with one all-reduce gives that sum on every rank, and the identical clipped AdamW step
keeps the replicas identical. The only differences are float rounding from the order of the additions.
Advantage whitening needs statistics of the whole batch: ranks prepare their share of the episodes without
it, and rank 0 whitens the gathered batch.

Why not torch's DistributedDataParallel wrapper: the learner calls PEFT methods on its actor (switching to the
frozen reference adapter, disabling the adapter, saving one adapter), which a DDP wrapper hides, and it
accumulates gradients over a variable number of micro-batches per rank (DDP's no_sync/last-pass protocol
needs the same count on every rank). One bucketed all-reduce per minibatch after accumulation is what DDP
does with no_sync; the small LoRA gradients make the missing overlap with the backward pass cheap.
Models too large to replicate on one GPU would need sharding (FSDP); at the paper's sizes (4B actor in bf16
with a LoRA adapter, 1.7B critic with fp32 AdamW state: ~35 GB) a replica fits one 80-141 GB GPU.

Ray is imported only here and only when data parallelism is configured: the embedded default needs no cluster.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import datetime
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

from models.settings import REPO_ROOT
from models.training.config import DataParallelSettings, PPOConfig
from models.training.ppo_learner import PPOLearner, PreparedEpisode, whiten_advantages
from models.training.rollouts import rollout_specs
from models.training.segments import EpisodeSample

if TYPE_CHECKING:
    from environments.core.runtime import EpisodeResult

log = logging.getLogger("socialrl.distributed")

BUCKET_ELEMENTS = 32 * 1024 * 1024
"""Gradient elements per all-reduce (128 MiB of fp32): bounds the flat buffer's extra memory."""


def connect(settings: DataParallelSettings) -> Any:
    """Ray, connected: to `settings.ray_address` when set ("auto" = the cluster `ray start` made on this
    node or $RAY_ADDRESS, "ray://head:10001" = a remote cluster), else to a new local cluster bounded by
    `local_cpus` and `object_store_mib`. Reuses an existing connection."""
    import ray

    if ray.is_initialized():
        return ray
    if settings.ray_address is None:
        ray.init(
            address="local",
            num_cpus=settings.local_cpus,
            object_store_memory=settings.object_store_mib * 1024 * 1024,
            include_dashboard=False,
            runtime_env=runtime_env(),
        )
    else:
        ray.init(address=settings.ray_address, runtime_env=runtime_env())
    return ray


def runtime_env() -> dict[str, Any]:
    """Ray workers import this checkout: on one machine from its path; on a cluster every node needs the
    same checkout at the same path (an image built from it, as KubeRay runs)."""
    return {"env_vars": {"PYTHONPATH": str(REPO_ROOT), "TOKENIZERS_PARALLELISM": "false"}}


def resolve_backend(settings: DataParallelSettings, device: torch.device) -> str:
    """gloo on CPU, NCCL on CUDA, unless configured."""
    if settings.backend != "auto":
        return settings.backend
    return "nccl" if device.type == "cuda" else "gloo"


def _module_grads(modules: Sequence[nn.Module]) -> list[torch.Tensor]:
    """The gradient of every trainable parameter; a parameter that got none on this rank gets zeros, so
    every rank reduces the same tensors and takes the same optimizer step."""
    grads = []
    for module in modules:
        for parameter in module.parameters():
            if not parameter.requires_grad:
                continue
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            grads.append(parameter.grad)
    return grads


class Collective:
    """This rank's view of the data-parallel group (set as `PPOLearner.data_parallel`)."""

    def __init__(self, rank: int, world: int, device: torch.device) -> None:
        if not 0 <= rank < world:
            raise ValueError(f"rank {rank} outside a group of {world}")
        self.rank, self.world, self.device = rank, world, device

    def share(self, chunks: Sequence[Any]) -> list[Any]:
        """The micro-batches this rank runs: r, r + N, r + 2N, ..."""
        return list(chunks[self.rank :: self.world])

    def reduce(self, modules: Sequence[nn.Module], sums: Sequence[float]) -> list[float]:
        """Sum the gradients of `modules` and the statistics `sums` over ranks (in place for gradients)."""
        grads = _module_grads(modules)
        bucket: list[torch.Tensor] = []
        size = 0
        for grad in grads:
            bucket.append(grad)
            size += grad.numel()
            if size >= BUCKET_ELEMENTS:
                self._all_reduce_bucket(bucket)
                bucket, size = [], 0
        if bucket:
            self._all_reduce_bucket(bucket)
        totals = torch.tensor(list(sums), dtype=torch.float64, device=self.device)
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        return [float(x) for x in totals.cpu()]

    @staticmethod
    def _all_reduce_bucket(bucket: list[torch.Tensor]) -> None:
        if len(bucket) == 1:
            dist.all_reduce(bucket[0], op=dist.ReduceOp.SUM)
            return
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for grad in bucket:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()


def broadcast_state(learner: PPOLearner) -> None:
    """Make every rank hold rank 0's trained weights and optimizer states (after a build or a resume)."""
    for module in (learner.actor, learner.critic):
        for parameter in module.parameters():
            if parameter.requires_grad:
                dist.broadcast(parameter.data, src=0)
    for optimizer in (learner.actor_optimizer, learner.critic_optimizer):
        state = [optimizer.state_dict() if dist.get_rank() == 0 else None]
        has_state = torch.tensor([len(state[0]["state"]) if state[0] else 0], device=learner.device)
        dist.broadcast(has_state, src=0)
        if int(has_state) == 0:  # a fresh optimizer: nothing to send
            continue
        dist.broadcast_object_list(state, src=0, device=learner.device)
        if dist.get_rank() != 0:
            optimizer.load_state_dict(state[0])


def _as_learner(built: Any) -> PPOLearner:
    learner = built[0] if isinstance(built, tuple) else built
    if not isinstance(learner, PPOLearner):
        raise TypeError(f"the learner builder returned {type(learner).__name__}, not a PPOLearner")
    return learner


class LearnerWorker:
    """One learner rank in a Ray actor (ranks 1..N-1)."""

    def __init__(
        self, build: Callable[[], Any], rank: int, world: int, init_method: str, settings: DataParallelSettings
    ) -> None:
        logging.basicConfig(level=logging.INFO)
        self.learner = _as_learner(build())
        backend = resolve_backend(settings, self.learner.device)
        dist.init_process_group(
            backend, init_method=init_method, rank=rank, world_size=world, timeout=datetime.timedelta(minutes=30)
        )
        self.learner.data_parallel = Collective(rank, world, self.learner.device)

    def ready(self) -> int:
        return dist.get_rank()

    def prepare(self, samples: list[EpisodeSample]) -> tuple[list[PreparedEpisode], dict[str, float] | None]:
        if not samples:
            return [], None
        return self.learner.prepare(samples, whiten=False)

    def broadcast_state(self) -> None:
        broadcast_state(self.learner)

    def update(self, prepared: list[PreparedEpisode], train_actor: bool, generator_state: torch.Tensor) -> None:
        generator = torch.Generator()
        generator.set_state(generator_state)
        self.learner.update(prepared, train_actor=train_actor, generator=generator)

    def trained_state(self) -> dict[str, torch.Tensor]:
        """The trainable weights (for checking that the replicas agree)."""
        return trained_state(self.learner)

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def trained_state(learner: PPOLearner) -> dict[str, torch.Tensor]:
    """Every trainable parameter of the actor and the critic, on the CPU."""
    out = {}
    for prefix, module in (("actor", learner.actor), ("critic", learner.critic)):
        for name, parameter in module.named_parameters():
            if parameter.requires_grad:
                out[f"{prefix}.{name}"] = parameter.detach().float().cpu().clone()
    return out


_OPEN: weakref.WeakSet[DataParallelLearner] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for group in list(_OPEN):
        group.close()


class DataParallelLearner:
    """A PPOLearner whose prepare/update run on `settings.workers` ranks. Rank 0 is `local` (in this
    process); everything else (`actor`, `critic`, optimizers, `load_reference`) is rank 0's, so saving
    adapters and checkpoints works as without Ray. Ranks 1..N-1 are built in Ray actors by `build` (a
    picklable callable returning a PPOLearner or a tuple starting with one), from the same settings and seed;
    rank 0's trained weights and optimizer states are broadcast before the first update (which also covers
    a resumed run)."""

    def __init__(self, local: PPOLearner, settings: DataParallelSettings, build: Callable[[], Any]) -> None:
        if settings.workers < 2:
            raise ValueError("a data-parallel learner needs workers >= 2")
        for group in list(_OPEN):  # a process holds one default process group at a time
            group.close()
        ray = connect(settings)
        self.local, self.settings, self.world = local, settings, settings.workers
        self._ray = ray
        self._synced = False
        self._closed = False
        host = "127.0.0.1" if settings.ray_address is None else ray.util.get_node_ip_address()
        from models.serving.engine import free_port

        init_method = f"tcp://{host}:{free_port()}"
        worker = ray.remote(LearnerWorker).options(
            num_cpus=settings.cpus_per_worker, num_gpus=settings.gpus_per_worker, runtime_env=runtime_env()
        )
        self.workers = [worker.remote(build, rank, self.world, init_method, settings) for rank in range(1, self.world)]
        dist.init_process_group(
            resolve_backend(settings, local.device),
            init_method=init_method,
            rank=0,
            world_size=self.world,
            timeout=datetime.timedelta(minutes=30),
        )
        ray.get([w.ready.remote() for w in self.workers])
        local.data_parallel = Collective(0, self.world, local.device)
        _OPEN.add(self)
        log.info("data-parallel learner: %d ranks (%s)", self.world, resolve_backend(settings, local.device))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.local, name)

    def prepare(self, samples: Sequence[EpisodeSample]) -> tuple[list[PreparedEpisode], dict[str, float]]:
        """Each rank prepares every N-th episode; the batch is gathered in order and whitened as a whole."""
        shares = [list(range(rank, len(samples), self.world)) for rank in range(self.world)]
        futures = [w.prepare.remote([samples[i] for i in shares[rank]]) for rank, w in enumerate(self.workers, start=1)]
        local = self.local.prepare([samples[i] for i in shares[0]], whiten=False) if shares[0] else ([], None)
        parts = [local, *self._ray.get(futures)]
        prepared: list[PreparedEpisode | None] = [None] * len(samples)
        for share, (episodes, _) in zip(shares, parts, strict=True):
            for index, episode in zip(share, episodes, strict=True):
                prepared[index] = episode
        batch = [p for p in prepared if p is not None]
        if self.local.hyper.whiten_advantages:
            whiten_advantages(batch)
        return batch, _merge_prepare_stats(
            [(stats, share, samples) for share, (_, stats) in zip(shares, parts, strict=True)]
        )

    def update(
        self, prepared: Sequence[PreparedEpisode], train_actor: bool, generator: torch.Generator
    ) -> dict[str, float]:
        if not self._synced:
            futures = [w.broadcast_state.remote() for w in self.workers]
            broadcast_state(self.local)
            self._ray.get(futures)
            self._synced = True
        state = generator.get_state()
        batch = list(prepared)
        futures = [w.update.remote(batch, train_actor, state) for w in self.workers]
        out = self.local.update(batch, train_actor=train_actor, generator=generator)
        self._ray.get(futures)
        return out

    def worker_states(self) -> list[dict[str, torch.Tensor]]:
        """Trainable weights of ranks 1..N-1."""
        return self._ray.get([w.trained_state.remote() for w in self.workers])

    def close(self) -> None:
        """Leave the process group and end the worker actors (the Ray connection stays)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._ray.get([w.close.remote() for w in self.workers], timeout=60)
        for w in self.workers:
            with contextlib.suppress(Exception):
                self._ray.kill(w)
        if dist.is_initialized():
            dist.destroy_process_group()
        self.local.data_parallel = None
        _OPEN.discard(self)


def _merge_prepare_stats(parts: list[tuple[dict[str, float] | None, list[int], Sequence[EpisodeSample]]]) -> dict:
    """The single-process statistics from the ranks': means weighted by agent tokens, the max of maxima."""
    weighted: dict[str, float] = {"logprob_mismatch_mean_abs": 0.0, "entropy": 0.0}
    tokens = 0
    worst = 0.0
    for stats, share, samples in parts:
        if stats is None:
            continue
        n = sum(len(seg.agent_positions) for i in share for seg in samples[i].segments)
        tokens += n
        for key in weighted:
            weighted[key] += stats[key] * n
        worst = max(worst, stats["logprob_mismatch_max_abs"])
    return {
        "logprob_mismatch_mean_abs": weighted["logprob_mismatch_mean_abs"] / tokens,
        "logprob_mismatch_max_abs": worst,
        "entropy": weighted["entropy"] / tokens,
    }


def _rollout_share(
    config: PPOConfig,
    iteration: int,
    proxy_base_url: str,
    model: str,
    indices: list[int],
    api_key: str | None,
    attempt: str,
) -> list[EpisodeResult]:
    """A Ray task: the iteration's episodes at `indices` (specs are rebuilt here, deterministic in
    (seed, iteration) and named by the trainer's `attempt`, so no closures travel)."""
    from environments.core.runtime import run_episodes

    specs = rollout_specs(config, iteration, proxy_base_url, model, api_key, attempt)
    chosen = [specs[i] for i in indices]
    return asyncio.run(run_episodes(chosen, concurrency=config.concurrency, turn_timeout=config.turn_timeout_s))


def distributed_rollouts(
    config: PPOConfig,
    iteration: int,
    proxy_base_url: str,
    model: str,
    settings: DataParallelSettings,
    api_key: str | None = None,
    attempt: str = "",
) -> list[EpisodeResult]:
    """The iteration's rollout episodes, worker w playing episodes w, w + W, ...; results in episode order,
    as one process's `run_episodes` returns them (episode ids as `rollout_specs` names them for `attempt`).
    Calls go through the proxy (`api_key` its token), which records them as usual."""
    ray = connect(settings)
    workers = settings.rollout_workers
    task = ray.remote(_rollout_share).options(num_cpus=settings.cpus_per_worker, runtime_env=runtime_env())
    shares = [list(range(w, config.episodes_per_iteration, workers)) for w in range(workers)]
    futures = [
        task.remote(config, iteration, proxy_base_url, model, share, api_key, attempt) for share in shares if share
    ]
    results: list[EpisodeResult | None] = [None] * config.episodes_per_iteration
    for share, part in zip([s for s in shares if s], ray.get(futures), strict=True):
        for index, result in zip(share, part, strict=True):
            results[index] = result
    missing = [i for i, r in enumerate(results) if r is None]
    if missing:
        raise RuntimeError(f"rollout workers returned no result for episodes {missing}")
    return [r for r in results if r is not None]
