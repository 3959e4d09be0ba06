"""Representative negotiations of a policy, rendered for people: Dagster markdown and standalone HTML.

A `Transcript` is one episode as a researcher reads it: each turn's speaker, text and parsed action
(kind + payload), every refused attempt with the reason the environment gave (so "invalid actions 3" shows
which three replies and why), the private facts every seat held, the outcome, and which seat was the policy's.

Choosing the episodes (`pick_representatives`), per policy, by the reward of the policy's seat:

| label | episode | ties broken by |
| --- | --- | --- |
| `best` | the highest reward | the smallest episode id |
| `median` | the lower median: position (n - 1) // 2 in ascending (reward, episode id) order | the episode id (part of the order) |
| `worst` | the lowest reward | the smallest episode id |
| `most refused` | the most refused attempts of the policy's seat, where any episode has one (a policy that breaks the action format shows how) | the smallest episode id |

With fewer episodes than labels one episode carries several labels (it is shown once, e.g. "best, median").
A NaN reward is an error (rewards are normalised to [0, 1]), not silently ranked.

Where the private facts come from: the environment is deterministic, so resetting a fresh one with the
episode's scenario and seed gives the same opening events; the private observations (`private=True`)
addressed to a seat are what that seat held, and `Environment.private_facts(seat)` names them. An
`EpisodeResult` kept with its inboxes is read directly. From the tables, the scenario is rebuilt from its
JSON (`episodes.scenario`); when that fails (a scenario type that does not round-trip), the transcript says
so in `note` and shows no private facts.

What decides a seat's outcome is never cut: its private values (`data["private"]` of its opening observations,
e.g. the buyer's target and the seller's minimum) are shown first and whole, and its opening briefing is cut on
its longest lines (the listing's description), so the short line stating the target stays.

Unusual text never breaks a page (models/evaluation/safe_text.py): every other text is cut to `max_chars` characters (and `max_lines` lines) with
a note of how much was cut; control characters are shown as `\\uXXXX`; bidirectional overrides are removed;
runs of empty lines shrink to one; markdown backslash-escapes the punctuation markdown gives a meaning to
(so `<script>`, `|`, `#`, `*`, links, bare URLs and images stay literal text); HTML goes through
`html.escape` and the page carries a Content-Security-Policy that allows no script at all.

| function | input | output |
| --- | --- | --- |
| `pick_representatives(scored)` (representatives.py) | `ScoredEpisode`s of one policy | `Representative`s (labels + episode) |
| `representatives_by_policy(scored)` (representatives.py) | `ScoredEpisode`s of several policies | policy -> `Representative`s |
| `transcript_from_result(result, policy_seat)` | an `EpisodeResult` | `Transcript` |
| `representative_transcripts(evaluation)` | a `models.evaluation.policy.EvaluationResult` | `Transcript`s (best, median, worst, most refused) |
| `transcripts_json(ts)` | transcripts of one or more policies | policy -> JSON entries (labels, ids, counterpart, reward, agreement, markdown) |
| `load_transcripts(store, episode_ids)` (transcript_tables.py) | the episode tables | `Transcript`s |
| `representative_transcripts_from_store(store, run_id)` (transcript_tables.py) | an evaluation run in the tables | policy name -> `Transcript`s |
| `transcript_markdown(t)` / `transcripts_markdown(ts, title)` | transcripts | Dagster markdown (`MetadataValue.md`) |
| `transcript_html(t)` / `transcripts_html(ts, title)` | transcripts | a standalone HTML page (MLflow artifact) |

For ad-hoc queries the tables have a DuckDB view `transcripts` (models/records.py `VIEWS`, docs/researcher_view.md).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from environments.core.base import Scenario
from environments.core.events import Observation
from environments.core.registry import make
from environments.core.runtime import EpisodeResult
from models.evaluation.representatives import ScoredEpisode, pick_representatives
from models.evaluation.safe_text import MAX_CHARS, html_text, md_text, uncut

if TYPE_CHECKING:  # pragma: no cover
    from models.evaluation.policy import EvaluationResult

log = logging.getLogger("socialrl.transcripts")

MAX_TURNS = 80
"""Default: most turns of one episode shown (the first ones; the rest is counted)."""


# --------------------------------------------------------------------------------------- transcripts
@dataclass(frozen=True, kw_only=True)
class SeatView:
    """One seat of an episode: who played it, what it privately knew, how it ended for it."""

    seat: str
    agent: str
    """The agent's description (class and parameters)."""
    reward: float | None = None
    utility: float | None = None
    invalid_actions: int | None = None
    leaked: tuple[str, ...] = ()
    """Names of the private facts the seat revealed in its own messages."""
    private_text: tuple[str, ...] = ()
    """Text of the private observations the seat received (its values, target, secret events, ...)."""
    private_facts: tuple[str, ...] = ()
    """`name: description` of each private fact the environment guards for this seat."""
    private_values: tuple[str, ...] = ()
    """`name: value` of each entry of the seat's private data (`data["private"]` of its private observations:
    a buyer's target, a seller's minimum, item values): what decides its outcome, shown first and never cut."""


@dataclass(frozen=True)
class TranscriptTurn:
    """One accepted action."""

    index: int
    speaker: str
    """The acting seat."""
    kind: str
    """The parsed action kind (offer, accept, message, vote, ...)."""
    text: str
    """What the speaker said with it."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    """The parsed action's structured arguments (price, split, choice, ...)."""


@dataclass(frozen=True, kw_only=True)
class TranscriptAttempt:
    """One answer of a seat, accepted or refused (environments.core.base.Attempt, as the tables keep it)."""

    index: int
    """Order among the episode's attempts."""
    speaker: str
    text: str
    """What the seat sent."""
    accepted: bool
    reason: str = ""
    """Why it was refused ("" when accepted)."""
    kind: str = ""
    """The parsed kind ("" when the text did not parse)."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    turn_index: int | None = None
    """The turn an accepted attempt became."""


@dataclass(frozen=True, kw_only=True)
class Transcript:
    """One episode as a person reads it."""

    episode_id: str
    env_id: str
    scenario_id: str
    seed: int
    seats: tuple[SeatView, ...]
    turns: tuple[TranscriptTurn, ...]
    agreement: bool | None = None
    deal: Mapping[str, Any] | None = None
    policy_seat: str | None = None
    """The evaluated policy's seat (highlighted), if any."""
    labels: tuple[str, ...] = ()
    """Why it was chosen (`LABELS`: "best", "median", "worst", "most refused")."""
    policy: str = ""
    """The policy's name, when known."""
    counterpart: str = ""
    """The counterpart the policy met (a name of the plan's `counterparts`), when known."""
    note: str = ""
    """What could not be shown (e.g. private facts of a scenario that could not be rebuilt)."""
    attempts: tuple[TranscriptAttempt, ...] = ()
    """Every answer of every seat in order, accepted or refused; empty for an episode recorded before attempts
    were (then only `turns` are shown)."""

    def seat(self, seat: str) -> SeatView:
        for view in self.seats:
            if view.seat == seat:
                return view
        raise KeyError(f"episode {self.episode_id} has no seat {seat!r}")

    @property
    def policy_reward(self) -> float | None:
        return self.seat(self.policy_seat).reward if self.policy_seat else None

    def timeline(self) -> list[TranscriptTurn | TranscriptAttempt]:
        """What happened, in order: each accepted turn, with every refused attempt where it came. Without
        recorded attempts, the turns alone."""
        if not self.attempts:
            return list(self.turns)
        by_index = {turn.index: turn for turn in self.turns}
        out: list[TranscriptTurn | TranscriptAttempt] = []
        for attempt in self.attempts:
            turn = by_index.pop(attempt.turn_index, None) if attempt.accepted else None
            out.append(turn if turn is not None else attempt)
        return out + sorted(by_index.values(), key=lambda t: t.index)  # turns without an attempt row (none expected)

    @property
    def refused(self) -> int:
        """Refused attempts recorded (all seats)."""
        return sum(not a.accepted for a in self.attempts)


@dataclass(frozen=True, kw_only=True)
class PrivateView:
    """What one seat held privately at the start of an episode."""

    texts: tuple[str, ...] = ()
    """Texts of the private observations addressed to it (its opening briefing)."""
    facts: tuple[str, ...] = ()
    """`name: description` of each private fact the environment guards for it."""
    values: tuple[str, ...] = ()
    """`name: value` of each entry of its private data (`private_values`)."""


def _value_text(value: Any) -> str:
    """A private value on one line: numbers to 6 significant digits (a weight of 0.148167914 reads 0.148168),
    mappings as `key value, ...`, sequences as `[a, b]`."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int | float):
        return f"{value:.6g}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return " ".join(str(value).split())


def private_values(observations: Iterable[Any]) -> tuple[str, ...]:
    """`name: value` of each entry of the private data (`Observation.data["private"]`, the structured facts every
    environment sends a seat in its opening) of the private observations among `observations`; empty entries
    (None, "") are left out."""
    out: list[str] = []
    for event in observations:
        if not (isinstance(event, Observation) and event.private and isinstance(event.data, Mapping)):
            continue
        private = event.data.get("private")
        if not isinstance(private, Mapping):
            continue
        out += [f"{name}: {_value_text(value)}" for name, value in private.items() if value not in (None, "")]
    return tuple(out)


def opening_private_view(
    env_id: str, scenario: Scenario, seed: int, env_config: Mapping[str, Any] | None = None
) -> dict[str, PrivateView]:
    """Seat -> what it held privately at reset (texts, guarded facts, private values), from a fresh environment
    reset with the episode's scenario and seed (environments are deterministic)."""
    env = make(env_id, **dict(env_config or {}))
    events = env.reset(scenario, seed)
    out: dict[str, PrivateView] = {}
    for seat in env.agent_ids:
        own = [e for e in events if isinstance(e, Observation) and e.private and e.to == seat]
        out[seat] = PrivateView(
            texts=tuple(e.text for e in own),
            facts=tuple(f"{f.name}: {f.description}" for f in env.private_facts(seat)),
            values=private_values(own),
        )
    return out


def private_views(
    env_id: str, scenario: Scenario | None, seed: int, env_config: Mapping[str, Any] | None
) -> tuple[dict[str, PrivateView], str]:
    """`opening_private_view`, or no views and a note saying why they are unavailable."""
    if scenario is None:
        return {}, "private facts unavailable: the scenario could not be rebuilt"
    try:
        return opening_private_view(env_id, scenario, seed, env_config), ""
    except Exception as exc:  # a scenario the environment refuses: show the rest, say what is missing
        return {}, f"private facts unavailable: {type(exc).__name__}: {exc}"


def transcript_from_result(
    result: EpisodeResult,
    policy_seat: str | None = None,
    labels: Sequence[str] = (),
    policy: str = "",
    env_config: Mapping[str, Any] | None = None,
    counterpart: str = "",
) -> Transcript:
    """The transcript of a finished episode. Private facts come from the result's inboxes when it kept
    them, else from a fresh environment reset with its scenario and seed (`env_config`: the constructor
    arguments the episode ran with, if any)."""
    views, note = private_views(result.env_id, result.scenario, result.seed, env_config)
    if result.inboxes:
        views = {
            seat: PrivateView(
                texts=tuple(e.text for e in events if isinstance(e, Observation) and e.private),
                facts=views.get(seat, PrivateView()).facts,
                values=private_values(events),
            )
            for seat, events in result.inboxes.items()
        }
    roles = result.outcome.roles
    seats = tuple(
        SeatView(
            seat=seat,
            agent=result.agent_names.get(seat, ""),
            reward=roles[seat].reward if seat in roles else None,
            utility=roles[seat].utility if seat in roles else None,
            invalid_actions=roles[seat].invalid_actions if seat in roles else None,
            leaked=tuple(roles[seat].leaked) if seat in roles else (),
            private_text=views.get(seat, PrivateView()).texts,
            private_facts=views.get(seat, PrivateView()).facts,
            private_values=views.get(seat, PrivateView()).values,
        )
        for seat in (result.agent_names or roles)
    )
    if policy_seat is not None and policy_seat not in {s.seat for s in seats}:
        raise ValueError(f"episode {result.episode_id}: no seat {policy_seat!r}; seats: {[s.seat for s in seats]}")
    return Transcript(
        episode_id=result.episode_id,
        env_id=result.env_id,
        scenario_id=result.outcome.scenario_id,
        seed=result.seed,
        seats=seats,
        turns=tuple(TranscriptTurn(t.index, t.agent_id, t.kind, t.text, dict(t.payload)) for t in result.transcript),
        agreement=result.outcome.agreement,
        deal=result.outcome.deal,
        policy_seat=policy_seat,
        labels=tuple(labels),
        policy=policy,
        counterpart=counterpart,
        note=note,
        attempts=tuple(
            TranscriptAttempt(
                index=a.index,
                speaker=a.agent_id,
                text=a.text,
                accepted=a.accepted,
                reason=a.reason,
                kind=a.kind,
                payload=dict(a.payload),
                turn_index=a.turn_index,
            )
            for a in result.attempts
        ),
    )


def representative_transcripts(evaluation: EvaluationResult, policy: str = "") -> list[Transcript]:
    """Best, median and worst episode of an evaluation (by the policy seat's reward), and the one with the most
    refused attempts where any has one, as transcripts. `policy`: the name shown (default: the evaluation's
    policy description)."""
    by_id = {e.episode_id: e for e in evaluation.episodes}
    counterparts = {view.episode_id: view.counterpart for view in evaluation.policy_episodes}
    scored = [
        ScoredEpisode(view.episode_id, view.reward, view.seat, policy or evaluation.policy, view.invalid_actions)
        for view in evaluation.policy_episodes
    ]
    return [
        transcript_from_result(
            by_id[r.episode.episode_id],
            r.episode.seat,
            r.labels,
            policy or evaluation.policy,
            counterpart=counterparts[r.episode.episode_id],
        )
        for r in pick_representatives(scored)
    ]


def transcript_entry(t: Transcript, max_chars: int = MAX_CHARS) -> dict[str, Any]:
    """One transcript as JSON: why it was chosen (`labels`), `episode_id`, `scenario_id`, `counterpart`, the policy
    seat's `reward` (None where undefined), `agreement`, and the `markdown` the asset page shows
    (`transcript_markdown`)."""
    reward = t.policy_reward
    return {
        "labels": list(t.labels),
        "episode_id": t.episode_id,
        "scenario_id": t.scenario_id,
        "counterpart": t.counterpart,
        "reward": reward if reward is not None and math.isfinite(reward) else None,
        "agreement": t.agreement,
        "markdown": transcript_markdown(t, max_chars),
    }


def transcripts_json(transcripts: Iterable[Transcript], max_chars: int = MAX_CHARS) -> dict[str, list[dict[str, Any]]]:
    """Policy (`Transcript.policy`) -> its transcripts as `transcript_entry`s, policies in first-seen order: what
    a person reads of what each policy said (the `specialist_eval` asset's metadata, `make run`'s transcripts
    file)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for t in transcripts:
        out.setdefault(t.policy, []).append(transcript_entry(t, max_chars))
    return out


def _payload_text(payload: Mapping[str, Any]) -> str:
    if not payload:
        return ""
    try:
        return json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(payload)


def _number(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _outcome_line(t: Transcript) -> str:
    agreement = "unknown" if t.agreement is None else ("agreement" if t.agreement else "no agreement")
    deal = f"; deal {_payload_text(t.deal)}" if t.deal else ""
    return f"{agreement}{deal}"


def _heading(t: Transcript) -> str:
    labels = ", ".join(t.labels) or "episode"
    reward = f"reward {_number(t.policy_reward)} ({t.policy_seat})" if t.policy_seat else ""
    parts = [labels, reward, t.env_id, f"scenario {t.scenario_id}", f"episode {t.episode_id}"]
    return " · ".join(p for p in parts if p)


def _turn_count(t: Transcript) -> str:
    return f"{len(t.turns)}, {t.refused} refused attempts" if t.refused else str(len(t.turns))


def _shown_steps(t: Transcript, max_turns: int) -> Iterator[TranscriptTurn | TranscriptAttempt]:
    """The timeline up to the `max_turns`-th accepted turn (refused attempts before it included)."""
    shown = 0
    for step in t.timeline():
        if isinstance(step, TranscriptTurn):
            if shown >= max_turns:
                return
            shown += 1
        yield step


# ------------------------------------------------------------------------------------------ markdown
def transcript_markdown(
    t: Transcript, max_chars: int = MAX_CHARS, max_turns: int = MAX_TURNS, heading_level: int = 4
) -> str:
    """One transcript as markdown for Dagster's metadata panel (`MetadataValue.md`): heading, outcome,
    each seat's private facts, then every turn (speaker, parsed action, text)."""
    hashes = "#" * max(1, min(6, heading_level))
    lines = [f"{hashes} {md_text(_heading(t), 300, 1)}", ""]
    if t.policy:
        lines += [f"Policy: {md_text(t.policy, 200, 1)}", ""]
    lines += [f"**Outcome**: {md_text(_outcome_line(t), 400, 1)}", ""]
    if t.note:
        lines += [f"*{md_text(t.note, 300, 2)}*", ""]
    lines += ["**Seats and the private facts each held**", ""]
    for s in t.seats:
        mark = " (policy)" if s.seat == t.policy_seat else ""
        leaked = f"; leaked: {', '.join(s.leaked)}" if s.leaked else ""
        head = (
            f"{s.seat}{mark}: {s.agent}; reward {_number(s.reward)}, utility {_number(s.utility)}, "
            f"invalid actions {s.invalid_actions if s.invalid_actions is not None else 'n/a'}{leaked}"
        )
        lines.append(f"- **{md_text(head, 300, 1)}**")
        if s.private_values:  # what decides the outcome: first, and never cut
            values = "; ".join(s.private_values)
            lines.append(f"  - **private**: {md_text(values, uncut(values), 1)}")
        for text in s.private_text:
            lines.append(f"  - {md_text(text, max_chars, 8, longest_first=True).replace(chr(10), chr(10) + '    ')}")
        if s.private_facts:
            lines.append(f"  - facts guarded: {md_text('; '.join(s.private_facts), max_chars, 1)}")
        if not s.private_text and not s.private_facts and not s.private_values:
            lines.append("  - no private facts")
    lines += ["", f"**Turns** ({_turn_count(t)})", ""]
    for step in _shown_steps(t, max_turns):
        mark = " (policy)" if step.speaker == t.policy_seat else ""
        if isinstance(step, TranscriptAttempt):
            lines.append(
                f"✗ **{md_text(step.speaker + mark, 100, 1)}** · *refused: {md_text(step.reason or 'no reason given', 300, 1)}*"
            )
            lines.append("> " + (md_text(step.text, max_chars).replace("\n", "\n> ") if step.text else "*(no text)*"))
            lines.append("")
            continue
        action = f"{step.kind} {_payload_text(step.payload)}".strip()
        lines.append(f"{step.index + 1}\\. **{md_text(step.speaker + mark, 100, 1)}** · *{md_text(action, 300, 1)}*")
        if step.text:
            lines.append("> " + md_text(step.text, max_chars).replace("\n", "\n> "))
        lines.append("")
    if len(t.turns) > max_turns:
        lines.append(f"*… {len(t.turns) - max_turns} more turns not shown*")
    return "\n".join(lines).rstrip() + "\n"


def transcripts_markdown(
    transcripts: Sequence[Transcript], title: str = "Representative negotiations", max_chars: int = MAX_CHARS
) -> str:
    """Several transcripts (e.g. best, median and worst of a policy) as one markdown document."""
    parts = [f"### {md_text(title, 200, 1)}", ""]
    if not transcripts:
        parts.append("*no episodes*")
    for t in transcripts:
        parts += [transcript_markdown(t, max_chars), "---", ""]
    return "\n".join(parts).rstrip("-\n ") + "\n"


# ---------------------------------------------------------------------------------------------- HTML
_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #222; }
article { border: 1px solid #ccc; border-radius: 6px; padding: 1rem 1.25rem; margin: 1.5rem 0; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 0; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.turn { margin: .5rem 0; padding: .4rem .6rem; border-left: 4px solid #bbb; background: #fafafa; }
.turn.policy { border-left-color: #2a6fdb; background: #f2f6fd; }
.turn.refused { border-left-color: #c00; background: #fff3f3; }
.reason { color: #a00; }
.action { font-family: ui-monospace, monospace; font-size: .9em; color: #555; overflow-wrap: anywhere; }
.private { color: #7a4b00; } .note { color: #a00; }
"""


def _article(t: Transcript, max_chars: int, max_turns: int) -> str:
    out = [f'<article id="{html_text(t.episode_id, 200, 1)}">', f"<h2>{html_text(_heading(t), 400, 1)}</h2>"]
    if t.policy:
        out.append(f"<p>Policy: {html_text(t.policy, 200, 1)}</p>")
    out.append(f"<p><b>Outcome</b>: {html_text(_outcome_line(t), 400, 1)}</p>")
    if t.note:
        out.append(f'<p class="note">{html_text(t.note, 300, 2)}</p>')
    out.append("<h3>Seats and the private facts each held</h3><ul>")
    for s in t.seats:
        mark = " (policy)" if s.seat == t.policy_seat else ""
        leaked = f"; leaked: {', '.join(s.leaked)}" if s.leaked else ""
        out.append(
            f"<li><b>{html_text(s.seat + mark, 100, 1)}</b>: {html_text(s.agent, 200, 1)}; reward {_number(s.reward)}, "
            f"utility {_number(s.utility)}, invalid actions {s.invalid_actions if s.invalid_actions is not None else 'n/a'}"
            f"{html_text(leaked, 300, 1)}<ul>"
        )
        if s.private_values:  # what decides the outcome: first, and never cut
            values = "; ".join(s.private_values)
            out.append(f'<li class="private"><b>private</b>: {html_text(values, uncut(values), 1)}</li>')
        for text in s.private_text:
            out.append(f'<li class="private text">{html_text(text, max_chars, 12, longest_first=True)}</li>')
        if s.private_facts:
            out.append(f"<li>facts guarded: {html_text('; '.join(s.private_facts), max_chars, 1)}</li>")
        if not s.private_text and not s.private_facts and not s.private_values:
            out.append("<li>no private facts</li>")
        out.append("</ul></li>")
    out.append(f"</ul><h3>Turns ({_turn_count(t)})</h3>")
    for step in _shown_steps(t, max_turns):
        css = "turn policy" if step.speaker == t.policy_seat else "turn"
        if isinstance(step, TranscriptAttempt):
            out.append(
                f'<div class="{css} refused"><b>✗ {html_text(step.speaker, 100, 1)}</b> '
                f'<span class="reason">refused: {html_text(step.reason or "no reason given", 300, 1)}</span>'
                f'<div class="text">{html_text(step.text, max_chars) if step.text else "<i>(no text)</i>"}</div></div>'
            )
            continue
        action = f"{step.kind} {_payload_text(step.payload)}".strip()
        out.append(
            f'<div class="{css}"><b>{step.index + 1}. {html_text(step.speaker, 100, 1)}</b> '
            f'<span class="action">{html_text(action, 300, 1)}</span>'
            f'<div class="text">{html_text(step.text, max_chars)}</div></div>'
        )
    if len(t.turns) > max_turns:
        out.append(f"<p><i>… {len(t.turns) - max_turns} more turns not shown</i></p>")
    out.append("</article>")
    return "\n".join(out)


def transcripts_html(
    transcripts: Sequence[Transcript],
    title: str = "Representative negotiations",
    max_chars: int = MAX_CHARS,
    max_turns: int = MAX_TURNS,
) -> str:
    """A standalone HTML page (no script, no external resource; a Content-Security-Policy forbids both)
    with every transcript, e.g. for an MLflow artifact (`TrackedRun.log_file("transcripts.html", page)`)."""
    body = "\n".join(_article(t, max_chars, max_turns) for t in transcripts) or "<p>No episodes.</p>"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        f"<title>{html_text(title, 200, 1)}</title><style>{_CSS}</style></head>\n"
        f"<body><h1>{html_text(title, 200, 1)}</h1>\n{body}\n</body></html>\n"
    )


def transcript_html(t: Transcript, max_chars: int = MAX_CHARS, max_turns: int = MAX_TURNS) -> str:
    """One transcript as a standalone HTML page."""
    return transcripts_html([t], title=f"{t.env_id} episode {t.episode_id}", max_chars=max_chars, max_turns=max_turns)
