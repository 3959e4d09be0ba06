"""Multi-turn PPO end to end on the real engine and proxy: it learns a toy task, the engine and trainer
log-probs agree, adapters are hot-loaded and recorded by version, and a killed run resumes, training on its own
calls only."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from models.storage import TableStore
from models.training.config import LoraSettings, PPOConfig, PPOHyper, Services
from models.training.ppo import latest_checkpoint, train_ppo

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _config(yes_no_ids: list[int], run_name: str, iterations: int) -> PPOConfig:
    # The keyword task rewards "no" in 8-token replies restricted to " yes" / " no": dense from the start.
    return PPOConfig(
        env_id="keyword-v0",
        iterations=iterations,
        episodes_per_iteration=16,
        max_new_tokens=8,
        concurrency=16,
        run_name=run_name,
        sampling_extra={"allowed_token_ids": yes_no_ids},
        hyper=PPOHyper(actor_lr=2e-3, critic_lr=1e-3, minibatch_episodes=8, ppo_epochs=4),
        lora=LoraSettings(r=8, alpha=16),
    )


def test_ppo_learns_the_keyword_task(
    vllm_engine: object,
    rollout_proxy: object,
    tiny_model_dir: Path,
    yes_no_ids: list[int],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = _config(yes_no_ids, "learn", iterations=8)
    services = Services(
        vllm_engine.client,
        rollout_proxy.base_url,
        TableStore(rollout_proxy.config.table_root),
        proxy_api_key=rollout_proxy.config.api_key,
    )
    with caplog.at_level("INFO", logger="socialrl.ppo"):
        result = train_ppo(config, tiny_model_dir, services, tmp_path / "run")
    # Progress: one line per iteration with the reward's interval, KL, losses and token rates.
    # Each iteration also says when its rollout ended (the 'rollout:' line) before it trains.
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("PPO learn it")]
    rollouts = [line for line in progress if " rollout: " in line]
    iterations = [line for line in progress if " rollout: " not in line]
    assert [line.split(" rollout: ")[0] for line in rollouts] == [f"PPO learn it {i}/8" for i in range(1, 9)]
    assert all(line.split(" rollout: ")[1].startswith("16 episodes, reward ") for line in rollouts)
    assert len(iterations) == 8 and all("reward" in line and "tok/s" in line for line in iterations)
    rewards = [m["reward_mean"] for m in result.history]
    early, late = sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2
    assert late > early + 0.25, rewards
    assert late > 0.7, rewards
    # Trainer and engine hold the same weights when a batch is prepared: their log-probs agree (bf16 engine).
    assert all(m["logprob_mismatch_mean_abs"] < 0.05 for m in result.history)
    # Each iteration's calls were recorded under the adapter version that produced them.
    versions = services.store.query(
        "SELECT DISTINCT model, adapter_version FROM recorded_calls WHERE starts_with(episode_id, 'learn:') ORDER BY model"
    )
    assert list(versions.model) == [f"learn-v{i}" for i in range(8)]
    assert list(versions.adapter_version) == list(versions.model)
    assert result.served_name == "learn-v8" and "learn-v8" in vllm_engine.client.models()


@pytest.mark.parametrize(
    ("credit", "critic", "advantage"),
    [("token", "separate", "gae"), ("turn", "shared", "gae"), ("token", "shared", "group")],
)
def test_ppo_learns_the_deciding_first_turn_of_a_two_turn_task(
    vllm_engine: object,
    rollout_proxy: object,
    tiny_model_dir: Path,
    yes_no_ids: list[int],
    tmp_path: Path,
    credit: str,
    critic: str,
    advantage: str,
) -> None:
    """Only the first of two replies is rewarded; the second is noise between the choice and the reward. The
    group-relative baseline (four samples per scenario, no critic in the advantages) learns it too."""
    import dataclasses

    base = _config(yes_no_ids, f"twoturn-{credit}-{critic}-{advantage}", iterations=8)
    config = dataclasses.replace(
        base,
        env_id="keyword-two-turn-v0",
        group_size=4 if advantage == "group" else 1,
        hyper=dataclasses.replace(base.hyper, credit=credit, critic=critic, advantage=advantage),
    )
    services = Services(
        vllm_engine.client,
        rollout_proxy.base_url,
        TableStore(rollout_proxy.config.table_root),
        proxy_api_key=rollout_proxy.config.api_key,
    )
    result = train_ppo(config, tiny_model_dir, services, tmp_path / "run")
    rewards = [m["reward_mean"] for m in result.history]
    early, late = sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2
    assert late > early + 0.2, rewards
    assert all(m["packed_fraction"] == 1.0 for m in result.history)  # both turns in one packed sequence
    assert all(m["entropy"] > 0 for m in result.history)


def _ppo_process(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "models.training.ppo", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_a_killed_run_resumes_from_its_checkpoint_with_the_same_results(
    vllm_engine: object, rollout_proxy: object, tiny_model_dir: Path, yes_no_ids: list[int], tmp_path: Path
) -> None:
    def args(run: str) -> list[str]:
        config = tmp_path / f"{run}.json"
        payload = json.loads(json.dumps(_config(yes_no_ids, run, iterations=4), default=lambda o: o.__dict__))
        config.write_text(json.dumps(payload))
        return [
            "--config", str(config), "--base-model", str(tiny_model_dir),
            "--engine-url", vllm_engine.base_url, "--proxy-url", rollout_proxy.base_url,
            "--table-root", str(rollout_proxy.config.table_root), "--output", str(tmp_path / run),
        ]  # fmt: skip

    env = {
        **os.environ,
        "SOCIALRL_ENGINE_API_KEY": vllm_engine.config.api_key,
        "SOCIALRL_PROXY_API_KEY": rollout_proxy.config.api_key,
    }
    whole = _ppo_process(args("whole"), env)
    out, _ = whole.communicate(timeout=600)
    assert whole.returncode == 0, out

    killed = _ppo_process(args("resumed"), env)
    deadline = time.monotonic() + 600
    while latest_checkpoint(tmp_path / "resumed") is None or latest_checkpoint(tmp_path / "resumed").name < "it00002":
        assert killed.poll() is None, killed.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(30)
    assert latest_checkpoint(tmp_path / "resumed").name in ("it00002", "it00003")
    again = _ppo_process(args("resumed"), env)
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, out
    assert json.loads(out.strip().splitlines()[-1])["resumed_from"] in (2, 3)

    def history(run: str) -> list[dict]:
        return json.loads((latest_checkpoint(tmp_path / run) / "state.json").read_text())["history"]

    # The same tokens iteration by iteration: the resumed iteration trained on its own calls, not on the killed
    # attempt's as well (the engine's replies have a fixed length here, so counts do not depend on sampling).
    assert [m["rollout_tokens"] for m in history("whole")] == [m["rollout_tokens"] for m in history("resumed")]
    whole_rewards = [round(m["reward_mean"], 6) for m in history("whole")]
    resumed_rewards = [round(m["reward_mean"], 6) for m in history("resumed")]
    assert len(resumed_rewards) == 4
    assert max(abs(a - b) for a, b in zip(whole_rewards, resumed_rewards, strict=True)) <= 0.125, (
        whole_rewards,
        resumed_rewards,
    )
    from safetensors.torch import load_file

    a = load_file(tmp_path / "whole" / "adapter" / "adapter_model.safetensors")
    b = load_file(tmp_path / "resumed" / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    scale = max(float(t.abs().max()) for t in a.values())
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 0.1 * scale


class _Killed(Exception):
    """Stands for the SIGKILL that ends a run between an iteration's recorded rollout and its update."""


def test_a_resumed_iteration_trains_on_its_own_calls_not_the_killed_attempts(
    vllm_engine: object,
    rollout_proxy: object,
    tiny_model_dir: Path,
    yes_no_ids: list[int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that dies after iteration 2's calls are recorded, before its update, resumes from the iteration-2
    checkpoint and plays iteration 2 again with the same seeds: it trains on exactly its own calls (the killed
    attempt's stay in the table, under their own episode ids), so it ends where an uninterrupted run does."""
    import models.training.ppo as ppo

    services = Services(
        vllm_engine.client,
        rollout_proxy.base_url,
        TableStore(rollout_proxy.config.table_root),
        proxy_api_key=rollout_proxy.config.api_key,
    )
    whole = train_ppo(_config(yes_no_ids, "own-whole", iterations=3), tiny_model_dir, services, tmp_path / "whole")

    batch = ppo._batch

    def killed_before_the_update(config: PPOConfig, services: Services, iteration: int, results: list) -> tuple:
        made = batch(config, services, iteration, results)  # iteration 2's calls are recorded and read by now
        if iteration == 2:
            raise _Killed
        return made

    config = _config(yes_no_ids, "own-resumed", iterations=3)
    monkeypatch.setattr(ppo, "_batch", killed_before_the_update)
    with pytest.raises(_Killed):
        train_ppo(config, tiny_model_dir, services, tmp_path / "resumed")
    monkeypatch.setattr(ppo, "_batch", batch)
    assert ppo.checkpoint_iteration(tmp_path / "resumed") == 2
    resumed = train_ppo(config, tiny_model_dir, services, tmp_path / "resumed")
    assert resumed.resumed_from == 2 and len(resumed.history) == 3

    # Iteration by iteration the uninterrupted run's batch sizes (the replies have a fixed length here).
    for key in ("episodes", "rollout_tokens", "agent_tokens", "update_tokens"):
        assert [m[key] for m in resumed.history] == [m[key] for m in whole.history], key
    calls = services.store.query(
        """SELECT split_part(episode_id, ':', 2) AS attempt, count(*) AS calls,
                  sum(len(prompt_token_ids) + len(completion_token_ids)) AS tokens
           FROM recorded_calls WHERE starts_with(episode_id, 'own-resumed:') AND episode_id LIKE '%:it2:%'
           GROUP BY ALL"""
    )
    by_attempt = {a: (int(n), int(t)) for a, n, t in zip(calls.attempt, calls.calls, calls.tokens, strict=True)}
    mine = resumed.history[2]["rollout_tag"].split(":")[1]
    assert len(by_attempt) == 2 and mine in by_attempt, by_attempt  # the killed attempt's calls were recorded
    # Iteration 2 trained on exactly its own 16 calls.
    assert by_attempt[mine] == (16, resumed.history[2]["rollout_tokens"])
    assert (
        max(abs(a["reward_mean"] - b["reward_mean"]) for a, b in zip(whole.history, resumed.history, strict=True))
        <= 0.125
    )
    from safetensors.torch import load_file

    a = load_file(whole.adapter_dir / "adapter_model.safetensors")
    b = load_file(resumed.adapter_dir / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    scale = max(float(t.abs().max()) for t in a.values())
    assert max(float((a[k] - b[k]).abs().max()) for k in a) <= 0.1 * scale
