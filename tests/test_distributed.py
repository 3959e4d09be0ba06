"""Data-parallel PPO on a local Ray cluster (2 CPUs, a small object store): two learner ranks perform the
same update as one process, and rollout episodes spread over two Ray workers make the same batch as one
worker. Ray is started by the fixture and shut down after the module."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from models.training.config import DataParallelSettings, LoraSettings, PPOConfig, PPOHyper
from models.training.ppo_learner import PPOLearner, ValueModel
from models.training.segments import RecordedTurn, episode_samples

pytestmark = pytest.mark.slow

SETTINGS = DataParallelSettings(workers=2, rollout_workers=2, local_cpus=2, object_store_mib=128)
HYPER = PPOHyper(actor_lr=1e-2, critic_lr=1e-2, minibatch_episodes=4, ppo_epochs=2, micro_batch_tokens=40, kl_coef=0.05)


def build_tiny_learner(model_dir: str) -> PPOLearner:
    """The learner every rank builds (Ray pickles this function by reference: it imports this module)."""
    from models.training.config import ComputeSettings
    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    lora = LoraSettings(r=4, alpha=8, target_modules=("q_proj", "v_proj", "up_proj"))
    actor, _ = load_lora_model(Path(model_dir), lora, compute=ComputeSettings(device="cpu"))
    critic = ValueModel.from_pretrained(Path(model_dir), ComputeSettings(device="cpu"))
    return PPOLearner(actor, critic, HYPER, pad_id=0, temperature=0.9)


def _samples(episodes: int = 7, vocab: int = 320) -> list:
    """Multi-turn packed episodes of different lengths (7 episodes: the ranks get 4 and 3)."""
    rng = torch.Generator().manual_seed(11)
    out = []
    for e in range(episodes):
        prompt = tuple(torch.randint(4, vocab, (6 + e,), generator=rng).tolist())
        turns = []
        for _ in range(1 + e % 3):
            completion = tuple(torch.randint(4, vocab, (3 + e % 2,), generator=rng).tolist())
            logprobs = tuple((-5.0 + 0.1 * torch.randn(len(completion), generator=rng)).tolist())
            turns.append(RecordedTurn(prompt, completion, logprobs))
            prompt = (*prompt, *completion, *torch.randint(4, vocab, (4,), generator=rng).tolist())
        out.append(episode_samples(f"e{e}", turns, reward=float(e % 3) / 2))
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.test_gpu_path import write_tiny_qwen

    return str(write_tiny_qwen(tmp_path_factory.mktemp("dp") / "model"))


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    import ray

    from models.training.distributed import connect

    yield connect(SETTINGS)
    ray.shutdown()


def _trained(learner: PPOLearner) -> dict[str, torch.Tensor]:
    from models.training.distributed import trained_state

    return trained_state(learner)


def test_two_ranks_update_as_one_process(ray_cluster: object, model_dir: str) -> None:
    """Same initial weights, the batch split over two ranks (prepare by episode, update by micro-batch),
    gradients summed: the prepared batch, the statistics and the new weights equal one process's."""
    import ray

    from models.training.distributed import DataParallelLearner

    samples = _samples()
    single = build_tiny_learner(model_dir)
    before = _trained(single)
    prepared_one, prepare_one = single.prepare(samples)
    stats_one = single.update(prepared_one, train_actor=True, generator=torch.Generator().manual_seed(5))
    weights_one = _trained(single)

    group = DataParallelLearner(
        build_tiny_learner(model_dir), SETTINGS, functools.partial(build_tiny_learner, model_dir)
    )
    try:
        assert ray.cluster_resources()["CPU"] == 2  # bounded: the fixture's local cluster
        prepared_dp, prepare_dp = group.prepare(samples)
        assert [p.sample.episode_id for p in prepared_dp] == [s.episode_id for s in samples]
        for a, b in zip(prepared_one, prepared_dp, strict=True):
            for x, y in zip(
                a.advantages + a.old_values + a.ref_logprobs, b.advantages + b.old_values + b.ref_logprobs, strict=True
            ):
                assert torch.allclose(x, y, atol=1e-5)
        for key, value in prepare_one.items():
            assert prepare_dp[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
        stats_dp = group.update(prepared_dp, train_actor=True, generator=torch.Generator().manual_seed(5))
        for key in (
            "policy_loss",
            "value_loss",
            "kl",
            "clip_fraction",
            "ratio_mean",
            "actor_grad_norm",
            "update_tokens",
        ):
            assert stats_dp[key] == pytest.approx(stats_one[key], rel=1e-4, abs=1e-6), key
        weights_rank0 = _trained(group.local)
        (weights_rank1,) = group.worker_states()
    finally:
        group.close()
    assert weights_one.keys() == weights_rank0.keys() == weights_rank1.keys()
    # AdamW divides each step by the root of the squared-gradient average: where a gradient is ~0, the
    # rounding-level difference of the summation order becomes a step difference of up to the learning rate.
    # So a few elements may differ by a fraction of one step; everything else agrees to 1e-5.
    differing = total = 0
    for name in weights_one:
        gap = (weights_rank0[name] - weights_one[name]).abs()
        step = (weights_one[name] - before[name]).abs().max()
        assert float(gap.max()) <= 0.05 * float(step) + 1e-6, name
        differing += int((gap > 1e-5).sum())
        total += gap.numel()
        assert torch.equal(weights_rank0[name], weights_rank1[name]), name  # the replicas stay identical
    assert differing / total < 1e-3, (differing, total)
    assert any(not torch.allclose(before[n], weights_one[n]) for n in before)  # the update moved the weights


def test_a_critic_warm_up_update_also_matches(ray_cluster: object, model_dir: str) -> None:
    """train_actor=False: only the critic's gradients are summed; the adapter stays where it was."""
    from models.training.distributed import DataParallelLearner

    samples = _samples(episodes=5)
    single = build_tiny_learner(model_dir)
    prepared, _ = single.prepare(samples)
    single.update(prepared, train_actor=False, generator=torch.Generator().manual_seed(2))
    group = DataParallelLearner(
        build_tiny_learner(model_dir), SETTINGS, functools.partial(build_tiny_learner, model_dir)
    )
    try:
        prepared_dp, _ = group.prepare(samples)
        adapter_before = {k: v for k, v in _trained(group.local).items() if k.startswith("actor.")}
        group.update(prepared_dp, train_actor=False, generator=torch.Generator().manual_seed(2))
        after = _trained(group.local)
        (rank1,) = group.worker_states()
    finally:
        group.close()
    for name, value in _trained(single).items():
        assert float((after[name] - value).abs().max()) < 1e-3, name  # a fraction of one step (see above)
        assert torch.equal(after[name], rank1[name]), name
    assert all(torch.equal(adapter_before[k], after[k]) for k in adapter_before)


def test_rollouts_spread_over_two_workers_make_the_same_batch(ray_cluster: object, rollout_proxy: object) -> None:
    """Episodes w, w + 2, ... run on worker w through the proxy; the batch equals one worker's in count,
    order, episode ids and table schema, and the proxy recorded the workers' calls."""
    import asyncio

    from environments.core.runtime import run_episodes
    from models.records import rows_for
    from models.storage import TableStore
    from models.training.distributed import distributed_rollouts
    from models.training.ppo import flush_proxy, load_recorded_turns, rollout_specs

    config = PPOConfig(
        env_id="keyword-v0", iterations=1, episodes_per_iteration=6, max_new_tokens=4, concurrency=6, run_name="dp"
    )
    # The session's proxy is keyed like the pipeline's: every worker's agents send its token.
    url, key = rollout_proxy.base_url, rollout_proxy.config.api_key
    one = asyncio.run(run_episodes(rollout_specs(config, 0, url, "tiny", key), concurrency=6, turn_timeout=120))
    spread = distributed_rollouts(config, 0, url, "tiny", SETTINGS, key)
    flush_proxy(url, key)
    assert len(spread) == len(one) == 6
    assert [r.episode_id for r in spread] == [r.episode_id for r in one]
    assert [r.scenario for r in spread] == [r.scenario for r in one]
    rows_one, rows_spread = rows_for(one, run_id="x"), rows_for(spread, run_id="x")
    assert rows_one.keys() == rows_spread.keys()
    assert len(rows_spread["episodes"]) == len(rows_one["episodes"]) == 6
    for table, rows in rows_one.items():  # one schema (models/records.py) whichever worker played
        if rows and rows_spread[table]:
            assert rows_spread[table][0].keys() == rows[0].keys(), table
    recorded = load_recorded_turns(
        TableStore(rollout_proxy.config.table_root), [r.episode_id for r in spread], "writer"
    )
    assert set(recorded) == {r.episode_id for r in spread}  # both runs' calls reached the proxy's table


def test_train_ppo_runs_data_parallel_with_spread_rollouts(
    ray_cluster: object, vllm_engine: object, rollout_proxy: object, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """One PPO iteration with two learner ranks and two rollout workers through train_ppo itself: rank 0
    saves and serves the adapter as without Ray, and the process group is closed afterwards."""
    import torch.distributed as dist

    from models.storage import TableStore
    from models.training.config import Services
    from models.training.ppo import train_ppo

    config = PPOConfig(
        env_id="keyword-v0",
        iterations=1,
        episodes_per_iteration=4,
        max_new_tokens=4,
        concurrency=4,
        run_name="dp-train",
        hyper=PPOHyper(actor_lr=1e-3, critic_lr=1e-3, minibatch_episodes=4),
        lora=LoraSettings(r=4, alpha=8, target_modules=("q_proj", "v_proj")),
        data_parallel=SETTINGS,
    )
    tables = TableStore(rollout_proxy.config.table_root)
    services = Services(vllm_engine.client, rollout_proxy.base_url, tables, proxy_api_key=rollout_proxy.config.api_key)
    result = train_ppo(config, tiny_model_dir, services, tmp_path / "run")
    vllm_engine.client.unload_adapter(result.served_name)
    (metrics,) = result.history
    assert metrics["episodes"] == 4 and metrics["update_tokens"] > 0
    assert all(math.isfinite(metrics[k]) for k in ("policy_loss", "value_loss", "actor_grad_norm"))
    assert (result.adapter_dir / "adapter_config.json").is_file()
    assert not dist.is_initialized()  # the learner group was closed
