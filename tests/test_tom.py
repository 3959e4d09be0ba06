"""The ToM study: INFER / ANTICIPATE scorers on hand-made turns per domain, the turn probe against real
episodes, the skill-outcome correlation on synthetic data, the students' trace formats, the analysis and
its results-file keys, and the five arms on the real engine in all six domains."""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from agents.llm_agent import TOM_INSTRUCTIONS, parse_tom
from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.teacher import make_teacher
from agents.socialrl.teacher.base import Plan, TurnContext
from agents.socialrl.teacher.language import money
from environments import make, sample_scenarios
from environments.core.base import TranscriptEntry
from environments.core.events import Observation
from environments.core.registry import env_class
from environments.socialrl.calendar_scheduling import CalendarEnv, format_time
from environments.socialrl.casino import CasinoScenario
from environments.socialrl.craigslist import CraigslistScenario
from environments.socialrl.dnd import DndScenario
from environments.socialrl.job_interview import JobInterviewEnv
from environments.socialrl.marketplace import MarketplaceScenario
from models.evaluation.policy import PolicyEpisode
from models.profiles import get_profile
from models.socialrl import tom, tom_skills
from models.socialrl.teachers import TeacherConfig, teacher_traces
from models.training.config import SFTResult

SMOKE = get_profile("smoke")


# ------------------------------------------------------------------------------------- INFER per domain
def test_dnd_infer_names_the_item_the_counterpart_values_most() -> None:
    scenario = DndScenario("t", counts=(1, 2, 2), alice_values=(4, 1, 2), bob_values=(0, 3, 2))
    truth = tom_skills.counterpart_truth("dnd-v0", scenario, "bob")
    assert truth.top == {"hat"}
    assert tom_skills.score_infer("dnd-v0", "They seem to value hats most and books least (p=0.4).", truth) == 1.0
    assert tom_skills.score_infer("dnd-v0", "I think books are their top priority.", truth) == 0.0
    assert tom_skills.score_infer("dnd-v0", "Their highest priority is probably the balls.", truth) == 0.0
    assert tom_skills.score_infer("dnd-v0", "They only talk about the hat.", truth) == 1.0  # the one item named
    assert tom_skills.score_infer("dnd-v0", "They care about books and balls equally.", truth) is None
    assert tom_skills.score_infer("dnd-v0", None, truth) is None


def test_casino_infer_is_scored_against_the_counterparts_high_item() -> None:
    scenario = CasinoScenario(
        "t", ("food", "water", "firewood"), ("a", "b", "c"), ("water", "firewood", "food"), ("d", "e", "f")
    )
    truth = tom_skills.counterpart_truth("casino-v0", scenario, "mturk_agent_2")
    assert tom_skills.score_infer("casino-v0", "Their top priority is water; food matters least.", truth) == 1.0
    assert tom_skills.score_infer("casino-v0", "They really need firewood for the cold nights.", truth) == 0.0
    assert tom_skills.score_infer("casino-v0", "They seem to value fire wood the most.", truth) == 0.0


def test_job_interview_infer_is_scored_against_the_largest_weight() -> None:
    scenario = JobInterviewEnv.sample_scenario(random.Random(3))
    weights = dict(scenario.weights["candidate"])
    top = max(weights, key=weights.get)
    low = min(weights, key=weights.get)
    truth = tom_skills.counterpart_truth("job-interview-v0", scenario, "candidate")
    assert tom_skills.score_infer("job-interview-v0", f"They seem to weigh {top} most (p=0.40).", truth) == 1.0
    assert tom_skills.score_infer("job-interview-v0", f"They care most about {low}.", truth) == 0.0


def test_price_infer_scores_the_stated_bottom_line_by_its_error_relative_to_the_listing() -> None:
    listing = CraigslistScenario(
        "t", "bike", "Bike", ("a", "b"), listing_price=200.0, buyer_target=140.0, seller_reservation=110.0
    )
    seller = tom_skills.counterpart_truth("craigslist-v0", listing, "seller", "boulware")
    assert seller.bottom_line == pytest.approx(110.0)  # the seller's private reservation
    text = "The seller's walk-away price looks like $110.00 (+/- $8.00); they concede slowly; 2 offer(s) seen."
    assert tom_skills.score_infer("craigslist-v0", text, seller) == pytest.approx(1.0)
    assert tom_skills.score_infer("craigslist-v0", "They would go as low as $135, I think.", seller) == pytest.approx(
        0.5
    )
    assert tom_skills.score_infer("craigslist-v0", "Their limit is far away: $300.", seller) == 0.0
    assert tom_skills.score_infer("craigslist-v0", "They accept with p=0.6, 50% likely.", seller) is None
    buyer = tom_skills.counterpart_truth("craigslist-v0", listing, "buyer")
    assert tom_skills.score_infer("craigslist-v0", "Their budget is probably around $140.", buyer) == pytest.approx(1.0)
    market = MarketplaceScenario("t", "Pens", 14.0, buyer_reservation=13.0, seller_reservation=11.0)
    truth = tom_skills.counterpart_truth("marketplace-v0", market, "seller")
    assert tom_skills.score_infer("marketplace-v0", "Their reservation is likely $11.", truth) == pytest.approx(1.0)
    assert tom_skills.score_infer("marketplace-v0", "They won't go below $12.75.", truth) == pytest.approx(0.5)


def test_calendar_infer_is_the_share_of_right_availability_claims() -> None:
    scenario = CalendarEnv.sample_scenario(random.Random(5))
    free = [s for s in scenario.slot_starts if scenario.is_free("requestor", s)]
    busy = [s for s in scenario.slot_starts if not scenario.is_free("requestor", s)]
    assert free and busy
    truth = tom_skills.counterpart_truth("calendar-v0", scenario, "requestor")
    right = f"They are likely free at {format_time(free[0])} (p=0.93); likely busy at {format_time(busy[0])}."
    wrong = f"They are likely free at {format_time(busy[0])}; they seem busy at {format_time(free[0])}."
    assert tom_skills.score_infer("calendar-v0", right, truth) == 1.0
    assert tom_skills.score_infer("calendar-v0", wrong, truth) == 0.0
    assert (
        tom_skills.score_infer(
            "calendar-v0", "Their availability is still unclear; P(no common free time)=0.20.", truth
        )
        is None
    )


# ----------------------------------------------------------------------------------------- ANTICIPATE
@pytest.mark.parametrize(
    "text, predicted",
    [
        ("They will probably counter (accept p~0.12) and push for more books.", "offer"),
        ("They will probably accept $150 (p~0.71).", "accept"),
        ("They won't accept this; they will reject it.", "reject"),
        ("The deal closes now.", "end"),
        ("They will state the same split, so the deal stands.", "end"),
        ("They will probably walk away.", "walk"),
        ("They will probably suggest another time, maybe 14:00 (accept p~0.10).", "offer"),
        ("They will ask about the condition of the bike.", "message"),
        ("Hard to tell.", None),
    ],
)
def test_anticipation_is_read_as_the_earliest_action_class(text: str, predicted: str | None) -> None:
    assert tom_skills.parse_anticipation(text) == predicted


def test_anticipation_is_scored_against_the_counterparts_next_accepted_action() -> None:
    turns = (
        TranscriptEntry(0, "buyer", "offer", "OFFER $100", {"price": 100.0}),
        TranscriptEntry(1, "seller", "reject", "No.", {}),
        TranscriptEntry(2, "buyer", "offer", "OFFER $120", {"price": 120.0}),
        TranscriptEntry(3, "seller", "offer", "OFFER $150", {"price": 150.0}),
        TranscriptEntry(4, "buyer", "accept", "ACCEPT", {"price": 150.0}),
    )
    kinds = tom_skills.next_counterpart_kinds(turns, "buyer")
    assert kinds == ["reject", "offer", None]
    assert [tom_skills.action_class(k) for k in kinds] == ["reject", "offer", "end"]
    assert tom_skills.score_anticipate("They will probably reject it.", kinds[0]) == 1.0
    assert tom_skills.score_anticipate("They will probably accept (p~0.8).", kinds[1]) == 0.0
    assert tom_skills.score_anticipate("The deal closes now.", kinds[2]) == 1.0
    assert tom_skills.score_anticipate("", kinds[2]) is None
    assert tom_skills.action_class("make_offer") == tom_skills.action_class("propose") == "offer"
    assert tom_skills.action_class("select") == "end" and tom_skills.action_class("decline") == "walk"


# --------------------------------------------------------------------------------- probe + real episodes
@pytest.mark.parametrize("env_id", SMOKE.tom.domains)
def test_the_probed_code_teacher_predicts_its_counterparts_next_move_well_above_chance(
    env_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="socialrl.tom"):
        run = tom.play_arm(env_id, SMOKE, "sft_tom", "teacher", True, make_teacher)
    ended = [r.getMessage() for r in caplog.records if " ended (" in r.getMessage()]
    assert len(ended) == run.result.summary.n  # one progress line per episode of the arm
    scored = [s for s in run.skills if s is not None]
    assert len(scored) == run.result.summary.n
    replies = sum(s.replies for s in scored)
    transcript_turns = sum(
        sum(e.agent_id == v.seat for e in ep.transcript)
        for ep, v in zip(run.result.episodes, run.result.policy_episodes, strict=True)
    )
    assert replies == transcript_turns  # accepted replies line up with the seat's transcript entries
    anticipate = [s.anticipate for s in scored if s.anticipate is not None]
    assert anticipate and np.mean(anticipate) > 0.5  # six classes: chance is far below
    assert sum(s.well_formed for s in scored) == replies
    plain = tom.play_arm(env_id, SMOKE, "base", "boulware", False, lambda seed: make_code_agent("boulware", seed))
    assert all(s is None for s in plain.skills)


# --------------------------------------------------------------------------------------- correlation
def _synthetic_run(arm: str, skill_values: list[float], rewards: list[float], scenarios: list[int]) -> Any:
    views = [
        PolicyEpisode(
            episode_id=f"e{i}",
            counterpart="c",
            seat="buyer",
            scenario_id=f"s{k}",
            seed=i,
            reward=r,
            utility=r,
            agreement=True,
            pareto_optimal=None,
            invalid_actions=0,
            policy_turns=1,
            leaked=(),
            timeouts=0,
            rounds=2,
            scenario_index=k,
        )
        for i, (r, k) in enumerate(zip(rewards, scenarios, strict=True))
    ]
    skills = [tom_skills.EpisodeSkills(x, 1.0 - x, 1, 1, 1, 1) for x in skill_values]
    return SimpleNamespace(arm=arm, result=SimpleNamespace(policy_episodes=views), skills=tuple(skills))


def test_the_skill_outcome_correlation_recovers_a_known_sign() -> None:
    rng = np.random.default_rng(0)
    skill = rng.uniform(0, 1, 60)
    reward = np.clip(0.2 + 0.6 * skill + rng.normal(0, 0.1, 60), 0, 1)
    scenarios = [i // 3 for i in range(60)]  # three episodes per scenario
    runs = [_synthetic_run("sft_tom", list(skill), list(reward), scenarios)]
    infer = tom.skill_correlation(runs, "infer")
    anticipate = tom.skill_correlation(runs, "anticipate")  # 1 - skill: the opposite sign
    assert infer.mean > 0.7 and infer.ci_low > 0.5 and infer.n == 60
    assert anticipate.mean < -0.7 and anticipate.ci_high < -0.5
    unrelated = tom.skill_correlation(
        [_synthetic_run("x", list(rng.uniform(0, 1, 60)), list(reward), scenarios)], "infer"
    )
    assert unrelated.ci_low < 0 < unrelated.ci_high
    assert tom.correlation_dict(infer).keys() == {"r", "ci_low", "ci_high", "n"}


# ------------------------------------------------------------------------------------------ students
def test_both_students_train_on_the_same_episodes_in_their_own_format(tmp_path: Path) -> None:
    traces = teacher_traces("marketplace-v0", SMOKE, TeacherConfig(), episodes=3)
    seen: dict[str, tuple[list, list]] = {}

    def fake_sft(base, train, out, settings, held_out):
        seen[out.name] = (train, held_out)
        # Both students train by passes, not steps: the smoke profile's max_steps is dropped.
        assert settings == SMOKE.tom.resolved(SMOKE).sft
        assert settings.epochs == SMOKE.tom.passes and settings.max_steps == -1
        one_pass = sum(len(m["content"]) for c in train for m in c)  # characters stand in for tokens
        examples = sum(m["role"] == "assistant" for c in train for m in c)
        return SFTResult(
            adapter_dir=out / "adapter", train_loss=1.0, eval_loss_before=2.0, eval_loss_after=1.5, steps=2, examples=examples, wall_seconds=0.1,
            train_tokens=int(settings.epochs * one_pass), pass_tokens=one_pass,
        )  # fmt: skip

    students = tom.train_students(
        "marketplace-v0", list(traces.traces), SMOKE, tmp_path, tmp_path / "out", sft=fake_sft
    )
    assert set(students) == {"sft_act", "sft_tom"} == set(seen)
    act_train, act_eval = seen["sft_act"]
    tom_train, tom_eval = seen["sft_tom"]
    assert len(act_train) == len(tom_train) and len(act_eval) == len(tom_eval) == SMOKE.tom.sft_eval_conversations
    for plain, scaffolded in zip(act_train, tom_train, strict=True):
        assert not plain[0]["content"].endswith(TOM_INSTRUCTIONS) and scaffolded[0]["content"].endswith(
            TOM_INSTRUCTIONS
        )
        for p, s in zip(plain[1:], scaffolded[1:], strict=True):
            if p["role"] == "assistant":
                assert parse_tom(s["content"]).act == p["content"].strip()
                assert not p["content"].startswith("INFER")
    assert students["sft_tom"].trace_format == "tom" and students["sft_act"].trace_format == "act"
    # Equal passes; the scaffolded student then trains on more tokens (its traces carry INFER and ANTICIPATE).
    assert students["sft_act"].passes == pytest.approx(students["sft_tom"].passes, rel=1e-3)
    assert students["sft_tom"].train_tokens > students["sft_act"].train_tokens
    assert students["sft_tom"].training()["pass_tokens"] == students["sft_tom"].pass_tokens
    # What sft_tom imitates: reasoning that changes from turn to turn and never the instructions.
    variety = tom.reasoning_variety(traces.traces)
    assert variety.records == sum(len(t.reasoning) for t in traces.traces) > 0
    assert variety.instruction_copy_rate == {"infer": 0.0, "anticipate": 0.0}
    assert variety.distinct_share["infer"] > 0.8


def test_the_tom_settings_resolve_both_students_to_equal_passes_not_steps() -> None:
    cpu = get_profile("cpu")
    settings = cpu.tom.resolved(cpu).sft
    assert settings.max_steps == -1 and settings.epochs == cpu.tom.passes
    # Without its own SFT settings the study takes the warm-start's, still trained by passes.
    bare = dataclasses.replace(cpu, tom=dataclasses.replace(cpu.tom, sft=None, passes=1.5))
    resolved = bare.tom.resolved(bare).sft
    assert resolved.learning_rate == cpu.sft.learning_rate and (resolved.epochs, resolved.max_steps) == (1.5, -1)
    with pytest.raises(ValueError, match="passes"):
        dataclasses.replace(cpu.tom, passes=0.0)
    # The cpu study can give a skill-outcome correlation 30 scored episodes from its scaffolded student alone.
    assert cpu.tom.heldout_scenarios * len(cpu.eval_counterparts) >= tom.MIN_CORRELATION_EPISODES


# ------------------------------------------------------------------------------------------- analysis
def _arms(env_id: str, sft_tom: tuple[str, Any] = ("teacher", make_teacher)) -> dict[str, Any]:
    """The study's five arms played by code agents (the scaffolded student's agent given by `sft_tom`)."""
    return {
        "base": tom.play_arm(env_id, SMOKE, "base", "conceder", False, lambda s: make_code_agent("conceder", s)),
        "base_tom_prompt": tom.play_arm(env_id, SMOKE, "base_tom_prompt", "teacher", True, make_teacher),
        "sft_act": tom.play_arm(env_id, SMOKE, "sft_act", "boulware", False, lambda s: make_code_agent("boulware", s)),
        "sft_act_tom_prompt": tom.play_arm(env_id, SMOKE, "sft_act_tom_prompt", "teacher", True, make_teacher),
        "sft_tom": tom.play_arm(env_id, SMOKE, "sft_tom", sft_tom[0], True, sft_tom[1]),
    }


def test_the_analysis_pairs_the_arms_and_writes_exactly_the_result_file_keys() -> None:
    env_id = "craigslist-v0"
    runs = _arms(env_id)
    result = tom.analyse(env_id, runs)
    written = tom.result_file([result])
    entry = written[env_id]
    assert set(entry) == {*tom.ARMS, "clusters", "skill_outcome_correlation"}
    assert set(tom.ARMS) == {"base", "base_tom_prompt", "sft_act", "sft_act_tom_prompt", "sft_tom"}
    # Every arm plays the plan's distinct held-out scenarios: the clusters each interval resamples.
    assert written["clusters"] == entry["clusters"] == result.clusters == SMOKE.tom.heldout_scenarios
    assert all(set(entry[arm]) == {"mean", "ci_low", "ci_high", "n"} for arm in tom.ARMS)
    assert set(entry["skill_outcome_correlation"]) == {"infer", "anticipate"}
    assert all(set(v) == {"r", "ci_low", "ci_high", "n"} for v in entry["skill_outcome_correlation"].values())
    n = SMOKE.tom.heldout_scenarios * len(SMOKE.eval_counterparts)
    assert entry["base"]["n"] == n and result.episodes == n
    teacher_vs_conceder = result.differences["sft_tom - base"]
    assert teacher_vs_conceder.n == n
    assert teacher_vs_conceder.mean == pytest.approx(result.arms["sft_tom"].mean - result.arms["base"].mean)
    # The scaffold on the warm-start is paired with the warm-start itself (teacher against boulware here).
    on_warm_start = result.differences["sft_act_tom_prompt - sft_act"]
    assert on_warm_start.n == n
    assert on_warm_start.mean == pytest.approx(result.arms["sft_act_tom_prompt"].mean - result.arms["sft_act"].mean)
    # The same teacher in the scaffolded arms plays identical episodes, so it scores identically.
    assert set(result.skills) == {"base_tom_prompt", "sft_act_tom_prompt", "sft_tom"}
    assert result.skills["sft_tom"].anticipate.mean == pytest.approx(result.skills["base_tom_prompt"].anticipate.mean)
    assert result.arms["sft_tom"].mean == pytest.approx(result.arms["base_tom_prompt"].mean)
    with pytest.raises(ValueError, match="arms missing"):
        tom.analyse(env_id, {k: v for k, v in runs.items() if k != "sft_act"})
    details = result.details()
    assert set(details["paired_differences"]) == {f"{a} - {b}" for a, b in tom.DIFFERENCES}
    # The result renders itself once (tom_analysis shows it, run_tom prints it): a row per arm, the scaffolded
    # arms with their INFER and ANTICIPATE scores, every paired difference and both correlations.
    table = result.markdown()
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert set(tom.ARMS) | set(result.differences) | {"r(infer, reward)", "r(anticipate, reward)"} <= set(rows)
    infer = result.skills["sft_tom"].infer
    assert f"{infer.mean:.3f} [{infer.ci_low:.3f}, {infer.ci_high:.3f}] n={infer.n}" in rows["sft_tom"]
    assert rows["base"].count(" - |") == 5  # no scaffold, no skills, no copying
    # 2 x 2 x 3 scored episodes at most: too few for a correlation, and the report says so.
    pooled = result.correlation["infer"]
    assert 0 < pooled.n < tom.MIN_CORRELATION_EPISODES and entry["skill_outcome_correlation"]["infer"]["r"] is None
    assert f"n = {pooled.n} < 30: not reported as a finding" in rows["r(infer, reward)"]
    assert details["skill_outcome_correlation_note"]["infer"] == tom.correlation_note(pooled)


@pytest.mark.slow
def test_the_arms_play_every_domain_through_the_engine(vllm_engine: Any) -> None:
    """The smoke profile's study domains (all six), every arm an LLM agent on the tiny model."""
    profile = dataclasses.replace(SMOKE, tom=dataclasses.replace(SMOKE.tom, heldout_scenarios=2))
    results = []
    for env_id in profile.tom.domains:
        runs = tom.run_arms(
            env_id, profile, vllm_engine.base_url, {"base": "tiny", "sft_act": "tiny", "sft_tom": "tiny"}
        )
        for arm, run in runs.items():
            assert run.result.summary.n == 2 * len(profile.eval_counterparts)
            assert all((s is not None) == tom.ARMS[arm][1] for s in run.skills)
        results.append(tom.analyse(env_id, runs))
    written = tom.result_file(results)
    assert set(written) == {*profile.tom.domains, "clusters"} and written["clusters"] == 2


# -------------------------------------------------------------------------- teacher reasoning with content
def _price_domain(env_id: str, seat: str, index: int) -> Any:
    from agents.socialrl.teacher.agent import _domain_factory

    env = make(env_id)
    events = env.reset(sample_scenarios(env_id, index + 1, 0)[index], 0)
    view = next(e.data for e in events if isinstance(e, Observation) and e.private and e.to == seat)
    return _domain_factory(env_id)(seat, view, env_class(env_id).deal_space(seat, view), random.Random(0))


@pytest.mark.parametrize("env_id", ["craigslist-v0", "marketplace-v0"])
def test_the_price_teachers_reasoning_cites_the_scenario_and_the_counterparts_moves(env_id: str) -> None:
    """What the scaffolded student imitates: INFER states the walk-away estimate with the evidence it rests
    on (the listing, then the counterpart's opening and latest offers), ANTICIPATE the counter expected next
    beside the counterpart's last offer; both vary with the scenario, copy nothing of the instructions, and
    the study's scorers read them."""
    infers = []
    for index in (0, 1):
        domain = _price_domain(env_id, "buyer", index)
        listing = domain.listing
        before = domain.infer_text()
        assert money(listing) in before and "no offer yet" in before
        offers = [round(listing * 0.98, 2), round(listing * 0.9, 2)]
        for turn, price in zip((1, 3), offers, strict=True):
            domain.on_offer(price, turn, 20)
        infer = domain.infer_text()
        assert f"opened {money(offers[0])}, now {money(offers[1])} after 2 offers (down" in infer
        estimate = tom_skills.parse_price(infer)
        assert estimate is not None and abs(estimate - domain.belief_summary()["final_price_mean"]) <= domain.step
        ctx = TurnContext(turn=4, max_turns=20, pending=offers[1], allowed=())
        anticipate = domain.anticipate_text(Plan("offer", round(listing * 0.5, 2), "concede", 0.5, 0.05), ctx)
        assert f"their last {money(offers[1])}" in anticipate and tom_skills.parse_anticipation(anticipate) == "offer"
        assert not any(tom_skills.copies_instructions(t) for t in (before, infer, anticipate))
        infers += [before, infer]
    assert len(set(infers)) == 4  # two scenarios, two moments each: four different texts


# ------------------------------------------------------------------------------- copying the instructions
def test_the_copy_score_flags_instruction_text_and_passes_content() -> None:
    copied = [
        "what the other side most likely wants and how far they may move.",
        "What the other side most likely wants",  # a cut copy
        "the other side's most likely next move.",  # the ANTICIPATE line
        "your move, written exactly as the rules above require.",  # the ACT line, in the wrong part
    ]
    content = [
        "Seller's walk-away ~$70 (+/- $21): opened $100, now $94 after 3 offers (down $6, slowly).",
        "They will probably counter around $88 (their last $94; accept p~0.00).",
        "They want the bike cheap and will move at most $10.",
        "Your turn (3/20). Standing offer from the seller: $100.",  # an echo, but not of the instructions
    ]
    assert all(tom_skills.instruction_overlap(t) == 1.0 and tom_skills.copies_instructions(t) for t in copied)
    assert all(tom_skills.instruction_overlap(t) < 0.2 and not tom_skills.copies_instructions(t) for t in content)
    # Instruction words around content: copied only when they are most of the part.
    mixed = "The other side most likely wants a lower price, maybe $80."
    assert 0.4 < tom_skills.instruction_overlap(mixed) < tom_skills.COPY_THRESHOLD
    assert not tom_skills.copies_instructions(None) and not tom_skills.copies_instructions("  ")


class _CopyingTeacher:
    """The code teacher whose INFER is replaced by the scaffold's own INFER instruction, as the cpu run's
    students wrote it."""

    def __init__(self, seed: int) -> None:
        self.inner = make_teacher(seed)

    @property
    def trace(self) -> list[dict[str, Any]]:
        return self.inner.trace

    async def reset(self, *args: Any) -> None:
        await self.inner.reset(*args)

    async def observe(self, event: Any) -> None:
        await self.inner.observe(event)

    async def act(self, request: Any) -> Any:
        action = await self.inner.act(request)
        self.inner.trace[-1]["infer"] = "what the other side most likely wants and how far they may move."
        return action


def test_the_analysis_reports_how_often_each_scaffolded_arm_copies_the_instructions() -> None:
    env_id = "craigslist-v0"
    runs = _arms(env_id, ("copier", _CopyingTeacher))
    result = tom.analyse(env_id, runs)
    copier, teacher = result.skills["sft_tom"], result.skills["base_tom_prompt"]
    assert copier.instruction_copy_rate("infer") == 1.0 and copier.instruction_copy_rate("anticipate") == 0.0
    assert copier.infer.n == 0  # a copied INFER names no price: nothing to score
    assert teacher.instruction_copy_rate("infer") == teacher.instruction_copy_rate("anticipate") == 0.0
    written = copier.instruction_copy["infer"][1]
    assert written >= sum(s.replies for s in runs["sft_tom"].skills if s is not None) > 0  # refused ones too
    details = result.details()
    assert details["instruction_copy_rate"]["sft_tom"] == {"infer": 1.0, "anticipate": 0.0}
    assert details["skills"]["sft_tom"]["parts_written"]["infer"] == written
    row = next(line for line in result.markdown().splitlines() if line.startswith("| sft_tom |"))
    assert f"1.00 ({written}/{written})" in row


# ------------------------------------------------------------------------------ correlations from enough
def test_a_skill_correlation_from_fewer_than_30_scored_episodes_is_not_reported() -> None:
    rng = np.random.default_rng(1)
    skill = rng.uniform(0, 1, 40)
    reward = np.clip(0.2 + 0.6 * skill + rng.normal(0, 0.1, 40), 0, 1)
    few = tom.skill_correlation([_synthetic_run("sft_tom", list(skill[:29]), list(reward[:29]), list(range(29)))],
                                "infer")  # fmt: skip
    assert few.n == 29 and math.isnan(few.mean) and math.isnan(few.ci_low)
    assert tom.correlation_note(few) == "n = 29 < 30: not reported as a finding"
    assert tom.correlation_dict(few) == {"r": None, "ci_low": None, "ci_high": None, "n": 29}
    enough = tom.skill_correlation([_synthetic_run("sft_tom", list(skill), list(reward), list(range(40)))], "infer")
    assert enough.n == 40 and enough.mean > 0.7 and tom.correlation_note(enough) is None
