"""The README's stage-1 results, rendered from benchmarks/results/make_run_cpu.json (never typed by hand).

The block between `<!-- make_run_cpu: begin -->` and `<!-- make_run_cpu: end -->` in README.md is this module's
rendering of the result file: every policy of the held-out plan (base, warm-start, PPO, the teacher and the
trivial code baselines) with every behaviour metric the evaluation computes, the paired reward differences,
the paired behaviour differences of PPO against its warm-start, the warm-start's imitation of its teacher and
the PPO learning curve. tests/test_readme_results.py fails when the README and the file disagree.

    python -m benchmarks.readme_results          # rewrite the README block from the result file
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "make_run_cpu.json"
README = ROOT / "README.md"
BEGIN, END = "<!-- make_run_cpu: begin -->", "<!-- make_run_cpu: end -->"

POLICY_ORDER = ("base", "sft", "ppo", "teacher", "accept_first", "hold_target", "split_difference")
POLICY_LABELS = {"sft": "SFT warm-start", "ppo": "PPO specialist", "teacher": "code teacher"}
METRIC_COLUMNS = (
    ("agreement", "agreement"),
    ("first_offer_accepted", "first offer accepted"),
    ("offer_rate", "offers"),
    ("opening_below_target", "opens below target"),
    ("opening_below_target_given_offer", "below target, given an offer"),
    ("opening_over_target", "opening / target (median)"),
    ("leak", "leaks"),
    ("invalid_per_turn", "invalid / turn"),
    ("command_rate", "command lines"),
    ("rounds", "rounds"),
)
PAIRS = ("ppo_minus_sft", "sft_minus_base", "ppo_minus_base", "ppo_minus_best_baseline", "ppo_minus_teacher")


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def _interval(estimate: dict[str, Any] | None, digits: int = 3) -> str:
    if not estimate or not estimate.get("n"):
        return "-"
    return f"{_num(estimate['mean'], digits)} [{_num(estimate['ci_low'], digits)}, {_num(estimate['ci_high'], digits)}]"


def render(result: dict[str, Any]) -> str:
    """The README block (markdown) for one make-run result file."""
    lines: list[str] = []
    for env_id, report in result["domains"].items():
        policies = report["policies"]
        lines += [
            f"**{env_id}**, {report['plan']} (model {report['model']}). Mean reward with a "
            "95% scenario-clustered bootstrap CI; behaviour columns are per-episode means (the opening ratio: "
            "the median), over the episodes that define them.",
            "",
            "| policy | n | reward | " + " | ".join(label for _, label in METRIC_COLUMNS) + " |",
            "| --- | --- | --- | " + " | ".join("---" for _ in METRIC_COLUMNS) + " |",
        ]
        for name in [p for p in POLICY_ORDER if p in policies] + [p for p in policies if p not in POLICY_ORDER]:
            p = policies[name]
            cells = [_num((p["metrics"].get(metric) or {}).get("mean"), 2) for metric, _ in METRIC_COLUMNS]
            label = POLICY_LABELS.get(name, name)
            lines.append(f"| {label} | {p['n']} | {_interval(p['metrics']['reward'])} | " + " | ".join(cells) + " |")
        lines += ["", "| paired reward difference (same episodes) | mean [95% CI] | n |", "| --- | --- | --- |"]
        for pair in PAIRS:
            if pair in report["paired"]:
                e = report["paired"][pair]
                note = f" (best baseline: {report['best_baseline']})" if pair == "ppo_minus_best_baseline" else ""
                lines.append(f"| {pair}{note} | {_interval(e)} | {e['n']} |")
        behaviour = report.get("behaviour_paired", {})
        pairs = [p for p in PAIRS if any(p in by_pair for by_pair in behaviour.values())]
        if pairs:
            lines += [
                "",
                "| behaviour, paired | " + " | ".join(pairs) + " |",
                "| --- | " + " | ".join("---" for _ in pairs) + " |",
            ]
            for metric, by_pair in behaviour.items():
                cells = [
                    f"{_interval(by_pair.get(pair))} (n={by_pair[pair]['n']})" if pair in by_pair else "-"
                    for pair in pairs
                ]
                lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        imitation = report.get("warmstart_imitation") or {}
        if imitation:
            lines += [
                "",
                f"Warm-start imitation on the same episodes (n = {imitation.get('n')}): command rate "
                f"{_num(imitation.get('command_rate'))} (teacher {_num(imitation.get('teacher_command_rate'))}, "
                f"check >= {imitation.get('min_command_rate')}: {'passed' if imitation.get('passed') else 'failed'}), "
                f"median opening / target {_num(imitation.get('offer_over_target_median'))} (teacher "
                f"{_num(imitation.get('teacher_offer_over_target_median'))}), reward - teacher "
                f"{_interval(imitation.get('reward_minus_teacher'))}, reward / teacher "
                f"{_num(imitation.get('reward_over_teacher'))}.",
            ]
        curve = report.get("learning_curve") or []
        if curve:
            lines += [
                "",
                "| PPO iteration | reward [95% CI] (in training) | agreement | invalid / episode | KL | rollout s | train s |",
                "| --- | --- | --- | --- | --- | --- | --- |",
            ]
            for point in curve:
                reward = {
                    "mean": point["reward_mean"],
                    "ci_low": point["reward_ci_low"],
                    "ci_high": point["reward_ci_high"],
                    "n": point["episodes"],
                }
                lines.append(
                    f"| {point['iteration'] + 1} | {_interval(reward)} | {_num(point['agreement_rate'], 2)} | "
                    f"{_num(point['invalid_actions_per_episode'], 2)} | {_num(point['kl'], 4)} | "
                    f"{_num(point['time_rollout_s'], 0)} | {_num(point['time_train_s'], 0)} |"
                )
        lines.append("")
    wall = result.get("wall_s")
    setup = result.get("wall_s_with_setup")
    timing = f"The run took {_num(wall / 60, 1)} min of jobs" if wall else ""
    if setup:
        timing += f" ({_num(setup / 60, 1)} min with setup, from a fresh clone)"
    if timing:
        lines.append(timing + ".")
    return "\n".join(lines).rstrip() + "\n"


def block(readme: str) -> str:
    """The text between the README's markers."""
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[start:end].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--result", type=Path, default=RESULT)
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    rendered = render(json.loads(args.result.read_text()))
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    args.readme.write_text(text[:start] + "\n" + rendered + text[end:])
    print(f"wrote {args.readme} from {args.result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
