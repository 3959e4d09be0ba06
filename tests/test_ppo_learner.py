"""The PPO learner: sample building from recorded ids, GAE by hand, log-prob alignment, a learning update."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from models.training.config import PPOHyper
from models.training.ppo_learner import PPOLearner, ValueModel, gae, k3_kl, token_logprobs
from models.training.segments import (
    RecordedTurn,
    Segment,
    episode_samples,
    is_prefix_stable,
    micro_batches,
    predicting_logits,
)


def test_k3_kl_is_exact_for_ordinary_tokens_and_bounded_for_outliers() -> None:
    ref = torch.tensor([-1.0, -2.0, -0.1, -0.01])
    policy = torch.tensor([-1.0, -1.5, -8.0, -40.0])
    kl = k3_kl(ref, policy)
    r = ref - policy
    # Equal log-probs give 0, a small gap the exact exp(r) - r - 1.
    assert kl[0].item() == 0.0
    assert kl[1].item() == pytest.approx(float(torch.exp(r[1]) - r[1] - 1))
    # A token the policy made 2,700 times less likely than the reference (r = 7.9) would weigh about 2,700
    # unclamped; it is held at 10, and a token past the log-ratio bound too, with no gradient from either.
    assert float(torch.exp(r[2]) - r[2] - 1) > 2000
    assert kl[2].item() == 10.0 and kl[3].item() == 10.0
    policy.requires_grad_(True)
    k3_kl(ref, policy).sum().backward()
    assert policy.grad[2].item() == 0.0 and policy.grad[3].item() == 0.0 and policy.grad[1].item() != 0.0


def test_gae_by_hand() -> None:
    # Three agent tokens, terminal reward 1, values (0.5, 0.2, 0.4), gamma 1, lambda 0.5.
    # deltas: d2 = 1 - 0.4 = 0.6; d1 = 0 + 0.4 - 0.2 = 0.2; d0 = 0 + 0.2 - 0.5 = -0.3
    # A2 = 0.6; A1 = 0.2 + 0.5 * 0.6 = 0.5; A0 = -0.3 + 0.5 * 0.5 = -0.05
    adv, ret = gae(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.2, 0.4]), gamma=1.0, lam=0.5)
    assert adv.tolist() == pytest.approx([-0.05, 0.5, 0.6])
    assert ret.tolist() == pytest.approx([0.45, 0.7, 1.0])
    adv, _ = gae(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0]), gamma=0.9, lam=1.0)
    assert adv.tolist() == pytest.approx([0.9, 1.0])


def test_prefix_stable_episode_is_packed_with_agent_positions() -> None:
    t1 = RecordedTurn((1, 2, 3), (10, 11), (-0.1, -0.2))
    t2 = RecordedTurn((1, 2, 3, 10, 11, 4, 5), (12,), (-0.3,))
    assert is_prefix_stable([t1, t2])
    sample = episode_samples("e", [t1, t2], reward=0.7)
    assert sample.packed and len(sample.segments) == 1
    segment = sample.segments[0]
    assert segment.input_ids == [1, 2, 3, 10, 11, 4, 5, 12]
    assert segment.agent_positions == [3, 4, 7]  # environment tokens 4, 5 are masked out
    assert segment.old_logprobs == [-0.1, -0.2, -0.3]


def test_unstable_template_falls_back_to_one_segment_per_turn() -> None:
    t1 = RecordedTurn((1, 2, 3), (10, 11), (-0.1, -0.2))
    t2 = RecordedTurn((1, 2, 3, 10, 99, 4), (12,), (-0.3,))  # turn 1 re-tokenised differently
    assert not is_prefix_stable([t1, t2])
    sample = episode_samples("e", [t1, t2], reward=1.0)
    assert not sample.packed
    assert [s.agent_positions for s in sample.segments] == [[3, 4], [6]]


def test_a_shortened_prompt_starts_a_new_packed_segment() -> None:
    t1 = RecordedTurn((1, 2, 3), (10, 11), (-0.1, -0.2))
    t2 = RecordedTurn((1, 2, 3, 10, 11, 4), (12,), (-0.3,))
    t3 = RecordedTurn((1, 4, 12, 5), (13, 14), (-0.4, -0.5))  # the agent dropped its oldest exchange
    t4 = RecordedTurn((1, 4, 12, 5, 13, 14, 6), (15,), (-0.6,))
    sample = episode_samples("e", [t1, t2, t3, t4], reward=1.0)
    assert not sample.packed and len(sample.segments) == 2
    first, second = sample.segments
    assert first.input_ids == [1, 2, 3, 10, 11, 4, 12] and first.agent_positions == [3, 4, 6]
    assert second.input_ids == [1, 4, 12, 5, 13, 14, 6, 15] and second.agent_positions == [4, 5, 7]
    assert second.old_logprobs == [-0.4, -0.5, -0.6]
    unpacked = episode_samples("e", [t1, t2, t3, t4], reward=1.0, pack=False)
    assert len(unpacked.segments) == 4 and not unpacked.packed


def test_recorded_turn_rejects_misaligned_logprobs() -> None:
    with pytest.raises(ValueError, match="2 completion tokens but 1 log-probs"):
        RecordedTurn((1,), (2, 3), (-0.1,))
    with pytest.raises(ValueError, match="no recorded turns"):
        episode_samples("e", [], 1.0)


@pytest.fixture(scope="module")
def tiny_actor(tiny_model_dir: Path) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    return get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"]))


def test_token_logprobs_align_with_a_manual_forward(tiny_actor: torch.nn.Module) -> None:
    segment = Segment([5, 6, 7, 8, 9], [3, 4], [0.0, 0.0])
    got = token_logprobs(tiny_actor, [segment, Segment([5, 6, 7], [2], [0.0])], pad_id=0)
    with torch.no_grad():
        logits = tiny_actor(input_ids=torch.tensor([[5, 6, 7, 8, 9]])).logits[0]
    manual = torch.log_softmax(logits, -1)
    assert got[0].tolist() == pytest.approx([manual[2, 8].item(), manual[3, 9].item()], abs=1e-5)
    assert got[1].shape == (1,)
    # At a sampling temperature the policy is softmax(logits / T), as the engine's processed log-probs are.
    tempered = token_logprobs(tiny_actor, [segment], pad_id=0, temperature=0.5)[0]
    manual_tempered = torch.log_softmax(logits / 0.5, -1)
    assert tempered.tolist() == pytest.approx([manual_tempered[2, 8].item(), manual_tempered[3, 9].item()], abs=1e-5)
    assert tempered.tolist() != pytest.approx(got[0].tolist(), abs=1e-3)
    # Restricted to allowed tokens (vLLM's allowed_token_ids), the log-probs renormalise over that set.
    restricted = token_logprobs(tiny_actor, [segment], pad_id=0, allowed_token_ids=[8, 9, 11])[0]
    expected = [torch.log_softmax(logits[p, [8, 9, 11]], -1)[i].item() for p, i in ((2, 0), (3, 1))]
    assert restricted.tolist() == pytest.approx(expected, abs=1e-5)


def test_only_the_predicting_positions_go_through_the_lm_head(tiny_actor: torch.nn.Module) -> None:
    """Two right-padded rows with different agent positions: the head runs on the union of the predicting
    positions (not the whole padded width), and each row gets the full forward's logits at its own."""
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [5, 6, 7, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    with torch.no_grad():
        rows, out = predicting_logits(tiny_actor, ids, mask, [[3, 5], [2]])
        full = tiny_actor(input_ids=ids, attention_mask=mask).logits
    assert out.logits.shape[1] == 3  # positions 1, 2 and 4 of 6
    assert [tuple(r.shape) for r in rows] == [(2, full.shape[-1]), (1, full.shape[-1])]
    torch.testing.assert_close(rows[0], full[0, [2, 4]], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rows[1], full[1, [1]], atol=1e-5, rtol=1e-5)


def test_an_update_raises_the_probability_of_rewarded_tokens(tiny_actor: torch.nn.Module, tiny_model_dir: Path) -> None:
    # Two one-token completions after the same prompt: token 100 is rewarded, token 200 is not.
    prompt = (1, 2, 3, 4)
    critic = ValueModel.from_pretrained(tiny_model_dir)
    learner = PPOLearner(
        tiny_actor,
        critic,
        PPOHyper(actor_lr=5e-3, critic_lr=1e-3, minibatch_episodes=8, old_logprobs="trainer"),
        pad_id=0,
    )

    def prob(token: int) -> float:
        with torch.no_grad():
            return float(token_logprobs(tiny_actor, [Segment([*prompt, token], [4], [0.0])], 0)[0].exp())

    before = prob(100) / prob(200)
    samples = [episode_samples(f"good{i}", [RecordedTurn(prompt, (100,), (-10.0,))], 1.0) for i in range(4)]
    samples += [episode_samples(f"bad{i}", [RecordedTurn(prompt, (200,), (-10.0,))], 0.0) for i in range(4)]
    generator = torch.Generator().manual_seed(0)
    history = []
    for _ in range(5):
        prepared, mismatch = learner.prepare(samples)
        history.append(learner.update(prepared, train_actor=True, generator=generator))
    assert prob(100) / prob(200) > 2 * before
    # One epoch, one minibatch, old log-probs from the trainer itself: each update starts where the old log-probs
    # were taken, so every ratio is 1 and nothing is clipped (stale or misaligned old log-probs break this).
    assert all(h["ratio_mean"] == pytest.approx(1.0, abs=1e-5) and h["clip_fraction"] == 0.0 for h in history)
    # The critic's head starts at 0 (ValueModel zero-initialises it), so the first value loss is 0.5 x the mean
    # squared return: 0.5 x (4 x 1^2 + 4 x 0^2) / 8 = 0.25 (a return on the wrong token or episode breaks it);
    # then the critic learns the returns, and the loss falls every update.
    assert history[0]["value_loss"] == pytest.approx(0.25, abs=1e-6)
    losses = [h["value_loss"] for h in history]
    assert all(b < a for a, b in itertools.pairwise(losses)), losses
    # Engine log-probs were recorded as -10: the mismatch metric must show it.
    assert mismatch["logprob_mismatch_mean_abs"] > 0.1


def test_micro_batches_bound_the_padded_size() -> None:
    segments = [Segment(list(range(n)), [n - 1], [0.0]) for n in (3, 3, 5, 2, 9, 1)]
    # 2x3 = 6 (a third at width 5 would be 15); 2x5 = 10 fits; 9 alone; 2x9 > 10
    assert micro_batches(segments, 10) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    assert micro_batches(segments, 1) == [(i, i + 1) for i in range(6)]  # never empty, long ones alone
    assert micro_batches(segments, 1000) == [(0, 6)]
    assert micro_batches([], 10) == []


def test_micro_batched_update_equals_one_pass(tiny_model_dir: Path) -> None:
    """Gradient accumulation over micro-batches gives the same update as one forward over the minibatch."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    def learner(micro_batch_tokens: int) -> PPOLearner:
        torch.manual_seed(0)
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        actor = get_peft_model(
            base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        )
        hyper = PPOHyper(
            actor_lr=1e-2, critic_lr=1e-2, minibatch_episodes=4, kl_coef=0.1, micro_batch_tokens=micro_batch_tokens
        )
        return PPOLearner(actor, ValueModel.from_pretrained(tiny_model_dir), hyper, pad_id=0, temperature=0.8)

    turns = [
        [RecordedTurn((1, 2, 3), (10, 11), (-1.0, -2.0)), RecordedTurn((1, 2, 3, 10, 11, 4), (12,), (-1.5,))],
        [RecordedTurn((5, 6), (13,), (-0.5,)), RecordedTurn((7, 8, 9, 5), (14, 15), (-1.0, -1.0))],
        [RecordedTurn((1, 9), (16, 17, 18), (-2.0, -2.0, -2.0))],
    ]
    samples = [episode_samples(f"e{i}", t, reward=float(i % 2)) for i, t in enumerate(turns)]
    results = []
    for budget in (10_000, 1):
        trainer = learner(budget)
        prepared, _ = trainer.prepare(samples)
        stats = trainer.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
        weights = [p.detach().clone() for p in trainer.actor.parameters() if p.requires_grad]
        results.append((stats, weights, [p.detach().clone() for p in trainer.critic.parameters()]))
    (one, actor_one, critic_one), (micro, actor_micro, critic_micro) = results
    for key in ("policy_loss", "value_loss", "kl", "ratio_mean"):
        assert micro[key] == pytest.approx(one[key], rel=1e-4, abs=1e-6), key
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(actor_one, actor_micro, strict=True))
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(critic_one, critic_micro, strict=True))
    untouched = [p.detach() for p in learner(1).actor.parameters() if p.requires_grad]
    assert any(not torch.allclose(a, b) for a, b in zip(actor_one, untouched, strict=True))  # it did update


def test_a_long_update_says_how_many_micro_batches_are_done(
    tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Inside an update, a progress line at most every `progress_interval_s` (0 here: after every micro-batch but
    the last) counting micro-batches over all epochs and minibatches, with tokens/s and the time left."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    actor = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    # One segment per micro-batch (micro_batch_tokens 1), minibatches of 2 episodes, 2 epochs.
    hyper = PPOHyper(minibatch_episodes=2, ppo_epochs=2, micro_batch_tokens=1, old_logprobs="trainer", critic="shared")
    learner = PPOLearner(actor, None, hyper, pad_id=0, progress_interval_s=0)
    turns = [
        [RecordedTurn((1, 2, 3), (10, 11), (-1.0, -2.0)), RecordedTurn((5, 6), (13,), (-0.5,))],  # 2 segments
        [RecordedTurn((1, 9), (16, 17, 18), (-2.0, -2.0, -2.0))],
        [RecordedTurn((4, 4), (12,), (-1.0,))],
    ]
    samples = [episode_samples(f"e{i}", t, reward=float(i % 2)) for i, t in enumerate(turns)]
    segments = sum(len(s.segments) for s in samples)
    assert segments == 4
    prepared, _ = learner.prepare(samples)
    with caplog.at_level("INFO", logger="socialrl.ppo"):
        learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("PPO update: micro-batch")]
    total = 2 * segments  # every segment alone, once per epoch
    assert [line.split()[3] for line in lines] == [f"{k}/{total}" for k in range(1, total)]
    assert all(" tok/s, about " in line and line.endswith(" left") for line in lines)
    epoch_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("PPO update epoch")]
    assert len(epoch_lines) == 2
    # At the default interval (a minute) a short update says nothing but its epochs.
    caplog.clear()
    learner.progress_interval_s = 60.0
    with caplog.at_level("INFO", logger="socialrl.ppo"):
        learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
    assert not [r for r in caplog.records if r.getMessage().startswith("PPO update: micro-batch")]


# ------------------------------------------------------------------------------- credit, reference, critic
def test_turn_advantages_by_hand() -> None:
    from models.training.ppo_learner import turn_advantages

    # Two turns of 2 and 3 tokens; turn values are the values at each turn's first token: 0.2 and 0.5.
    values = torch.tensor([0.2, 9.0, 0.5, 9.0, 9.0])
    adv, ret = turn_advantages(values, [2, 3], reward=1.0, gamma=1.0, lam=1.0)
    # lambda = 1: every turn's advantage is the return (1) minus the turn's value.
    assert adv.tolist() == pytest.approx([0.8, 0.8, 0.5, 0.5, 0.5])
    assert ret.tolist() == pytest.approx([1.0] * 5)
    adv, _ = turn_advantages(values, [2, 3], reward=1.0, gamma=1.0, lam=0.0)
    # lambda = 0: turn 0 sees only the value of turn 1 (0.5 - 0.2), turn 1 the reward (1 - 0.5).
    assert adv.tolist() == pytest.approx([0.3, 0.3, 0.5, 0.5, 0.5])


def _two_turn_samples(rng: torch.Generator, episodes: int, second_turn_tokens: int) -> list:
    """The first reply (one token, 100 or 200) decides the reward; a long unrewarded second reply follows."""
    samples = []
    for i in range(episodes):
        first = 100 if i % 2 == 0 else 200
        noise = tuple(int(t) for t in torch.randint(300, 340, (second_turn_tokens,), generator=rng))
        t1 = RecordedTurn((1, 2, 3, 4), (first,), (-1.0,))
        t2 = RecordedTurn((1, 2, 3, 4, first, 5, 6), noise, (-1.0,) * second_turn_tokens)
        samples.append(episode_samples(f"e{i}", [t1, t2], reward=1.0 if first == 100 else 0.0))
    return samples


def _first_turn_preference(actor: torch.nn.Module) -> float:
    with torch.no_grad():
        good = token_logprobs(actor, [Segment([1, 2, 3, 4, 100], [4], [0.0])], 0)[0]
        bad = token_logprobs(actor, [Segment([1, 2, 3, 4, 200], [4], [0.0])], 0)[0]
    return float(good - bad)


@pytest.mark.parametrize("lam", [1.0, 0.95])
def test_credit_reaches_the_opening_turn_only_with_lambda_one(tiny_model_dir: Path, lam: float) -> None:
    """Two-turn toy: only the first reply decides the reward. With gamma = lambda = 1 (the default) its
    choice is learned; with lambda = 0.95 over tokens the reward reaches it damped by 0.95^60 (~0.05)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    actor = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"]))
    hyper = PPOHyper(actor_lr=3e-3, critic_lr=1e-3, minibatch_episodes=8, old_logprobs="trainer", lam=lam)
    assert PPOHyper().lam == 1.0 and PPOHyper().gamma == 1.0  # the default reaches the opening turn
    learner = PPOLearner(actor, ValueModel.from_pretrained(tiny_model_dir), hyper, pad_id=0)
    before = _first_turn_preference(actor)
    generator, rng = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    for _ in range(6):
        prepared, _ = learner.prepare(_two_turn_samples(rng, 8, second_turn_tokens=60))
        learner.update(prepared, train_actor=True, generator=generator)
    gained = _first_turn_preference(actor) - before
    if lam == 1.0:
        assert gained > 1.0, gained
    else:
        assert gained < 0.3, gained


def test_the_kl_reference_is_the_warm_start_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    """PPO starting from an SFT adapter penalises moving away from that adapter, not from the base model."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    warm = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    warm.save_pretrained(tmp_path / "sft")
    actor = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), tmp_path / "sft", is_trainable=True
    )
    learner = PPOLearner(
        actor,
        ValueModel.from_pretrained(tiny_model_dir),
        PPOHyper(actor_lr=1e-2, critic_lr=1e-3, minibatch_episodes=4, kl_coef=0.1),
        pad_id=0,
    )
    learner.load_reference(tmp_path / "sft")
    samples = [
        episode_samples("good", [RecordedTurn((1, 2, 3, 4), (10, 11, 12), (-1.0, -1.0, -1.0))], 1.0),
        episode_samples("bad", [RecordedTurn((1, 2, 3, 4), (20, 21, 22), (-1.0, -1.0, -1.0))], 0.0),
    ]
    prepared, _ = learner.prepare(samples)
    policy = token_logprobs(actor, samples[0].segments, 0)[0]
    with actor.disable_adapter(), torch.no_grad():
        base = token_logprobs(actor, samples[0].segments, 0)[0]
    # Before any update the policy is the warm-start, so the reference log-probs equal the policy's ...
    assert prepared[0].ref_logprobs[0].tolist() == pytest.approx(policy.tolist(), abs=1e-5)
    # ... and differ from the adapter-free base model's.
    assert max(abs(a - b) for a, b in zip(prepared[0].ref_logprobs[0].tolist(), base.tolist(), strict=True)) > 1e-3
    stats = learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)  # no distance yet from the reference
    # The trained adapter stays the active, trainable one; the reference stays frozen.
    assert actor.active_adapter == "default"
    assert all(not p.requires_grad for n, p in actor.named_parameters() if ".reference." in n)
    assert any(p.requires_grad for n, p in actor.named_parameters() if ".default." in n)
    prepared, _ = learner.prepare(samples)
    assert learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))["kl"] > 0


def test_a_shared_critic_is_one_forward_that_learns_policy_and_values(tiny_model_dir: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    actor = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32),
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj"]),
    )
    hyper = PPOHyper(actor_lr=5e-3, critic_lr=1e-2, minibatch_episodes=8, old_logprobs="trainer", critic="shared")
    with pytest.raises(ValueError, match="shared critic"):
        PPOLearner(actor, ValueModel.from_pretrained(tiny_model_dir), hyper, pad_id=0)
    learner = PPOLearner(actor, None, hyper, pad_id=0)
    prompt = (1, 2, 3, 4)

    def prob_ratio() -> float:
        with torch.no_grad():
            good = token_logprobs(actor, [Segment([*prompt, 100], [4], [0.0])], 0)[0]
            bad = token_logprobs(actor, [Segment([*prompt, 200], [4], [0.0])], 0)[0]
        return float((good - bad).exp())

    samples = [episode_samples(f"g{i}", [RecordedTurn(prompt, (100,), (-1.0,))], 1.0) for i in range(4)]
    samples += [episode_samples(f"b{i}", [RecordedTurn(prompt, (200,), (-1.0,))], 0.0) for i in range(4)]
    before = prob_ratio()
    generator = torch.Generator().manual_seed(0)
    # Critic warm-up: only the head learns (the adapter is untouched).
    lora_before = [p.detach().clone() for p in actor.parameters() if p.requires_grad]
    for _ in range(20):
        prepared, stats = learner.prepare(samples)
        learner.update(prepared, train_actor=False, generator=generator)
    assert all(
        torch.equal(a, b) for a, b in zip(lora_before, [p for p in actor.parameters() if p.requires_grad], strict=True)
    )
    values = torch.cat([v for p in learner.prepare(samples)[0] for v in p.old_values])
    assert 0.3 < float(values.mean()) < 0.7  # towards the mean return 0.5 from the zero-initialised head
    for _ in range(5):
        prepared, stats = learner.prepare(samples)
        learner.update(prepared, train_actor=True, generator=generator)
    assert prob_ratio() > 2 * before
    assert stats["entropy"] > 0


def test_group_advantages_are_the_return_minus_the_groups_baseline_and_leave_the_policy_to_its_objective(
    tiny_model_dir: Path,
) -> None:
    """advantage='group': every token of an episode gets reward - baseline (whitening off here to read it by
    hand); the shared head learns on detached hidden states, so an episode whose return equals its baseline
    gives the adapter no gradient at all, while the head still learns."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    actor = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32),
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]),
    )
    hyper = PPOHyper(
        actor_lr=5e-3,
        critic_lr=1e-2,
        critic="shared",
        advantage="group",
        whiten_advantages=False,
        old_logprobs="trainer",
    )
    learner = PPOLearner(actor, None, hyper, pad_id=0)
    turns = [RecordedTurn((1, 2, 3), (100, 101), (-1.0, -1.0)), RecordedTurn((1, 2, 3, 100, 101, 7), (102,), (-1.0,))]
    sample = episode_samples("e", turns, reward=0.75)
    sample.baseline = 0.25
    prepared, _ = learner.prepare([sample])
    assert torch.allclose(torch.cat(prepared[0].advantages), torch.full((3,), 0.5))
    assert torch.allclose(torch.cat(prepared[0].returns), torch.full((3,), 0.75))
    # Return == baseline: zero advantage, so the update gives the adapter no gradient (AdamW's weight decay
    # still shrinks its weights, so gradients are what is read); the head gets one and moves.
    even = episode_samples("f", turns, reward=0.5)
    even.baseline = 0.5
    head_before = [p.detach().clone() for p in learner.critic.parameters()]
    learner.update(learner.prepare([even])[0], train_actor=True, generator=torch.Generator().manual_seed(0))
    adapter = [p for p in actor.parameters() if p.requires_grad]
    assert all(p.grad is None or not torch.any(p.grad) for p in adapter)
    assert not all(torch.equal(a, b) for a, b in zip(head_before, learner.critic.parameters(), strict=True))
    # With the GAE advantage the same update would move the adapter through the value loss (shared head).
    gae_learner = PPOLearner(actor, None, PPOHyper(critic="shared", whiten_advantages=False), pad_id=0)
    gae_learner.update(gae_learner.prepare([even])[0], train_actor=True, generator=torch.Generator().manual_seed(0))
    assert any(p.grad is not None and torch.any(p.grad) for p in adapter)
