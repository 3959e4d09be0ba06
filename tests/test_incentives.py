"""The incentive audit (models/socialrl/incentives.py), its asset and check, and env_version."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agents.env_version import env_version
from agents.socialrl.scripted import BuyerScript, ScriptedBuyer
from models.evaluation.policy import EvaluationPlan, evaluate_policy
from models.evaluation.stats import Estimate
from models.socialrl.incentives import (
    BEHAVIOURS,
    IncentiveAudit,
    IncentiveSettings,
    audit_domain,
    search_fixed_rule,
)

SMALL = IncentiveSettings(base_hold_shares=(0.5,), fixed_rule_grid=(0.6, 0.8, 0.95))


@pytest.fixture(scope="module")
def craigslist_audit():
    plan = EvaluationPlan("craigslist-v0", 10, seat="buyer", seed=3)
    return audit_domain(plan, SMALL)


def test_the_audit_pairs_scripts_that_differ_in_one_behaviour(craigslist_audit) -> None:
    d = craigslist_audit
    assert d.n == 30 and d.clusters == 10 and set(d.behaviours) == set(BEHAVIOURS)
    # Stating "my maximum is the listing" to sellers that listen makes the listing their floor: it always loses.
    assert d.behaviours["protect_information"].effect.ci_low > 0
    # A "final offer" in every message while still conceding is never believed: identical episodes.
    spam = d.behaviours["commit_spam"]
    assert spam.identical == spam.effect.n == 30 and spam.effect.mean == 0.0
    assert set(spam.by_base) == {"0.5"}
    # The best fixed rule is the grid's best by its own mean, and the oracle (told the reservation) beats it.
    assert d.best_fixed_rule[1].mean == max(e.mean for e in d.fixed_rules.values())
    assert d.oracle.mean > d.best_fixed_rule[1].mean
    assert set(d.baselines) == {"accept_first", "hold_target", "split_difference"}


def test_the_audit_plays_only_a_price_domains_buyer_seat() -> None:
    with pytest.raises(ValueError, match="buyer seat"):
        audit_domain(EvaluationPlan("dnd-v0", 2, seat="buyer"), SMALL)
    with pytest.raises(ValueError, match="buyer seat"):
        audit_domain(EvaluationPlan("craigslist-v0", 2, seat="seller"), SMALL)
    with pytest.raises(ValueError, match="base_hold_shares"):
        IncentiveSettings(base_hold_shares=())


def _estimate(mean: float, low: float, high: float) -> Estimate:
    return Estimate(mean, low, high, 96, 32)


def test_the_targets_refuse_what_they_must(craigslist_audit) -> None:
    """`failures` names each refused target: a behaviour that does not pay, spam that pays, a fixed rule near
    the teacher, an oracle without headroom, teacher deals unlike people's."""
    d = craigslist_audit
    good = dataclasses.replace(
        d,
        behaviours={
            name: dataclasses.replace(
                b, effect=_estimate(0.0, -0.01, 0.01) if name == "commit_spam" else _estimate(0.1, 0.05, 0.15)
            )
            for name, b in d.behaviours.items()
        },
        teacher=_estimate(0.6, 0.5, 0.7),
        teacher_minus_best_fixed_rule=_estimate(0.3, 0.2, 0.4),
        oracle=_estimate(0.8, 0.7, 0.9),
        calibration=None,
    )
    assert IncentiveAudit(env_version="v", domains={"craigslist-v0": good}, settings=SMALL).failures() == []
    spam_pays = {
        **good.behaviours,
        "commit_spam": dataclasses.replace(good.behaviours["commit_spam"], effect=_estimate(0.1, 0.02, 0.2)),
    }
    anchor_idle = {
        **good.behaviours,
        "anchor": dataclasses.replace(good.behaviours["anchor"], effect=_estimate(0.02, -0.01, 0.05)),
    }
    cases = {
        "commit_spam pays": dataclasses.replace(good, behaviours=spam_pays),
        "anchor does not pay": dataclasses.replace(good, behaviours=anchor_idle),
        "best fixed rule": dataclasses.replace(good, teacher_minus_best_fixed_rule=_estimate(0.05, -0.02, 0.1)),
        "oracle": dataclasses.replace(good, oracle=_estimate(0.55, 0.4, 0.7)),
    }
    for words, domain in cases.items():
        failures = IncentiveAudit(env_version="v", domains={"craigslist-v0": domain}, settings=SMALL).failures()
        assert len(failures) == 1 and words in failures[0], (words, failures)
    # A bluff that costs and an uninformed commitment that does not pay are reported, not refused.
    costly = {
        **good.behaviours,
        **{
            name: dataclasses.replace(good.behaviours[name], effect=_estimate(-0.05, -0.1, -0.01))
            for name in ("commit_bluff", "commit_uninformed")
        },
    }
    reported = IncentiveAudit(
        env_version="v", domains={"craigslist-v0": dataclasses.replace(good, behaviours=costly)}, settings=SMALL
    )
    assert reported.failures() == []


def test_a_commitment_splits_into_its_credible_part_and_its_bluff(craigslist_audit) -> None:
    """Each episode's final offer is either inside the counterpart's reservation or beyond it, so the
    uninformed commitment's effect is the credible one's plus the bluff's, episode for episode; and the credible
    commitment never loses a deal the base made (a credible final offer is never punished)."""
    b = craigslist_audit.behaviours
    credible, bluff, uninformed = b["commit"], b["commit_bluff"], b["commit_uninformed"]
    assert uninformed.effect.mean == pytest.approx(credible.effect.mean + bluff.effect.mean, abs=1e-12)
    # Every episode is unchanged by at least one of the two, so their identical pairs cover the plan.
    assert credible.identical + bluff.identical >= credible.effect.n
    assert credible.effect.mean > 0 and credible.identical < credible.effect.n


def test_a_conditional_final_offer_needs_the_reservation_and_a_single_final() -> None:
    with pytest.raises(ValueError, match="final_when"):
        BuyerScript(final="every", final_when="inside_reservation")
    with pytest.raises(ValueError, match="final_when"):
        BuyerScript(final="once", final_when="sometimes")
    plan = EvaluationPlan("craigslist-v0", 2, seat="buyer", seed=3)
    script = BuyerScript(final="once", final_when="inside_reservation")
    with pytest.raises(ValueError, match="needs the counterpart's reservation"):
        evaluate_policy(plan, lambda s: ScriptedBuyer(script, s))


def test_the_result_json_has_the_keys_the_checks_read(craigslist_audit) -> None:
    audit = IncentiveAudit(env_version=env_version(), domains={"craigslist-v0": craigslist_audit}, settings=SMALL)
    data = json.loads(json.dumps(audit.as_json()))
    d = data["domains"]["craigslist-v0"]
    assert data["env_version"].startswith("env-") and {"n", "clusters"} <= set(d)
    for entry in d["behaviours"].values():
        assert {"mean", "ci_low", "ci_high", "n", "identical"} <= set(entry)
    assert {"fraction", "mean"} <= set(d["best_fixed_rule"])
    assert {"mean", "ci_low", "ci_high", "n"} <= set(d["teacher_minus_best_fixed_rule"])
    assert {"mean", "ci_low", "ci_high"} <= set(d["teacher"]) and "mean" in d["oracle"]
    calibration = d["calibration"]
    if calibration is not None:  # only with the shared CoCoA data
        assert {"deal_over_listing_median", "human_deal_over_listing_median", "ks_distance", "agreement"} <= set(
            calibration
        )
        assert 0.0 <= calibration["ks_distance"] <= 1.0 and calibration["human_agreement"] > 0.5


def test_env_version_follows_the_environment_and_counterpart_code_not_comments(tmp_path: Path) -> None:
    from agents.env_version import COUNTERPART_MODULES, ROOT

    def copy_tree(root: Path) -> None:
        for source in [*ROOT.joinpath("environments").rglob("*.py")]:
            target = root / source.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source.read_text())
        for name in COUNTERPART_MODULES:
            path = ROOT / name
            for source in path.rglob("*.py") if path.is_dir() else [path]:
                target = root / source.relative_to(ROOT)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(source.read_text())

    copy_tree(tmp_path)
    assert env_version.__wrapped__(tmp_path) == env_version()
    counterpart = tmp_path / "agents/socialrl/price_counterpart.py"
    counterpart.write_text(counterpart.read_text() + "\n# a comment changes nothing\n")
    assert env_version.__wrapped__(tmp_path) == env_version()
    counterpart.write_text(counterpart.read_text().replace("credibility=0.6", "credibility=0.61", 1))
    assert env_version.__wrapped__(tmp_path) != env_version()


def test_the_asset_writes_the_audit_and_its_check_fails_on_a_refused_target(tmp_path: Path, craigslist_audit) -> None:
    from dagster import build_asset_context

    from assets.incentives import IncentiveReport, incentives_hold
    from models.profiles import SMOKE
    from resources import SettingsResource

    settings = SettingsResource(profile="smoke", data_dir=str(tmp_path))
    from assets.incentives import environment_incentives

    output = environment_incentives(build_asset_context(), settings=settings)
    written = json.loads(Path(output.value.path).read_text())
    assert written["env_version"] == env_version() and set(written["domains"]) == {"craigslist-v0", "marketplace-v0"}
    assert written["profile"] == SMOKE.name and output.metadata["env_version"].value == env_version()
    failing = IncentiveAudit(
        env_version="v",
        domains={"craigslist-v0": dataclasses.replace(craigslist_audit, oracle=_estimate(0.0, 0.0, 0.0))},
        settings=SMALL,
    )
    result = incentives_hold(IncentiveReport(audit=failing, path="x"))
    assert not result.passed and "oracle" in result.metadata["failures"].value


def test_the_committed_audit_was_measured_on_the_current_environment() -> None:
    """benchmarks/results/incentives_cpu.json must be re-measured (`python -m benchmarks.bench_incentives`, code only,
    seconds) whenever the environment or counterpart code changes: results of different versions are never
    compared, and docs/stage1.md shows this file."""
    from benchmarks.readme_results import RESULTS

    committed = json.loads((RESULTS / "incentives_cpu.json").read_text())
    assert committed["env_version"] == env_version(), "re-run python -m benchmarks.bench_incentives"
    assert set(committed["domains"]) == {"craigslist-v0", "marketplace-v0"} and committed["profile"] == "cpu"


def test_stage_one_plays_the_best_fixed_rule_where_it_is_defined(craigslist_audit) -> None:
    """The stage-1 code policies carry the audit's best fixed rule in a price domain's buyer seat (a rule a
    trained buyer must beat), chosen as the audit chooses it, and leave it out where it means nothing."""
    from models.socialrl.stage1.evaluation import BEST_FIXED_RULE, best_baseline, evaluate_code_policies

    plan = EvaluationPlan("craigslist-v0", 10, seat="buyer", seed=3)
    fraction, searched = search_fixed_rule(plan, SMALL.fixed_rule_grid)
    assert fraction == craigslist_audit.best_fixed_rule[0]
    played = evaluate_code_policies(plan)
    rule, _ = played[BEST_FIXED_RULE]
    means = {f: sum(e.reward for e in r.policy_episodes) / len(r.policy_episodes) for f, r in searched.items()}
    full_fraction, _ = search_fixed_rule(plan)
    assert rule.model == f"hold max(target, {full_fraction:g} x listing)"
    assert rule.summary.mean_reward >= max(means.values()) - 1e-9  # the full grid holds the small one
    policies = {label: policy for label, (policy, _) in played.items()}
    best = best_baseline(policies)
    assert best is not None and best != "teacher"
    assert policies[best].summary.mean_reward == max(
        p.summary.mean_reward for label, p in policies.items() if label != "teacher"
    )
    dnd = evaluate_code_policies(EvaluationPlan("dnd-v0", 2), labels=(BEST_FIXED_RULE, "hold_target"))
    assert set(dnd) == {"hold_target"}
    with pytest.raises(ValueError, match="buyer seat"):
        search_fixed_rule(EvaluationPlan("craigslist-v0", 2, seat="seller"))
