"""The Theory-of-Mind study's skill scores (models/socialrl/tom.py runs the study): INFER and ANTICIPATE
parsed from each reply of a scaffolded arm and scored automatically from the environment's ground truth.

Skills are scored automatically from the environment's ground truth, per turn of the scaffolded arms,
on the replies the environment accepted (`TurnProbe` records each reply and whether it was refused):

INFER: the stated inference about the counterpart, parsed and scored per domain:

| domain | what is read from INFER | truth (the counterpart's private facts) | score |
| --- | --- | --- | --- |
| dnd-v0 | the item said to be valued most | the counterpart's per-item values | 1 if that item has the counterpart's highest value (ties: any), else 0 |
| casino-v0 | the item said to be valued most / top priority | the counterpart's High item | 1 / 0 |
| job-interview-v0 | the issue said to weigh most | the counterpart's largest issue weight | 1 / 0 |
| craigslist-v0 | the counterpart's bottom-line price | buyer counterpart: its private target. Seller counterpart: its private reservation (the scenario's, below which it never settles) | max(0, 1 - abs(error) / (0.25 x listing)) |
| marketplace-v0 | the counterpart's bottom-line price | the counterpart's reservation price | as Craigslist (scale: the listed price) |
| calendar-v0 | every time said to be free / available / preferred, or busy / unavailable | the counterpart's calendar | share of those claims that are right |

Parsing rules: items and issues are read from phrases such as "value books most", "water is their top
priority", "care most about salary", "top priority is firewood"; failing those, an INFER naming exactly one
item is read as that item. Prices: the first amount after a cue word (walk-away, reservation, bottom line,
limit, lowest, highest, minimum, maximum, budget, target, at most, at least, up to, around, accept, go),
else the first amount written with `$`; probabilities (`p=0.6`) and percentages are skipped. Calendar:
the INFER is split into clauses at `;`, `.` and new lines; times in a clause with a busy cue (busy,
unavailable, not free, conflict, booked, blocked, taken, doesn't work, can't) are busy claims, times in
a clause with a free cue (free, available, open, works, prefer, like, suits) free claims; times off the
slot grid are ignored. An INFER with nothing readable is unscored (its share is reported as coverage).

ANTICIPATE: the predicted next counterpart action, read as one class by the earliest matching phrase:
`reject` ("reject", "refuse", "won't accept", "turn it down"), `accept` ("accept", "agree", "take the
deal"), `end` ("the deal closes now", "ends without", "is booked now": the episode ends before the
counterpart moves again), `walk` ("walk away", "quit", "no deal", "withdraw", "decline"), `offer`
("counter", "offer", "propose", "suggest", "push for", "ask for", "$120"), `message` ("ask about",
"say", "talk", "message"). The truth is the class of the counterpart's next accepted action after the
reply (accept / accept_offer -> accept; offer / make_offer / propose -> offer; reject; quit / end /
no_deal / walk_away / decline -> walk; message / send_message -> message; DnD's select and no further
counterpart action -> end). Score 1 when the classes match, else 0.

Copying the scaffold: a part copies the instructions when at least `COPY_THRESHOLD` (0.6) of its words lie
in runs of `COPY_RUN` (3) or more consecutive words that also occur in the scaffold's instruction text
(`agents.llm_agent.TOM_INSTRUCTIONS`, all three lines: copying the ACT line into INFER counts too), words
lower-cased with punctuation dropped. "INFER: what the other side most likely wants and how far they may
move." scores 1.0; "Seller's walk-away ~$70: opened $100, now $94" scores 0. The instruction copy rate of a
part is copied / written over every probed reply that has the part (refused replies included: the rate
describes what the policy writes, not what the environment took).

Skill-outcome correlation: per episode of the scaffolded arms (`base_tom_prompt`, `sft_act_tom_prompt`, `sft_tom`,
pooled), the mean skill score over its scored turns against the episode's reward, Pearson r with a bootstrap
interval resampling scenarios (`models.evaluation.stats.correlation_estimate`).
"""

from __future__ import annotations

import logging
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.llm_agent import TOM_INSTRUCTIONS
from environments.core.base import ActionSpec, Scenario, TranscriptEntry
from environments.core.events import Action, Event, Notification, NotificationKind
from environments.core.runtime import Agent, EpisodeResult
from environments.socialrl.calendar_scheduling import CalendarScenario, parse_time

log = logging.getLogger("socialrl.tom")

# ================================================================================== INFER: parse + score
_ITEMS: dict[str, dict[str, str]] = {
    "dnd-v0": {"book": r"books?", "hat": r"hats?", "ball": r"(?:basket)?balls?"},
    "casino-v0": {"food": r"food", "water": r"water", "firewood": r"(?:fire[\s-]?)?wood"},
    "job-interview-v0": {
        "salary": r"salary|salaries|pay|wages?|compensation|hourly rate",
        "holidays": r"holidays?|days off|vacations?|time off",
        "position": r"position|role|job title",
        "workplace": r"workplace|location|office|city",
        "company": r"company|employer|firm",
    },
}
_MOST_VERB = r"(?:value|values|valuing|want|wants|need|needs|care|cares|caring|weigh|weighs|weight|prefer|prefers|like|likes|prioriti[sz]es?|focus(?:es)?)"
_TOP = r"(?:top|highest|main|first|biggest|most important|primary|key)"


def _item_regex(env_id: str) -> str:
    return "(?P<item>" + "|".join(f"(?:{p})" for p in _ITEMS[env_id].values()) + ")"


def _canonical_item(env_id: str, word: str) -> str | None:
    for item, pattern in _ITEMS[env_id].items():
        if re.fullmatch(pattern, word, flags=re.IGNORECASE):
            return item
    return None


def parse_top_item(env_id: str, text: str) -> str | None:
    """The item (or issue) an INFER says the counterpart values most (rules in the module docstring)."""
    item = _item_regex(env_id)
    rules = (
        rf"\b{_MOST_VERB}\b(?:\s+about)?\s+(?:the\s+)?{item}\b(?:\s+\w+){{0,2}}?\s+(?:the\s+)?most\b",
        rf"\b{item}\b\s+(?:is|are|seems?|seem to be|looks?|looks like|being)\s+(?:to be\s+)?(?:their|the|its)?\s*{_TOP}",
        rf"\b{_TOP}\s*(?:priority|concern|issue|item|need|interest)?\s*(?:is|are|:|=|seems to be|looks like)?\s*(?:probably|likely)?\s*(?:the\s+)?{item}\b",
        rf"\bmost\s+(?:about|on|for|in|of|is)?\s*(?:the\s+)?{item}\b",
        rf"\b(?:priority on|focus(?:ed)? on|mainly|mostly|really)\s+(?:wants?\s+|needs?\s+)?(?:the\s+)?{item}\b",
    )  # fmt: skip
    for rule in rules:
        match = re.search(rule, text, flags=re.IGNORECASE)
        if match:
            return _canonical_item(env_id, match.group("item"))
    named = {_canonical_item(env_id, m.group("item")) for m in re.finditer(rf"\b{item}\b", text, re.IGNORECASE)}
    named.discard(None)
    return named.pop() if len(named) == 1 else None


_AMOUNT = re.compile(r"(?P<dollar>\$)?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<k>k\b)?", re.IGNORECASE)
_PRICE_CUE = re.compile(
    r"walk[- ]?away|reservation|bottom[- ]?line|limit|lowest|highest|minimum|maximum|\bmin\b|\bmax\b|budget|target"
    r"|floor|ceiling|at most|at least|up to|around|about|accept|\bgo\b|\bpay\b|settle",
    re.IGNORECASE,
)


def _amounts(text: str) -> list[tuple[int, float, bool]]:
    """(position, value, written with $) of the amounts in a text, probabilities and percentages skipped."""
    found = []
    for m in _AMOUNT.finditer(text):
        before = text[max(0, m.start() - 3) : m.start()].lower().replace(" ", "")
        after = text[m.end() : m.end() + 1]
        if before.endswith(("p=", "p~", "p:")) or after == "%" or text[m.end() : m.end() + 2] == " %":
            continue
        value = float(m.group("num").replace(",", "")) * (1000 if m.group("k") else 1)
        found.append((m.start(), value, bool(m.group("dollar"))))
    return found


def parse_price(text: str) -> float | None:
    """The bottom-line price an INFER states (rules in the module docstring)."""
    amounts = _amounts(text)
    for cue in _PRICE_CUE.finditer(text):
        after = [a for a in amounts if 0 <= a[0] - cue.end() <= 60]
        if after:
            return after[0][1]
    dollars = [a for a in amounts if a[2]]
    return dollars[0][1] if dollars else None


_BUSY_CUE = re.compile(
    r"busy|unavailable|not available|not free|conflict|booked|blocked|taken|occupied|(?:doesn't|does not|won't|will not|can't|cannot|can not)\s+(?:work|do|make)",
    re.IGNORECASE,
)
_FREE_CUE = re.compile(r"free|available|open|works?\b|prefer|like|suits?|good for|fine", re.IGNORECASE)
_TIME_TOKEN = re.compile(r"\b(?:noon|\d{1,2}:\d{2}(?:\s*[ap]\.?\s?m\.?)?|\d{1,2}\s*[ap]\.?\s?m\.?)", re.IGNORECASE)


def parse_availability(text: str, slot_starts: Sequence[int]) -> dict[int, bool]:
    """Slot start -> claimed free (True) or busy (False), read clause by clause (module docstring)."""
    claims: dict[int, bool] = {}
    for clause in re.split(r"[;\n]|\.(?!\d)", text):
        busy, free = _BUSY_CUE.search(clause), _FREE_CUE.search(clause)
        if not busy and not free:
            continue
        for token in _TIME_TOKEN.findall(clause):
            start = parse_time(token.strip(), slot_starts)
            if start is not None and start in slot_starts:
                claims[start] = not busy
    return claims


@dataclass(frozen=True)
class CounterpartTruth:
    """What INFER is scored against: the counterpart seat's private facts (module table)."""

    env_id: str
    seat: str
    """The counterpart's seat."""
    top: frozenset[str] = frozenset()
    """Allocation and contract domains: the item(s) or issue(s) it values most."""
    bottom_line: float | None = None
    """Price domains: its bottom-line price."""
    price_scale: float | None = None
    """Price domains: the listing price errors are measured against."""
    free: Mapping[int, bool] | None = None
    """Calendar: slot start -> whether it is free in its calendar."""


def counterpart_truth(env_id: str, scenario: Scenario, seat: str, counterpart: str = "") -> CounterpartTruth:
    """The private facts of the counterpart in `seat` of `scenario` (`counterpart`: the code agent's name; every
    domain's truth is the scenario's own, so it is kept for the callers' records only)."""
    s: Any = scenario
    if env_id == "dnd-v0":
        values = dict(zip(("book", "hat", "ball"), s.alice_values if seat == "alice" else s.bob_values, strict=True))
        return CounterpartTruth(env_id, seat, top=frozenset(k for k, v in values.items() if v == max(values.values())))
    if env_id == "casino-v0":
        return CounterpartTruth(env_id, seat, top=frozenset({s.priorities(seat)[0]}))
    if env_id == "job-interview-v0":
        weights = dict(s.weights[seat])
        best = max(weights.values())
        return CounterpartTruth(env_id, seat, top=frozenset(k for k, w in weights.items() if abs(w - best) < 1e-12))
    if env_id == "marketplace-v0":
        line = s.buyer_reservation if seat == "buyer" else s.seller_reservation
        return CounterpartTruth(env_id, seat, bottom_line=float(line), price_scale=float(s.listed_price))
    if env_id == "craigslist-v0":
        # The buyer's line is its target; the seller's its reservation (below which no seller settles).
        line = float(s.buyer_target) if seat == "buyer" else float(s.reservation)
        return CounterpartTruth(env_id, seat, bottom_line=line, price_scale=float(s.listing_price))
    if env_id == "calendar-v0":
        assert isinstance(s, CalendarScenario)
        return CounterpartTruth(env_id, seat, free={start: s.is_free(seat, start) for start in s.slot_starts})
    raise KeyError(f"no ToM skill scorer for {env_id}")


def score_infer(env_id: str, text: str | None, truth: CounterpartTruth) -> float | None:
    """INFER score in [0, 1] (module table), or None when nothing in it can be read."""
    if not text:
        return None
    if env_id in _ITEMS:
        item = parse_top_item(env_id, text)
        return None if item is None else float(item in truth.top)
    if env_id in ("craigslist-v0", "marketplace-v0"):
        price = parse_price(text)
        if price is None or truth.bottom_line is None or not truth.price_scale:
            return None
        return max(0.0, 1.0 - abs(price - truth.bottom_line) / (0.25 * truth.price_scale))
    if env_id == "calendar-v0":
        assert truth.free is not None
        claims = parse_availability(text, tuple(truth.free))
        if not claims:
            return None
        return sum(truth.free[start] == free for start, free in claims.items()) / len(claims)
    raise KeyError(f"no ToM skill scorer for {env_id}")


# ============================================================================ copying the scaffold's text
COPY_RUN = 3
"""Shortest run of consecutive words shared with the instructions that counts as copied text."""
COPY_THRESHOLD = 0.6
"""A part whose share of copied words reaches this copies the instructions (module docstring)."""
_WORD = re.compile(r"[a-z0-9$][a-z0-9$'.,]*[a-z0-9]|[a-z0-9$]", re.IGNORECASE)


def _words(text: str) -> list[str]:
    return [w.lower().rstrip(".,") for w in _WORD.findall(text)]


def instruction_overlap(text: str | None, instructions: str = TOM_INSTRUCTIONS) -> float:
    """Share of `text`'s words inside a run of >= `COPY_RUN` consecutive words that also occurs in
    `instructions` (0 for an empty text)."""
    words, source = _words(text or ""), _words(instructions)
    grams = {tuple(source[k : k + COPY_RUN]) for k in range(len(source) - COPY_RUN + 1)}
    covered = [False] * len(words)
    for k in range(len(words) - COPY_RUN + 1):
        if tuple(words[k : k + COPY_RUN]) in grams:
            covered[k : k + COPY_RUN] = [True] * COPY_RUN
    return sum(covered) / len(words) if words else 0.0


def copies_instructions(text: str | None, instructions: str = TOM_INSTRUCTIONS) -> bool:
    """Whether a written part is the scaffold's instruction text rather than content (module docstring)."""
    return bool(text and text.strip()) and instruction_overlap(text, instructions) >= COPY_THRESHOLD


# =============================================================================== ANTICIPATE: parse + score
ACTION_CLASSES = ("accept", "reject", "offer", "walk", "message", "end")
_ANTICIPATE_PATTERNS: dict[str, str] = {
    "reject": r"\breject\w*|\brefus\w*|\bturn\w*\s+(?:it|this|that|us|me|our \w+)\s+down|\bsay no\b"
    r"|\b(?:won'?t|will not|wouldn'?t|not|unlikely to|never)\s+(?:\w+\s+)?(?:accept|agree|take)\b",
    "end": r"\b(?:closes|is booked|is agreed|booked|agreed|done) now\b|\bends? without\b|\bdeal stands\b"
    r"|\bsame split\b|\bselect\w*",
    "accept": r"\baccept\w*|\bagree\w*|\btake (?:it|the deal|this|that|the offer|our offer)\b|\bsay yes\b|\bbook (?:it|the)",
    "walk": r"\bwalk\w*\s+away|\bquit\w*|\bno deal\b|\bwithdraw\w*|\bgive up\b|\bdeclin\w*|\bleave\b|\bend (?:the|this)\b",
    "offer": r"\bcounter\w*|\boffer\w*|\bpropos\w*|\bsuggest\w*|\bpush\w*\s+(?:for|on)|\bask\w* for\b|\bcome back with"
    r"|\bbid\w*|\bhaggl\w*|\binsist\w*|\bhold (?:at|firm)|\$\s?\d",
    "message": r"\bask\w* (?:about|whether|if|a question|questions)|\bsay\w*\b|\btalk\w*|\bmessage\w*|\bexplain\w*",
}
_KIND_CLASS = {
    "accept": "accept", "accept_offer": "accept",
    "offer": "offer", "make_offer": "offer", "propose": "offer",
    "reject": "reject",
    "quit": "walk", "end": "walk", "no_deal": "walk", "walk_away": "walk", "decline": "walk",
    "message": "message", "send_message": "message",
    "select": "end",
}  # fmt: skip


def parse_anticipation(text: str | None) -> str | None:
    """The action class an ANTICIPATE predicts: the class whose phrase appears first (module docstring)."""
    if not text:
        return None
    best: tuple[int, str] | None = None
    for name, pattern in _ANTICIPATE_PATTERNS.items():
        match = re.search(pattern, text, flags=re.IGNORECASE)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), name)
    return best[1] if best else None


def action_class(kind: str | None) -> str:
    """The class of an accepted action kind; None (no further counterpart action) is `end`."""
    return "end" if kind is None else _KIND_CLASS.get(kind, "message")


def score_anticipate(text: str | None, next_kind: str | None) -> float | None:
    """1 when the predicted class is the class of the counterpart's next action, 0 when not, None unreadable."""
    predicted = parse_anticipation(text)
    return None if predicted is None else float(predicted == action_class(next_kind))


# ======================================================================================== turn probes
@dataclass
class ProbedReply:
    """One reply of the probed policy."""

    turn_index: int
    infer: str | None
    anticipate: str | None
    has_act: bool
    accepted: bool = True
    """False when the environment refused it (an INVALID_ACTION followed)."""


class TurnProbe:
    """Wraps a policy and records, per reply, its ToM parts and whether the environment accepted it, so that
    accepted replies line up with the seat's transcript entries. The parts come from an LLM agent's
    `tom_records` or the code teacher's `trace` (a reply that added no record has none)."""

    def __init__(self, inner: Agent) -> None:
        self.inner = inner
        self.replies: list[ProbedReply] = []
        self.episode_id = ""
        self._verdict_pending = False

    def describe(self) -> str:
        describe = getattr(self.inner, "describe", None)
        return describe() if callable(describe) else type(self.inner).__name__

    def _records(self) -> list[dict[str, Any]]:
        records = getattr(self.inner, "tom_records", None)
        return records if records is not None else getattr(self.inner, "trace", [])

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.replies, self.episode_id, self._verdict_pending = [], episode_id, False
        await self.inner.reset(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Event) -> None:
        if self._verdict_pending:
            self._verdict_pending = False
            if isinstance(event, Notification) and event.kind == NotificationKind.INVALID_ACTION:
                self.replies[-1].accepted = False
        await self.inner.observe(event)

    async def act(self, request: Notification) -> Action:
        before = len(self._records())
        action = await self.inner.act(request)
        records = self._records()
        record = records[-1] if len(records) > before else {}
        self.replies.append(
            ProbedReply(
                turn_index=int(getattr(self.inner, "turn_index", len(self.replies))),
                infer=record.get("infer"),
                anticipate=record.get("anticipate"),
                has_act=bool(record.get("act")),
            )
        )
        self._verdict_pending = True
        return action


@dataclass(frozen=True)
class EpisodeSkills:
    """Skill scores of one episode of a scaffolded arm (None: nothing scorable)."""

    infer: float | None
    """Mean INFER score over the accepted replies whose INFER could be read."""
    anticipate: float | None
    """Mean ANTICIPATE score over the accepted replies whose ANTICIPATE could be read."""
    replies: int
    """Accepted replies."""
    infer_scored: int
    anticipate_scored: int
    well_formed: int
    """Accepted replies with all three parts."""
    infer_written: int = 0
    """Probed replies (refused ones included) with an INFER part."""
    infer_copied: int = 0
    """Of those, the INFERs that copy the scaffold's instructions (`copies_instructions`)."""
    anticipate_written: int = 0
    anticipate_copied: int = 0


def next_counterpart_kinds(transcript: Sequence[TranscriptEntry], seat: str) -> list[str | None]:
    """For each of `seat`'s transcript entries, the kind of the next entry by another seat (None: none)."""
    out = []
    for k, entry in enumerate(transcript):
        if entry.agent_id == seat:
            nxt = next((e.kind for e in transcript[k + 1 :] if e.agent_id != seat), None)
            out.append(nxt)
    return out


def episode_skills(env_id: str, result: EpisodeResult, seat: str, counterpart: str, probe: TurnProbe) -> EpisodeSkills:
    """Score the probed replies of one episode against the environment's ground truth."""
    accepted = [r for r in probe.replies if r.accepted]
    other = next(s for s in result.outcome.roles if s != seat)
    truth = counterpart_truth(env_id, result.scenario, other, counterpart)
    infer = [s for r in accepted if (s := score_infer(env_id, r.infer, truth)) is not None]
    kinds = next_counterpart_kinds(result.transcript, seat)
    anticipate: list[float] = []
    if len(kinds) == len(accepted):
        anticipate = [
            s for r, k in zip(accepted, kinds, strict=True) if (s := score_anticipate(r.anticipate, k)) is not None
        ]
    else:  # should not happen: the probe's verdicts and the transcript disagree
        log.warning("%s: %d accepted replies but %d transcript entries; ANTICIPATE left unscored",
                    result.episode_id, len(accepted), len(kinds))  # fmt: skip
    return EpisodeSkills(
        infer=statistics.fmean(infer) if infer else None,
        anticipate=statistics.fmean(anticipate) if anticipate else None,
        replies=len(accepted),
        infer_scored=len(infer),
        anticipate_scored=len(anticipate),
        well_formed=sum(bool(r.infer and r.anticipate and r.has_act) for r in accepted),
        infer_written=sum(bool(r.infer) for r in probe.replies),
        infer_copied=sum(copies_instructions(r.infer) for r in probe.replies),
        anticipate_written=sum(bool(r.anticipate) for r in probe.replies),
        anticipate_copied=sum(copies_instructions(r.anticipate) for r in probe.replies),
    )
