"""Representative transcripts: the documented best/median/worst choice on hand-made evaluation rows, the
private facts each seat held, the `transcripts` view, and escaping of unusual text (markdown rendered by a
CommonMark parser, HTML parsed back)."""

from __future__ import annotations

import html.parser
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from agents.socialrl.code_agents import make_code_agent
from environments.core.registry import sample_scenarios
from models.evaluation.policy import EvaluationPlan, evaluate_policy, store_evaluation
from models.evaluation.representatives import (
    MOST_REFUSED,
    ScoredEpisode,
    pick_representatives,
    representatives_by_policy,
)
from models.evaluation.safe_text import clean_text, escape_markdown
from models.evaluation.transcript_tables import load_transcripts, representative_transcripts_from_store
from models.evaluation.transcripts import (
    SeatView,
    Transcript,
    TranscriptTurn,
    representative_transcripts,
    transcript_from_result,
    transcript_html,
    transcript_markdown,
    transcripts_html,
    transcripts_markdown,
)
from models.records import _json
from models.storage import TableStore


def labels_of(reps) -> dict[str, tuple[str, ...]]:
    return {r.episode.episode_id: r.labels for r in reps}


# ------------------------------------------------------------------------------------------- choice
def test_best_median_worst_with_documented_tie_breaking() -> None:
    scored = [
        ScoredEpisode("e5", 0.40),
        ScoredEpisode("e2", 0.90),
        ScoredEpisode("e1", 0.90),  # ties e2 for best: the smaller id wins
        ScoredEpisode("e4", 0.10),
        ScoredEpisode("e3", 0.10),  # ties e4 for worst: the smaller id wins
        ScoredEpisode("e6", 0.40),
    ]
    # ascending (reward, id): e3 e4 e5 e6 e1 e2 -> lower median at (6 - 1) // 2 = 2 -> e5
    reps = pick_representatives(scored)
    assert [(r.labels, r.episode.episode_id) for r in reps] == [
        (("best",), "e1"),
        (("median",), "e5"),
        (("worst",), "e3"),
    ]
    # Input order does not matter.
    assert labels_of(pick_representatives(list(reversed(scored)))) == labels_of(reps)


def test_small_groups_share_labels_and_bad_rows_are_refused() -> None:
    assert pick_representatives([]) == []
    one = pick_representatives([ScoredEpisode("only", 0.3)])
    assert [(r.labels, r.episode.episode_id) for r in one] == [(("best", "median", "worst"), "only")]
    two = pick_representatives([ScoredEpisode("hi", 0.8), ScoredEpisode("lo", 0.2)])
    assert labels_of(two) == {"hi": ("best",), "lo": ("median", "worst")}
    with pytest.raises(ValueError, match="reward must be a number"):
        ScoredEpisode("nan", float("nan"))
    with pytest.raises(ValueError, match="unique"):
        pick_representatives([ScoredEpisode("a", 0.1), ScoredEpisode("a", 0.2)])
    grouped = representatives_by_policy(
        [
            ScoredEpisode("a1", 0.1, policy="A"),
            ScoredEpisode("b1", 0.5, policy="B"),
            ScoredEpisode("a2", 0.7, policy="A"),
        ]
    )
    assert list(grouped) == ["A", "B"]
    assert labels_of(grouped["A"]) == {"a2": ("best",), "a1": ("median", "worst")}


def test_the_episode_with_the_most_refused_attempts_is_added() -> None:
    """Best, median and worst by reward may all be clean episodes of a policy that often broke the action format:
    the episode whose policy seat had the most refused attempts is shown too (ties: the smallest id), and only
    where some episode has one."""
    scored = [
        ScoredEpisode("e1", 0.9),
        ScoredEpisode("e2", 0.5, refused=3),
        ScoredEpisode("e3", 0.4, refused=5),
        ScoredEpisode("e4", 0.45),
        ScoredEpisode("e0", 0.3, refused=5),  # ties e3: the smaller id wins
        ScoredEpisode("e5", 0.1, refused=1),
    ]
    # ascending (reward, id): e5 e0 e3 e4 e2 e1 -> median at (6 - 1) // 2 = 2 -> e3
    reps = pick_representatives(scored)
    assert [(r.labels, r.episode.episode_id) for r in reps] == [
        (("best",), "e1"),
        (("median",), "e3"),
        (("worst",), "e5"),
        ((MOST_REFUSED,), "e0"),
    ]
    # The most refused episode may be one already chosen: it carries both labels and is shown once.
    merged = pick_representatives([ScoredEpisode("a", 0.9), ScoredEpisode("b", 0.1, refused=2)])
    assert labels_of(merged) == {"a": ("best",), "b": ("median", "worst", MOST_REFUSED)}
    # No refused attempt anywhere: no extra episode.
    assert [r.labels for r in pick_representatives([ScoredEpisode("a", 0.9), ScoredEpisode("b", 0.1)])] == [
        ("best",),
        ("median", "worst"),
    ]
    with pytest.raises(ValueError, match="refused"):
        ScoredEpisode("x", 0.5, refused=-1)


def _hand_made_rows(
    store: TableStore, run_id: str, rewards: dict[str, float], refused: dict[str, int] | None = None
) -> None:
    """Episodes of a policy in seat buyer against 'boulware' in the seller seat, rewards (and the buyer's refused
    attempts, its invalid actions) chosen by hand."""
    scenario = sample_scenarios("craigslist-v0", 1, 0)[0]
    now = datetime.now(UTC).replace(tzinfo=None)
    for episode_id, reward in rewards.items():
        agents = {"buyer": "my-policy(v1)", "seller": "boulware(seed=1)"}
        store.append(
            "episodes",
            [
                {
                    "episode_id": episode_id, "run_id": run_id, "env_id": "craigslist-v0",
                    "scenario_id": scenario.scenario_id, "seed": 3, "agents": json.dumps(agents),
                    "agreement": reward > 0, "rounds": 2, "deal": json.dumps({"price": 100.0}) if reward else None,
                    "metrics": "{}", "scenario": _json(scenario), "wall_seconds": 0.1, "created_at": now,
                }
            ],
        )  # fmt: skip
        store.append(
            "episode_roles",
            [
                {"episode_id": episode_id, "run_id": run_id, "env_id": "craigslist-v0", "agent_id": "buyer",
                 "agent_name": agents["buyer"], "reward": reward, "utility": reward,
                 "invalid_actions": (refused or {}).get(episode_id, 0),
                 "timeouts": 0, "leaked": "[]"},
                {"episode_id": episode_id, "run_id": run_id, "env_id": "craigslist-v0", "agent_id": "seller",
                 "agent_name": agents["seller"], "reward": 1 - reward, "utility": 1 - reward, "invalid_actions": 1,
                 "timeouts": 0, "leaked": "[]"},
            ],
        )  # fmt: skip
        store.append(
            "episode_turns",
            [
                {"episode_id": episode_id, "run_id": run_id, "turn_index": 1, "agent_id": "seller",
                 "kind": "accept", "text": "Deal.", "payload": "{}"},
                {"episode_id": episode_id, "run_id": run_id, "turn_index": 0, "agent_id": "buyer",
                 "kind": "offer", "text": f"I offer {episode_id}", "payload": json.dumps({"price": 100.0})},
            ],
        )  # fmt: skip
    store.append(
        "evaluations",
        [{"run_id": run_id, "policy_name": "craigslist:ppo", "policy": "my-policy(v1)", "env_id": "craigslist-v0",
          "seat": "buyer", "counterpart": "*", "n": len(rewards), "mean_reward": 0.5, "created_at": now}],
    )  # fmt: skip


def test_choice_from_hand_made_evaluation_rows_in_the_tables(tmp_path: Path) -> None:
    store = TableStore(tmp_path)
    rewards = {"ep-c": 0.5, "ep-a": 0.75, "ep-b": 0.75, "ep-d": 0.0, "ep-e": 0.25}
    _hand_made_rows(store, "eval-1", rewards, refused={"ep-e": 2, "ep-b": 1})
    _hand_made_rows(store, "eval-2", {"other": 1.0})  # another run: never mixed in
    chosen = representative_transcripts_from_store(store, "eval-1")
    assert list(chosen) == ["craigslist:ppo"]
    # ascending: d(0) e(.25) c(.5) a(.75) b(.75) -> best a (tie with b, smaller id), median c, worst d; the buyer
    # refused most in e (2; the seller's refusals do not count)
    assert [(t.labels, t.episode_id) for t in chosen["craigslist:ppo"]] == [
        (("best",), "ep-a"), (("median",), "ep-c"), (("worst",), "ep-d"), ((MOST_REFUSED,), "ep-e")
    ]  # fmt: skip
    best = chosen["craigslist:ppo"][0]
    assert best.policy_seat == "buyer" and best.policy_reward == 0.75 and best.policy == "craigslist:ppo"
    assert [(t.index, t.speaker, t.kind, dict(t.payload)) for t in best.turns] == [
        (0, "buyer", "offer", {"price": 100.0}), (1, "seller", "accept", {})
    ]  # fmt: skip
    # The buyer's private target comes back from the scenario JSON, and the seller's reservation.
    buyer = best.seat("buyer")
    assert any("target price" in text for text in buyer.private_text)
    assert buyer.private_facts and buyer.private_facts[0].startswith("target_price")
    assert best.seat("seller").private_facts[0].startswith("reservation_price") and best.note == ""
    scenario = sample_scenarios("craigslist-v0", 1, 0)[0]
    assert buyer.private_values == (f"target_price: {scenario.buyer_target:.6g}",)
    assert best.seat("seller").private_values == (f"reservation_price: {scenario.reservation:.6g}",)
    with pytest.raises(KeyError, match="no evaluation rows"):
        representative_transcripts_from_store(store, "missing-run")
    with pytest.raises(KeyError, match="nope"):
        load_transcripts(store, ["nope"])


def test_the_transcripts_view_joins_turns_episodes_and_roles(tmp_path: Path) -> None:
    store = TableStore(tmp_path)
    assert store.query("SELECT count(*) AS n FROM transcripts").n[0] == 0  # empty tables: an empty view
    _hand_made_rows(store, "eval-1", {"ep-a": 0.75})
    _hand_made_rows(store, "eval-2", {"ep-a": 0.25})  # the same episode id in another run stays separate
    frame = store.query(
        "SELECT run_id, turn_index, speaker, speaker_agent, kind, speaker_reward, agreement FROM transcripts "
        "WHERE episode_id = 'ep-a' ORDER BY run_id, turn_index"
    )
    assert frame.values.tolist() == [
        ["eval-1", 0, "buyer", "my-policy(v1)", "offer", 0.75, True],
        ["eval-1", 1, "seller", "boulware(seed=1)", "accept", 0.25, True],
        ["eval-2", 0, "buyer", "my-policy(v1)", "offer", 0.25, True],
        ["eval-2", 1, "seller", "boulware(seed=1)", "accept", 0.75, True],
    ]


# ----------------------------------------------------------------------------- from a real evaluation
@pytest.fixture(scope="module")
def evaluation():
    plan = EvaluationPlan("craigslist-v0", 4, seat="buyer", counterparts=("boulware", "conceder"), seed=1)
    return evaluate_policy(plan, lambda seed: make_code_agent("reciprocal", seed))


def test_representatives_of_an_evaluation_match_the_tables(evaluation, tmp_path: Path) -> None:
    chosen = representative_transcripts(evaluation, policy="reciprocal")
    rewards = sorted((e.reward, e.episode_id) for e in evaluation.policy_episodes)
    assert chosen[-1].episode_id == rewards[0][1] and "worst" in chosen[-1].labels
    assert chosen[0].policy_reward == max(r for r, _ in rewards) and "best" in chosen[0].labels
    for t in chosen:
        assert t.policy_seat == "buyer" and t.turns and t.seat("buyer").private_text
    store = TableStore(tmp_path)
    store_evaluation(store, evaluation, "reciprocal", "eval-real")
    from_store = representative_transcripts_from_store(store, "eval-real")["reciprocal"]
    assert [(t.episode_id, t.labels) for t in from_store] == [(t.episode_id, t.labels) for t in chosen]
    for a, b in zip(from_store, chosen, strict=True):
        assert a.turns == b.turns and a.seats == b.seats and a.agreement == b.agreement


def test_inboxes_are_used_when_kept() -> None:
    import asyncio

    from environments import make
    from environments.core.runtime import run_episode

    scenario = sample_scenarios("dnd-v0", 1, 2)[0]
    agents = {"alice": make_code_agent("boulware", 1), "bob": make_code_agent("conceder", 2)}
    result = asyncio.run(run_episode(make("dnd-v0"), agents, scenario, seed=2, keep_inboxes=True))
    t = transcript_from_result(result, "alice", ("best",))
    assert t.seat("alice").private_text == tuple(
        e.text for e in result.inboxes["alice"] if getattr(e, "private", False)
    )
    assert "Your private points" in t.seat("bob").private_text[0]
    with pytest.raises(ValueError, match="no seat"):
        transcript_from_result(result, "carol")


def test_the_private_facts_come_first_and_are_never_cut() -> None:
    """A listing whose description alone is longer than the cut: each seat's private values (the buyer's target,
    the seller's minimum) come first and whole, and the opening briefing is cut on its description line, so
    the line that states the target stays (the cut once fell on it: "[cut: 473 more characters]")."""
    import asyncio
    import dataclasses

    from environments import make
    from environments.core.runtime import run_episode

    scenario = sample_scenarios("craigslist-v0", 1, 0)[0]
    scenario = dataclasses.replace(scenario, description=("Solid oak, seats six, no scratches. " * 60,))
    agents = {"buyer": make_code_agent("boulware", 1), "seller": make_code_agent("conceder", 2)}
    result = asyncio.run(run_episode(make("craigslist-v0"), agents, scenario, seed=3))
    t = transcript_from_result(result, "buyer", ("best",))
    target, minimum = f"{scenario.buyer_target:g}", f"{scenario.reservation:g}"
    assert t.seat("buyer").private_values == (f"target_price: {target}",)
    assert t.seat("seller").private_values == (f"reservation_price: {minimum}",)
    assert len(t.seat("buyer").private_text[0]) > 2 * 800  # longer than the cut

    md = transcript_markdown(t, max_chars=800)
    for fact, stated in ((f"target_price: {target}", "Your private target price is"), (f"reservation_price: {minimum}", "Your private minimum is")):  # fmt: skip
        shown = escape_markdown(fact)
        assert f"**private**: {shown}" in md
        assert md.index(shown) < md.index(escape_markdown(stated)), fact  # first
        assert escape_markdown(stated) in md  # the line stating it is not cut away
    description = [line for line in md.splitlines() if "Description" in line]
    assert len(description) == 2 and all("\\[cut\\: " in line for line in description)

    page = transcript_html(t, max_chars=800)
    assert f"<b>private</b>: target_price: {target}</li>" in page
    assert page.index(f"target_price: {target}") < page.index("Description:")
    assert f"Your private target price is ${target}" in page and f"Your private minimum is ${minimum}" in page
    assert page.count("more characters]") == 2  # one cut per briefing, on its description

    # The cut itself: the longest line gives way, short lines stay whole, the result fits.
    text = "short head\n" + "x" * 300 + "\n" + "y" * 120 + "\nthe target line"
    cut = clean_text(text, 200, longest_first=True)
    lines = cut.split("\n")
    assert lines[0] == "short head" and lines[3] == "the target line"
    assert lines[1].startswith("x") and lines[2].startswith("y") and all("more characters]" in x for x in lines[1:3])
    # 10 + 15 characters of short lines and 3 newlines leave 172 for the two long ones: 86 each.
    assert (
        lines[1] == "x" * 86 + " … [cut: 214 more characters]" and lines[2] == "y" * 86 + " … [cut: 34 more characters]"
    )
    assert clean_text(text, 200).endswith("more characters]")  # the default cuts the end


# ------------------------------------------------------------------------------------------- escaping
NASTY = (
    "<script>alert('x')</script> | a | b |\n# Heading\n![img](http://evil/x.png) [link](javascript:alert(1))\n"
    "    indented code?\n***bold*** `code` <img src=x onerror=alert(1)> &amp; \x00\x07\x1b[31mred\u202eevil"
)


def nasty_transcript(long_text: str) -> Transcript:
    return Transcript(
        episode_id="ep<1>|x",
        env_id="craigslist-v0",
        scenario_id="s|1",
        seed=0,
        seats=(
            SeatView(
                seat="buyer",
                agent="<b>agent</b>",
                reward=0.5,
                utility=1.0,
                invalid_actions=0,
                leaked=("target_price",),
                private_text=(NASTY,),
                private_facts=("target_price: <i>x</i>",),
            ),
            SeatView(seat="seller", agent="x", reward=0.1, utility=0.0, invalid_actions=2),
        ),
        turns=(
            TranscriptTurn(0, "buyer", "message", NASTY, {"html": "<script>"}),
            TranscriptTurn(1, "seller", "offer", long_text, {"price": 1.0}),
            TranscriptTurn(2, "buyer", "accept", "\n" * 500 + "end"),
        ),
        agreement=True,
        deal={"price": 1.0},
        policy_seat="buyer",
        labels=("best",),
        policy="p<script>",
    )


def test_clean_text_cuts_and_shows_control_characters() -> None:
    assert clean_text("a\x00b\x1bc\u202ed") == "a\\u0000b\\u001bcd"
    cut = clean_text("x" * 5000, max_chars=100)
    assert cut.startswith("x" * 100) and "4900 more characters" in cut and len(cut) < 140
    assert "more lines" in clean_text("\n".join("l" * 3 for _ in range(100)), max_lines=5)


def test_markdown_renders_unusual_text_as_literal_text() -> None:
    long_text = "Z" * 200_000
    md = transcript_markdown(nasty_transcript(long_text), max_chars=500)
    assert len(md) < 20_000  # 200k characters were cut
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    for forbidden in ("<script", "<img", "<a ", "<table", "<h1", "<code", "<pre", "<strong><em>bold"):
        assert forbidden not in rendered, forbidden
    # The text is still there, as text (escaped once by the renderer).
    assert "&lt;script&gt;alert(" in rendered and "| a | b |" in rendered and "# Heading" in rendered
    assert "\\u0000" in rendered and "\x00" not in rendered and "\u202e" not in rendered
    assert "more characters" in rendered
    # Exactly one heading: the transcript's own (the text's "# Heading" stays a paragraph).
    assert rendered.count("<h4>") == 1 and "<h1>" not in rendered
    many = transcripts_markdown([nasty_transcript("short")] * 3, title="policy <x>")
    assert MarkdownIt("commonmark").render(many).count("<h4>") == 3


class _Collector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_page_keeps_unusual_text_inert() -> None:
    page = transcripts_html([nasty_transcript("Q" * 100_000), nasty_transcript("ok")], title="<title>")
    parser = _Collector()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags and "a" not in parser.tags
    assert parser.tags.count("article") == 2
    text = "".join(parser.text)
    assert "<script>alert('x')</script>" in text and "more characters" in text
    assert "Content-Security-Policy" in page and len(page) < 30_000
    assert "\x00" not in page and "\u202e" not in page
    single = transcript_html(nasty_transcript("ok"))
    assert single.startswith("<!DOCTYPE html>") and single.count("<article") == 1


# ------------------------------------------------------------------------------------ refused attempts
@pytest.fixture(scope="module")
def stumbling_episode():
    """A Craigslist episode whose buyer's first two replies are refused (no price, nothing to accept) before an
    offer, then three more (retries exhausted: the turn is forfeited) before it quits."""
    import asyncio

    from environments import make
    from environments.core.events import RAW_TEXT, Action
    from environments.core.runtime import run_episode

    class Stumbling:
        def __init__(self) -> None:
            self.replies = ["OFFER $", "ACCEPT <b>now</b>", "OFFER $60 fine", "OFFER $", "OFFER $", "OFFER $"]

        async def reset(self, *args) -> None:
            pass

        async def observe(self, event) -> None:
            pass

        async def act(self, request) -> Action:
            return Action("buyer", RAW_TEXT, self.replies.pop(0) if self.replies else "QUIT")

    scenario = sample_scenarios("craigslist-v0", 1, 3)[0]
    agents = {"buyer": Stumbling(), "seller": make_code_agent("boulware", 1)}
    return asyncio.run(run_episode(make("craigslist-v0"), agents, scenario, 3, episode_id="ep-stumble"))


def test_every_refused_attempt_is_shown_with_its_reason(stumbling_episode, tmp_path: Path) -> None:
    from models.records import rows_for

    result = stumbling_episode
    buyer_refusals = [a for a in result.attempts if a.agent_id == "buyer" and not a.accepted]
    assert len(buyer_refusals) == result.outcome.roles["buyer"].invalid_actions == 5
    transcript = transcript_from_result(result, "buyer")
    md = transcript_markdown(transcript)
    rendered = MarkdownIt("commonmark").render(md)
    # Each refused reply, with the environment's reason, where it happened (before the offer it led to).
    for attempt in buyer_refusals:
        assert f"refused: {escape_html(attempt.reason)}" in rendered
    offer = "offer {&quot;price&quot;: 60.0}"
    assert rendered.index("OFFER $") < rendered.index("ACCEPT &lt;b&gt;now&lt;/b&gt;") < rendered.index(offer)
    assert md.count("✗") == len([a for a in result.attempts if not a.accepted])
    assert f"{len(result.transcript)}, {len(buyer_refusals)} refused attempts" in md
    page = transcript_html(transcript)
    assert page.count('class="turn policy refused"') == len(buyer_refusals)
    assert "ACCEPT &lt;b&gt;now&lt;/b&gt;" in page and "<b>now</b>" not in page
    # The same from the tables: the attempts round-trip and render identically.
    store = TableStore(tmp_path)
    store.append_all(rows_for([result], "run-1"))
    (loaded,) = load_transcripts(store, ["ep-stumble"], policy_seats={"ep-stumble": "buyer"})
    assert loaded.attempts == transcript.attempts and transcript_markdown(loaded) == md
    # The DuckDB views: every attempt, and the refusals before each accepted action.
    attempts = store.query("SELECT speaker, accepted, reason, text FROM attempts ORDER BY attempt_index")
    assert len(attempts) == len(result.attempts) and (~attempts.accepted).sum() == len(
        [a for a in result.attempts if not a.accepted]
    )
    first_offer = store.query(
        "SELECT kind, text, refused, refusals FROM transcripts WHERE speaker = 'buyer' ORDER BY turn_index LIMIT 1"
    )
    assert first_offer.kind[0] == "offer" and first_offer.text[0] == "fine"
    assert first_offer.refused[0] == 2
    assert [r["text"] for r in json.loads(first_offer.refusals[0])] == ["OFFER $", "ACCEPT <b>now</b>"]


def test_tables_recorded_before_attempts_stay_readable(stumbling_episode, tmp_path: Path) -> None:
    from models.records import rows_for

    store = TableStore(tmp_path)
    store.append_all({k: v for k, v in rows_for([stumbling_episode], "old").items() if k != "episode_attempts"})
    (old,) = load_transcripts(store, ["ep-stumble"])
    assert old.attempts == () and len(old.turns) == len(stumbling_episode.transcript)
    assert "refused" not in transcript_markdown(old) and "✗" not in transcript_markdown(old)
    assert set(store.query("SELECT refused FROM transcripts").refused) == {0}
    assert store.query("SELECT count(*) AS n FROM attempts").n[0] == 0


def escape_html(text: str) -> str:
    import html as html_module

    return html_module.escape(text, quote=False)
