"""The listener probe (models/yoao/listening.py): the audit's seat rounds, and how replies are scored."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from environments.yoao.red_black import VOTE, VOTE_REQUEST
from models.yoao.config import CPU_YOAO
from models.yoao.incentives import ARMS, COMPARISONS
from models.yoao.listening import ProbeTurn, probe_games, probe_turns, score_probe

GAMES = 4


@pytest.fixture(scope="module")
def turns() -> list[ProbeTurn]:
    return probe_turns(CPU_YOAO, probe_games(CPU_YOAO, GAMES))


def test_every_untrained_seat_round_of_every_arm_is_asked(turns: list[ProbeTurn]) -> None:
    counts = Counter(t.arm for t in turns)
    # k = 0: all five seats are untrained; every other arm has the seed in one seat.
    assert counts == {arm: GAMES * CPU_YOAO.rounds * (5 if arm == "none" else 4) for arm in ARMS}
    for t in turns:
        assert t.statement_context[0]["role"] == "system" and t.statement_context[-1]["role"] == "user"
        assert f"Round {t.round} of" in t.statement_context[-1]["content"]
        assert VOTE_REQUEST not in t.statement_context[-1]["content"]
        assert VOTE_REQUEST in t.after_statement[-1]["content"]
    # The seed's seat (A0) is never asked beside a seed.
    assert not any(t.seat == "A0" for t in turns if t.arm != "none")


def test_the_vote_is_asked_after_the_players_own_statement(turns: list[ProbeTurn]) -> None:
    t = turns[0]
    context = t.vote_context("Mine, not the tutor's. I vote OPEN.")
    assert context[len(t.statement_context)] == {"role": "assistant", "content": "Mine, not the tutor's. I vote OPEN."}
    assert t.tutor_statement not in [m["content"] for m in context[len(t.statement_context) :]]
    assert context[-1] == t.after_statement[-1]
    with pytest.raises(ValueError, match="vote request must end"):
        ProbeTurn(
            arm="none", game="g", seat="A1", round=1, frame="trade_war", statement_context=t.statement_context,
            tutor_statement="x", after_statement=t.statement_context[-1:], tutor_vote="VOTE: OPEN",
        )  # fmt: skip


def test_the_arms_differ_in_what_the_seed_said_and_share_sampling_seeds(turns: list[ProbeTurn]) -> None:
    by_key = {(t.arm, t.game, t.seat, t.round): t for t in turns}
    argue, muted = by_key["argue", "trade_war:0", "A1", 1], by_key["vote_only", "trade_war:0", "A1", 1]
    # A1 speaks after A0 in round 1: it heard the arguing seed's reasons, or only the muted seed's vote.
    assert argue.statement_context[-1] != muted.statement_context[-1]
    assert "A0: I vote OPEN." in muted.statement_context[-1]["content"]
    assert "A0: I vote OPEN." not in argue.statement_context[-1]["content"]
    # Common random numbers: the same game, seat, round and turn kind sample alike in every arm.
    assert argue.sampling_seed(VOTE) == muted.sampling_seed(VOTE)
    assert argue.sampling_seed(VOTE) != argue.sampling_seed("opinion")
    assert argue.sampling_seed(VOTE) != by_key["argue", "trade_war:0", "A1", 2].sampling_seed(VOTE)


def test_replies_that_echo_the_tutors_score_as_the_tutors(turns: list[ProbeTurn]) -> None:
    probe = score_probe(turns, [t.tutor_statement for t in turns], [t.tutor_vote for t in turns], "echo", GAMES, 0.0)
    for arm in ARMS:
        assert probe.model[arm] == probe.tutors[arm]
        assert probe.model_statements[arm] == probe.tutor_statements[arm]
        assert probe.invalid_rate[arm] == 0.0
    assert probe.model_statement_comparisons == probe.tutor_statement_comparisons
    # The tutors weigh an argument above a bare vote (the incentive audit), so an echo does too.
    assert probe.tutor_comparisons["argue_minus_vote_only"].mean > 0
    assert probe.listens


def test_a_player_that_always_votes_cooperatively_does_not_listen(turns: list[ProbeTurn]) -> None:
    probe = score_probe(turns, ["I vote BLACK." for _ in turns], ["VOTE: BLACK" for _ in turns], "always", GAMES, 0.0)
    assert all(probe.model[arm].mean == 1.0 and probe.model_statements[arm].mean == 1.0 for arm in ARMS)
    assert all(probe.model_comparisons[name].mean == 0.0 for name in COMPARISONS)
    assert all(probe.model_statement_comparisons[name].mean == 0.0 for name in COMPARISONS)
    assert not probe.listens
    # The tutors' side is read from the games, whatever the replies: selfish with no seed.
    assert probe.tutors["none"].mean < 0.5


def test_unreadable_replies_are_invalid_votes_not_choices(turns: list[ProbeTurn]) -> None:
    mumbles = ["I am not sure what to do." for _ in turns]
    probe = score_probe(turns, mumbles, mumbles, "mumbles", GAMES, 0.0)
    assert all(rate == 1.0 for rate in probe.invalid_rate.values())
    assert all(math.isnan(probe.model[arm].mean) for arm in ARMS)
    assert not probe.listens
    row = probe.as_json()
    assert row["model"]["argue"]["mean"] is None and row["listens"] is False
    assert {t["arm"] for t in row["transcripts"]} == set(ARMS)
    assert "does not show that it weighs" in probe.markdown()


def test_a_statement_and_a_vote_per_round_are_required(turns: list[ProbeTurn]) -> None:
    with pytest.raises(ValueError, match="for 8"):
        score_probe(turns[:8], ["I vote OPEN."] * 8, ["VOTE: OPEN"], "short", GAMES, 0.0)
    with pytest.raises(ValueError, match="at least 2 games"):
        probe_games(CPU_YOAO, 1)


def test_the_result_files_sentence_reads_the_probe(turns: list[ProbeTurn]) -> None:
    from models.display import interval_text
    from models.yoao.listening import listener_sentence

    echo = score_probe(turns, [t.tutor_statement for t in turns], [t.tutor_vote for t in turns], "echo", GAMES, 0.0)
    row = echo.as_json()
    text = listener_sentence(row)
    e = row["model_comparisons"]["argue_minus_vote_only"]
    assert f"votes argue_minus_vote_only {interval_text(e['mean'], e['ci_low'], e['ci_high'], '+.2f')}" in text
    assert "The warm-up weighs an argument" in text and f"{len(turns)} seat rounds" in text
    always = score_probe(turns, ["I vote BLACK."] * len(turns), ["VOTE: BLACK"] * len(turns), "always", GAMES, 0.0)
    assert "does not show that it weighs" in listener_sentence(always.as_json())


def test_the_recipes_table_shows_each_warmups_recipe_and_comparisons(turns: list[ProbeTurn]) -> None:
    from models.yoao.listening import recipes_markdown

    echo = score_probe(turns, [t.tutor_statement for t in turns], [t.tutor_vote for t in turns], "echo", GAMES, 0.0)
    recipe = {"games": 48, "steps": 48, "overrides": {"warmup_advocate_share": 0.5}, "eval_curve": [[0, 2.1], [48, 0.41]],
              "follows_majority": 0.91}  # fmt: skip
    text = recipes_markdown(
        {"rows": [{"recipe": recipe, **echo.as_json()}], "commit": "abcdef123", "machine_update_tok_s": 1.0}
    )
    assert "| echo | 48 | 48 | 0.5 | 2.100, 0.410 | 0.91 |" in text
    e = echo.model_comparisons["argue_minus_vote_only"]
    assert (
        f"{e.mean:+.2f} [{e.ci_low:+.2f}, {e.ci_high:+.2f}] ({e.mean:+.2f} [{e.ci_low:+.2f}, {e.ci_high:+.2f}])" in text
    )
    assert text.rstrip().endswith("commit abcdef1.") and "| yes |" in text


def test_a_player_that_votes_as_its_teammates_stated_is_not_taken_for_one_that_listens(turns: list[ProbeTurn]) -> None:
    # It states the selfish choice whatever it heard, then votes with the round's stated
    # majority: in the arguing arm the tutors who spoke after it were persuaded, so its votes move, but its own
    # statements never answer the seed.
    from agents.yoao.red_black_teacher import stated_majority
    from environments.yoao.red_black import load_frame, read_choice

    frame = load_frame("trade_war")
    votes = []
    for t in turns:
        heard = [
            line.split(": ", 1)[1] for m in t.after_statement for line in m["content"].splitlines() if line[:1] == "A"
        ]
        before = [line.split(": ", 1)[1] for line in t.statement_context[-1]["content"].splitlines() if line[:1] == "A"]
        stated = [c for c in (read_choice(x, frame) for x in before + heard) if c]
        votes.append(f"VOTE: {stated_majority(stated) or 'RED'}")
    probe = score_probe(turns, ["I vote RED."] * len(turns), votes, "follower", GAMES, 0.0)
    assert probe.model_comparisons["argue_minus_vote_only"].mean > 0
    assert probe.model_statement_comparisons["argue_minus_vote_only"].mean == 0.0
    assert not probe.listens
