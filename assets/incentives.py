"""The incentive audit as a Dagster asset: does each price environment pay for the paper's behaviours?

`environment_incentives` runs models/socialrl/incentives.py on the profile's held-out plans of the price
domains (code only, seconds) and writes the result to data/reports/incentives_<profile>.json; the check
`incentives_hold` fails when a behaviour the paper reports as learned does not pay, when "final offer" spam
pays, when a fixed rule comes near the teacher or when the oracle leaves no headroom.
"""

import json
from dataclasses import dataclass

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    MetadataValue,
    Output,
    asset,
    asset_check,
)

from models.socialrl.incentives import PRICE_DOMAINS, IncentiveAudit, run_incentive_audit
from models.socialrl.stage1.evaluation import evaluation_plan
from resources import SettingsResource

GROUP = "environments"


@dataclass(frozen=True, kw_only=True)
class IncentiveReport:
    """The audit and where its JSON went."""

    audit: IncentiveAudit
    """The audit of every price domain."""
    path: str
    """data/reports/incentives_<profile>.json."""


def _table(audit: IncentiveAudit) -> str:
    rows = ["| domain | behaviour or policy | paired effect or mean reward |", "| --- | --- | --- |"]
    for env_id, d in audit.domains.items():
        for name, b in d.behaviours.items():
            rows.append(f"| {env_id} | {name} | {b.effect.text('+.3f')} (n = {b.effect.n}, {d.clusters} scenarios) |")
        rows.append(f"| {env_id} | best fixed rule (f = {d.best_fixed_rule[0]:g}) | {d.best_fixed_rule[1].text()} |")
        rows.append(f"| {env_id} | teacher | {d.teacher.text()} |")
        rows.append(f"| {env_id} | oracle | {d.oracle.text()} |")
    return "\n".join(rows)


@asset(group_name=GROUP, kinds={"python"})
def environment_incentives(context: AssetExecutionContext, settings: SettingsResource) -> Output[IncentiveReport]:
    """Scripted buyers that differ in one behaviour, the best fixed rule, an oracle, the baselines and the teacher,
    paired on each price domain's held-out plan (models/socialrl/incentives.py)."""
    profile = settings.get_profile()
    plans = [evaluation_plan(env_id, profile, seat="buyer") for env_id in PRICE_DOMAINS]
    audit = run_incentive_audit(plans)
    path = settings.paths().reports / f"incentives_{profile.name}.json"
    path.write_text(json.dumps({**audit.as_json(), "profile": profile.name}, indent=1) + "\n")
    context.log.info(f"incentive audit ({audit.env_version}) written to {path}")
    return Output(
        IncentiveReport(audit=audit, path=str(path)),
        metadata={
            "env_version": audit.env_version,
            "audit": MetadataValue.md(_table(audit)),
            "failures": len(audit.failures()),
            "path": MetadataValue.path(str(path)),
        },
    )


@asset_check(asset=environment_incentives)
def incentives_hold(environment_incentives: IncentiveReport) -> AssetCheckResult:
    """Each behaviour the paper reports as learned pays, spam does not, no fixed rule nears the teacher and the
    oracle leaves headroom (`IncentiveAudit.failures`)."""
    failures = environment_incentives.audit.failures()
    return AssetCheckResult(
        passed=not failures,
        severity=AssetCheckSeverity.ERROR,
        metadata={"failures": MetadataValue.md("\n".join(f"- {f}" for f in failures) or "none")},
    )
