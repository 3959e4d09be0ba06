"""Job Interview (job-interview-v0): a recruiter and a candidate negotiate a five-issue contract.

| | |
| --- | --- |
| roles | `recruiter`, `candidate` (the recruiter opens) |
| private information | each side's issue weights (w_i = 0.1 + 0.5 * r_i / sum(r), r_i ~ U(0, 1), so they sum to 1) and option values (per issue, best option 1, worst 0). Salary and holidays are opposed (the candidate prefers more, the recruiter less, linearly); position, workplace and company get random values per side, so they may be win-win |
| issues | salary ($20-50/hour in steps of 5: 7 options), weekly holidays (2-6 days: 5 options), position, workplace, company (4 options each): 7 * 5 * 4 * 4 * 4 = 2240 contracts |
| actions | `message` (free text), `propose` {salary, holidays, position, workplace, company} (all five), `accept` (the counterpart's standing proposal; the payload echoes its terms), `reject` (the standing proposal), `quit` (end without a deal) |
| text grammar | free text, optionally ending with one command: `PROPOSE salary=35 holidays=4 position="Data Scientist" workplace=Remote company=Acme`, `ACCEPT`, `REJECT`, `QUIT`. Tolerant: `:` or `=`, commas, quotes, `$`, `/hour`, `days`, one term per line, case-insensitive option names. Commands count anywhere in capitals; in lower case only as a line of their own (`accept.`), or `propose`/`proposal` directly followed by terms A command negated by the words right before it ("I do NOT ACCEPT", "I refuse to ACCEPT", also across double spaces and line breaks) does not count (the shared negation rule of environments/core/grammar.py). Salary and holidays are read whole by the shared number reader: `salary=-35`, `salary=1e3`, `salary=3,5`, `salary=35 000`, `salary=35/2` are invalid actions saying why. |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`); parsing is linear in the reply's length (environments/core/grammar.py) |
| reward | utility U(contract) = sum_i w_i * value_i(option). Reference agreement: the Nash bargaining point over all 2240 contracts (disagreement = 0). reward = clip(U_own(deal) / U_own(reference), 0, 1); no deal = 0. Raw utility: U_own(deal) in [0, 1] |
| termination | an accepted proposal (deal), a quit, or `max_turns` turns (default 20; no deal); a turn forfeited after exhausted retries still counts |

Invalid actions (empty text, a proposal that misses an issue or names an unknown option, accepting or
rejecting when no proposal stands, accepting terms other than the standing ones) are counted; after
`max_invalid_retries` retries the turn is forfeited and passes to the other side (it counts towards
`max_turns`). Outcome: `pareto_optimal` over all contracts; `envy_free` is undefined (None).
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from environments.core.alternating import AlternatingTurns
from environments.core.base import (
    ActionSpec,
    Environment,
    Outcome,
    ParseError,
    PrivateFact,
    RoleOutcome,
    Scenario,
    ScenarioError,
    check_max_turns,
)
from environments.core.events import Action, Event, Observation
from environments.core.grammar import (
    CommandMatch,
    NumberError,
    check_number,
    read_number,
    show,
)
from environments.core.quoting import quote
from environments.core.registry import register
from environments.core.scoring import is_pareto_optimal, nash_bargaining_point, normalise
from environments.socialrl.bargaining import Deal, DealSpace
from environments.socialrl.replies import CommandReplies, respond_command, walk_away_command

RECRUITER, CANDIDATE = "recruiter", "candidate"
ROLES = (RECRUITER, CANDIDATE)
ISSUES = ("salary", "holidays", "position", "workplace", "company")
NUMERIC_ISSUES = ("salary", "holidays")
"""Opposed issues: the candidate's values rise with the amount, the recruiter's fall."""
SALARY_RANGE = (20, 50)
HOLIDAY_RANGE = (2, 6)
SALARY_OPTIONS = (20, 25, 30, 35, 40, 45, 50)
HOLIDAY_OPTIONS = (2, 3, 4, 5, 6)
POSITIONS = (
    "Software Engineer",
    "Data Scientist",
    "Product Manager",
    "ML Engineer",
    "Research Scientist",
    "Data Engineer",
    "UX Designer",
    "DevOps Engineer",
)
WORKPLACES = ("Remote", "New York", "San Francisco", "Austin", "Chicago", "Seattle", "Boston", "London")
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries", "Wayne Enterprises", "Cyberdyne")
_TOLERANCE = 1e-6
MAX_TERM_NUMBER = 1_000_000
"""Largest salary or holiday number a proposal may state (larger ones are unreadable, not off the grid)."""

Option = int | str


def _canonical_number(value: Any) -> int | float:
    number = float(value)
    return int(number) if number.is_integer() else number


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


@dataclass(frozen=True)
class JobInterviewScenario(Scenario):
    """The five issues' options and both sides' private weights and option values."""

    options: Mapping[str, tuple[Option, ...]]
    """Issue -> its options (salary in $/hour and holidays in days as numbers; the others as names)."""
    weights: Mapping[str, Mapping[str, float]]
    """Role -> issue -> weight (positive, summing to 1 per role)."""
    values: Mapping[str, Mapping[str, tuple[float, ...]]]
    """Role -> issue -> value of each option, aligned with `options` (best option 1, worst 0)."""
    max_turns: int = 20
    """Accepted actions after which the episode ends without a deal."""

    def __post_init__(self) -> None:
        sid = self.scenario_id
        if not isinstance(self.options, Mapping) or set(self.options) != set(ISSUES):
            raise ScenarioError(f"{sid}: options must give exactly the issues {', '.join(ISSUES)}")
        options: dict[str, tuple[Option, ...]] = {}
        for issue in ISSUES:
            if isinstance(self.options[issue], str) or not isinstance(self.options[issue], Sequence):
                raise ScenarioError(f"{sid}: options of {issue} must be a list, got {quote(self.options[issue])}")
            raw = tuple(self.options[issue])
            if len(raw) < 2:
                raise ScenarioError(f"{sid}: issue {quote(issue)} needs at least 2 options, got {len(raw)}")
            if issue in NUMERIC_ISSUES:
                low, high = SALARY_RANGE if issue == "salary" else HOLIDAY_RANGE
                if any(check_number(o, what=issue) is not None for o in raw):
                    raise ScenarioError(f"{sid}: {issue} options must be numbers, got {list(raw)}")
                opts = tuple(_canonical_number(o) for o in raw)
                bad = [o for o in opts if not low <= o <= high]
                if bad:
                    raise ScenarioError(f"{sid}: {issue} options must lie in [{low}, {high}], got {bad}")
                if issue == "holidays" and any(not isinstance(o, int) for o in opts):
                    raise ScenarioError(f"{sid}: holidays options must be whole days, got {list(opts)}")
            else:
                if not all(isinstance(o, str) for o in raw):
                    raise ScenarioError(f"{sid}: {issue} options must be names (strings), got {list(raw)}")
                opts = tuple(o.strip() for o in raw)
                if any(not o for o in opts):
                    raise ScenarioError(f"{sid}: {issue} options must be non-empty names, got {list(raw)}")
            if len({_norm(o) for o in opts}) != len(opts):
                raise ScenarioError(f"{sid}: {issue} options must be distinct, got {list(opts)}")
            options[issue] = opts
        object.__setattr__(self, "options", options)

        for name in ("weights", "values"):
            table = getattr(self, name)
            if not isinstance(table, Mapping) or set(table) != set(ROLES):
                raise ScenarioError(f"{sid}: {name} must give exactly the roles {', '.join(ROLES)}")
        weights: dict[str, dict[str, float]] = {}
        values: dict[str, dict[str, tuple[float, ...]]] = {}
        for role in ROLES:
            w, v = self.weights[role], self.values[role]
            if not isinstance(w, Mapping) or set(w) != set(ISSUES):
                raise ScenarioError(f"{sid}: {role} weights must give exactly the issues {', '.join(ISSUES)}")
            if not isinstance(v, Mapping) or set(v) != set(ISSUES):
                raise ScenarioError(f"{sid}: {role} values must give exactly the issues {', '.join(ISSUES)}")
            for issue in ISSUES:
                reason = check_number(w[issue], what=f"{role} weight of {issue}")
                if reason is not None:
                    raise ScenarioError(f"{sid}: {reason}")
            weights[role] = {i: float(w[i]) for i in ISSUES}
            bad = {i: x for i, x in weights[role].items() if not 0.0 < x <= 1.0}
            if bad:
                raise ScenarioError(f"{sid}: {role} weights must lie in (0, 1], got {bad}")
            total = sum(weights[role].values())
            if abs(total - 1.0) > _TOLERANCE:
                raise ScenarioError(f"{sid}: {role} weights must sum to 1, got {total:.6f}")
            values[role] = {}
            for issue in ISSUES:
                if isinstance(v[issue], str) or not isinstance(v[issue], Sequence):
                    raise ScenarioError(
                        f"{sid}: {role} values for {issue} must be a list of numbers, got {quote(v[issue])}"
                    )
                for x in v[issue]:
                    reason = check_number(x, what=f"{role} value for {issue}")
                    if reason is not None:
                        raise ScenarioError(f"{sid}: {reason}")
                vals = tuple(float(x) for x in v[issue])
                if len(vals) != len(options[issue]):
                    raise ScenarioError(
                        f"{sid}: {role} values for {issue} need one value per option "
                        f"({len(options[issue])}), got {len(vals)}"
                    )
                if any(not 0.0 <= x <= 1.0 for x in vals):
                    raise ScenarioError(f"{sid}: {role} values for {issue} must lie in [0, 1], got {list(vals)}")
                if abs(max(vals) - 1.0) > _TOLERANCE or abs(min(vals)) > _TOLERANCE:
                    raise ScenarioError(
                        f"{sid}: {role} values for {issue} must be rescaled so the best option is 1 and the "
                        f"worst 0, got {list(vals)}"
                    )
                if issue in NUMERIC_ISSUES:
                    ordered = [x for _, x in sorted(zip(options[issue], vals, strict=True))]
                    rising = all(a <= b for a, b in itertools.pairwise(ordered))
                    falling = all(a >= b for a, b in itertools.pairwise(ordered))
                    if (role == CANDIDATE and not rising) or (role == RECRUITER and not falling):
                        more_or_less = "more" if role == CANDIDATE else "less"
                        raise ScenarioError(
                            f"{sid}: {issue} is opposed: the {role}'s values must prefer {more_or_less}, "
                            f"got {list(vals)}"
                        )
                values[role][issue] = vals
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "values", values)
        check_max_turns(sid, self.max_turns)

    def _key(self) -> tuple:
        return (
            self.scenario_id,
            tuple(self.options[i] for i in ISSUES),
            tuple(tuple(self.weights[r][i] for i in ISSUES) for r in ROLES),
            tuple(tuple(self.values[r][i] for i in ISSUES) for r in ROLES),
            self.max_turns,
        )

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def n_outcomes(self) -> int:
        n = 1
        for issue in ISSUES:
            n *= len(self.options[issue])
        return n

    def utility(self, role: str, deal: Mapping[str, Option]) -> float:
        """U_role(contract) = sum_i w_i * value_i(option); `deal` uses canonical option names."""
        return sum(self.weights[role][i] * self.values[role][i][self.options[i].index(deal[i])] for i in ISSUES)

    def most_important_issue(self, role: str) -> str:
        return max(ISSUES, key=lambda i: self.weights[role][i])


@dataclass(frozen=True)
class _Analysis:
    """Every contract (as option indices) with both sides' utilities and the reference agreement."""

    outcomes: tuple[tuple[int, ...], ...]
    utilities: dict[str, dict[tuple[int, ...], float]]
    reference: tuple[int, ...]


@functools.lru_cache(maxsize=256)
def analyse(scenario: JobInterviewScenario) -> _Analysis:
    """Enumerate the contracts once per scenario (cached): utilities and the Nash bargaining point."""
    sizes = [len(scenario.options[i]) for i in ISSUES]
    outcomes = tuple(itertools.product(*(range(n) for n in sizes)))
    utilities: dict[str, dict[tuple[int, ...], float]] = {}
    for role in ROLES:
        parts = [[scenario.weights[role][i] * v for v in scenario.values[role][i]] for i in ISSUES]
        # Rounded so that mathematically equal utilities compare equal (Pareto checks, Nash ties).
        utilities[role] = {o: round(sum(p[k] for p, k in zip(parts, o, strict=True)), 12) for o in outcomes}
    funcs = [utilities[r].__getitem__ for r in ROLES]
    reference = nash_bargaining_point(outcomes, funcs, disagreement=(0.0, 0.0))
    return _Analysis(outcomes, utilities, reference)


def deal_to_indices(scenario: JobInterviewScenario, deal: Mapping[str, Option]) -> tuple[int, ...]:
    return tuple(scenario.options[i].index(deal[i]) for i in ISSUES)


def indices_to_deal(scenario: JobInterviewScenario, indices: Sequence[int]) -> dict[str, Option]:
    return {i: scenario.options[i][k] for i, k in zip(ISSUES, indices, strict=True)}


def reference_agreement(scenario: JobInterviewScenario) -> dict[str, Option]:
    """The Nash bargaining point over all contracts (disagreement utility 0 for both)."""
    return indices_to_deal(scenario, analyse(scenario).reference)


def rewards_for_deal(scenario: JobInterviewScenario, deal: Mapping[str, Option]) -> dict[str, float]:
    """Normalised rewards of a contract: own utility over own utility at the reference, clipped to [0, 1]."""
    analysis = analyse(scenario)
    indices = deal_to_indices(scenario, deal)
    return {r: normalise(analysis.utilities[r][indices], analysis.utilities[r][analysis.reference]) for r in ROLES}


def canonical_option(options: Sequence[Option], issue: str, value: Any) -> Option | None:
    """The option `value` names (numbers by value, names case-insensitively), or None."""
    if issue in NUMERIC_ISSUES:
        if isinstance(value, bool):
            return None
        number = value if isinstance(value, int | float) else read_number(str(value), what=issue)
        if isinstance(number, NumberError) or not math.isfinite(number):
            return None
        return next((o for o in options if abs(float(o) - float(number)) < 1e-9), None)
    if not isinstance(value, str):
        return None
    wanted = _norm(value)
    return next((o for o in options if _norm(o) == wanted), None)


def canonical_deal(options: Mapping[str, Sequence[Option]], payload: Mapping[str, Any] | None) -> dict | str:
    """The contract a payload describes with canonical option names, or why it does not describe one."""
    if not isinstance(payload, Mapping):
        return "a proposal needs terms for all five issues"
    missing = [i for i in ISSUES if i not in payload]
    if missing:
        return f"a proposal must set all five issues; missing: {', '.join(missing)}"
    deal, problems = {}, []
    for issue in ISSUES:
        option = canonical_option(options[issue], issue, payload[issue])
        if option is None:
            allowed = ", ".join(str(o) for o in options[issue])
            problems.append(f"{issue}={show(payload[issue], 40)} is not an option (choose from {allowed})")
        deal[issue] = option
    return "; ".join(problems) if problems else deal


# ------------------------------------------------------------------------------------------ grammar
_KEY_WORDS = {
    "salary": ("salary", "pay", "wage", "hourly rate", "rate"),
    "holidays": ("holidays", "holiday", "weekly holidays", "days off", "vacation"),
    "position": ("position", "role", "job title", "title", "job"),
    "workplace": ("workplace", "work place", "location", "office"),
    "company": ("company", "employer"),
}
_KEY_TO_ISSUE = {word: issue for issue, words in _KEY_WORDS.items() for word in words}
_KEYS = "|".join(sorted((w.replace(" ", r"\s+") for w in _KEY_TO_ISSUE), key=len, reverse=True))
_ASSIGN = rf"[\"']?\b(?:{_KEYS})\b[\"']? ?[:=]"
_TERM_LINE = rf"\n(?:[-•{{] ?)?(?:[0-9]+[.)] ?)?{_ASSIGN}[^\n]*"
_TERMS = rf"(?P<terms>[^\n]*(?:{_TERM_LINE})*)"
# Grammars match normalised text (environments/core/grammar.py): every whitespace run is one character,
# so the optional spaces below cannot backtrack over a run.
_COMMANDS = {
    "propose": (
        rf"(?:(?-i:\bPROPOSE\b)|\b(?:propose|proposal)\b(?= ?:? ?(?:\n(?:[-•{{] ?)?)?\{{? ?{_ASSIGN}))"
        rf" ?:?{_TERMS}"
    ),
    "accept": respond_command("accept", "offer|proposal|contract|deal|terms"),
    "reject": respond_command("reject", "offer|proposal"),
    "quit": walk_away_command(lower="quit|walk away|end the negotiation"),
}
_ASSIGN_RE = re.compile(rf"[\"']?\b(?P<key>{_KEYS})\b[\"']? ?[:=] ?", re.IGNORECASE)
_UNITS = re.compile(
    r"\$|usd|dollars?|(?:/|\bper\s+|\ban?\s+)(?:hour|hr|h|week|wk)\b|\bhourly\b|\bdays?\b|\bweekly\b|\boff\b",
    re.IGNORECASE,
)


def parse_terms(text: str) -> dict[str, str]:
    """`salary=35 holidays=4 position="Data Scientist" ...` -> {issue: raw value text} (last one wins)."""
    found: dict[str, str] = {}
    matches = list(_ASSIGN_RE.finditer(text))
    for match, following in itertools.zip_longest(matches, matches[1:]):
        end = following.start() if following is not None else len(text)
        value = text[match.end() : end].split("\n", 1)[0]
        value = value.strip().strip("{}").strip().rstrip(",;").strip().strip("\"'").strip()
        value = re.sub(r"(?:,|;|\band\b)\s*$", "", value).strip().strip("\"'").rstrip(".!").strip()
        found[_KEY_TO_ISSUE[" ".join(match.group("key").lower().split())]] = value
    return found


def _raw_option(issue: str, raw: str) -> Any:
    """The option text of a term; for salary and holidays the number it states (units dropped), or why it
    cannot be read (a NumberError)."""
    if issue in NUMERIC_ISSUES:
        return read_number(_UNITS.sub("", raw).strip(), what=issue, minimum=0, maximum=MAX_TERM_NUMBER)
    return raw


# ---------------------------------------------------------------------------------------- leakage
ISSUE_WORDS = {
    # How each issue is named in text (also read by the teacher's opponent model, agents/socialrl/teacher/contract.py).
    "salary": r"(?:salary|pay|wages?|compensation|money)",
    "holidays": r"(?:holidays?|days off|time off|vacation(?: days)?)",
    "position": r"(?:position|role|job title|title)",
    "workplace": r"(?:workplace|work ?place|location|office)",
    "company": r"(?:company|employer)",
}
_RANK = r"(?:top|main|biggest|highest|first|number one|#1|most important)"


def priority_patterns(issue: str) -> tuple[str, ...]:
    """Phrases revealing that `issue` matters most to the speaker."""
    x = rf"(?:the\s+|my\s+)?{ISSUE_WORDS[issue]}\b"
    return (
        rf"\b{x}\s+(?:is|are)\s+(?:the\s+|by\s+far\s+the\s+)?(?:single\s+)?most\s+important\b",
        rf"\b{x}\s+(?:is|are)\s+(?:my|the)\s+{_RANK}\s+(?:priority|concern|issue)",
        rf"\bmy\s+{_RANK}\s+(?:priority|concern|issue)\s+is\s+{x}",
        rf"\bI\s+care\s+(?:the\s+)?most\s+about\s+{x}",
        rf"\b{x}\s+matters?\s+(?:the\s+)?most\b",
        rf"\bwhat\s+(?:I\s+care\s+about|matters\s+(?:to|for)\s+me)\s+(?:the\s+)?most\s+is\s+{x}",
        rf"\bmost\s+important\s+(?:thing\s+|issue\s+)?(?:to|for)\s+me\s+is\s+{x}",
    )


def weight_patterns(issue: str, weight: float) -> tuple[str, ...]:
    """An issue's weight stated as a percentage next to the issue's name ("salary: 34%", "34% on pay")."""
    words, percent = ISSUE_WORDS[issue], rf"(?<![\d.]){round(weight * 100)}(?:\.\d+)?\s*(?:%|percent\b)"
    return (rf"\b{words}\b[^.\n]{{0,25}}?{percent}", rf"{percent}[^.\n]{{0,25}}?\b{words}\b")


@register
class JobInterviewEnv(CommandReplies, AlternatingTurns, Environment[JobInterviewScenario]):
    """Multi-issue contract negotiation between a recruiter and a candidate."""

    env_id: ClassVar[str] = "job-interview-v0"
    scenario_type: ClassVar[type[Scenario]] = JobInterviewScenario
    commands: ClassVar[Mapping[str, str]] = _COMMANDS
    reply_example: ClassVar[str] = "`PROPOSE salary=35 ...` or `ACCEPT`"

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return ROLES

    # ---------------------------------------------------------------------------------- scenarios
    @classmethod
    def sample_scenario(cls, rng: random.Random) -> JobInterviewScenario:
        options: dict[str, tuple[Option, ...]] = {
            "salary": SALARY_OPTIONS,
            "holidays": HOLIDAY_OPTIONS,
            "position": tuple(rng.sample(POSITIONS, 4)),
            "workplace": tuple(rng.sample(WORKPLACES, 4)),
            "company": tuple(rng.sample(COMPANIES, 4)),
        }
        weights, values = {}, {}
        for role in ROLES:
            r = [rng.random() + 1e-9 for _ in ISSUES]
            weights[role] = {i: 0.1 + 0.5 * x / sum(r) for i, x in zip(ISSUES, r, strict=True)}
            values[role] = {}
            for issue in ISSUES:
                n = len(options[issue])
                if issue in NUMERIC_ISSUES:
                    rising = tuple(k / (n - 1) for k in range(n))
                    values[role][issue] = rising if role == CANDIDATE else tuple(1.0 - x for x in rising)
                else:
                    values[role][issue] = _random_values(rng, n)
        return JobInterviewScenario(
            scenario_id=f"gen:{rng.getrandbits(32):08x}", options=options, weights=weights, values=values
        )

    # ------------------------------------------------------------------------------ action grammar
    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec(
            kinds={
                "message": "say something without making a move",
                "propose": "propose a full contract (all five issues)",
                "accept": "accept the other side's standing proposal",
                "reject": "reject the other side's standing proposal",
                "quit": "walk away without a deal",
            },
            grammar=(
                "Write your message, then end with exactly one command line: "
                '`PROPOSE salary=<$/hour> holidays=<days> position="<name>" workplace="<name>" company="<name>"` '
                "(all five issues, options as listed), `ACCEPT`, `REJECT` or `QUIT`. A reply without a command "
                "line is sent as a plain message."
            ),
            examples=(
                'Here is a fair package.\nPROPOSE salary=35 holidays=4 position="Data Scientist" '
                "workplace=Remote company=Acme",
                "That works for me.\nACCEPT",
            ),
        )

    def _parse_command(self, agent_id: str, match: CommandMatch) -> Action | ParseError:
        if match.kind == "propose":
            terms = parse_terms(match.groups.get("terms", ""))
            missing = [i for i in ISSUES if i not in terms]
            if missing:
                return ParseError(
                    f"`PROPOSE` must set all five issues; missing: {', '.join(missing)}. Example: "
                    '`PROPOSE salary=35 holidays=4 position="Data Scientist" workplace=Remote company=Acme`'
                )
            raw = {i: _raw_option(i, terms[i]) for i in ISSUES}
            unreadable = [v.message for v in raw.values() if isinstance(v, NumberError)]
            if unreadable:
                return ParseError("`PROPOSE` has a term that cannot be read: " + "; ".join(unreadable))
            deal = canonical_deal(self.scenario.options, raw)
            if isinstance(deal, str):
                return ParseError(deal)
            return Action(agent_id, "propose", match.message, deal)
        if match.kind == "accept":
            standing = self._standing_offer(agent_id)
            if standing is not None:
                # Echo the accepted terms so that restating them is not mistaken for a leak.
                return Action(agent_id, "accept", match.message, dict(standing))
        return Action(agent_id, match.kind, match.message)

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        s = self.scenario
        weights = s.weights[agent_id]
        top = s.most_important_issue(agent_id)
        return (
            PrivateFact(
                "issue_weights",
                f"the {agent_id}'s private issue weights",
                numbers=tuple(round(weights[i], 2) for i in ISSUES),
                patterns=tuple(p for i in ISSUES for p in weight_patterns(i, weights[i])),
            ),
            PrivateFact(
                "most_important_issue",
                f"the {agent_id}'s most important issue ({top})",
                patterns=priority_patterns(top),
            ),
        )

    # ---------------------------------------------------------------------------------------- rules
    def _reset(self, scenario: JobInterviewScenario) -> list[Event]:
        self._turn = 0
        self._standing: dict[str, dict[str, Option] | None] = {RECRUITER: None, CANDIDATE: None}  # BY each side
        self._deal: dict[str, Option] | None = None
        self._ending = "max_turns"
        public = {
            "issues": list(ISSUES),
            "options": {i: list(scenario.options[i]) for i in ISSUES},
            "max_turns": scenario.max_turns,
        }
        events: list[Event] = []
        for role in ROLES:
            private = {
                "weights": dict(scenario.weights[role]),
                "values": {i: list(scenario.values[role][i]) for i in ISSUES},
            }
            data = {"role": role, "private": private, "public": public}
            events.append(Observation(role, self._private_text(role), data, private=True))
        events.append(self._turn_for(RECRUITER))
        return events

    def _private_text(self, role: str) -> str:
        s = self.scenario
        other = self._other(role)
        lines = [
            f"You are the {role} in a job interview, negotiating an employment contract with the {other}. "
            "A contract fixes all five issues: salary ($ per hour), weekly holidays (days), position, "
            "workplace and company.",
            "Your private preferences (weight = how much the issue matters to you; each option's value runs from "
            "0 = worst to 1 = best for you):",
        ]
        for issue in ISSUES:
            opts = ", ".join(
                f"{_show(issue, o)}={v:.2f}" for o, v in zip(s.options[issue], s.values[role][issue], strict=True)
            )
            lines.append(f"- {issue} (weight {s.weights[role][issue]:.2f}): {opts}")
        lines.append(
            "Your score for a contract is the weighted sum of its option values; ending without a contract scores 0. "
            f"The {other} has its own private preferences: on salary and holidays your interests are opposed, "
            "on the other issues they may coincide. Keep your weights and priorities private."
        )
        return "\n".join(lines)

    def _turn_for(self, agent_id: str) -> Event:
        standing = self._standing[self._other(agent_id)]
        allowed = ["message", "propose", "quit"] + (["accept", "reject"] if standing is not None else [])
        text = f"Your turn ({self._turn + 1}/{self.scenario.max_turns})."
        if standing is not None:
            text += f" Standing proposal from the {self._other(agent_id)}: {describe_deal(standing)}."
        return self._request_turn(
            agent_id,
            allowed,
            text,
            {
                "turn": self._turn,
                "max_turns": self.scenario.max_turns,
                "pending_offer": dict(standing) if standing is not None else None,
            },
        )

    def _validate(self, action: Action) -> str | None:
        if action.kind == "propose":
            deal = canonical_deal(self.scenario.options, action.payload)
            if isinstance(deal, str):
                return deal
        if action.kind == "message" and not action.text.strip():
            return "a message cannot be empty"
        if action.kind == "accept" and action.payload:
            standing = self._standing[self._other(action.agent_id)]
            deal = canonical_deal(self.scenario.options, action.payload)
            if deal != standing:
                return f"the standing proposal is {describe_deal(standing or {})}, not {action.payload}"
        return None

    def _apply(self, action: Action) -> list[Event]:
        actor, other = action.agent_id, self._other(action.agent_id)
        self._turn += 1
        said = f"The {actor} says: {action.text}" if action.text else f"The {actor}:"
        if action.kind == "propose":
            deal = canonical_deal(self.scenario.options, action.payload)
            assert isinstance(deal, dict)
            self._standing[actor] = deal
            relay = self._relay(action, other, f"{said}\n[proposes {describe_deal(deal)}]", {"offer": dict(deal)})
        elif action.kind == "accept":
            self._deal = dict(self._standing[other] or {})
            self._ending = "deal"
            note = f"{said}\n[accepts {describe_deal(self._deal)}]"
            return self._finish([self._relay(action, other, note, {"accepted": dict(self._deal)})])
        elif action.kind == "quit":
            self._ending = "quit"
            return self._finish([self._relay(action, other, f"{said}\n[quits]")])
        elif action.kind == "reject":
            self._standing[other] = None
            relay = self._relay(action, other, f"{said}\n[rejects your proposal]", {"rejected": True})
        else:
            relay = self._relay(action, other, said)
        return self._next_turn(other, [relay])

    def _compute_outcome(self) -> Outcome:
        s = self.scenario
        analysis = analyse(s)
        ref = analysis.reference
        reference_utilities = {r: analysis.utilities[r][ref] for r in ROLES}
        pareto = None
        if self._deal is None:
            rewards, utilities = dict.fromkeys(ROLES, 0.0), dict.fromkeys(ROLES, 0.0)
        else:
            indices = deal_to_indices(s, self._deal)
            utilities = {r: analysis.utilities[r][indices] for r in ROLES}
            rewards = {r: normalise(utilities[r], reference_utilities[r]) for r in ROLES}
            funcs = [analysis.utilities[r].__getitem__ for r in ROLES]
            pareto = is_pareto_optimal(indices, analysis.outcomes, funcs)
        return Outcome(
            env_id=self.env_id,
            scenario_id=s.scenario_id,
            agreement=self._deal is not None,
            rounds=self._turn,
            roles={r: RoleOutcome(rewards[r], utilities[r]) for r in ROLES},
            deal=dict(self._deal) if self._deal is not None else None,
            pareto_optimal=pareto,
            envy_free=None,
            metrics={
                "ending": self._ending,
                "reference_deal": indices_to_deal(s, ref),
                "reference_utilities": reference_utilities,
                "joint_utility": sum(utilities.values()),
                "most_important_issue": {r: s.most_important_issue(r) for r in ROLES},
            },
        )

    # -------------------------------------------------------------------------------- code agents
    @staticmethod
    def deal_space(agent_id: str, private_view: Mapping[str, Any]) -> DealSpace:
        public, private = private_view["public"], private_view["private"]
        return ContractDealSpace(
            options={i: tuple(public["options"][i]) for i in ISSUES},
            weights={i: float(private["weights"][i]) for i in ISSUES},
            values={i: tuple(float(v) for v in private["values"][i]) for i in ISSUES},
        )


def _random_values(rng: random.Random, n: int) -> tuple[float, ...]:
    """n option values, min-max rescaled so the best is 1 and the worst 0 (rounded to 3 decimals)."""
    while True:
        raw = [rng.random() for _ in range(n)]
        low, high = min(raw), max(raw)
        if high - low > 1e-3:
            return tuple(round((x - low) / (high - low), 3) for x in raw)


def _show(issue: str, option: Option) -> str:
    if issue == "salary":
        return f"${option}/hour"
    if issue == "holidays":
        return f"{option} days"
    return str(option)


def describe_deal(deal: Mapping[str, Option]) -> str:
    """A contract in words, e.g. `salary $35/hour, 4 days of weekly holidays, position Data Scientist, ...`."""
    if not deal:
        return "(none)"
    return (
        f"salary ${deal['salary']}/hour, {deal['holidays']} days of weekly holidays, position {deal['position']}, "
        f"workplace {deal['workplace']}, company {deal['company']}"
    )


class ContractDealSpace(DealSpace):
    """A side's view of the contract space: every combination of options, scored with its own preferences."""

    def __init__(
        self,
        options: Mapping[str, Sequence[Option]],
        weights: Mapping[str, float],
        values: Mapping[str, Sequence[float]],
    ) -> None:
        self.options = {i: tuple(options[i]) for i in ISSUES}
        self.weights = dict(weights)
        self.values = {i: tuple(values[i]) for i in ISSUES}
        self._deals = tuple(itertools.product(*(self.options[i] for i in ISSUES)))
        parts = [dict(zip(self.options[i], (self.weights[i] * v for v in self.values[i]), strict=True)) for i in ISSUES]
        self._utility = {d: round(sum(p[o] for p, o in zip(parts, d, strict=True)), 12) for d in self._deals}

    def deals(self) -> Sequence[Deal]:
        return self._deals

    def utility(self, deal: Deal) -> float:
        return self._utility[deal]

    def deal_from_payload(self, payload: Mapping[str, Any] | None) -> Deal | None:
        deal = canonical_deal(self.options, payload)
        return None if isinstance(deal, str) else tuple(deal[i] for i in ISSUES)

    def _payload(self, deal: Deal) -> dict[str, Option]:
        return dict(zip(ISSUES, deal, strict=True))

    def offer(self, agent_id: str, deal: Deal, text: str) -> Action:
        return Action(agent_id, "propose", text, self._payload(deal))

    def accept(self, agent_id: str, deal: Deal, text: str) -> Action:
        return Action(agent_id, "accept", text, self._payload(deal))

    def walk_away(self, agent_id: str, text: str) -> Action | None:
        return Action(agent_id, "quit", text)

    def describe(self, deal: Deal) -> str:
        return describe_deal(self._payload(deal))

    def reveal_private(self) -> str:
        ranked = sorted(ISSUES, key=lambda i: -self.weights[i])
        weights = ", ".join(f"{i} {self.weights[i]:.2f}" for i in ranked)
        return f"To be open with you: I care most about {ranked[0]}. My issue weights are {weights}."
