"""Have the YOAO warm-starts learned their data? The format warm-up and the seed replayed on held-out turns.

Stage 1 plays a warm-start against its teacher on held-out episodes (models/socialrl/imitation.py). A YOAO
warm-start's teacher is a code agent whose every reply is in its traces, so the comparison is exact: each
assistant turn of a held-out conversation (`TrainedAdapter.held_out`, never trained on) is asked of the
served adapter with the teacher's own context (everything before that turn), and the adapter's reply is read
as the game reads it. Per adapter:

| measure | definition |
| --- | --- |
| `valid_vote_rate` | vote turns whose reply is a vote the game accepts (`read_choice` finds one, not negated) |
| `states_choice_rate` | discussion turns whose reply states a choice |
| `vote_follows_teacher` | vote turns whose reply votes what the teacher voted in that context (an invalid reply does not) |
| `statement_follows_teacher` | discussion turns whose reply states the teacher's choice |
| `black_vote_share` | BLACK among the valid votes |
| `principled_rate` | discussion turns the seed-data filter would keep (`classify_turn`: BLACK with a collective-welfare reason); the seed's teacher scores 1, the vote-following tutors 0, the persuadable tutors the share of their statements that argue BLACK from the group's welfare |
| `eval_curve`, `plateaued` | the held-out loss at step 0, every checkpoint and the end (`TrainedAdapter.eval_curve`), and whether its last interval gained less than `PLATEAU_TOLERANCE` |

Rates are pooled over turns with a bootstrap interval clustered by conversation. Three replayed turns (the
context's last message, the teacher's reply, the adapter's) are kept as transcripts.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from environments.yoao.red_black import BLACK, VOTE, VOTE_REQUEST, list_frames, load_frame, read_choice
from models.display import fixed
from models.evaluation.stats import Estimate, mean_estimate
from models.yoao.replay import Message, ReplayTurn, ask_turns
from models.yoao.seed.dataset import classify_turn
from models.yoao.seed.training import PLATEAU_TOLERANCE, TrainedAdapter

if TYPE_CHECKING:
    from models.yoao.listening import ListenerProbe
    from models.yoao.seed_audit import SeedAudit

METRICS = (
    "valid_vote_rate",
    "states_choice_rate",
    "vote_follows_teacher",
    "statement_follows_teacher",
    "black_vote_share",
    "principled_rate",
)


def conversation_frame(conversation: Sequence[Message]) -> str:
    """The frame a rendered conversation plays (its intro is in the first user message)."""
    text = next((m["content"] for m in conversation if m["role"] == "user"), "")
    for name in list_frames():
        if load_frame(name).intro[:80] in text:
            return name
    raise ValueError("no frame's intro in the conversation's first user message")


def replay_turns(conversations: Sequence[Sequence[Message]]) -> list[ReplayTurn]:
    """Every assistant turn of the conversations, with its context (a vote turn's request says VOTE_REQUEST)."""
    turns = []
    for c, conversation in enumerate(conversations):
        frame = conversation_frame(conversation)
        for p, message in enumerate(conversation):
            if message["role"] != "assistant":
                continue
            kind = VOTE if VOTE_REQUEST in conversation[p - 1]["content"] else "opinion"
            turns.append(ReplayTurn(c, tuple(conversation[:p]), message["content"], kind, frame))
    return turns


@dataclass(frozen=True)
class AdapterImitation:
    """One adapter replayed on its held-out turns (module table)."""

    adapter: str
    """Registered name of the adapter."""
    turns: int
    conversations: int
    metrics: dict[str, Estimate]
    eval_curve: tuple[tuple[int, float], ...]
    plateau_gain: float
    """Relative drop of the held-out loss over the last checkpoint interval."""
    transcripts: tuple[dict[str, str], ...] = field(repr=False, default=())

    @property
    def plateaued(self) -> bool:
        return bool(self.plateau_gain < PLATEAU_TOLERANCE)

    @property
    def valid_vote_rate(self) -> float:
        return self.metrics["valid_vote_rate"].mean

    def as_dict(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "turns": self.turns,
            "conversations": self.conversations,
            **{k: v.as_dict() for k, v in self.metrics.items()},
            "eval_curve": [[step, round(loss, 4)] for step, loss in self.eval_curve],
            "plateau_gain": None if math.isnan(self.plateau_gain) else round(self.plateau_gain, 4),
            "plateaued": self.plateaued,
            "transcripts": list(self.transcripts),
        }

    def markdown(self) -> str:
        rows = [f"**{self.adapter}** ({self.turns} held-out turns of {self.conversations} conversations)", "",
                "| measure | rate [95% CI] |", "| --- | --- |"]  # fmt: skip
        for name, e in self.metrics.items():
            rows.append(f"| {name} | {e.text('.2f')} (n={e.n}) |")
        curve = ", ".join(f"{step}: {loss:.3f}" for step, loss in self.eval_curve)
        rows += ["", f"held-out loss by step: {curve}; last interval gained {_f(self.plateau_gain)} "
                 f"({'plateaued' if self.plateaued else 'still falling'})", ""]  # fmt: skip
        for t in self.transcripts:
            rows += [f"> {t['context']}", "", f"teacher: `{t['teacher']}`  ", f"{self.adapter}: `{t['model']}`", ""]
        return "\n".join(rows)


def _f(value: float | None) -> str:
    return fixed(value, ".2f")


def score_replies(turns: Sequence[ReplayTurn], replies: Sequence[str]) -> dict[str, Estimate]:
    """The module table's rates, from the replayed turns and the adapter's replies."""
    values: dict[str, list[tuple[float, int]]] = {name: [] for name in METRICS}
    for turn, reply in zip(turns, replies, strict=True):
        frame = load_frame(turn.frame)
        mine, theirs = read_choice(reply, frame), read_choice(turn.teacher, frame)
        if turn.kind == VOTE:
            values["valid_vote_rate"].append((float(mine is not None), turn.conversation))
            values["vote_follows_teacher"].append((float(mine == theirs), turn.conversation))
            if mine is not None:
                values["black_vote_share"].append((float(mine == BLACK), turn.conversation))
        else:
            values["states_choice_rate"].append((float(mine is not None), turn.conversation))
            values["statement_follows_teacher"].append((float(mine == theirs), turn.conversation))
            kept = classify_turn(reply, "opinion", turn.frame).kept
            values["principled_rate"].append((float(kept), turn.conversation))
    return {
        name: mean_estimate([v for v, _ in pairs], [c for _, c in pairs], (0.0, 1.0)) for name, pairs in values.items()
    }


def replay_adapter(
    adapter: TrainedAdapter,
    base_url: str,
    model: str,
    conversations: int,
    max_tokens: int = 64,
    temperature: float = 0.7,
    api_key: str | None = None,
    concurrency: int = 32,
) -> AdapterImitation:
    """Replay the first `conversations` held-out conversations of `adapter`, served as `model` at `base_url`."""
    held_out = adapter.held_out[:conversations]
    turns = replay_turns(held_out)
    replies = asyncio.run(ask_turns(turns, base_url, model, max_tokens, temperature, api_key, concurrency))
    shown = [turns.index(t) for t in _spread(turns)]
    return AdapterImitation(
        adapter=adapter.registered_name,
        turns=len(turns),
        conversations=len(held_out),
        metrics=score_replies(turns, replies),
        eval_curve=adapter.eval_curve,
        plateau_gain=adapter.plateau_gain,
        transcripts=tuple(
            {"context": turns[i].context[-1]["content"][-300:], "teacher": turns[i].teacher, "model": replies[i]}
            for i in shown
        ),
    )


def _spread(turns: Sequence[ReplayTurn], n: int = 3) -> list[ReplayTurn]:
    """A discussion turn, a vote turn and the last turn (a few transcripts to read beside the rates)."""
    picks = [next((t for t in turns if t.kind != VOTE), None), next((t for t in turns if t.kind == VOTE), None)]
    picks.append(turns[-1] if turns else None)
    unique = []
    for t in picks:
        if t is not None and t not in unique:
            unique.append(t)
    return unique[:n]


@dataclass(frozen=True)
class WarmstartImitation:
    """Both YOAO warm-starts replayed on their held-out turns."""

    format_warmup: AdapterImitation
    seed: AdapterImitation
    min_valid_vote_rate: float
    """The check's threshold (1 - the abstention limit)."""
    listener: ListenerProbe | None = None
    """The format warm-up asked the incentive audit's vote turns (models/yoao/listening.py); None: not probed."""
    seed_audit: SeedAudit | None = None
    """The seed in the incentive audit's seed seat among the tutors (models/yoao/seed_audit.py); None: not run."""

    @property
    def passed(self) -> bool:
        """Both adapters vote validly and their held-out loss has plateaued."""
        adapters = (self.format_warmup, self.seed)
        return all(a.valid_vote_rate >= self.min_valid_vote_rate and a.plateaued for a in adapters)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format_warmup": self.format_warmup.as_dict(),
            "seed": self.seed.as_dict(),
            "min_valid_vote_rate": self.min_valid_vote_rate,
            "passed": self.passed,
            "listener_probe": self.listener.as_json() if self.listener else None,
            "seed_audit": self.seed_audit.as_json() if self.seed_audit else None,
        }

    def markdown(self) -> str:
        parts = [self.format_warmup.markdown(), self.seed.markdown()]
        probes = [p.markdown() for p in (self.listener, self.seed_audit) if p is not None]
        return "\n\n".join(parts + probes)

    def summary(self) -> dict[str, Any]:
        """The result file's `warmstarts`: per adapter the rates' means, the loss curve and the plateau."""

        def short(a: AdapterImitation) -> dict[str, Any]:
            means = {name: e.as_dict()["mean"] for name, e in a.metrics.items()}
            curve = [[step, round(loss, 4)] for step, loss in a.eval_curve]
            return {**means, "turns": a.turns, "eval_curve": curve, "plateaued": a.plateaued}

        out = {"format_warmup": short(self.format_warmup), "seed": short(self.seed), "passed": self.passed}
        if self.listener:
            out["listener_probe"] = self.listener.as_json()
        if self.seed_audit:
            out["seed_audit"] = self.seed_audit.as_json()
        return out
