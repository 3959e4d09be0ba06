"""MOPD from a competent start: the student's LoRA starts from a warm-start, samples at the
rollouts' temperature, and every curriculum decision is recorded with whether it fell back to uniform; the
cpu profile's stage-2 cells rest on at least 16 scenario clusters. No engine: the stage-2 wiring runs with
the engine-facing parts replaced."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
import torch

from models.profiles import Stage2Settings, get_profile
from models.socialrl import stage2
from models.socialrl.stage2 import BASE, PolicyScores, build_transfer_matrix, specialist_policy
from models.training.mopd import MOPDState, _update_curriculum, curriculum_decision, train_mopd
from models.training.mopd_config import CurriculumDecision, MOPDConfig, MOPDResult, uniform_fallbacks

CRAIG, MARKET = "craigslist-v0", "marketplace-v0"


# ------------------------------------------------------------------------------------- student start
def test_the_student_starts_from_the_first_domains_warm_start_else_a_fresh_lora(tmp_path: Path) -> None:
    craig, market = tmp_path / "sft-craig", tmp_path / "sft-market"
    both = stage2.student_start((CRAIG, MARKET), {CRAIG: craig, MARKET: market})
    assert (both.adapter, both.domain, both.description) == (craig, CRAIG, f"SFT warm-start of {CRAIG}")
    # The order is the stage-2 domains', not the mapping's.
    assert stage2.student_start((MARKET, CRAIG), {CRAIG: craig, MARKET: market}).adapter == market
    # The first domain without a warm-start: the next one that has one.
    assert stage2.student_start((CRAIG, MARKET), {CRAIG: None, MARKET: market}).domain == MARKET
    fresh = stage2.student_start((CRAIG, MARKET), {CRAIG: None, MARKET: None})
    assert (fresh.adapter, fresh.description) == (None, "fresh LoRA (no warm-start)")
    assert stage2.student_start((CRAIG,), {}).description == stage2.FRESH_START


def _warm_start(base: Path, target: Path) -> Path:
    """A LoRA adapter with non-zero B matrices (a fresh one's are zero), as an SFT warm-start leaves it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(3)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(target)
    return target


def _lora(model: Any) -> dict[str, torch.Tensor]:
    return {k.replace(".default", ""): v.detach().float() for k, v in model.state_dict().items() if "lora_" in k}


def test_the_mopd_learner_continues_a_warm_start_adapter_and_trains_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`init_adapter` (what `train_mopd_student` passes) is the student: its own weights and shape (not
    `MOPDConfig.lora`'s), trainable; without it the student is a fresh LoRA, B = 0, i.e. the base model."""
    from peft import load_peft_weights

    from models.training.mopd import _start_learner

    warm = _warm_start(tiny_model_dir, tmp_path / "warm")
    config = MOPDConfig(steps=1, temperature=0.7)
    learner, _, state = _start_learner(config, tiny_model_dir, None, warm)
    saved = {k: v.float() for k, v in load_peft_weights(str(warm)).items()}
    loaded = _lora(learner.student)
    assert set(loaded) == set(saved) and state.step == 0
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)
    assert any(loaded[k].abs().sum() > 0 for k in loaded if "lora_B" in k)
    assert learner.student.peft_config["default"].r == 4  # the warm-start's rank, not config.lora's 16
    trainable = [n for n, p in learner.student.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)

    fresh, _, _ = _start_learner(config, tiny_model_dir, None, None)
    assert fresh.student.peft_config["default"].r == config.lora.r
    assert all(v.abs().sum() == 0 for k, v in _lora(fresh.student).items() if "lora_B" in k)


# -------------------------------------------------------------------------------------- temperature
def test_mopd_samples_at_the_rollouts_temperature_unless_set() -> None:
    cpu, paper = get_profile("cpu"), get_profile("paper")
    assert MOPDConfig().temperature == 0 and cpu.stage2.mopd.temperature == 0  # "the rollouts'"
    resolved = cpu.stage2.resolved(cpu)
    assert resolved.mopd.temperature == cpu.ppo.temperature == 0.7
    assert resolved.resolved(cpu) == resolved  # resolving twice changes nothing
    assert paper.stage2.resolved(paper).mopd.temperature == paper.ppo.temperature
    # A temperature set in the settings is kept, whatever the rollouts use.
    own = Stage2Settings(mopd=MOPDConfig(temperature=1.0)).resolved(cpu)
    assert own.mopd.temperature == 1.0 and own.mopd == replace(MOPDConfig(), temperature=1.0)
    with pytest.raises(ValueError, match="temperature"):
        MOPDConfig(temperature=-0.1)
    with pytest.raises(ValueError, match="temperature"):
        MOPDConfig(temperature=2.5)


def test_train_mopd_refuses_an_unresolved_temperature_before_anything_else(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="resolve it first"):
        train_mopd(MOPDConfig(steps=1), tmp_path, None, tmp_path / "out", {CRAIG: "t"}, {CRAIG: "buyer"})  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------- curriculum
TARGETS_FLAT = {CRAIG: (0.0, 0.0), MARKET: (0.2, 0.2)}  # no teacher above its base: gap undefined everywhere
TARGETS_ONE = {CRAIG: (0.6, 0.2), MARKET: (0.2, 0.2)}  # only Craigslist's teacher beats its base


def test_a_decision_without_any_defined_gap_falls_back_to_uniform_and_is_counted() -> None:
    flat = curriculum_decision(0, TARGETS_FLAT, {CRAIG: 0.0, MARKET: 0.3}, eps=0.05)
    assert flat.gaps == {CRAIG: None, MARKET: None} and flat.fell_back
    assert flat.probabilities == pytest.approx({CRAIG: 0.5, MARKET: 0.5})
    one = curriculum_decision(4, TARGETS_ONE, {CRAIG: 0.3, MARKET: 0.0}, eps=0.05)
    assert one.gaps[CRAIG] == pytest.approx(0.75) and one.gaps[MARKET] is None and not one.fell_back
    assert one.probabilities[CRAIG] == pytest.approx(0.75 / 0.80)
    # Every gap defined but closed: every domain at the floor, uniform, yet the curriculum was informed.
    closed = curriculum_decision(8, TARGETS_ONE | {MARKET: (0.5, 0.2)}, {CRAIG: 0.6, MARKET: 0.5}, eps=0.05)
    assert closed.probabilities == pytest.approx({CRAIG: 0.5, MARKET: 0.5}) and not closed.fell_back
    assert uniform_fallbacks([flat, one, closed, flat]) == 2 and uniform_fallbacks([]) == 0
    # A decision survives a checkpoint's JSON.
    assert CurriculumDecision(**json.loads(json.dumps(asdict(one)))) == one
    assert flat.as_dict() == {
        "step": 0,
        "gaps": {CRAIG: None, MARKET: None},
        "probabilities": pytest.approx({CRAIG: 0.5, MARKET: 0.5}),
        "student": {CRAIG: 0.0, MARKET: 0.3},
        "fell_back": True,
    }


def test_the_loop_records_every_curriculum_decision_with_the_probe_it_came_from() -> None:
    """`_update_curriculum` at the steps `train_mopd` calls it: a fresh student is the base at step 0 (no
    probe), later steps probe; every decision lands in the state (and so in the checkpoint), fallbacks too."""
    config = MOPDConfig(steps=8, curriculum_every=4, temperature=0.7)
    probes: list[str] = []
    rewards = iter([{CRAIG: 0.4, MARKET: 0.0}])

    def probe(served: str) -> dict[str, float]:
        probes.append(served)
        return next(rewards)

    state = MOPDState()
    for step in range(8):
        state.step = step
        _update_curriculum(state, config, [CRAIG, MARKET], TARGETS_ONE, probe, f"s-v{step}", step == 0, 0.0)
    assert probes == ["s-v4"]
    decisions = [CurriculumDecision(**d) for d in state.decisions]
    assert [d.step for d in decisions] == [0, 4] and not any(d.fell_back for d in decisions)
    assert decisions[0].student == {CRAIG: 0.2, MARKET: 0.2} and decisions[0].gaps[CRAIG] == pytest.approx(1.0)
    assert decisions[1].gaps[CRAIG] == pytest.approx(0.5) and state.probabilities == decisions[1].probabilities

    flat = MOPDState()
    _update_curriculum(flat, config, [CRAIG, MARKET], TARGETS_FLAT, probe, "s-v0", True, 0.0)
    assert [CurriculumDecision(**d).fell_back for d in flat.decisions] == [True]
    assert flat.probabilities == pytest.approx({CRAIG: 0.5, MARKET: 0.5})
    # Without targets the domains stay uniform and no decision is recorded.
    none = MOPDState()
    _update_curriculum(none, config, [CRAIG, MARKET], None, None, "s-v0", True, 0.0)
    assert none.decisions == [] and none.probabilities == {CRAIG: 0.5, MARKET: 0.5}


# ------------------------------------------------------------------------- the stage-2 wiring, no engine
def _scores(policy: str, env_id: str, offset: float) -> PolicyScores:
    rewards = [0.3 + offset, 0.5 + offset, 0.4 + offset, 0.6 + offset]
    keys = tuple(f"{i}|s{i}|conceder|seat|{i}" for i in range(4))
    return PolicyScores(policy, env_id, policy, keys, tuple(f"{env_id}|{i}" for i in range(4)), tuple(rewards))


class _Run:
    run_id = "run-1"

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.metrics.update(metrics)

    def log_file(self, *args: Any) -> None:
        pass

    def log_artifact_dir(self, *args: Any) -> None:
        pass


class _Tracker:
    def __init__(self) -> None:
        self.run = _Run()
        self.params: dict[str, Any] = {}

    @contextmanager
    def start_run(self, name: str, params: dict[str, Any]) -> Iterator[_Run]:
        self.params = params
        yield self.run

    def register_adapter(self, *args: Any, **kwargs: Any) -> int:
        return 1


def test_the_stage2_student_starts_from_the_warm_start_at_the_rollouts_temperature(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`train_mopd_student` on the cpu profile: `train_mopd` gets the first domain's warm-start and the PPO
    temperature, and the result records the start and the curriculum decisions (one of them a fallback)."""
    from models.socialrl.stage2 import mopd as student_module
    from models.training import mopd as loop

    cpu = get_profile("cpu")
    matrix = build_transfer_matrix(
        [_scores(BASE, d, 0.0) for d in (CRAIG, MARKET)]
        + [_scores(specialist_policy(a), b, 0.2 if a == b else 0.0) for a in (CRAIG, MARKET) for b in (CRAIG, MARKET)],
        (CRAIG, MARKET),
    )
    warm = {CRAIG: tmp_path / "sft-craigslist", MARKET: tmp_path / "sft-marketplace"}
    seen: dict[str, Any] = {}
    decisions = (
        curriculum_decision(0, TARGETS_FLAT, {CRAIG: 0.0, MARKET: 0.2}, 0.05),
        curriculum_decision(4, TARGETS_ONE, {CRAIG: 0.4, MARKET: 0.2}, 0.05),
    )

    def fake_train(config: MOPDConfig, *args: Any, init_adapter: Path | None = None, **kwargs: Any) -> MOPDResult:
        seen.update(config=config, init=init_adapter)
        return MOPDResult(tmp_path / "adapter", "mopd-v12", [{"step": 0, "reverse_kl": 0.1}], None, decisions)

    monkeypatch.setattr(
        student_module,
        "_teachers",
        lambda *args: ({d: f"teacher-{d}" for d in warm}, {d: "buyer" for d in warm}, TARGETS_ONE, warm),
    )
    monkeypatch.setattr(loop, "train_mopd", fake_train)
    monkeypatch.setattr(student_module, "_student_probe", lambda *args: lambda served: {CRAIG: 0.4, MARKET: 0.2})
    monkeypatch.setattr(
        student_module, "_heldout", lambda *args: tuple(_scores(stage2.MOPD, d, 0.1) for d in (CRAIG, MARKET))
    )
    tracker = _Tracker()
    result = stage2.train_mopd_student(matrix, cpu, tmp_path, None, tmp_path / "out", tracker, "base")  # type: ignore[arg-type]
    assert seen["init"] == warm[CRAIG] and seen["config"].temperature == cpu.ppo.temperature == 0.7
    assert seen["config"].steps == cpu.stage2.mopd.steps
    assert result.student_init == f"SFT warm-start of {CRAIG}" and tracker.params["init"] == result.student_init
    assert result.curriculum == decisions and result.uniform_fallbacks == 1
    assert tracker.run.metrics["curriculum_uniform_fallbacks"] == 1
    assert f"from SFT warm-start of {CRAIG}" in result.summary() and "1 of 2 curriculum decisions fell back" in (
        result.summary()
    )
    table = result.curriculum_markdown().splitlines()
    assert table[0] == "| step | gap craigslist | p craigslist | gap marketplace | p marketplace | fell back |"
    assert table[2] == "| 0 | undefined | 0.50 | undefined | 0.50 | yes |"
    assert table[3] == "| 4 | 0.50 | 0.91 | undefined | 0.09 | no |"
    # No warm-start in the registry: a fresh LoRA, and the result says so.
    monkeypatch.setattr(
        student_module,
        "_teachers",
        lambda *args: ({d: f"teacher-{d}" for d in warm}, {d: "buyer" for d in warm}, TARGETS_ONE, {}),
    )
    fresh = stage2.train_mopd_student(matrix, cpu, tmp_path, None, tmp_path / "out", _Tracker(), "base")  # type: ignore[arg-type]
    assert seen["init"] is None and fresh.student_init == "fresh LoRA (no warm-start)"


# --------------------------------------------------------------------------------- the cpu profile
def test_the_cpu_stage2_cells_rest_on_at_least_16_scenario_clusters_and_probe_where_policies_differ() -> None:
    """>= 16 scenario clusters per stage-2 cell on the cpu profile (fewer domains before fewer
    clusters, and stage 2 needs two), counted on the plans the cells are built from; the probe that steers
    the curriculum plays counterparts a trained policy can beat, not only boulware."""
    from models.socialrl.stage1.evaluation import evaluation_plan

    cpu = get_profile("cpu")
    s2 = cpu.stage2
    assert len(s2.domains) >= 2
    plan_profile = stage2.evaluation_profile(cpu)
    for domain in s2.domains:
        plan = evaluation_plan(domain, plan_profile, seed=s2.eval_seed)
        clusters = {s.scenario_id for s in plan.scenario_list()}
        assert len(clusters) >= 16, (domain, len(clusters))
    assert set(s2.probe_counterparts) - {"boulware"} and s2.probe_scenarios * len(s2.probe_counterparts) >= 8


def test_a_scenario_the_plan_draws_twice_is_one_bootstrap_cluster() -> None:
    """A dataset partition smaller than the plan cycles (Marketplace's 11 held-out scenarios in a 16-scenario
    plan): the repeated scenario is paired episode by episode as before but clusters once."""
    from types import SimpleNamespace

    from models.evaluation.policy import PolicyEpisode

    def episode(index: int, scenario: str, reward: float) -> PolicyEpisode:
        return PolicyEpisode(
            episode_id=f"e{index}",
            counterpart="conceder",
            seat="buyer",
            scenario_id=scenario,
            seed=index,
            reward=reward,
            utility=reward,
            agreement=True,
            pareto_optimal=None,
            invalid_actions=0,
            policy_turns=3,
            leaked=(),
            timeouts=0,
            rounds=3,
            scenario_index=index,
        )

    result = SimpleNamespace(
        env_id=MARKET, policy_episodes=[episode(0, "m:1", 0.2), episode(1, "m:2", 0.4), episode(2, "m:1", 0.6)]
    )
    scores = PolicyScores.from_result(BASE, "base", result)  # type: ignore[arg-type]
    assert len(set(scores.keys)) == 3 and len(set(scores.clusters)) == 2
    assert scores.estimate().clusters == 2 and scores.estimate().n == 3
