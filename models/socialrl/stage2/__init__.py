"""Stage 2 of SocialRL as plain functions (the Dagster assets in assets/stage2.py call these): the transfer
matrix, the cascade order, the transfer-aware cascade policy, the MOPD student and the unified evaluation.

| module | what |
| --- | --- |
| scores.py | `PolicyScores` (one policy's per-episode rewards on one plan), policy labels, registry names |
| plans.py | the held-out plans and the validation probe, the registered specialists and warm-starts |
| transfer.py | the transfer matrix |
| cascade.py | the cascade order and the cascade policy |
| checks.py | the logic of the transfer matrix's and the cascade's asset checks, recomputed apart from the assets |
| mopd.py | the MOPD student and its recovered share |
| unified.py | the unified evaluation table and promotion |

This package re-exports them all: the assets use `stage2.<name>`, and Dagster's stored outputs of earlier runs
name their classes by this path.

Every policy is evaluated with one plan per domain (the stage-2 held-out scenarios, counterparts and seeds,
`evaluation_profile`), so any two policies are paired episode by episode; their per-episode rewards are
kept as `PolicyScores`, and every difference is `models.evaluation.stats.paired_difference` (mean of the
per-episode differences, bootstrap CI resampling scenarios).

| quantity | definition |
| --- | --- |
| transfer cell (donor, recipient) | paired difference, on the recipient's held-out plan, donor's specialist (or SFT warm-start) minus the base model |
| donor effect | mean of a specialist donor's cells on the *other* domains; > 0 a positive donor, < 0 a negative (destructive) one |
| cascade-order score | see `order_score`: backward transfer of every later stage onto every earlier domain, plus `adjacency_weight` x the mutual benefit of consecutive domains |
| cascade checkpoint rule | after each stage, the checkpoint (of that stage's PPO) with the best mean validation-probe reward over the domains seen so far (the paper's rule) |
| MOPD gap of domain d | (teacher_d - student_d) / (teacher_d - base_d) on the validation probe (models/training/mopd.py); a curriculum decision with no gap defined falls back to uniform sampling and is counted |
| best baseline | of the trivial code baselines (agents/socialrl/baselines.py) played on the same held-out plan, the one with the highest mean there (pooled over the policy's domains for its mean row); every trained policy's row carries its paired difference to it (`unified_evaluation`) |
| MOPD student start | the SFT warm-start of the first stage-2 domain that has one, else a fresh LoRA (`student_start`) |
| recovered share | sum over domains d and paired held-out episodes e of (student - base) / sum of (specialist - base), a ratio of sums with a scenario-cluster bootstrap CI (`recovered_share`); undefined where the specialists' summed advantage is not > 0. With `floor="warmstart"` each domain's own SFT warm-start replaces the base (the result file's `mopd_recovered_share_over_warmstart`) |
| per-domain ratio of domain d | (student_d - base_d) / (specialist_d - base_d), each a paired mean difference; shown only (it swings when the advantage is small); undefined where the specialist does not beat the base by more than `min_advantage` |

The validation probe (`probe_rewards`) plays a few scenarios of the *training* split (never held out) against
`probe_counterparts`; it picks cascade checkpoints and steers the MOPD curriculum, so no held-out episode
informs training. Held-out evaluations only report.
"""

from __future__ import annotations

from models.socialrl.stage2.cascade import (
    ORDER_RULE,
    PAPER_ORDER,
    CandidateScore,
    CascadeOrder,
    CascadeResult,
    CascadeStage,
    OrderScore,
    best_checkpoint,
    cascade_curve_png,
    choose_cascade_order,
    order_score,
    paper_order,
    ppo_checkpoints,
    score_candidates,
    train_cascade,
)
from models.socialrl.stage2.checks import (
    CheckOutcome,
    brute_force_order_scores,
    check_cascade_order,
    check_kept_checkpoints,
    check_transfer_matrix,
)
from models.socialrl.stage2.mopd import (
    FRESH_START,
    MOPDStudentResult,
    RecoveredShare,
    StudentStart,
    domain_share,
    gap_curve_png,
    gap_series,
    recovered_share,
    student_start,
    train_mopd_student,
)
from models.socialrl.stage2.plans import (
    DomainAdapters,
    MissingSpecialistError,
    evaluate_baselines,
    evaluate_policies,
    evaluation_profile,
    heldout_plan,
    probe_rewards,
    probe_scenarios,
    registered_adapters,
    serve,
)
from models.socialrl.stage2.scores import (
    BASE,
    BASELINE_PREFIX,
    CASCADE,
    CASCADE_MODEL,
    DOMAINS_TAG,
    MOPD,
    MOPD_MODEL,
    REWARD_BOUNDS,
    PolicyScores,
    baseline_policy,
    pooled,
    sft_policy,
    short,
    specialist_policy,
)
from models.socialrl.stage2.transfer import (
    TransferCell,
    TransferMatrix,
    TransferMatrixResult,
    build_transfer_matrix,
    compute_transfer_matrix,
    transfer_heatmap,
)
from models.socialrl.stage2.unified import (
    MEAN,
    TRAINED_POLICIES,
    UNIFIED_POLICIES,
    UnifiedEvaluation,
    UnifiedRow,
    unified_evaluation,
    unified_policies,
)

__all__ = [
    "BASE",
    "BASELINE_PREFIX",
    "CASCADE",
    "CASCADE_MODEL",
    "DOMAINS_TAG",
    "FRESH_START",
    "MEAN",
    "MOPD",
    "MOPD_MODEL",
    "ORDER_RULE",
    "PAPER_ORDER",
    "REWARD_BOUNDS",
    "TRAINED_POLICIES",
    "UNIFIED_POLICIES",
    "CandidateScore",
    "CascadeOrder",
    "CascadeResult",
    "CascadeStage",
    "CheckOutcome",
    "DomainAdapters",
    "MOPDStudentResult",
    "MissingSpecialistError",
    "OrderScore",
    "PolicyScores",
    "RecoveredShare",
    "StudentStart",
    "TransferCell",
    "TransferMatrix",
    "TransferMatrixResult",
    "UnifiedEvaluation",
    "UnifiedRow",
    "baseline_policy",
    "best_checkpoint",
    "brute_force_order_scores",
    "build_transfer_matrix",
    "cascade_curve_png",
    "check_cascade_order",
    "check_kept_checkpoints",
    "check_transfer_matrix",
    "choose_cascade_order",
    "compute_transfer_matrix",
    "domain_share",
    "evaluate_baselines",
    "evaluate_policies",
    "evaluation_profile",
    "gap_curve_png",
    "gap_series",
    "heldout_plan",
    "order_score",
    "paper_order",
    "pooled",
    "ppo_checkpoints",
    "probe_rewards",
    "probe_scenarios",
    "recovered_share",
    "registered_adapters",
    "score_candidates",
    "serve",
    "sft_policy",
    "short",
    "specialist_policy",
    "student_start",
    "train_cascade",
    "train_mopd_student",
    "transfer_heatmap",
    "unified_evaluation",
    "unified_policies",
]
