"""Each paper's measurers (models/socialrl/paper_claims.py, models/yoao/paper_claims.py) on stand-ins of the
result classes their stages store: every claim a materialised stage can measure comes out measured (with the
key it read), none reads "could not be read", and claims with no interval say why. The file measurers, on real
result files: tests/test_paper_report_files.py. No engine, no training."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from models.evaluation.stats import Estimate
from models.profiles import PROFILES
from models.report import (
    NOT_MEASURED,
    NOT_SHOWN,
    OPPOSITE,
    REPRODUCED,
    Interval,
    Snapshot,
    StageRead,
    build_report,
)
from models.socialrl import behaviour, red_team, stage2, tom
from models.socialrl import paper_claims as socialrl_claims
from models.yoao import paper_claims as yoao_claims
from models.yoao.experiments import ExperimentResult
from models.yoao.games import ArmSummary
from models.yoao.report import ArmOutcomes, YoaoResults
from models.yoao.sugarscape import FractionResult, SugarscapeResult

NAN = Estimate(math.nan, math.nan, math.nan, 0)
CURRENT = env_version()


def fill(cls: type, **given: Any) -> Any:
    """An instance of the dataclass `cls` with `given` fields, every other required field empty of its type."""
    defaults = {"Estimate": NAN, "float": math.nan, "int": 0, "str": "", "bool": False, "Path": Path("/x")}
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in given or f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        kind = str(f.type).split("[")[0].split(" |")[0]
        values[f.name] = defaults.get(kind, () if kind == "tuple" else {} if kind in ("dict", "Mapping") else None)
    return cls(**values, **given)


def e(mean: float, low: float, high: float, clusters: int = 12, n: int = 36) -> Estimate:
    return Estimate(mean, low, high, n, clusters)


def read(asset: str, value: Any, partition: str | None = None) -> StageRead:
    return StageRead(
        asset=asset,
        partition=partition,
        run_id=f"run-{asset}",
        timestamp=1.7e9,
        profile="cpu",
        metadata={},
        value=value,
    )


def scores(policy: str, env_id: str, rewards: list[float]) -> stage2.PolicyScores:
    keys = tuple(f"{i}|s{i // 2}|c|buyer|0" for i in range(len(rewards)))
    clusters = tuple(f"{env_id}|{i // 2}" for i in range(len(rewards)))
    return stage2.PolicyScores(policy, env_id, policy, keys, clusters, tuple(rewards))


def flipped(x: Estimate, sign: float) -> Estimate:
    """`x` mirrored around 0 when `sign` is -1 (the interval's ends swap)."""
    return x if sign > 0 else Estimate(-x.mean, -x.ci_high, -x.ci_low, x.n, x.clusters)


CASCADE_REWARDS = [0.35 + 0.01 * (i % 4) for i in range(20)]
MOPD_REWARDS = [0.2 + 0.01 * (i % 2) for i in range(20)]


def socialrl_snapshot(sign: float = 1.0) -> Snapshot:
    """The stand-in results; `sign=-1` reverses every measured effect (the cascade and the MOPD student swap
    their episodes, the red team's, the ToM prompt's differences and the skill correlation are mirrored)."""
    env = "craigslist-v0"
    n = 20  # 10 scenario clusters of two episodes
    base = scores(stage2.BASE, env, [0.1 + 0.01 * (i % 3) for i in range(n)])
    specialist = scores(stage2.specialist_policy(env), env, [0.3 + 0.01 * (i % 5) for i in range(n)])
    high, low = (CASCADE_REWARDS, MOPD_REWARDS) if sign > 0 else (MOPD_REWARDS, CASCADE_REWARDS)
    cascade = scores(stage2.CASCADE, env, high)
    mopd = scores(stage2.MOPD, env, low)
    cell = stage2.TransferCell(env, "specialist", env, specialist.minus(base), specialist.mean, base.mean)
    matrix = stage2.TransferMatrix((env,), (cell,), (base, specialist))
    transfer = fill(stage2.TransferMatrixResult, matrix=matrix, specialists={}, sft_domains=())
    share = stage2.recovered_share([mopd], matrix)
    rule = scores(stage2.baseline_policy("accept_first"), env, [0.25 + 0.01 * (i % 3) for i in range(n)])
    unified = stage2.unified_evaluation(matrix, (cascade,), (mopd,), (rule,), {}, None, None, "r")
    summary = {
        p: fill(behaviour.BehaviourSummary, policy=f"{env}:{p}", env_id=env, episodes=10, rejection_rate=r,
                counter_offer_share=0.5, commitment_rate=0.1, over_conceding_rate=0.2)
        for p, r in (("ppo", 0.3), ("base", 0.1))
    }  # fmt: skip
    domain = red_team.RedTeamDomain(
        "marketplace-v0", 12, "extractor", {}, {}, {"specialist - base": flipped(e(-0.2, -0.3, -0.1), sign)}
    )
    analysis = fill(
        tom.ToMDomainResult, env_id=env,
        differences={"base_tom_prompt - base": flipped(e(-0.1, -0.2, -0.02), sign),
                     "sft_act_tom_prompt - sft_act": flipped(e(0.05, 0.01, 0.1), sign)},
        correlation={"infer": flipped(e(0.3, 0.1, 0.5), sign), "anticipate": e(0.05, -0.1, 0.2)},
    )  # fmt: skip
    return Snapshot(
        (
            read("transfer_matrix", transfer),
            read("cascade_policy", fill(stage2.CascadeResult, scores=(cascade,))),
            read("mopd_student", fill(stage2.MOPDStudentResult, scores=(mopd,), domains=(env,), steps=4, share=share)),
            read("unified_evaluation", unified),
            read("behaviour_report", behaviour.BehaviourReport(tuple(summary.values()), 20)),
            read("privacy_red_team", red_team.RedTeamReport((domain,))),
            read("tom_analysis", analysis, env),
        )
    )


def test_the_socialrl_measurers_read_every_stage_they_name() -> None:
    report = build_report([socialrl_claims.SPEC], socialrl_snapshot(), PROFILES, current_env_version=CURRENT)
    rows = {(r.claim.claim_id, r.scope): r for r in report.rows}
    assert not [r for r in report.rows if "could not be read" in r.verdict.reason]
    # stage 1 is absent here: its claims say so
    assert rows[("warm_start", "")].verdict.kind == NOT_MEASURED
    assert "not materialised" in rows[("warm_start", "")].verdict.reason
    # stage 2: the cascade beats the MOPD student and the specialists on the same episodes, over 10 clusters
    assert rows[("cascade_best_unifier", "mean over craigslist-v0")].verdict.kind == REPRODUCED
    assert rows[("unified_vs_specialists", "cascade, mean over craigslist-v0")].verdict.kind == REPRODUCED
    assert rows[("unified_vs_specialists", "MOPD student, mean over craigslist-v0")].verdict.kind == OPPOSITE
    recovered = rows[("mopd_recovered_share", "4 steps, craigslist-v0")]
    assert recovered.verdict.kind == REPRODUCED and recovered.clusters == "10 clusters"
    # Beside each stage-2 row, the best trivial rule on the same held-out episodes and the policy against it.
    cascade_row = rows[("cascade_best_unifier", "mean over craigslist-v0")]
    # The rule's mean is 0.25 + 0.0095; the cascade's 0.365 and the student's 0.205.
    assert cascade_row.baseline.startswith("accept_first: mean reward 0.259 [")
    assert "; cascade - accept_first 0.105 [" in cascade_row.baseline
    assert "; mopd - accept_first -0.055 [" in recovered.baseline
    mopd_row = rows[("unified_vs_specialists", "MOPD student, mean over craigslist-v0")]
    assert mopd_row.baseline == recovered.baseline
    asymmetry = rows[("transfer_asymmetry", "all domains")]
    assert asymmetry.verdict.kind == NOT_SHOWN and "donor effects" in asymmetry.value
    # the behaviour report's rates have no interval: not shown, and the row says what was measured
    rejection = rows[("rejection_counter_offer", "craigslist-v0")]
    assert rejection.verdict.kind == NOT_SHOWN and "rejection_rate: specialist 0.30 vs base 0.10" in rejection.value
    assert rows[("leakage", "red team, marketplace-v0, specialist - base")].verdict.kind == REPRODUCED
    # The ToM prompt on the base and on the warm-start: one row each, read from its own paired difference.
    assert rows[("tom_prompt", "craigslist-v0, on the base")].verdict.kind == REPRODUCED
    assert rows[("tom_prompt", "craigslist-v0, on the warm-start")].verdict.kind == OPPOSITE
    assert rows[("skill_outcome_correlation", "craigslist-v0, anticipate")].verdict.kind == NOT_SHOWN
    assert rows[("tom_distillation", "craigslist-v0")].verdict.kind == NOT_MEASURED  # its key is absent
    # The values are the stored episodes' own paired differences, recomputed here from the per-episode rewards.
    env = "craigslist-v0"
    cascade, mopd = scores(stage2.CASCADE, env, CASCADE_REWARDS), scores(stage2.MOPD, env, MOPD_REWARDS)
    specialist = scores(stage2.specialist_policy(env), env, [0.3 + 0.01 * (i % 5) for i in range(20)])
    assert cascade_row.value == Interval.of(cascade.minus(mopd)).text() == "0.160 [0.154, 0.166]"
    assert (
        rows[("unified_vs_specialists", "cascade, mean over craigslist-v0")].value
        == Interval.of(cascade.minus(specialist)).text()
    )
    assert mopd_row.value == Interval.of(mopd.minus(specialist)).text()
    assert cascade_row.n == 20 and cascade_row.clusters == "10 clusters"


def test_the_socialrl_verdicts_follow_the_data_not_the_stand_in() -> None:
    """The same stand-ins with every effect reversed: each claim that came out reproduced now comes out in the
    opposite, and the MOPD student's row the other way round. A measurer that read another key, or
    decided without its data, keeps its verdict and fails here."""
    verdicts = {}
    for sign in (1.0, -1.0):
        report = build_report([socialrl_claims.SPEC], socialrl_snapshot(sign), PROFILES, current_env_version=CURRENT)
        verdicts[sign] = {(r.claim.claim_id, r.scope): r.verdict.kind for r in report.rows}
    flips = {
        ("cascade_best_unifier", "mean over craigslist-v0"): (REPRODUCED, OPPOSITE),
        ("unified_vs_specialists", "cascade, mean over craigslist-v0"): (REPRODUCED, OPPOSITE),
        ("unified_vs_specialists", "MOPD student, mean over craigslist-v0"): (OPPOSITE, REPRODUCED),
        ("leakage", "red team, marketplace-v0, specialist - base"): (REPRODUCED, OPPOSITE),
        ("tom_prompt", "craigslist-v0, on the base"): (REPRODUCED, OPPOSITE),
        ("tom_prompt", "craigslist-v0, on the warm-start"): (OPPOSITE, REPRODUCED),
        ("skill_outcome_correlation", "craigslist-v0, infer"): (REPRODUCED, OPPOSITE),
    }
    assert {key: (verdicts[1.0][key], verdicts[-1.0][key]) for key in flips} == flips


def _arm(name: str, untrained: Estimate) -> ArmSummary:
    return fill(ArmSummary, arm=name, roles=(), games=8, untrained_cooperation=untrained, cooperation=untrained)


def yoao_snapshot(skipped_sugarscape: str = "", sign: float = 1.0) -> Snapshot:
    """The stand-in results; `sign=-1` mirrors every measured effect."""
    outcomes = tuple(
        ArmOutcomes(name, _arm(name, e(0.5, 0.3, 0.7)), paired and flipped(paired, sign), None, None)
        for name, paired in (("k=0", None), ("k=1", e(0.3, 0.15, 0.45)), ("k=3", e(0.5, 0.3, 0.6, clusters=5)))
    )
    results = fill(YoaoResults, profile="cpu", frames=("trade_war",), outcomes=outcomes)
    mute = fill(ExperimentResult, experiment="propagation_mute", frame="trade_war",
                untrained_comparisons={"k=1 muted vs k=1": flipped(e(-0.2, -0.35, -0.05), sign),
                                       "k=1 muted vs k=0": e(0.1, 0, 0.2)})  # fmt: skip
    baseline = fill(ExperimentResult, frame="trade_war", skipped="not requested")
    fractions = tuple(
        fill(FractionResult, fraction=f, trade_success=e(t, t - 0.1, t + 0.1), survival=e(t, t - 0.1, t + 0.1),
             mean_lifespan=e(5, 4, 6), leaning_shift_untrained=flipped(e(0.2, 0.05, 0.35), sign))
        for f, t in ((0.0, 0.2), (0.5, 0.6), (1.0, 0.9))
    )  # fmt: skip
    sugarscape = fill(SugarscapeResult, fractions=fractions, skipped=skipped_sugarscape)
    return Snapshot(
        (
            read("yoao_results", results),
            read("propagation_mute", mute, "trade_war"),
            read("propagation_prompting_baseline", baseline, "trade_war"),
            read("sugarscape_zero_shot", sugarscape),
        )
    )


def test_the_yoao_measurers_read_every_stage_they_name() -> None:
    report = build_report([yoao_claims.SPEC], yoao_snapshot(), PROFILES, current_env_version=CURRENT)
    rows = {(r.claim.claim_id, r.scope): r for r in report.rows}
    assert not [r for r in report.rows if "could not be read" in r.verdict.reason]
    assert rows[("one_seed", "k=1, frames trade_war")].verdict.kind == REPRODUCED
    more = rows[("more_seeds", "k=3, frames trade_war")]
    assert more.verdict.kind == NOT_SHOWN and "(< 8 clusters)" in more.clusters  # 5 games: flagged
    assert rows[("mute", "trade_war, k=1 muted vs k=1")].verdict.kind == REPRODUCED
    assert ("mute", "trade_war, k=1 muted vs k=0") not in rows  # not the mute claim's comparison
    prompting = rows[("prompting_baseline", "trade_war")]
    assert prompting.verdict.kind == NOT_MEASURED and "not requested" in prompting.verdict.reason
    trades = rows[("sugarscape_trades", "100% vs 0% seeds")]
    assert trades.verdict.kind == NOT_SHOWN and "no interval of their difference" in trades.verdict.reason
    assert "100% seeds 0.900 [0.800, 1.000] vs no seeds 0.200 [0.100, 0.300]" in trades.value
    assert rows[("identity_leaning", "50% seeds")].verdict.kind == REPRODUCED
    for claim_id in ("cross_architecture", "broadcast_vs_pairwise"):
        assert rows[(claim_id, "")].verdict.kind == NOT_MEASURED and "no asset" in rows[(claim_id, "")].verdict.reason
    assert rows[("persistence", "")].verdict.kind == NOT_MEASURED  # not in the snapshot

    skipped = build_report(
        [yoao_claims.SPEC], yoao_snapshot("left to the paper profile"), PROFILES, current_env_version=CURRENT
    )
    survival = next(r for r in skipped.rows if r.claim.claim_id == "survival")
    assert survival.verdict.kind == NOT_MEASURED and "left to the paper profile" in survival.verdict.reason


def test_the_yoao_verdicts_follow_the_data_not_the_stand_in() -> None:
    """The YOAO stand-ins with every measured effect mirrored: the claims that only an instance gives with an
    interval (the muted arm against the same k, the leaning shift) come out opposite. (The seed counts against
    k = 0 are flipped in a real result file: tests/test_paper_report_files.py.)"""
    verdicts = {}
    for sign in (1.0, -1.0):
        report = build_report([yoao_claims.SPEC], yoao_snapshot(sign=sign), PROFILES, current_env_version=CURRENT)
        verdicts[sign] = {(r.claim.claim_id, r.scope): r.verdict.kind for r in report.rows}
    for key in (("mute", "trade_war, k=1 muted vs k=1"), ("identity_leaning", "50% seeds")):
        assert (verdicts[1.0][key], verdicts[-1.0][key]) == (REPRODUCED, OPPOSITE), key
