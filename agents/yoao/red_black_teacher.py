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

`FormatTutor` writes the untrained teammates' format warm-up data: the answer format, and votes that depend
on what the tutor heard. Each tutor seat has a *kind* and a *prior* (its probability of BLACK when nothing it
heard decides). The default kind of the warm-up is `persuadable`: a teammate that leans selfish
(prior drawn per seat from `PERSUADABLE_PRIORS`, mean 0.3, so that such teammates among themselves cooperate
near the paper's untrained 24.8%) and is moved by the grounded reasons it hears, weighed against that prior,
and little by a bare vote or by length (agents/yoao/persuasion.py). The four vote-following kinds
(`VOTE_FOLLOWING_TUTORS`, priors from `TUTOR_PRIORS`, mean 1/2) follow stated votes or argument length and stay
available:

| kind | what it states in the discussion | what it votes |
| --- | --- | --- |
| `persuadable` | the choice `Persuasion.decide` gives from its prior and the statements heard so far (this round's; earlier rounds' only with `Persuasion.memory` > 0), with its draw for the round | the same rule over the whole round's discussion, with the same draw |
| `majority` | the strict majority of the choices its teammates stated before it this round, else its prior | the strict majority of every choice stated this round (its own included), else its own statement |
| `last_speaker` | the choice of the last teammate who stated one before it this round, else its prior | the last choice a teammate stated this round, else its own statement |
| `strongest_argument` | the choice of the teammate with the strongest argument so far (`argument_words`: words outside the sentences that state a vote; a bare "I vote X." weighs 0; ties between choices or no argument: its prior) | the same rule over the whole round (its own statement included), else its own statement |
| `prior` | a draw from its prior every round, whatever it heard | its own statement |

With `reason_rate` > 0 a statement carries, with that probability, reasons: a `persuadable` tutor gives one or
two grounded reasons for the choice it states (`REASON_SENTENCES` of persuasion.py, a `history` reason only
when it is true), and with `filler_rate` one or two long sentences that give no reason (`FILLER_SENTENCES`),
otherwise a bare vote; the vote-following kinds give one short reason from pools of equal size for either choice
(`TUTOR_REASONS`: no welfare, trust, points or retaliation words, so the seed-data filter reads them as
`no_rationale` or `defects`). `mirror` (vote-following kinds only) swaps the colour of every prior draw (the
generator's draws are the same), so a game and its mirror have exactly opposite votes: warm-up data built
from game pairs is balanced between colours by construction. A `persuadable` tutor cannot be mirrored: its
reasons are not symmetric (the group's welfare argues for BLACK only). The default tutor (`prior`, prior 1/2,
no reasons) is a fair coin per round.

`ScriptedSeed` is the incentive audit's seed that differs from the principled cooperator in one behaviour: it
states and votes a fixed choice with every grounded reason it can truthfully give for it (`reasons`) or with
long text that gives none (`filler`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agents.yoao.persuasion import (
    FILLER_SENTENCES,
    REASON_KINDS,
    REASON_SENTENCES,
    Heard,
    Persuasion,
    Reading,
    available_reasons,
    read_argument,
)
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
PERSUADABLE = "persuadable"
VOTE_FOLLOWING_TUTORS = ("majority", "last_speaker", "strongest_argument", "prior")
"""The vote-following tutor mix: votes follow stated votes, argument length, or a prior of mean 1/2."""
TUTOR_KINDS = (*VOTE_FOLLOWING_TUTORS, PERSUADABLE)
"""The format tutors' kinds (module docstring); the warm-up data cycles through its mix in equal shares."""
DEFAULT_TUTORS = (PERSUADABLE,)
"""The warm-up's default mix: teammates who lean selfish and weigh arguments."""
TUTOR_PRIORS = (0.2, 0.5, 0.8)
"""A vote-following tutor's probability of BLACK when nothing it heard decides, drawn per seat (mean 1/2)."""
PERSUADABLE_PRIORS = (0.15, 0.3, 0.45)
"""A persuadable tutor's probability of BLACK with nothing heard, drawn per seat (mean 0.3, spread so that
teammates differ in leaning): the mean of the grid 0.25, 0.3, ..., 0.5 whose tutors, discussing among
themselves in the cpu profile's warm-up games on the training frames, cooperate closest to the paper's
untrained 24.8% (models/yoao/paper_claims.py; `prior_calibration` of models/yoao/incentives.py, docs/yoao.md)."""
TUTOR_REASONS: dict[str, tuple[str, ...]] = {
    BLACK: (
        "{them} has played fair with us so far.",
        "I do not think {them} will try to trick us.",
        "Going with {coop} keeps things calm.",
        "I think {coop} is the safer call here.",
        "Let's give {them} the benefit of the doubt.",
    ),
    RED: (
        "{them} may try to trick us this round.",
        "I am not sure {them} will play fair with us.",
        "Going with {defect} protects us here.",
        "I think {defect} is the safer call here.",
        "Let's not give {them} an easy opening now.",
    ),
}
"""Short reasons a tutor may give: as many for either choice, the same number of words at each position (a
mirrored tutor's draw picks the same position, and `argument_words` weighs both alike)."""
_SENTENCES = re.compile(r"[^.!?\n]+[.!?]*")


def argument_words(text: str) -> int:
    """The weight of an opinion's argument: words in its sentences that do not state a vote ("I vote X",
    "VOTE: X", "let's choose X"); a bare "I vote BLACK." weighs 0."""
    return sum(len(s.split()) for s in _SENTENCES.findall(text) if not _VOTE_COMMAND.search(s))


def stated_majority(choices: Sequence[str]) -> str | None:
    """The strict majority of stated choices (None on a tie or without any)."""
    black, red = choices.count(BLACK), choices.count(RED)
    return None if black == red else (BLACK if black > red else RED)


def strongest_argument(heard: Sequence[tuple[str, str]]) -> str | None:
    """The choice of the (text, choice) statement with the most `argument_words`; None when no statement has
    an argument or the strongest ones state different choices."""
    weights = [(argument_words(text), choice) for text, choice in heard]
    best = max((w for w, _ in weights), default=0)
    if best == 0:
        return None
    chosen = {c for w, c in weights if w == best}
    return chosen.pop() if len(chosen) == 1 else None


class FormatTutor(_RedBlackCodeAgent):
    """Format warm-up data whose votes depend on what the tutor heard (module docstring)."""

    def __init__(
        self,
        seed: int = 0,
        kind: str = "prior",
        prior: float = 0.5,
        reason_rate: float = 0.0,
        mirror: bool = False,
        filler_rate: float = 0.0,
        persuasion: Persuasion | None = None,
    ) -> None:
        if kind not in TUTOR_KINDS:
            raise ValueError(f"unknown tutor kind {kind!r}; known: {', '.join(TUTOR_KINDS)}")
        if not all(0.0 <= x <= 1.0 for x in (prior, reason_rate, filler_rate)) or reason_rate + filler_rate > 1.0:
            raise ValueError(
                f"prior, reason_rate and filler_rate must lie in [0, 1] (reason_rate + filler_rate <= 1), got "
                f"{prior}, {reason_rate}, {filler_rate}"
            )
        if mirror and kind == PERSUADABLE:
            raise ValueError("a persuadable tutor cannot be mirrored: its reasons are not symmetric between colours")
        if filler_rate and kind != PERSUADABLE:
            raise ValueError(f"filler_rate is for the {PERSUADABLE} tutor only, got kind {kind!r}")
        super().__init__(seed)
        self.kind, self.prior, self.reason_rate, self.mirror = kind, prior, reason_rate, mirror
        self.filler_rate = filler_rate
        self.persuasion = persuasion or Persuasion()
        self.uniforms: dict[int, float] = {}
        self.stated: dict[int, tuple[str, str]] = {}
        self.readings: dict[tuple[int, int], Reading] = {}

    def describe(self) -> str:
        filler = f", filler={self.filler_rate:g}" if self.kind == PERSUADABLE else ""
        return (
            f"FormatTutor(kind={self.kind}, prior={self.prior:g}, reasons={self.reason_rate:g}{filler}, "
            f"mirror={self.mirror}, seed={self.seed})"
        )

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        await super().reset(agent_id, env_id, spec, episode_id)
        self.uniforms, self.stated, self.readings = {}, {}, {}

    def uniform(self, round_: int) -> float:
        """The round's uniform draw in [0, 1), made once per round in round order."""
        for r in range(len(self.uniforms) + 1, round_ + 1):
            self.uniforms[r] = self.rng.random()
        return self.uniforms[round_]

    def own_draw(self, round_: int) -> str:
        """The round's draw from the prior (colour swapped when mirrored)."""
        choice = BLACK if self.uniform(round_) < self.prior else RED
        return (RED if choice == BLACK else BLACK) if self.mirror else choice

    def heard_in(self, round_: int) -> list[tuple[str, str]]:
        """(text, choice) of the teammates' statements of a round that stated a choice, in the order heard."""
        return [(t, c) for _, t, c in self.heard.get(round_, []) if c in CHOICES]

    def heard_until(self, round_: int) -> list[Heard]:
        """Every statement with a choice heard up to now, read (`read_argument`) and aged from `round_`."""
        out = []
        labels = (self.words["coop"], self.words["defect"])
        for r in range(1, round_ + 1):
            for i, (_, text, choice) in enumerate(self.heard.get(r, [])):
                if choice not in CHOICES:
                    continue
                reading = self.readings.get((r, i))
                if reading is None:
                    reading = self.readings[r, i] = read_argument(text, ignore=labels, has_history=r > 1)
                out.append(Heard(choice=choice, reading=reading, age=round_ - r))
        return out

    def persuaded(self, round_: int) -> str:
        """A persuadable tutor's choice now: its prior against everything heard, with the round's draw."""
        return self.persuasion.decide(self.prior, self.heard_until(round_), self.uniform(round_))

    def lean(self, round_: int) -> str:
        """What this tutor states: its kind's rule on what it heard so far this round, else its prior."""
        if self.kind == PERSUADABLE:
            return self.persuaded(round_)
        heard = self.heard_in(round_)
        own = self.own_draw(round_)
        if self.kind == "majority":
            return stated_majority([c for _, c in heard]) or own
        if self.kind == "last_speaker":
            return heard[-1][1] if heard else own
        if self.kind == "strongest_argument":
            return strongest_argument(heard) or own
        return own

    def vote(self, round_: int) -> str:
        """Its kind's rule over the whole round's discussion (its own statement included, except for the
        persuadable tutor, who is not persuaded by itself), else its statement."""
        if self.kind == PERSUADABLE:
            return self.persuaded(round_)
        own_text, own = self.stated.get(round_) or ("", self.own_draw(round_))
        heard = self.heard_in(round_)
        if self.kind == "majority":
            return stated_majority([*(c for _, c in heard), own]) or own
        if self.kind == "last_speaker":
            return heard[-1][1] if heard else own
        if self.kind == "strongest_argument":
            return strongest_argument([*heard, (own_text, own)]) or own
        return own

    async def act(self, request: Notification) -> Action:
        round_ = int(request.data.get("round", 1))
        if VOTE in request.allowed:
            return Action(self.agent_id, RAW_TEXT, f"VOTE: {self.label(self.vote(round_))}")
        choice = self.lean(round_)
        if self.kind == PERSUADABLE:
            text = self.argued(round_, choice)
        else:
            # Every draw is made whatever the colours, so a mirrored tutor's generator stays in step with its twin.
            give_reason = self.rng.random() < self.reason_rate
            reason = TUTOR_REASONS[choice][self.rng.randrange(len(TUTOR_REASONS[BLACK]))]
            template = TUTOR_OPINIONS[self.rng.randrange(len(TUTOR_OPINIONS))]
            text = template.format(choice=self.label(choice), round=round_)
            if give_reason:
                text = f"{reason.format(**self.words)} {text}"
        self.stated[round_] = (text, choice)
        return Action(self.agent_id, RAW_TEXT, text)

    def argued(self, round_: int, choice: str) -> str:
        """A persuadable tutor's statement: one or two grounded reasons for `choice` (with `reason_rate`), one or
        two sentences without a reason (with `filler_rate`), or a bare vote. The same number of draws is made
        whatever is said, so the tutor's later rounds do not depend on its words (paired games stay paired)."""
        style, two = self.rng.random(), self.rng.random() < 0.5
        order = [self.rng.random() for _ in REASON_KINDS]
        variants = [self.rng.random() for _ in REASON_KINDS]
        fillers = self.rng.sample(range(len(FILLER_SENTENCES)), 2)
        template = TUTOR_OPINIONS[self.rng.randrange(len(TUTOR_OPINIONS))]
        sentences: list[str] = []
        if style < self.reason_rate:
            last = self.results.get(round_ - 1)
            other_last = last["choices"][other_team(team_of(self.agent_id))] if last else None
            ranked = sorted(available_reasons(choice, other_last), key=lambda k: order[REASON_KINDS.index(k)])
            for kind in ranked[: 2 if two else 1]:
                pool = REASON_SENTENCES[choice][kind]
                sentences.append(pool[int(variants[REASON_KINDS.index(kind)] * len(pool))])
        elif style < self.reason_rate + self.filler_rate:
            sentences = [FILLER_SENTENCES[i] for i in fillers[: 2 if two else 1]]
        fill = dict(self.words)
        parts = [x.format(**fill) for x in sentences]
        parts.append(template.format(choice=self.label(choice), round=round_))
        return " ".join(parts)


class ScriptedSeed(_RedBlackCodeAgent):
    """The incentive audit's scripted seed (module docstring): states and votes `choice` every round, with
    every grounded reason it can truthfully give for it (`speech="reasons"`, `REASON_SENTENCES`) or with three
    sentences that give none (`speech="filler"`, about as long as the principled cooperator's argument)."""

    SPEECHES = ("reasons", "filler")

    def __init__(self, seed: int = 0, *, choice: str = RED, speech: str = "reasons") -> None:
        if choice not in CHOICES or speech not in self.SPEECHES:
            raise ValueError(f"choice must be one of {CHOICES} and speech one of {self.SPEECHES}")
        super().__init__(seed)
        self.choice, self.speech = choice, speech

    def describe(self) -> str:
        return f"ScriptedSeed(choice={self.choice}, speech={self.speech}, seed={self.seed})"

    async def act(self, request: Notification) -> Action:
        if VOTE in request.allowed:
            return Action(self.agent_id, RAW_TEXT, f"VOTE: {self.label(self.choice)}")
        round_ = int(request.data.get("round", 1))
        start = self.rng.randrange(len(FILLER_SENTENCES))
        variant = self.rng.randrange(2)
        if self.speech == "filler":
            sentences = [FILLER_SENTENCES[(start + i) % len(FILLER_SENTENCES)] for i in range(3)]
        else:
            last = self.results.get(round_ - 1)
            other_last = last["choices"][other_team(team_of(self.agent_id))] if last else None
            sentences = [
                REASON_SENTENCES[self.choice][k][variant % len(REASON_SENTENCES[self.choice][k])]
                for k in available_reasons(self.choice, other_last)
            ]
        parts = [x.format(**self.words) for x in sentences]
        parts.append(f"I vote {self.label(self.choice)}.")
        return Action(self.agent_id, RAW_TEXT, " ".join(parts))
