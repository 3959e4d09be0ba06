"""The seed-data filter: every assistant turn of the teacher traces labelled by the rules (`classify_turn`)
or an LLM judge, and the conversations cut before their first dropped turn (the package docstring)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from agents.traces import Trace
from environments.yoao.red_black import BLACK, RED, VOTE, list_frames, load_frame, read_choice
from models.yoao.config import Endpoint, YoaoSettings
from models.yoao.seed.traces import check_training_frames, trace_frame

log = logging.getLogger("socialrl.yoao")


_QUOTED = re.compile(r'"[^"\n]*"')
_RETALIATION = re.compile(
    r"\b(?:punish\w*|retaliat\w*|revenge\w*|pay\s+(?:them|him|her|it)?\s*back|payback|teach\s+them\s+a\s+lesson|"
    r"make\s+them\s+pay|get\s+even|eye\s+for\s+an\s+eye|(?:hit|strike)\s+(?:them\s+)?back)\b",
    re.IGNORECASE,
)
_OUTCOME = re.compile(
    r"(?:\b(?:points?|score\w*|payoffs?|profit\w*|win\w*|gain\w*|maximi[sz]\w*)\b|\+\s?6\b)", re.IGNORECASE
)
_COLLECTIVE = re.compile(
    r"\b(?:together|both\s+(?:sides|teams|of\s+us|nations|parties|groups|labs|countries)|collective\w*|combined|"
    r"joint\w*|mutual\w*|shared?|common\s+good|trust\w*|everyone|everybody|all\s+of\s+us|each\s+other|"
    r"welfare|long\s+(?:run|term))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TurnLabel:
    """The filter's decision on one assistant turn."""

    kind: str
    choice: str | None
    kept: bool
    reason: str
    judge: str | None = None


def classify_turn(text: str, kind: str, frame_name: str | None = None) -> TurnLabel:
    """The rule-based decision on one turn (module docstring); votes are judged by `label_conversation`."""
    frame = load_frame(frame_name) if frame_name else None
    choice = read_choice(text, frame)
    if kind == VOTE:
        if choice == BLACK:
            return TurnLabel(kind, choice, True, "principled_vote")
        return TurnLabel(kind, choice, False, "defects" if choice == RED else "no_choice")
    if choice == RED:
        return TurnLabel(kind, choice, False, "defects")
    if choice is None:
        return TurnLabel(kind, choice, False, "no_choice")
    own = _QUOTED.sub(" ", text)
    if frame is not None:  # the choice words are not arguments ("SHARE" is a choice, not a collective cue)
        for label in (frame.cooperate.label, frame.defect.label):
            own = re.sub(rf"\b{re.escape(label)}\b", " ", own)
    if _RETALIATION.search(own):
        return TurnLabel(kind, choice, False, "retaliation")
    collective = bool(_COLLECTIVE.search(own))
    if _OUTCOME.search(own) and not collective:
        return TurnLabel(kind, choice, False, "outcome_only")
    if not collective:
        return TurnLabel(kind, choice, False, "no_rationale")
    return TurnLabel(kind, choice, True, "principled")


JUDGE_PROMPT = """\
You check training data for a cooperative agent in a team game where {coop} is the cooperative choice and \
{defect} the defecting one. Keep a message only if it chooses {coop} for a principled reason about the welfare \
of both sides (not to retaliate, not only for its own team's points). Answer with one word, KEEP or DROP.

Message: {text}"""


@dataclass(frozen=True)
class LLMJudge:
    """An LLM deciding KEEP/DROP for cooperative opinions, through any OpenAI-compatible endpoint."""

    base_url: str
    model: str
    api_key_env: str | None = None
    concurrency: int = 16
    api_key: str | None = field(default=None, repr=False)
    """The token itself (the rollout proxy's when the judge is the run's engine); else `api_key_env`."""

    def judge_all(self, items: Sequence[tuple[str, str]]) -> list[str]:
        """(text, frame) -> "KEEP", "DROP" or "unparsed" (also when the call fails)."""
        return asyncio.run(self._judge_all(items))

    async def _judge_all(self, items: Sequence[tuple[str, str]]) -> list[str]:
        import os

        gate = asyncio.Semaphore(self.concurrency)
        headers = {}
        key = self.api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        async with httpx.AsyncClient(timeout=120.0) as client:

            async def one(text: str, frame_name: str) -> str:
                frame = load_frame(frame_name)
                prompt = JUDGE_PROMPT.format(coop=frame.cooperate.label, defect=frame.defect.label, text=text)
                body = {
                    "model": self.model,
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": 4,
                    "temperature": 0.0,
                }
                async with gate:
                    try:
                        response = await client.post(
                            f"{self.base_url.rstrip('/')}/chat/completions", json=body, headers=headers
                        )
                        answer = response.json()["choices"][0]["message"]["content"] or ""
                    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
                        return "unparsed"
                found = re.search(r"\b(KEEP|DROP)\b", answer.upper())
                return found.group(1) if found else "unparsed"

            return list(await asyncio.gather(*(one(t, f) for t, f in items)))


@dataclass(frozen=True)
class SeedDataset:
    """The filtered seed data: training conversations and every turn's decision."""

    conversations: tuple[tuple[dict[str, str], ...], ...]
    """Each cut before its first dropped turn; only conversations with at least one assistant turn."""
    turns: tuple[dict[str, Any], ...]
    """One row per assistant turn (schema `yoao_seed_turns`, without run_id)."""
    frames: tuple[str, ...]
    """Frames in the training data (all training frames; asserted)."""
    kept: int
    dropped: dict[str, int]
    """Reason -> dropped turns (`after_drop`: turns after a conversation's first dropped one)."""
    judge_agreement: float | None
    """Share of judged opinions on which the judge agreed with the rules (None without a judge)."""
    examples: dict[str, str]
    """Reason -> one example turn."""
    wall_s: float

    @property
    def trained_turns(self) -> int:
        return sum(m["role"] == "assistant" for c in self.conversations for m in c)


def build_seed_dataset(traces: Sequence[Trace], judge: LLMJudge | None = None) -> SeedDataset:
    """Label every assistant turn of the teacher traces and cut the conversations (module docstring)."""
    start = time.perf_counter()
    frames = sorted({trace_frame(t) for t in traces})
    check_training_frames(frames)
    labelled: list[tuple[Trace, list[int], list[TurnLabel]]] = []
    for trace in traces:
        frame = trace_frame(trace)
        positions = [i for i, m in enumerate(trace.messages) if m["role"] == "assistant"]
        if len(positions) != len(trace.reasoning):
            raise ValueError(f"{trace.episode_id}: {len(positions)} replies but {len(trace.reasoning)} recorded turns")
        labels = [
            classify_turn(trace.messages[p]["content"], turn["kind"], frame)
            for p, turn in zip(positions, trace.reasoning, strict=True)
        ]
        labelled.append((trace, positions, labels))
    agreement = _apply_judge(labelled, judge) if judge is not None else None
    conversations, rows = [], []
    dropped: Counter[str] = Counter()
    examples: dict[str, str] = {}
    kept = 0
    for trace, positions, labels in labelled:
        frame = trace_frame(trace)
        opinion_kept: dict[int, bool] = {}
        cut: int | None = None
        for p, turn, label in zip(positions, trace.reasoning, labels, strict=True):
            round_ = int(turn["round"])
            if label.kind == VOTE and label.kept and not opinion_kept.get(round_, False):
                label = TurnLabel(label.kind, label.choice, False, "vote_without_principled_opinion", label.judge)
            if label.kind != VOTE:
                opinion_kept[round_] = opinion_kept.get(round_, True) and label.kept
            reason = label.reason
            if cut is not None:
                reason, kept_now = "after_drop", False
            else:
                kept_now = label.kept
                if not kept_now:
                    cut = p
            if kept_now:
                kept += 1
            else:
                dropped[reason] += 1
            examples.setdefault(reason, trace.messages[p]["content"])
            rows.append(
                {
                    "episode_id": trace.episode_id,
                    "frame": frame,
                    "split": load_frame(frame).split,
                    "turn": p,
                    "round": round_,
                    "kind": label.kind,
                    "text": trace.messages[p]["content"],
                    "choice": label.choice,
                    "kept": kept_now,
                    "reason": reason,
                    "judge": label.judge,
                }
            )
        messages = trace.messages if cut is None else trace.messages[:cut]
        if any(m["role"] == "assistant" for m in messages):
            conversations.append(tuple(dict(m) for m in messages))
    dataset = SeedDataset(
        conversations=tuple(conversations),
        turns=tuple(rows),
        frames=tuple(frames),
        kept=kept,
        dropped=dict(dropped),
        judge_agreement=agreement,
        examples=examples,
        wall_s=time.perf_counter() - start,
    )
    assert_no_held_out_frames(dataset)
    log.info("seed dataset: %d turns kept, dropped %s, %d conversations", kept, dict(dropped), len(conversations))
    return dataset


def _apply_judge(labelled: list[tuple[Trace, list[int], list[TurnLabel]]], judge: LLMJudge) -> float | None:
    """Let the judge decide the cooperative opinions in place; returns its agreement with the rules."""
    items, where = [], []
    for t, (trace, positions, labels) in enumerate(labelled):
        for i, (p, label) in enumerate(zip(positions, labels, strict=True)):
            if label.kind != VOTE and label.choice == BLACK:
                items.append((trace.messages[p]["content"], trace_frame(trace)))
                where.append((t, i))
    answers = judge.judge_all(items) if items else []
    agree = judged = 0
    for (t, i), answer in zip(where, answers, strict=True):
        label = labelled[t][2][i]
        if answer == "unparsed":
            labelled[t][2][i] = TurnLabel(label.kind, label.choice, label.kept, label.reason, answer)
            continue
        judged += 1
        agree += (answer == "KEEP") == label.kept
        reason = "judge_keep" if answer == "KEEP" else "judge_drop"
        labelled[t][2][i] = TurnLabel(label.kind, label.choice, answer == "KEEP", reason, answer)
    return agree / judged if judged else None


def assert_no_held_out_frames(dataset: SeedDataset) -> None:
    """Held-out frames never appear in training data: neither as a turn's frame nor in any message (their
    intros and team names are distinctive)."""
    held_out = {name: load_frame(name) for name in list_frames("heldout")}
    bad = sorted({row["frame"] for row in dataset.turns if row["frame"] in held_out or row["split"] != "train"})
    if bad:
        raise ValueError(f"held-out frames {bad} in the seed data")
    for frame in held_out.values():
        markers = (frame.intro[:80], *frame.team_names.values())
        for conversation in dataset.conversations:
            if any(marker in m["content"] for m in conversation for marker in markers):
                raise ValueError(f"held-out frame {frame.name} appears in a training conversation")


def judge_for(settings: YoaoSettings, engine_url: str, engine_key: str | None = None) -> LLMJudge | None:
    """The configured judge (None: rules only); `engine_key` is the token of `engine_url`."""
    judge: Endpoint | None = settings.judge
    if judge is None:
        return None
    url = judge.url(engine_url)
    return LLMJudge(url, judge.model, judge.api_key_env, api_key=engine_key if url == engine_url else None)


def dataset_summary(dataset: SeedDataset) -> dict[str, Any]:
    return {
        "kept": dataset.kept,
        "dropped": dataset.dropped,
        "conversations": len(dataset.conversations),
        "trained_turns": dataset.trained_turns,
        "frames": list(dataset.frames),
        "judge_agreement": dataset.judge_agreement,
    }
