"""The Theory-of-Mind study: does reasoning INFER -> ACT -> ANTICIPATE help, and which skill matters?

Per domain, four arms play the same held-out scenarios, in the same seat, against the same counterparts,
with the same seeds (one `EvaluationPlan`), so every comparison is paired:

| arm | model | prompt |
| --- | --- | --- |
| `base` | the base model | the LLM agent's plain prompt |
| `base_tom_prompt` | the base model | the ToM scaffold (INFER / ACT / ANTICIPATE; only ACT reaches the environment) |
| `sft_act` | LoRA SFT on the code teacher's traces, ACT text only (today's warm-start) | plain |
| `sft_tom` | LoRA SFT on the same traces with the teacher's INFER and ANTICIPATE kept (ToM distillation) | scaffold |

Both students train on the same episodes with the same settings (`Profile.tom.sft`); only the trace
format differs (models/socialrl/teachers.py `sft_traces`). Every arm gets the same reply budget
(`Profile.tom.max_new_tokens`).

Skills are scored automatically from the environment's ground truth, per turn of the scaffolded arms,
on the replies the environment accepted (`TurnProbe` records each reply and whether it was refused):

INFER: the stated inference about the counterpart, parsed and scored per domain:

| domain | what is read from INFER | truth (the counterpart's private facts) | score |
| --- | --- | --- | --- |
| dnd-v0 | the item said to be valued most | the counterpart's per-item values | 1 if that item has the counterpart's highest value (ties: any), else 0 |
| casino-v0 | the item said to be valued most / top priority | the counterpart's High item | 1 / 0 |
| job-interview-v0 | the issue said to weigh most | the counterpart's largest issue weight | 1 / 0 |
| craigslist-v0 | the counterpart's bottom-line price | buyer counterpart: its private target. Seller counterpart: the environment gives the seller no private price, so its bottom line as it plays: the lowest price of its deal space at its concession floor (code counterparts) | max(0, 1 - abs(error) / (0.25 x listing)) |
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

Skill-outcome correlation: per episode of the scaffolded arms (`base_tom_prompt`, `sft_tom`, pooled), the
mean skill score over its scored turns against the episode's reward, Pearson r with a bootstrap interval
resampling scenarios (`models.evaluation.stats.correlation_estimate`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.socialrl.code_agents import CODE_AGENTS
from agents.traces import Trace, filter_traces
from environments.core.base import ActionSpec, Scenario, TranscriptEntry
from environments.core.events import Action, Event, Notification, NotificationKind
from environments.core.runtime import Agent, EpisodeResult
from environments.socialrl.calendar_scheduling import CalendarScenario, parse_time
from models.evaluation.policy import EvaluationPlan, EvaluationResult, evaluate_policy_async, paired_difference
from models.evaluation.scenarios import held_out_scenarios
from models.evaluation.stats import Estimate, correlation_estimate, mean_estimate
from models.profiles import Profile
from models.socialrl import stage1
from models.socialrl.teachers import TeacherConfig, sft_traces, teacher_traces
from models.tracking import Tracker
from models.training.config import SFTResult

log = logging.getLogger("socialrl.tom")

ARMS: dict[str, tuple[str, bool]] = {
    "base": ("base", False),
    "base_tom_prompt": ("base", True),
    "sft_act": ("sft_act", False),
    "sft_tom": ("sft_tom", True),
}
"""Arm -> (which model: the base or a student, whether prompted with the scaffold)."""
SCAFFOLDED_ARMS = tuple(arm for arm, (_, tom) in ARMS.items() if tom)
STUDENT_FORMATS = {"sft_act": "act", "sft_tom": "tom"}
"""Student arm -> the SFT trace format it is trained on."""
SKILLS = ("infer", "anticipate")


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
    """The private facts of the counterpart in `seat` of `scenario` (`counterpart`: the code agent's name,
    used only for the Craigslist seller's bottom line)."""
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
        if seat == "buyer":
            line = float(s.buyer_target)
        else:  # no private price: the lowest price the code seller offers, at its concession floor
            config = CODE_AGENTS.get(counterpart, {}).get("config")
            floor = config.floor if config is not None else 0.0
            worst = round(s.listing_price * 0.5, 2)  # CraigslistEnv.deal_space(seller)
            line = worst + floor * (s.listing_price - worst)
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
    )


# ========================================================================================= the study
def study_plan(env_id: str, profile: Profile, seed: int = 0) -> EvaluationPlan:
    """The one plan every arm of a domain plays (held-out scenarios, the specialist's seat, the counterparts)."""
    return EvaluationPlan(
        env_id,
        tuple(held_out_scenarios(env_id, profile.tom.heldout_scenarios, seed)),
        seat=stage1.specialist_seat(env_id, profile),
        counterparts=profile.eval_counterparts,
        seed=seed,
        concurrency=16,
    )


@dataclass(frozen=True, eq=False)
class ArmRun:
    """One arm's evaluation and the skill scores of its episodes (None for unscaffolded arms)."""

    arm: str
    model: str
    tom: bool
    result: EvaluationResult
    skills: tuple[EpisodeSkills | None, ...]
    """Aligned with `result.policy_episodes`."""


def llm_arm_agent(
    profile: Profile, base_url: str, arm: str, model: str, api_key: str | None = None
) -> Callable[[int], Agent]:
    """The LLM agent of an arm: the served `model`, plain or scaffolded as the arm says."""
    tom = ARMS[arm][1]

    def make_agent(policy_seed: int) -> Agent:
        return LLMAgent(
            LLMAgentConfig(
                base_url=base_url,
                model=model,
                api_key_env=None,
                api_key=api_key,
                temperature=0.7,
                max_tokens=profile.tom.max_new_tokens,
                seed=policy_seed,
                fail_on_request_error=False,
                tom=tom,
                name=f"{arm}({model})",
            )
        )

    return make_agent


async def play_arm_async(
    env_id: str, profile: Profile, arm: str, model: str, tom: bool, make_agent: Callable[[int], Agent], seed: int = 0
) -> ArmRun:
    """`play_arm` inside a running event loop."""
    probes: list[TurnProbe] = []

    def make_policy(policy_seed: int) -> Agent:
        probe = TurnProbe(make_agent(policy_seed))
        probes.append(probe)
        return probe

    plan = dataclasses.replace(study_plan(env_id, profile, seed), episode_prefix=f"tom:{arm}:{env_id}:{seed}")
    # The arms play at once for minutes on CPU: one line per ended episode is their progress.
    result = await evaluate_policy_async(plan, make_policy, progress=log)
    by_episode = {p.episode_id: p for p in probes}
    skills = tuple(
        episode_skills(env_id, episode, view.seat, view.counterpart, by_episode[episode.episode_id]) if tom else None
        for episode, view in zip(result.episodes, result.policy_episodes, strict=True)
    )
    log.info("%s %s: mean reward %.3f over %d episodes", env_id, arm, result.summary.mean_reward, result.summary.n)
    return ArmRun(arm, model, tom, result, skills)


def play_arm(
    env_id: str, profile: Profile, arm: str, model: str, tom: bool, make_agent: Callable[[int], Agent], seed: int = 0
) -> ArmRun:
    """Any policy (`make_agent(seed)`) as one arm on the study plan; skills scored when `tom`."""
    return asyncio.run(play_arm_async(env_id, profile, arm, model, tom, make_agent, seed))


@dataclass(frozen=True)
class SkillSummary:
    """One scaffolded arm's skills."""

    infer: Estimate
    """Mean per-episode INFER score (episodes with a scored INFER), bootstrap CI by scenario."""
    anticipate: Estimate
    """Mean per-episode ANTICIPATE score."""
    well_formed_rate: float
    """Share of accepted replies with INFER, ACT and ANTICIPATE."""
    infer_coverage: float
    """Share of accepted replies whose INFER could be scored."""
    anticipate_coverage: float
    """Share of accepted replies whose ANTICIPATE could be scored."""


@dataclass(frozen=True)
class ToMDomainResult:
    """The study's numbers for one domain."""

    env_id: str
    seat: str
    episodes: int
    """Episodes per arm (held-out scenarios x counterparts)."""
    arms: dict[str, Estimate]
    """Arm -> mean reward with its bootstrap CI (clipped to [0, 1])."""
    agreement: dict[str, float]
    invalid_action_rate: dict[str, float]
    differences: dict[str, Estimate]
    """Paired reward differences ("sft_tom - sft_act", "base_tom_prompt - base", ...), scenario-clustered CIs."""
    skills: dict[str, SkillSummary]
    """Scaffolded arm -> its skill scores."""
    correlation: dict[str, Estimate]
    """Skill -> Pearson r of the per-episode skill with the reward (scaffolded arms pooled)."""
    correlation_by_arm: dict[str, dict[str, Estimate]]
    """Scaffolded arm -> skill -> r within that arm alone."""

    def result_file_entry(self) -> dict[str, Any]:
        """This domain's entry of benchmarks/results/tom_<profile>.json (the keys the checks read)."""
        entry: dict[str, Any] = {arm: self.arms[arm].as_dict() for arm in ARMS}
        entry["skill_outcome_correlation"] = {skill: correlation_dict(self.correlation[skill]) for skill in SKILLS}
        return entry

    def details(self) -> dict[str, Any]:
        """Everything else (paired differences, skill scores, rates), JSON-safe."""
        return {
            "seat": self.seat,
            "episodes_per_arm": self.episodes,
            "agreement": self.agreement,
            "invalid_action_rate": self.invalid_action_rate,
            "paired_differences": {k: v.as_dict() for k, v in self.differences.items()},
            "skills": {
                arm: {
                    "infer": s.infer.as_dict(),
                    "anticipate": s.anticipate.as_dict(),
                    "well_formed_rate": _finite(s.well_formed_rate),
                    "infer_coverage": _finite(s.infer_coverage),
                    "anticipate_coverage": _finite(s.anticipate_coverage),
                }
                for arm, s in self.skills.items()
            },
            "correlation_by_arm": {
                arm: {skill: correlation_dict(e) for skill, e in by.items()}
                for arm, by in self.correlation_by_arm.items()
            },
        }


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def correlation_dict(estimate: Estimate) -> dict[str, Any]:
    """{r, ci_low, ci_high, n} of a correlation estimate (JSON-safe)."""
    values = estimate.as_dict()
    return {"r": values["mean"], "ci_low": values["ci_low"], "ci_high": values["ci_high"], "n": values["n"]}


DIFFERENCES = (
    ("base_tom_prompt", "base"),
    ("sft_act", "base"),
    ("sft_tom", "base"),
    ("sft_tom", "sft_act"),
)
"""The paired comparisons reported: the scaffold prompt alone, each student, ToM distillation vs standard SFT."""


def skill_correlation(runs: Sequence[ArmRun], skill: str, seed: int = 0) -> Estimate:
    """Pearson r of a per-episode skill with the episode reward over `runs` (episodes with that skill scored),
    with a bootstrap interval resampling scenarios."""
    xs, ys, clusters = [], [], []
    for run in runs:
        for view, skills in zip(run.result.policy_episodes, run.skills, strict=True):
            value = getattr(skills, skill) if skills is not None else None
            if value is not None:
                xs.append(value)
                ys.append(view.reward)
                clusters.append(view.scenario_index)
    return correlation_estimate(xs, ys, clusters, seed=seed)


def analyse(env_id: str, runs: Mapping[str, ArmRun], seed: int = 0) -> ToMDomainResult:
    """Arm means, paired differences, skill scores and skill-outcome correlations of one domain."""
    missing = set(ARMS) - set(runs)
    if missing:
        raise ValueError(f"{env_id}: arms missing from the study: {sorted(missing)}")
    skills: dict[str, SkillSummary] = {}
    for arm in SCAFFOLDED_ARMS:
        run = runs[arm]
        scored = [(v, s) for v, s in zip(run.result.policy_episodes, run.skills, strict=True) if s is not None]
        replies = sum(s.replies for _, s in scored)

        def estimate(skill: str, scored=scored) -> Estimate:
            pairs = [(getattr(s, skill), v.scenario_index) for v, s in scored if getattr(s, skill) is not None]
            return mean_estimate([p[0] for p in pairs], [p[1] for p in pairs], (0.0, 1.0), seed=seed)

        skills[arm] = SkillSummary(
            infer=estimate("infer"),
            anticipate=estimate("anticipate"),
            well_formed_rate=sum(s.well_formed for _, s in scored) / replies if replies else math.nan,
            infer_coverage=sum(s.infer_scored for _, s in scored) / replies if replies else math.nan,
            anticipate_coverage=sum(s.anticipate_scored for _, s in scored) / replies if replies else math.nan,
        )
    scaffolded = [runs[arm] for arm in SCAFFOLDED_ARMS]
    any_run = runs["base"]
    return ToMDomainResult(
        env_id=env_id,
        seat=any_run.result.seat,
        episodes=any_run.result.summary.n,
        arms={arm: runs[arm].result.summary.reward for arm in ARMS},
        agreement={arm: runs[arm].result.summary.agreement_rate for arm in ARMS},
        invalid_action_rate={arm: _finite(runs[arm].result.summary.invalid_action_rate) for arm in ARMS},
        differences={
            f"{a} - {b}": paired_difference(runs[a].result, runs[b].result, seed=seed) for a, b in DIFFERENCES
        },
        skills=skills,
        correlation={skill: skill_correlation(scaffolded, skill, seed) for skill in SKILLS},
        correlation_by_arm={
            arm: {skill: skill_correlation([runs[arm]], skill, seed) for skill in SKILLS} for arm in SCAFFOLDED_ARMS
        },
    )


# ========================================================================================== students
@dataclass(frozen=True)
class Student:
    """One trained student of the study."""

    arm: str
    """`sft_act` or `sft_tom`."""
    trace_format: str
    """`act` or `tom`."""
    adapter_dir: str
    train_loss: float
    eval_loss_before: float | None
    eval_loss_after: float | None
    examples: int
    steps: int
    wall_seconds: float
    mlflow_run_id: str | None = None


def train_students(
    env_id: str,
    traces: Sequence[Trace],
    profile: Profile,
    base_model_dir: Path,
    output: Path,
    tracker: Tracker | None = None,
    sft: Callable[..., SFTResult] | None = None,
) -> dict[str, Student]:
    """The two students: LoRA SFT on the same filtered traces, ACT-only and full scaffold (`Profile.tom.sft`,
    default the warm-start's settings).
    The first `sft_eval_conversations` kept traces are held out to measure the SFT loss."""
    if sft is None:
        from models.training.sft import run_sft as sft  # loads torch: only when training runs
    kept = filter_traces(traces, profile.trace_min_reward)
    cut = min(profile.tom.sft_eval_conversations, max(0, len(kept) - 1))
    if len(kept) - cut < 1:
        raise ValueError(f"{env_id}: no usable traces for the ToM students (min reward {profile.trace_min_reward})")
    held_out, train = kept[:cut], kept[cut:]
    settings = profile.tom.sft or profile.sft
    students: dict[str, Student] = {}
    for arm, fmt in STUDENT_FORMATS.items():
        train_chats = [t.messages for t in sft_traces(train, fmt)]
        eval_chats = [t.messages for t in sft_traces(held_out, fmt)]
        out = output / arm
        params = {"sft": asdict(settings), "profile": profile.name, "env_id": env_id, "trace_format": fmt}
        if tracker is None:
            result, run_id = sft(base_model_dir, train_chats, out, settings, eval_chats), None
        else:
            with tracker.start_run(f"tom-{arm}-{env_id}", params=params) as run:
                result = sft(base_model_dir, train_chats, out, settings, eval_chats)
                run.log_metrics(
                    result.steps,
                    train_loss=result.train_loss,
                    examples=result.examples,
                    wall_seconds=result.wall_seconds,
                )
                run.log_artifact_dir(result.adapter_dir, "adapter")
                run_id = run.run_id
        log.info("%s %s: %d examples, %d steps, loss %.3f, %.0f s", env_id, arm, result.examples, result.steps,
                 result.train_loss, result.wall_seconds)  # fmt: skip
        students[arm] = Student(
            arm, fmt, str(result.adapter_dir), result.train_loss, result.eval_loss_before, result.eval_loss_after,
            result.examples, result.steps, result.wall_seconds, run_id,
        )  # fmt: skip
    return students


def run_arms(
    env_id: str,
    profile: Profile,
    base_url: str,
    models: Mapping[str, str],
    seed: int = 0,
    api_key: str | None = None,
) -> dict[str, ArmRun]:
    """All four arms, played at once (their calls batch in the engine); `models` maps "base", "sft_act" and
    "sft_tom" to served model names; `api_key` is the token of the server at `base_url`."""

    async def play() -> list[ArmRun]:
        return await asyncio.gather(
            *(
                play_arm_async(
                    env_id,
                    profile,
                    arm,
                    models[which],
                    tom,
                    llm_arm_agent(profile, base_url, arm, models[which], api_key),
                    seed,
                )
                for arm, (which, tom) in ARMS.items()
            )
        )

    return {run.arm: run for run in asyncio.run(play())}


def result_file(results: Sequence[ToMDomainResult]) -> dict[str, Any]:
    """benchmarks/results/tom_<profile>.json: per domain the four arms and the skill-outcome correlations."""
    return {r.env_id: r.result_file_entry() for r in results}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def skill_rows(runs: Mapping[str, ArmRun]) -> list[dict[str, Any]]:
    """One row per scaffolded episode: arm, scenario, counterpart, reward and skill scores (for tables and plots)."""
    rows = []
    for arm, run in runs.items():
        for view, skills in zip(run.result.policy_episodes, run.skills, strict=True):
            if skills is None:
                continue
            rows.append({"arm": arm, "scenario_index": view.scenario_index, "counterpart": view.counterpart,
                         "reward": view.reward, **asdict(skills)})  # fmt: skip
    return rows


# ====================================================================================== asset outputs
@dataclass(frozen=True)
class StudyTraces:
    """The teacher traces of one domain's study (rows of `traces` under `run_id`)."""

    env_id: str
    run_id: str
    episodes: int
    failed: int
    mean_reward: float


@dataclass(frozen=True)
class StudyStudents:
    """The two students of one domain's study."""

    env_id: str
    traces_run_id: str
    students: dict[str, Student]
    """`sft_act` and `sft_tom`."""


def study_traces(env_id: str, profile: Profile, seed: int = 0, run_tag: str = "tom-traces") -> list[Trace]:
    """The code teacher's traces for the study: `Profile.tom.teacher_episodes` training scenarios, every seat."""
    collection = teacher_traces(
        env_id, profile, TeacherConfig(), seed=seed, run_tag=run_tag, episodes=profile.tom.teacher_episodes
    )
    return list(collection.traces)
