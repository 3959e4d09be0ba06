"""Code agents that write Red-Black training text: the principled cooperator (the embedded YOAO teacher) and
the format tutor (neutral data for the untrained teammates' format-only warm-up).

Both answer with RAW_TEXT, the text a model should learn to write, so `agents.traces.TracedAgent` can render
their games as the chat an LLM agent in the same seat sees (SFT data and deployment share one format).

`PrincipledCooperator` follows the five properties of the YOAO paper's cooperative meta-prompt:

| property | how |
| --- | --- |
| varied messages | every opinion is assembled from several pools of sentences (opening, situation, stakes, teammates, closing), drawn by a seeded generator that avoids the sentences it already used in the game |
| argues from collective welfare | every situation sentence is about the combined total of both sides (mutual cooperation +3/+3 is the largest total a round can give; a RED war costs both), never about the own team's points alone |
| references teammates' earlier arguments | it quotes or names what a teammate said this round (agreeing with a cooperative case, answering a RED case), or what a teammate argued last round when it speaks first |
| keeps cooperating after being exploited | it always states and votes the cooperative choice, whatever the other team did |
| persuades rather than retaliates | after an exploitation it argues for breaking the spiral and winning the other side back; its sentences never use the words of retaliation (punish, revenge, pay back, ...) that the seed-data filter drops |

`FormatTutor` teaches only the answer format: each round it draws BLACK or RED with probability 1/2 from its
seeded generator (independently of what it heard), states it in one short sentence without any rationale and
votes it. Its games carry no cooperative (or defecting) disposition, which is what a warm-up that makes the
untrained teammates vote validly must not teach.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from environments.core.base import ActionSpec
from environments.core.events import RAW_TEXT, Action, Event, Notification, Observation
from environments.yoao.red_black import BLACK, CHOICES, RED, VOTE, other_team, team_of

OPENINGS = (
    "Let's open with {coop}. If both {us} and {them} choose it, the two sides together add {pair} points to "
    "the combined total, the most any single round can give.",
    "The first round sets the tone for the whole game. Choosing {coop} ({coop_desc}) is how both sides end up "
    "better off together.",
    "The best result for everyone is a whole game of mutual {coop}: 150 points of collective welfare. I want us "
    "to start building that trust now.",
    "Nobody can win this game alone. If we and {them} both choose {coop}, every round adds to what all of us share.",
)
AFTER_MUTUAL = (
    "Last round both sides chose {coop} and everyone gained. Let's keep that trust going.",
    "Mutual {coop} is working: the combined total grew by {last_pair} points last round. Nothing else grows our "
    "shared welfare as much.",
    "{them} and we are building something together. One more round of {coop} keeps the total rising for both sides.",
    "Cooperation held last round. Staying with {coop} is what keeps the collective result at its best.",
)
AFTER_EXPLOITED = (
    "{them} chose {defect} last round, and it hurt. Still, answering with {defect} only drags both sides into "
    "losing rounds; the collective welfare recovers only if someone keeps offering {coop}.",
    "They defected, but one bad round does not have to define the game. If we stay with {coop}, we show {them} "
    "the way back to a result that is good for both sides.",
    "Being exploited is costly, I know. Yet a spiral of {defect} against {defect} would cost everyone far more. "
    "I would rather keep the door open with {coop} and win them back to cooperation.",
    "Last round went badly for us, but the combined total only grows when both sides cooperate. Let's make it "
    "easy for {them} to return to {coop}.",
)
AFTER_MUTUAL_DEFECT = (
    "Last round both sides lost: mutual {defect} is the worst outcome for everyone. Let's be the side that "
    "breaks the spiral with {coop}.",
    "A round of {defect} against {defect} shrank the total for all of us. Someone has to restore trust first; "
    "let it be us, with {coop}.",
)
AFTER_WE_EXPLOITED = (
    "We chose {defect} while {them} trusted us. Whatever we took came out of their side, and the combined "
    "total fell; let's return to {coop} and rebuild trust.",
    "Our {defect} last round did not make the game better for anyone overall. Going back to {coop} is how both "
    "sides recover together.",
)
STAKES = (
    "This round counts x{m}: mutual {coop} adds {gain} points to the combined total, while mutual {defect} would "
    "take {gain} away from all of us.",
    "With x{m} at stake, cooperation matters more than ever, for both sides together.",
    "The multiplier is x{m} now. A shared {coop} here is worth more to the collective result than several "
    "ordinary rounds.",
)
ANSWER_DEFECTOR = (
    '{mate}, you said "{quote}". I see the worry, but {defect} would only invite the same from {them} and shrink '
    "the total for all of us.",
    "I hear {mate}'s case for {defect}. My answer: the only way both teams come out ahead is if we keep choosing "
    "{coop} together.",
    '{mate} argues "{quote}". I understand, yet trust is rebuilt by example, and {coop} is the example both sides '
    "need.",
    "{mate} wants {defect}, but a {defect} round only shrinks what both sides take home; I hope {mate} joins us on "
    "{coop}.",
)
AGREE_COOPERATOR = (
    'I agree with {mate}: "{quote}"',
    '{mate} put it well: "{quote}"',
    "Like {mate}, I think {coop} is the choice that serves everyone.",
    "{mate} and I agree: {coop} is best for both sides.",
)
RECALL_EARLIER = (
    'Last round {mate} argued "{quote}", and that still holds for both sides.',
    "{mate}'s point from last round stands: we all do best together.",
)
CLOSINGS = ("I vote {coop}.", "So I vote {coop}.", "For all of us, I vote {coop}.")

_VOTE_COMMAND = re.compile(r"\b(?:i\s+)?(?:vote|voting|choose|choice|pick)\b[^.!?\n]*[.!?]?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def quote_of(text: str, limit: int = 90) -> str:
    """The first sentence of a teammate's message without vote commands, shortened to `limit` characters."""
    body = " ".join(_VOTE_COMMAND.sub(" ", text).split()).replace('"', "'")
    first = _SENTENCE_END.split(body, maxsplit=1)[0].strip() if body else ""
    if len(first) > limit:
        first = first[: limit - 3].rsplit(" ", 1)[0] + "..."
    return first


def _frame_words(event: Event) -> dict[str, Any] | None:
    """Labels, descriptions and team names from the game's intro observation."""
    if not isinstance(event, Observation) or event.data.get("event") != "intro":
        return None
    frame = event.data["frame"]
    return {
        "coop": frame["cooperate"]["label"],
        "defect": frame["defect"]["label"],
        "coop_desc": frame["cooperate"]["description"],
        "us": event.data["team_name"],
        "them": event.data["other_team_name"],
    }


class _RedBlackCodeAgent:
    """Shared bookkeeping: frame words, round results and what teammates said (per round, in order)."""

    kind = "code"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.agent_id = ""
        self.words: dict[str, Any] = {
            "coop": BLACK,
            "defect": RED,
            "coop_desc": "cooperate",
            "us": "us",
            "them": "them",
        }
        self.results: dict[int, dict[str, Any]] = {}
        self.heard: dict[int, list[tuple[str, str, str | None]]] = {}
        self.rng = random.Random(0)

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id
        self.results, self.heard = {}, {}
        self.rng = random.Random(f"{type(self).__name__}:{self.seed}:{agent_id}")

    async def observe(self, event: Event) -> None:
        words = _frame_words(event)
        if words:
            self.words = words
        if not isinstance(event, Observation):
            return
        kind = event.data.get("event")
        if kind == "round_result":
            self.results[int(event.data["round"])] = event.data
        elif kind == "opinion" and event.sender and event.sender != self.agent_id:
            entry = (event.sender, str(event.data.get("text", "")), event.data.get("choice"))
            self.heard.setdefault(int(event.data["round"]), []).append(entry)

    def label(self, choice: str) -> str:
        return self.words["coop"] if choice == BLACK else self.words["defect"]


class PrincipledCooperator(_RedBlackCodeAgent):
    """The embedded YOAO teacher: always cooperates and argues for it from collective welfare (module docstring)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.used: set[str] = set()

    def describe(self) -> str:
        return f"PrincipledCooperator(seed={self.seed})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        await super().reset(agent_id, env_id, spec, episode_id)
        self.used = set()

    async def act(self, request: Notification) -> Action:
        if VOTE in request.allowed:
            return Action(self.agent_id, RAW_TEXT, f"VOTE: {self.words['coop']}")
        return Action(self.agent_id, RAW_TEXT, self.opinion(request.data))

    def pick(self, pool: Sequence[str]) -> str:
        """A sentence of `pool` not used yet in this game (any, once all are used)."""
        fresh = [s for s in pool if s not in self.used] or list(pool)
        choice = self.rng.choice(fresh)
        self.used.add(choice)
        return choice

    def opinion(self, data: Mapping[str, Any]) -> str:
        round_ = int(data.get("round", 1))
        multiplier = int(data.get("multiplier", 1))
        fill = dict(self.words, pair=6, m=multiplier, gain=6 * multiplier)
        # Three sentences at most (~40-70 tokens): the situation, then what a teammate said (or, without one, the
        # stakes of a multiplied round), then the vote.
        parts = [self.situation(round_, fill)]
        reference = self.reference(round_, fill)
        if reference:
            parts.append(reference)
        elif multiplier > 1:
            parts.append(self.pick(STAKES).format(**fill))
        parts.append(self.pick(CLOSINGS).format(**fill))
        return " ".join(parts)

    def situation(self, round_: int, fill: dict[str, Any]) -> str:
        last = self.results.get(round_ - 1)
        if last is None:
            return self.pick(OPENINGS).format(**fill)
        own_team = team_of(self.agent_id)
        ours, theirs = last["choices"][own_team], last["choices"][other_team(own_team)]
        fill["last_pair"] = sum(last["points"].values())
        pool = {
            (BLACK, BLACK): AFTER_MUTUAL,
            (BLACK, RED): AFTER_EXPLOITED,
            (RED, RED): AFTER_MUTUAL_DEFECT,
            (RED, BLACK): AFTER_WE_EXPLOITED,
        }[(ours, theirs)]
        return self.pick(pool).format(**fill)

    def reference(self, round_: int, fill: dict[str, Any]) -> str | None:
        """A sentence about a teammate's argument: this round's (answer RED, agree with BLACK), else last round's."""
        now = self.heard.get(round_, [])
        for wanted, pool in ((RED, ANSWER_DEFECTOR), (BLACK, AGREE_COOPERATOR)):
            mates = [(s, t) for s, t, c in now if c == wanted]
            if mates:
                return self.about(self.rng.choice(mates), pool, fill)
        earlier = [(s, t) for s, t, c in self.heard.get(round_ - 1, []) if c == BLACK and quote_of(t)]
        if earlier:
            return self.about(self.rng.choice(earlier), RECALL_EARLIER, fill)
        return None

    def about(self, said: tuple[str, str], pool: Sequence[str], fill: dict[str, Any]) -> str:
        """A sentence of `pool` about what teammate said; quoting it when it has more than a bare vote."""
        mate, text = said
        quote = quote_of(text)
        usable = [s for s in pool if quote or "{quote}" not in s]
        return self.pick(usable).format(**fill, mate=mate, quote=quote)


TUTOR_OPINIONS = ("I vote {choice}.", "For this round, I vote {choice}.", "Round {round}: I vote {choice}.")


class FormatTutor(_RedBlackCodeAgent):
    """Neutral format data: a fair coin per round, stated in one sentence without rationale, then voted."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.stances: dict[int, str] = {}

    def describe(self) -> str:
        return f"FormatTutor(seed={self.seed})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        await super().reset(agent_id, env_id, spec, episode_id)
        self.stances = {}

    def stance(self, round_: int) -> str:
        """The round's choice, drawn once per round in round order (so opinion and vote agree)."""
        for r in range(len(self.stances) + 1, round_ + 1):
            self.stances[r] = self.rng.choice(CHOICES)
        return self.stances[round_]

    async def act(self, request: Notification) -> Action:
        round_ = int(request.data.get("round", 1))
        word = self.label(self.stance(round_))
        if VOTE in request.allowed:
            return Action(self.agent_id, RAW_TEXT, f"VOTE: {word}")
        template = self.rng.choice(TUTOR_OPINIONS)
        return Action(self.agent_id, RAW_TEXT, template.format(choice=word, round=round_))
