"""The YOAO seed pipeline as plain functions: teacher selection -> seed traces -> filtered seed dataset ->
format-only warm-up of the untrained teammates -> seed agent (LoRA SFT on top of the warm-up): selection.py,
traces.py, dataset.py (the filter), training.py. This package re-exports them (the YOAO assets use
`models.yoao.seed`, and Dagster's stored outputs of earlier runs name their classes by this path).

Teacher selection (`select_teacher`): every candidate plays `selection_games` games as the whole of team A on
the training frames against the scripted opponents (cycled); the candidate with the highest mean collective
welfare (both teams' scores, 150 at most) is selected (the paper: Kimi-K2, 127/150). A candidate whose probe
call fails, or whose every call fails, is skipped with the reason; one whose votes end as abstentions more
often than `max_abstention_rate` is not eligible (a tie counts as BLACK, so abstaining looks like cooperation).
Ties in welfare go to the earlier candidate (the code teacher comes first).

Seed-data filter (`classify_turn`, the rule-based default; `LLMJudge` optional). Each assistant turn of a
teacher trace is an opinion or a vote. Quoted text (a teammate's words between double quotes) and the frame's two
choice words (SHARE is a choice, not an argument) are ignored by the cue rules.

| decision | rule (first that applies) |
| --- | --- |
| drop `defects` | the turn states RED (read exactly as the game reads it) |
| drop `no_choice` | an opinion that states no choice |
| drop `retaliation` | it speaks of retaliating: punish, retaliate, revenge, pay (them) back, teach them a lesson, make them pay, get even, eye for an eye, hit/strike back, payback |
| drop `outcome_only` | it argues from the team's own points, score or winning (points, score, payoff, profit, +6, win, gain, maximise) with no collective-welfare cue |
| drop `no_rationale` | it states BLACK with no collective-welfare cue: together, both sides/teams/of us, collective, combined, joint, mutual, shared, common good, trust, everyone, all of us, each other, welfare, long run/term |
| keep `principled` | it states BLACK with a collective-welfare cue |
| vote: keep `principled_vote` / drop `vote_without_principled_opinion` | a BLACK vote is kept when the seat's opinion in the same round was kept (the vote carries no text of its own to judge) |

The LLM judge (any OpenAI endpoint) decides instead of the rules for opinions that state BLACK (answer KEEP or
DROP; an unreadable answer leaves the rule's decision, counted). `run_sft` trains on every assistant turn of
the conversations it gets, so each conversation is cut before its first dropped turn (the later turns are
counted as `after_drop`): every trained turn is a kept one, in its real context.

Format warm-up (`format_warmup_traces`): `FormatTutor` code agents of the kinds in `warmup_tutors` fill team A
on the training frames (agents/yoao/red_black_teacher.py). The default kind, `persuadable`, leans
selfish and weighs the grounded reasons it hears against that leaning (agents/yoao/persuasion.py); the vote-following
kinds (vote with the stated majority, the last speaker, the longest argument, or a prior of mean 1/2) are
played in pairs of a game and its mirror with `warmup_mirror`, so that their votes are exactly balanced. A LoRA
adapter SFT'd on those games teaches the untrained teammates the answer format (valid votes) and what moves
them. Held-out games and conversations give both SFTs a learning curve (training.py). The seed adapter
continues the warm-up adapter, so seed and untrained teammates differ only by the cooperative training.
"""

from __future__ import annotations

from models.yoao.seed.dataset import (
    JUDGE_PROMPT,
    LLMJudge,
    SeedDataset,
    TurnLabel,
    assert_no_held_out_frames,
    build_seed_dataset,
    classify_turn,
    dataset_summary,
    judge_for,
)
from models.yoao.seed.selection import (
    CODE_TEACHER,
    CandidateRow,
    TeacherCandidate,
    TeacherChoice,
    TeacherSelection,
    probe_endpoint,
    select_teacher,
    spread_games,
    teacher_candidates,
)
from models.yoao.seed.traces import (
    ENV_ID,
    TraceSet,
    TurnTracedAgent,
    advocate,
    advocate_seat,
    check_training_frames,
    format_warmup_traces,
    seed_traces,
    trace_frame,
    trace_rows,
    vote_balance,
)
from models.yoao.seed.training import (
    SEED_MODEL_NAME,
    WARMUP_MODEL_NAME,
    FormatWarmup,
    TrainedAdapter,
    format_warmup,
    split_eval,
    train_adapter,
    train_seed,
)

__all__ = [
    "CODE_TEACHER",
    "ENV_ID",
    "JUDGE_PROMPT",
    "SEED_MODEL_NAME",
    "WARMUP_MODEL_NAME",
    "CandidateRow",
    "FormatWarmup",
    "LLMJudge",
    "SeedDataset",
    "TeacherCandidate",
    "TeacherChoice",
    "TeacherSelection",
    "TraceSet",
    "TrainedAdapter",
    "TurnLabel",
    "TurnTracedAgent",
    "advocate",
    "advocate_seat",
    "assert_no_held_out_frames",
    "build_seed_dataset",
    "check_training_frames",
    "classify_turn",
    "dataset_summary",
    "format_warmup",
    "format_warmup_traces",
    "judge_for",
    "probe_endpoint",
    "seed_traces",
    "select_teacher",
    "split_eval",
    "spread_games",
    "teacher_candidates",
    "trace_frame",
    "trace_rows",
    "train_adapter",
    "train_seed",
    "vote_balance",
]
