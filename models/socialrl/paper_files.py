"""The SocialRL claims measured on the committed result files (models/report/files.py, docs/report.md): for each
claim of models/socialrl/paper_claims.py, the file measurer that reads this project's value from the keys its
runner writes.

| file | runner | claims |
| --- | --- | --- |
| make_run_cpu.json (until one measured on the current environment exists: make_run_cpu_before_audit.json) | `make run` | the stage-1 pairs and behaviour differences, per domain |
| stage2_cpu.json | run_stage2 | transfer, cascade order, cascade, MOPD, unified policies |
| tom_cpu.json, tom_cpu_details.json | run_tom | the ToM arms, their paired differences, skill-outcome correlations |
| incentives_cpu.json | the incentive audit (`make run`'s incentives_job) | what the environment pays for each behaviour (context, and why a behaviour cannot be learnt where it pays nothing) |

A stage-1 file keeps each interval without its cluster count; the count is read from the plan it records
("32 held-out ... scenarios x ... (base: the first 16)"): the base's scenarios for a pair with the base, else
every scenario (`plan_clusters`). tom_cpu.json records its domains' `clusters` (the held-out scenarios behind every
arm's interval, `_tom_clusters`; files written before it did leave the count unrecorded), not those behind a
skill-outcome correlation, which rests on the scored episodes only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from models.report import (
    FileMeasurer,
    Interval,
    Measurement,
    ResultFile,
    ResultSources,
    entry_interval,
    missing_files,
)
from models.socialrl.stage2 import PAPER_ORDER

MAKE_RUN_FILES = ("make_run_cpu.json", "make_run_cpu_before_audit.json")
"""The make-run result, newest first: the report reads the first that exists."""
STAGE2_FILE = "stage2_cpu.json"
TOM_FILE, TOM_DETAILS = "tom_cpu.json", "tom_cpu_details.json"
INCENTIVES_FILE = "incentives_cpu.json"
RESULT_FILES = (*MAKE_RUN_FILES, STAGE2_FILE, TOM_FILE, TOM_DETAILS, INCENTIVES_FILE)
"""Every result file the SocialRL claims read."""
TWO_ESTIMATES = "two estimates on the same episodes; the file keeps no paired interval of their difference"
FRONTIER = (
    "no frontier model (the paper's GPT-4.1, GPT-5.1, GPT-5.2) was evaluated on these episodes: the comparison "
    "is not measured"
)
NO_BEHAVIOUR_FILE = (
    "no result file records the over-conceding rate: the make-run file predates `behaviour_paired.over_conceded`, "
    "and the behaviour report (`behaviour_report`, `behaviour_job`) is read from a Dagster instance only"
)


def _zero(interval: Interval | None) -> bool:
    """Whether an estimate is exactly 0 on every episode (0 [0, 0])."""
    return interval is not None and interval.mean == interval.low == interval.high == 0.0


def plan_clusters(plan: Any, pair: str) -> int | None:
    """The scenario clusters behind a stage-1 paired difference `pair` ("ppo_minus_base"), read from the plan a
    make-run file records (module docstring); None when the plan does not say."""
    text = plan if isinstance(plan, str) else ""
    with_base = "base" in pair.split("_minus_")
    found = re.search(r"base: the first (\d+)", text) if with_base else re.match(r"(\d+) held-out", text)
    return int(found.group(1)) if found else None


# ------------------------------------------------------------------------------------------------ stage 1
def _audit(files: ResultSources, env_id: str, behaviour: str) -> tuple[str, str]:
    """What the environment pays for `behaviour` in `env_id` (the incentive audit), and why it cannot be learnt
    where the audit finds it pays nothing (empty when it pays, or no audit was read)."""
    audit = files.get(INCENTIVES_FILE)
    interval = entry_interval(audit.get("domains", env_id, "behaviours", behaviour)) if audit else None
    if audit is None or interval is None:
        return "", ""
    said = f"{behaviour} {interval.text()} ({interval.cluster_text()})"
    text = f"what the environment pays for it ({INCENTIVES_FILE}, {audit.env_version or 'no version'}): {said}"
    cannot = "" if interval.low > 0 else f"the environment does not pay for it ({INCENTIVES_FILE}: {said})"
    return text, cannot


def _reward_baseline(domain: Mapping[str, Any]) -> str:
    """The best trivial baseline of a domain's plan: its mean reward, and PPO against it (paired)."""
    best = domain.get("best_baseline")
    reward = entry_interval((domain.get("baselines") or {}).get(best))
    if not best or reward is None:
        return ""
    clusters = plan_clusters(domain.get("plan"), "ppo_minus_best_baseline")
    against = entry_interval((domain.get("paired") or {}).get("ppo_minus_best_baseline"), clusters)
    return f"{best}: mean reward {reward.text()}" + (f"; PPO - {best} {against.text()} (paired)" if against else "")


def _stage1_entry(
    file: ResultFile, env_id: str, domain: Mapping[str, Any], key: str, entry: Any, pair: str, files: ResultSources,
    behaviour: str,
) -> Measurement:  # fmt: skip
    path = f"domains.{env_id}.{key}"
    interval = entry_interval(entry, plan_clusters(domain.get("plan"), pair))
    context, cannot = _audit(files, env_id, behaviour) if behaviour else (_reward_baseline(domain), "")
    return Measurement(None, path, env_id, interval, baseline=context, file=file, cannot=cannot)


def stage1(pair: str, metric: str | None = None, behaviour: str = "", why: str = "") -> FileMeasurer:
    """A file measurer of `paired[pair]` (or `behaviour_paired[metric][pair]`) in every domain of the make-run
    file that has it; `behaviour` names the incentive audit's behaviour that pays for the metric."""
    key = f"paired.{pair}" if metric is None else f"behaviour_paired.{metric}.{pair}"

    def measure(files: ResultSources) -> list[Measurement]:
        file = files.first(*MAKE_RUN_FILES)
        if file is None:
            return missing_files(files, *MAKE_RUN_FILES)
        out = []
        for env_id, domain in (file.get("domains") or {}).items():
            by = domain.get("paired") if metric is None else (domain.get("behaviour_paired") or {}).get(metric)
            entry = (by or {}).get(pair)
            if entry is None and metric is not None:
                continue  # a metric of another domain (opening below target: the Craigslist buyer only)
            if entry is None:
                missing = why or f"{file.name} has no `domains.{env_id}.{key}`"
                out.append(Measurement(None, f"domains.{env_id}.{key}", env_id, missing=missing, file=file))
                continue
            out.append(_stage1_entry(file, env_id, domain, key, entry, pair, files, behaviour))
        return out or [Measurement(None, key, missing=f"no domain of {file.name} records `{key}`", file=file)]

    return measure


def leakage(files: ResultSources) -> list[Measurement]:
    """The held-out leak indicator, PPO - base (the privacy red team keeps no result file)."""
    return stage1("ppo_minus_base", "leak", "protect_information")(files)


def concession(files: ResultSources) -> list[Measurement]:
    """Deals above the seat's own target (`behaviour_paired.over_conceded`), PPO - base; where the base made no
    deal on the episodes PPO did (the pair is undefined), PPO - the warm-start, named in the key. A make-run file
    from before the metric: the behaviour report, which keeps no result file."""
    file = files.first(*MAKE_RUN_FILES)
    if file is None:
        return missing_files(files, *MAKE_RUN_FILES)
    out = []
    for env_id, domain in (file.get("domains") or {}).items():
        by = (domain.get("behaviour_paired") or {}).get("over_conceded") or {}
        pair = next((p for p in ("ppo_minus_base", "ppo_minus_sft") if p in by), None)
        if pair is not None:
            key = f"behaviour_paired.over_conceded.{pair}"
            out.append(_stage1_entry(file, env_id, domain, key, by[pair], pair, files, ""))
    return out or [Measurement(None, "summaries[].over_conceding_rate", missing=NO_BEHAVIOUR_FILE)]


# ----------------------------------------------------------------------------------------------- stage 2
def _stage2(files: ResultSources) -> ResultFile | None:
    return files.get(STAGE2_FILE)


def _stage2_lacks(files: ResultSources, file: ResultFile | None, key: str) -> list[Measurement]:
    """The one measurement of a stage-2 claim whose file is absent, or present without `key` (a run that stopped
    before the asset behind it: the file says `complete` false and names what it is `missing`)."""
    if file is None:
        return missing_files(files, STAGE2_FILE)
    unmade = file.get("missing") if file.get("complete") is False else None
    why = f" (the run that wrote it stopped before {', '.join(unmade)})" if unmade else ""
    return [Measurement(None, key, missing=f"{file.name} has no `{key}`{why}", file=file)]


def _cross_cells(file: ResultFile) -> dict[tuple[str, str], Interval]:
    """(donor, recipient) -> the transfer cell's difference, for every cross-domain cell of the file."""
    cells = {}
    for donor, row in (file.get("transfer_matrix") or {}).items():
        for recipient, entry in row.items():
            interval = entry_interval(entry, file.get("clusters_per_cell"))
            if donor != recipient and interval is not None:
                cells[(donor, recipient)] = interval
    return cells


def _no_transfer(file: ResultFile) -> str:
    """Why transfer cannot be read from the matrix: every cross-domain cell is exactly 0 (empty otherwise)."""
    cells = _cross_cells(file)
    if cells and all(_zero(c) for c in cells.values()):
        return (
            f"every cross-domain cell of the transfer matrix is 0 [0, 0] ({len(cells)} cells): no transfer either way"
        )
    return ""


def transfer_asymmetry(files: ResultSources) -> list[Measurement]:
    file = _stage2(files)
    if file is None or not file.get("transfer_matrix"):
        return _stage2_lacks(files, file, "transfer_matrix")
    cells = _cross_cells(file)
    effects = {}
    for donor in dict.fromkeys(d for d, _ in cells):
        means = [c.mean for (d, _), c in cells.items() if d == donor and math.isfinite(c.mean)]
        effects[donor] = sum(means) / len(means) if means else math.nan
    above = sum(1 for c in cells.values() if c.low > 0)
    below = sum(1 for c in cells.values() if c.high < 0)
    text = (
        "donor effects (mean transfer to the other domains): "
        + (", ".join(f"{d} {v:+.3f}" for d, v in effects.items() if math.isfinite(v)) or "-")
        + f"; of {len(cells)} cross-domain cells, {above} lie above 0 and {below} below (95% CI)"
    )
    why = "the matrix gives one interval per cell and none for a pair's asymmetry (every cell is listed below)"
    return [Measurement(None, "transfer_matrix", "all domains", None, text, why, file=file, cannot=_no_transfer(file))]


def cascade_order(files: ResultSources) -> list[Measurement]:
    file = _stage2(files)
    order = file.get("cascade_order") if file is not None else None
    if file is None or not order:
        return _stage2_lacks(files, file, "cascade_order")
    paper = [d for d in PAPER_ORDER if d in order]
    text = f"chosen {' -> '.join(order)}; the paper's order on these domains {' -> '.join(paper)}"
    why = "an order is chosen, not estimated: there is no interval"
    return [Measurement(None, "cascade_order", "all domains", None, text, why, file=file, cannot=_no_transfer(file))]


def _unified(file: ResultFile, policy: str) -> Interval | None:
    return entry_interval(file.get("unified", policy, "mean"))


def _floor(label: str, interval: Interval | None) -> str:
    return f"{label} scores 0 on every episode" if _zero(interval) else ""


def _versus(file: ResultFile, a: str, b: str, labels: tuple[str, str], scope: str) -> Measurement:
    """Two unified policies' mean rewards over the domains (two estimates)."""
    first, second = _unified(file, a), _unified(file, b)
    key = f"unified.{a}.mean, unified.{b}.mean"
    if first is None or second is None:
        return Measurement(None, key, scope, missing=f"{file.name} has no `{key}`", file=file)
    text = f"{labels[0]} {first.text()} vs {labels[1]} {second.text()} (mean reward over the domains, n = {first.n})"
    cannot = "; ".join(c for c in (_floor(labels[0], first), _floor(labels[1], second)) if c)
    return Measurement(None, key, scope, None, text, TWO_ESTIMATES, file=file, cannot=cannot)


def cascade_vs_mopd(files: ResultSources) -> list[Measurement]:
    file = _stage2(files)
    if file is None or not file.get("unified"):
        return _stage2_lacks(files, file, "unified")
    return [_versus(file, "cascade", "mopd", ("cascade", "MOPD student"), "mean over the domains")]


def unified_vs_specialists(files: ResultSources) -> list[Measurement]:
    file = _stage2(files)
    if file is None or not file.get("unified"):
        return _stage2_lacks(files, file, "unified")
    return [
        _versus(file, policy, "specialist", (label, "the specialists"), f"{label}, mean over the domains")
        for policy, label in (("cascade", "cascade"), ("mopd", "MOPD student"))
    ]


def unified_vs_frontier(files: ResultSources) -> list[Measurement]:
    file = _stage2(files)
    if file is None or not file.get("unified"):
        return _stage2_lacks(files, file, "unified")
    found = {label: _unified(file, p) for p, label in (("cascade", "cascade"), ("mopd", "MOPD student"))}
    text = "; ".join(f"{label} {e.text()}" for label, e in found.items() if e is not None)
    text = f"mean utility over the domains: {text}" if text else ""
    return [Measurement(None, "unified.{cascade,mopd}.mean", "", value_text=text, missing=FRONTIER, file=file)]


def recovered_share(files: ResultSources) -> list[Measurement]:
    file = _stage2(files)
    share = file.get("mopd_recovered_share") if file is not None else None
    if file is None or share is None:
        return _stage2_lacks(files, file, "mopd_recovered_share")
    scope = f"{file.get('mopd_steps')} steps, {', '.join(file.get('domains') or [])}"
    if isinstance(share, Mapping) and share.get("reason"):
        return [Measurement(None, "mopd_recovered_share", scope, None, "undefined", share["reason"], file=file)]
    if isinstance(share, Mapping):
        return [Measurement(None, "mopd_recovered_share", scope, entry_interval(share), file=file)]
    why = "the file gives the share without an interval"
    return [Measurement(None, "mopd_recovered_share", scope, None, f"{float(share):.1%}", why, file=file)]


# ---------------------------------------------------------------------------------------------------- ToM
def _tom_domains(files: ResultSources) -> list[str]:
    details = files.get(TOM_DETAILS)
    data = details.data if details is not None else {}
    return [k for k, v in data.items() if isinstance(v, Mapping) and "paired_differences" in v]


def _arm_floor(files: ResultSources, env_id: str, arm: str) -> str:
    """Why a prompt cannot lower `arm`: it scores 0 on every episode (empty otherwise)."""
    main = files.get(TOM_FILE)
    interval = entry_interval(main.get(env_id, arm)) if main is not None else None
    return (
        f"the {arm} scores 0 on every episode ({interval.text()}), so nothing can lower it" if _zero(interval) else ""
    )


def _tom_clusters(files: ResultSources, env_id: str) -> int | None:
    """The held-out scenarios behind a domain's ToM intervals (tom_cpu.json's `<domain>.clusters`; None where the
    file predates it)."""
    main = files.get(TOM_FILE)
    clusters = main.get(env_id, "clusters") if main is not None else None
    return int(clusters) if isinstance(clusters, int | float) else None


def tom_difference(difference: str, floor_arm: str = "", on: str = "") -> FileMeasurer:
    """A file measurer of the ToM study's paired `difference` per domain; `floor_arm`: the arm the claim says
    falls (a row says so when it already scores 0); `on`: what the row's scope adds to the domain."""

    def measure(files: ResultSources) -> list[Measurement]:
        details = files.get(TOM_DETAILS)
        if details is None:
            return missing_files(files, TOM_DETAILS)
        out = []
        for env_id in _tom_domains(files):
            key = f"{env_id}.paired_differences['{difference}']"
            scope = f"{env_id}, {on}" if on else env_id
            interval = entry_interval(
                details.get(env_id, "paired_differences", difference), _tom_clusters(files, env_id)
            )
            if interval is None:
                out.append(Measurement(None, key, scope, missing=f"{details.name} has no `{key}`", file=details))
                continue
            cannot = _arm_floor(files, env_id, floor_arm) if floor_arm else ""
            out.append(Measurement(None, key, scope, interval, file=details, cannot=cannot))
        return out or missing_files(files, TOM_DETAILS)

    return measure


TOM_PROMPT_DIFFERENCES = {"on the base": "base_tom_prompt - base", "on the warm-start": "sft_act_tom_prompt - sft_act"}
"""Where the ToM prompt claim is tested -> the study's paired difference (models/socialrl/tom.py `DIFFERENCES`): on
the base, as the paper does, and on the warm-start, whose score leaves room to fall where the base scores 0."""


def tom_prompt(files: ResultSources) -> list[Measurement]:
    """The scaffold prompt's paired effect per domain on the base and on the warm-start (`TOM_PROMPT_DIFFERENCES`),
    each row saying when the arm it would lower already scores 0."""
    rows = []
    for on, difference in TOM_PROMPT_DIFFERENCES.items():
        rows += tom_difference(difference, floor_arm=difference.split(" - ")[1], on=on)(files)
    return rows


def skill_correlation(files: ResultSources) -> list[Measurement]:
    main, details = files.get(TOM_FILE), files.get(TOM_DETAILS)
    if main is None:
        return missing_files(files, TOM_FILE)
    out = []
    for env_id, entry in main.data.items():
        correlations = entry.get("skill_outcome_correlation") if isinstance(entry, Mapping) else None
        for skill, value in (correlations or {}).items():
            interval = entry_interval(value)  # its scored episodes' scenarios, a subset of the plan's: unrecorded
            note = details.get(env_id, "skill_outcome_correlation_note", skill) if details is not None else None
            n = value.get("n") if isinstance(value, Mapping) else None
            why = note or f"r is undefined on {n} scored episode(s)"
            key = f"{env_id}.skill_outcome_correlation.{skill}"
            out.append(Measurement(None, key, f"{env_id}, {skill}", interval, no_interval=why, file=main))
    return out or missing_files(files, TOM_FILE)


FILE_MEASURERS: dict[str, FileMeasurer] = {
    "specialist_over_base": stage1("ppo_minus_base"),
    "warm_start": stage1("sft_minus_base", why="no warm-start in this domain (PPO started from the base model)"),
    "ppo_over_warmstart": stage1("ppo_minus_sft", why="no warm-start in this domain (PPO started from the base)"),
    "anchoring": stage1("ppo_minus_base", "opening_below_target", "anchor"),
    "concession": concession,
    "rejection_counter_offer": stage1("ppo_minus_base", "reject_with_counter", "reject_with_counter"),
    "commitment_language": stage1("ppo_minus_base", "commitment", "commit"),
    "leakage": leakage,
    "transfer_asymmetry": transfer_asymmetry,
    "cascade_order": cascade_order,
    "cascade_best_unifier": cascade_vs_mopd,
    "mopd_recovered_share": recovered_share,
    "unified_vs_specialists": unified_vs_specialists,
    "unified_vs_frontier": unified_vs_frontier,
    "tom_prompt": tom_prompt,
    "tom_distillation": tom_difference("sft_tom - sft_act"),
    "skill_outcome_correlation": skill_correlation,
}
"""claim_id -> its file measurer (models/socialrl/paper_claims.py `CLAIMS`)."""
