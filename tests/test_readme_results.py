"""The README's stage-1 results are the rendering of benchmarks/results/make_run_cpu.json, not typed by hand."""

from __future__ import annotations

import json

from benchmarks import readme_results


def test_the_readme_block_is_the_rendering_of_the_result_file() -> None:
    result = json.loads(readme_results.RESULT.read_text())
    assert readme_results.block(readme_results.README.read_text()) == readme_results.render(result)


def test_the_rendering_shows_every_policy_pair_behaviour_metric_and_imitation() -> None:
    result = json.loads(readme_results.RESULT.read_text())
    text = readme_results.render(result)
    for report in result["domains"].values():
        for name in report["policies"]:
            assert f"| {name} | " in text
        for pair in report["paired"]:
            assert f"| {pair}" in text
        for metric in report["behaviour_paired"]:
            assert f"| {metric} | " in text
        imitation = report["warmstart_imitation"]
        assert f"command rate {imitation['command_rate']:.3f}" in text
    assert f"{result['wall_s'] / 60:.1f} min of jobs" in text
