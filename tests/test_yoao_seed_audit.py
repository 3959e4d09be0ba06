"""The seed audit (models/yoao/seed_audit.py): a seed in the incentive audit's seat among the tutors, paired
with the audit's code arms. Code seeds stand in for the trained one: each is a seed whose answer is known."""

from __future__ import annotations

import dataclasses
import math

import pytest

from agents.yoao.red_black_strategies import MuteWrapper
from agents.yoao.red_black_teacher import PrincipledCooperator, ScriptedSeed
from environments.yoao.red_black import BLACK, RED, load_frame, read_choice
from models.display import entry_text
from models.evaluation.stats import Estimate
from models.yoao.config import SMOKE_YOAO
from models.yoao.incentives import YoaoIncentiveSettings, run_yoao_incentives
from models.yoao.seed_audit import COMPARISONS, TRANSCRIPT_GAMES, SeedAudit, run_seed_audit, seed_audit_sentence

SETTINGS = dataclasses.replace(SMOKE_YOAO, team_size=5, rounds=3, opponents=("always_defect", "tit_for_tat"))
AUDIT = YoaoIncentiveSettings(min_games=6)


def test_the_teacher_in_the_seed_seat_is_the_audits_arguing_arm_game_for_game() -> None:
    audit = run_seed_audit(SETTINGS, lambda seat, s: PrincipledCooperator(s), name="teacher", audit=AUDIT)
    code = run_yoao_incentives(SETTINGS, AUDIT)
    assert audit.games == code.games == 6
    for arm in ("none", "argue", "vote_only"):  # the code arms are the audit's own games, played again
        assert audit.untrained_cooperation[arm] == code.untrained_cooperation[arm]
    assert audit.untrained_cooperation["seed"] == code.untrained_cooperation["argue"]
    gap = audit.comparisons["argue_minus_seed"]
    assert (gap.mean, gap.ci_low, gap.ci_high) == (0.0, 0.0, 0.0)
    assert audit.comparisons["seed_minus_none"] == code.comparisons["argue_minus_none"]
    assert audit.persuades == (code.comparisons["argue_minus_vote_only"].ci_low > 0)
    # The teacher states BLACK in every discussion it speaks in and votes BLACK: 3 rounds x 6 games.
    assert audit.stated == {BLACK: 18, RED: 0, "none": 0} and audit.seed_black_votes == 1.0
    assert audit.llm_calls == 0  # code seeds make no calls


def test_a_muted_seed_does_not_persuade_beyond_its_vote() -> None:
    audit = run_seed_audit(SETTINGS, lambda seat, s: MuteWrapper(PrincipledCooperator(s)), name="mute", audit=AUDIT)
    same = audit.comparisons["seed_minus_vote_only"]
    assert (same.mean, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0) and not audit.persuades
    assert audit.comparisons["argue_minus_seed"].mean > 0  # the teacher's words moved the tutors, the vote less


def test_a_selfish_seed_is_counted_as_stating_red_and_pulls_cooperation_down() -> None:
    audit = run_seed_audit(
        SETTINGS, lambda seat, s: ScriptedSeed(s, choice=RED, speech="reasons"), name="selfish", audit=AUDIT
    )
    assert audit.stated[RED] == 18 and audit.stated[BLACK] == 0 and audit.seed_black_votes == 0.0
    assert audit.comparisons["seed_minus_none"].mean < 0 and not audit.persuades
    result = audit.as_json()
    assert set(COMPARISONS) <= set(result) and result["games"] == 6 and result["persuades"] is False
    assert {t["game"] for t in result["transcripts"]} == {f"trade_war:{i}" for i in range(TRANSCRIPT_GAMES)}
    assert all(read_choice(t["statement"], load_frame("trade_war")) == RED for t in result["transcripts"])
    text = audit.markdown()
    assert "selfish" in text and "seed_minus_vote_only" in text and "not shown to move" in text
    sentence = seed_audit_sentence(result)
    assert "6 paired games" in sentence and "18 RED" in sentence and "not shown to move" in sentence
    assert f"seed_minus_none {entry_text(result['seed_minus_none'], '+.2f')}" in sentence


def test_the_result_refuses_missing_arms_or_counts() -> None:
    e = Estimate(0.0, 0.0, 0.0, 2)
    fields = dict(
        seed="s", frames=("trade_war",), games=2, comparisons=dict.fromkeys(COMPARISONS, e),
        stated={BLACK: 1, RED: 0, "none": 0}, seed_black_votes=math.nan, llm_calls=0, wall_s=0.0,
    )  # fmt: skip
    with pytest.raises(ValueError, match="arms"):
        SeedAudit(untrained_cooperation={"none": e, "seed": e}, **fields)
    arms = dict.fromkeys(("none", "argue", "vote_only", "seed"), e)
    with pytest.raises(ValueError, match="stated"):
        SeedAudit(untrained_cooperation=arms, **{**fields, "stated": {BLACK: 1}})
    assert SeedAudit(untrained_cooperation=arms, **fields).as_json()["seed_black_votes"] is None


def test_fewer_than_two_paired_games_are_refused() -> None:
    with pytest.raises(ValueError, match="seed audit"):
        dataclasses.replace(SETTINGS, seed_audit_games=1)
    with pytest.raises(ValueError, match="at least 2 paired games"):
        run_seed_audit(SETTINGS, lambda seat, s: PrincipledCooperator(s), name="teacher", games=1, audit=AUDIT)
    two = run_seed_audit(SETTINGS, lambda seat, s: PrincipledCooperator(s), name="teacher", games=2, audit=AUDIT)
    assert two.games == 2 and two.stated[BLACK] == 2 * SETTINGS.rounds  # the first two of the audit's games
