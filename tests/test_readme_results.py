"""The README's stage-1 results are the rendering of benchmarks/results/make_run_cpu.json, not typed by hand."""

from __future__ import annotations

import json

from benchmarks import readme_results


def test_the_readme_block_is_the_rendering_of_the_result_file() -> None:
    result = json.loads(readme_results.RESULT.read_text())
    assert readme_results.block(readme_results.README.read_text()) == readme_results.render(result)


def test_the_rendering_shows_every_policy_pair_and_behaviour_metric() -> None:
    result = json.loads(readme_results.RESULT.read_text())
    text = readme_results.render(result)
    for report in result["domains"].values():
        for name in report["policies"]:
            assert f"| {readme_results.POLICY_LABELS.get(name, name)} | " in text
        for pair in report["paired"]:
            assert pair in text or pair == "ppo_minus_teacher"
        for metric in report.get("behaviour_paired", {}):
            assert f"| {metric} | " in text
