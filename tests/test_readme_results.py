"""The result blocks of the README and docs are the rendering of their result files, not typed by hand
(benchmarks/readme_results.py: docs/stage1.md's stage-1 block, docs/yoao.md's cpu run and tutor reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import readme_results


def test_the_stage1_block_is_the_rendering_of_the_result_file() -> None:
    result = json.loads(readme_results.MAKE_RUN.read_text())
    assert readme_results.block(readme_results.STAGE1.read_text()) == readme_results.render(result)


@pytest.mark.parametrize("name", [b.name for b in readme_results.BLOCKS])
def test_every_document_block_is_the_rendering_of_its_result_file(name: str) -> None:
    b = next(b for b in readme_results.BLOCKS if b.name == name)
    text = b.document.read_text()
    assert text.count(b.markers[0]) == 1 and text.count(b.markers[1]) == 1, f"{b.document.name} lacks {name}'s markers"
    if not b.result.exists():
        pytest.skip(f"{b.result.name} not measured yet")
    assert readme_results.block(text, b.markers) == b.render(json.loads(b.result.read_text()))


def test_the_yoao_rendering_shows_every_arm_the_pairing_the_null_and_persuadability() -> None:
    from models.yoao.report import benchmark_markdown

    result = json.loads((readme_results.RESULTS / "yoao_tutor_reference.json").read_text())
    text = benchmark_markdown(result)
    for arm, entry in result["untrained_cooperation"].items():
        shown = "-" if entry["mean"] is None else f"{entry['mean']:.2f} ["  # k = 5 leaves no untrained player
        assert f"| {arm} | {entry['games']} | {shown}" in text
    for arm, entry in ((a, e) for a, e in result["untrained_cooperation_paired"].items() if e["games"]):
        assert f"{entry['mean']:+.2f} [{entry['ci_low']:+.2f}, {entry['ci_high']:+.2f}]" in text, arm
    null = result["team"]["1"]["vote_arithmetic_null"]
    assert f"{null['mean']:.2f} [{null['ci_low']:.2f}, {null['ci_high']:.2f}]" in text
    k0 = result["persuadability_k0"]
    assert f"Persuadability at k = 0: {k0['mean']:.2f}" in text and f"({k0['votes']} votes" in text
    skipped = benchmark_markdown({**result, "sugarscape": {"skipped": "left to the paper profile"}})
    assert "Sugarscape: not run in this profile (left to the paper profile)." in skipped
    muted = result["untrained_cooperation_between_arms"]["1_muted_minus_1"]
    assert (f"paired by game: k=1 muted - k=1 {muted['mean']:+.2f} [{muted['ci_low']:+.2f}, {muted['ci_high']:+.2f}] "
            f"({muted['games']} games)") in text  # fmt: skip


def test_the_rendering_shows_every_policy_pair_behaviour_metric_and_imitation() -> None:
    result = json.loads(readme_results.MAKE_RUN.read_text())
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


def test_a_report_renders_its_policies_pairs_behaviour_imitation_and_curve() -> None:
    from models.socialrl.stage1.report import report_markdown

    estimate = {"mean": 0.25, "ci_low": 0.1, "ci_high": 0.4, "n": 48}
    policy = {"n": 48, "metrics": {"reward": estimate, "agreement": {**estimate, "mean": 0.5}}}
    report = {
        "env_id": "craigslist-v0",
        "seat": "buyer",
        "plan": "16 listings x 3 counterparts",
        "model": "socialrl-craigslist-specialist v3",
        "policies": {"accept_first": policy, "ppo": policy, "sft": policy},
        "paired": {"ppo_minus_sft": estimate, "ppo_minus_best_baseline": {**estimate, "mean": -0.05}},
        "best_baseline": "accept_first",
        "behaviour_paired": {"agreement": {"ppo_minus_sft": estimate}},
        "warmstart_imitation": {"n": 48, "command_rate": 0.93, "teacher_command_rate": 1.0, "passed": True}
        | {"min_command_rate": 0.9},
        "learning_curve": [
            {"iteration": 0, "reward_mean": 0.2, "reward_ci_low": 0.1, "reward_ci_high": 0.3, "agreement_rate": 0.5}
            | {"invalid_actions_per_episode": 0.1, "kl": 0.01, "entropy": 0.9, "time_rollout_s": 60, "time_train_s": 90}
        ],
    }
    lines = report_markdown(report).splitlines()
    # Trained policies first (POLICY_ORDER), then the baselines; the agreement column holds its mean.
    rows = [line.split(" | ")[0] for line in lines if line.startswith(("| sft |", "| ppo |", "| accept_first |"))]
    assert rows == ["| sft", "| ppo", "| accept_first"]
    assert "| sft | 48 | 0.250 [0.100, 0.400] | 0.50 |" in lines
    assert "| ppo_minus_best_baseline (best baseline: accept_first) | -0.050 [0.100, 0.400] | 48 |" in lines
    assert "| agreement | 0.250 [0.100, 0.400] (n=48) | - | - |" in lines
    assert any("command rate 0.930 (teacher 1.000; check >= 0.9: passed)" in line for line in lines)
    assert "| 1 | 0.200 [0.100, 0.300] | 0.50 | 0.10 | 0.0100 | 0.90 | 60 | 90 |" in lines


def test_the_test_suite_summary_reads_counts_wall_time_and_the_slowest_tests_from_the_junit_xml(
    tmp_path, monkeypatch
) -> None:
    from benchmarks import bench_test_suite

    cases = "".join(
        f'<testcase classname="tests.test_{i}" name="test_{i}" time="{t}"/>'
        for i, t in enumerate([3.0, 120.5, 0.2, 47.0, 9.9, 1.0, 2.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    )
    junit = tmp_path / "pytest.xml"
    junit.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="1" failures="2" skipped="3" '
        f'tests="12" time="101.25">{cases}</testsuite></testsuites>'
    )
    result = bench_test_suite.summarise(junit, workers=2, setup_s=300.0)
    assert (result["tests"], result["failures"], result["errors"], result["skipped"]) == (12, 2, 1, 3)
    assert result["wall_s"] == 101.2 and result["summed_test_s"] == 213.6 and result["workers"] == 2
    assert [row["seconds"] for row in result["slowest"]] == [120.5, 47.0, 9.9, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0]
    assert result["slowest"][0]["test"] == "tests.test_1::test_1"
    text = bench_test_suite.render(result)
    assert "12 tests (2 failed, 1 errors, 3 skipped) on 2 pytest-xdist workers in 1.7 min" in text
    assert "5.0 min of setup" in text and "| `tests.test_1::test_1` | 120 |" in text
    assert "machine_update_tok_s" not in result and "tokens/s" not in text  # not measured: not shown
    # The machine's speed sits beside the wall time.
    timed = bench_test_suite.summarise(junit, workers=2, setup_s=300.0, update_tok_s=2634.04)
    assert timed["machine_update_tok_s"] == 2634.0 and timed.keys() - {"machine_update_tok_s"} == result.keys()
    assert (
        "on 2 pytest-xdist workers in 1.7 min (the machine's PPO update speed: 2,634 tokens/s, "
        "`benchmarks/bench_learner.py --shape small`), 5.0 min of setup"
    ) in bench_test_suite.render(timed)
    # Setup and suite scaled to the reference machine by the speed measured as the reference's was (not the
    # machine speed above): twice its speed here, so twice the time there.
    reference = tmp_path / "learner_cpu.json"
    reference.write_text(json.dumps({"tokens_per_s": {"update": 1317.02}}))
    monkeypatch.setattr(bench_test_suite, "REFERENCE", reference)
    scaled = bench_test_suite.summarise(junit, 2, 300.0, update_tok_s=9999.0, reference_settings_tok_s=2634.04)
    assert scaled["reference_update_tok_s"] == 1317.02 and scaled["reference_settings_update_tok_s"] == 2634.0
    assert scaled["at_reference_speed_s"] == 802.4
    assert "together 13.4 min when scaled to the reference machine: 2,634 tokens/s here against its 1,317" in (
        bench_test_suite.render(scaled)
    )
    junit.write_text("<report/>")
    with pytest.raises(ValueError, match="no <testsuite>"):
        bench_test_suite.summarise(junit, workers=1)


def test_the_test_suite_summary_measures_the_machines_update_speed_in_the_same_run(tmp_path, monkeypatch) -> None:
    """main() measures the speed with bench_learner (a stand-in script here: the real one takes seconds and is
    run by `make test`'s summary), takes a value given instead, or leaves the key out when told."""
    import json

    from benchmarks import bench_test_suite
    from models import provenance

    junit = tmp_path / "pytest.xml"
    junit.write_text(
        '<testsuite name="pytest" tests="1" time="60"><testcase classname="t" name="a" time="1"/></testsuite>'
    )
    learner = tmp_path / "bench_learner.py"
    learner.write_text(
        "import json, pathlib, sys\n"
        "machine = ['--device', 'cpu', '--shape', 'small', '--iterations', '1']\n"
        "like = ['--device', 'cpu', '--shape', 'small', '--iterations', '3', '--threads', '1']\n"
        "assert sys.argv[1:] in (machine, like), sys.argv\n"
        "runs = pathlib.Path(__file__).with_name('runs')\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        "update = 1234.56 if sys.argv[1:] == machine else [900.0, 1100.0, 1000.0][len(runs.read_text()) % 3]\n"
        "print('warming up')\n"
        "print(json.dumps({'benchmark': 'learner', 'tokens_per_s': {'prepare': 9.0, 'update': update}}))\n"
    )
    monkeypatch.setattr(provenance, "LEARNER", learner)
    output = tmp_path / "test_suite.json"

    def written(*extra: str) -> dict:
        assert bench_test_suite.main(["--junit", str(junit), "--workers", "1", "--output", str(output), *extra]) == 0
        return json.loads(output.read_text())

    assert written()["machine_update_tok_s"] == 1234.6
    assert written("--update-tok-s", "99.44")["machine_update_tok_s"] == 99.4
    assert "machine_update_tok_s" not in written("--no-machine-speed")
    assert written()["wall_s"] == 60.0  # the existing keys stay
    # With the setup's seconds: the speed measured as the reference was, the median of three runs, scales them.
    reference = tmp_path / "learner_cpu.json"
    reference.write_text(
        json.dumps({"shape": "small", "timed_iterations": 3, "threads": 1, "tokens_per_s": {"update": 2000.0}})
    )
    monkeypatch.setattr(bench_test_suite, "REFERENCE", reference)
    scaled = written("--setup-s", "40")
    assert (scaled["machine_update_tok_s"], scaled["reference_settings_update_tok_s"]) == (1234.6, 1000.0)
    assert scaled["at_reference_speed_s"] == (60.0 + 40.0) * 1000.0 / 2000.0
    assert "reference_settings_update_tok_s" not in written("--setup-s", "40", "--no-machine-speed")
    learner.write_text("import sys\nsys.exit('no torch here')\n")
    with pytest.raises(RuntimeError, match="no torch here"):
        provenance.measure_update_tok_s()


def test_test_files_run_slowest_first_and_stay_together() -> None:
    """bench_test_suite sums each file's time from the JUnit XML; the suite orders whole files by it (slowest
    first, unmeasured files after, each file's tests in their own order)."""
    from types import SimpleNamespace

    from benchmarks import bench_test_suite
    from tests.conftest import slow_files_first

    cases = [
        (3.0, "tests.test_a::test_one"),
        (200.0, "tests.test_pipelines::test_lineage"),
        (2.0, "tests.test_a.TestGroup::test_two[x]"),
        (9.0, "tests.test_b::test_three"),
    ]
    totals = bench_test_suite.module_seconds(cases)
    assert totals == {"test_pipelines": 200.0, "test_b": 9.0, "test_a": 5.0}
    assert list(totals) == ["test_pipelines", "test_b", "test_a"]

    def item(path: str, name: str) -> SimpleNamespace:
        return SimpleNamespace(path=Path(path), name=name)

    items = [
        item("tests/test_a.py", "1"), item("tests/test_a.py", "2"), item("tests/test_new.py", "3"),
        item("tests/test_b.py", "4"), item("tests/test_pipelines.py", "5"), item("tests/test_b.py", "6"),
    ]  # fmt: skip
    ordered = [i.name for i in slow_files_first(items, totals)]
    assert ordered == ["5", "4", "6", "1", "2", "3"]
    assert [i.name for i in slow_files_first(items, {})] == ["1", "2", "3", "4", "5", "6"]
