"""How long the README's test command takes, read from the JUnit XML that `make test` writes.

`make test` runs the suite on `TEST_WORKERS` pytest-xdist processes and writes every test's time to
data/logs/pytest.xml. This reads that file (nothing is rerun) and writes benchmarks/results/test_suite.json:

| key | meaning |
| --- | --- |
| `workers` | pytest-xdist processes of the run (given on the command line; the XML does not record it) |
| `wall_s` | the pytest session's wall time (the XML's `testsuite` time) |
| `summed_test_s` | the tests' own times added up (with several workers each time is taken beside the others, so this overstates what one process would need) |
| `tests`, `failures`, `errors`, `skipped` | counts from the XML |
| `slowest` | the ten slowest tests, `{test, seconds}` |
| `module_seconds` | test file (its stem, e.g. `test_pipelines`) -> its tests' summed seconds: tests/conftest.py runs the files in this order, slowest first, so that the workers' last tests are short ones |
| `setup_s` | optional: the seconds `make setup` took before it on a fresh clone (`--setup-s`) |
| `machine_update_tok_s` | the machine's speed, so that wall times of different machines can be compared: the PPO update's tokens/s of `benchmarks/bench_learner.py --device cpu --shape small` (its `tokens_per_s.update`, one timed iteration after its warm-up, all cores), measured by this run right after reading the XML (a subprocess; `--update-tok-s` passes a value measured otherwise, `--no-machine-speed` leaves the key out) |
| `reference_update_tok_s`, `reference_settings_update_tok_s`, `at_reference_speed_s` | with `setup_s`: the reference machine's PPO update speed (benchmarks/results/learner_cpu.json `tokens_per_s.update`, one thread, three timed iterations), this machine's measured the same way (`models.provenance.measure_like`: the median of three runs, right after `machine_update_tok_s`; that one uses both cores and one iteration, so it is not comparable with the reference's), and `(wall_s + setup_s) x reference_settings_update_tok_s / reference_update_tok_s`, what setup and suite would take on the reference machine (the suite's budget, 1,200 s, is set there) |
| `measured_at` | UTC time this file was written |

    python -m benchmarks.bench_test_suite --workers 2 [--junit data/logs/pytest.xml] [--setup-s 330]
"""

from __future__ import annotations

import argparse
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from models.provenance import measure_like, measure_update_tok_s

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "test_suite.json"
REFERENCE = ROOT / "benchmarks" / "results" / "learner_cpu.json"
SLOWEST = 10


def summarise(
    junit: Path,
    workers: int,
    setup_s: float | None = None,
    update_tok_s: float | None = None,
    reference_settings_tok_s: float | None = None,
) -> dict[str, Any]:
    """The result file's content for one JUnit XML written by pytest (`--junitxml`); `update_tok_s` is the
    machine's PPO update speed (`measure_update_tok_s`), kept as `machine_update_tok_s` when given;
    `reference_settings_tok_s` the same measured as the reference was (`measure_like`), which with `setup_s`
    scales the run to the reference machine."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    if not suites:
        raise ValueError(f"{junit}: no <testsuite> element (not a pytest JUnit XML?)")
    cases = [
        (float(case.get("time") or 0.0), f"{case.get('classname', '')}::{case.get('name', '')}")
        for case in root.iter("testcase")
    ]
    cases.sort(key=lambda c: -c[0])
    counts = {key: sum(int(s.get(key) or 0) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    result: dict[str, Any] = {
        "workers": workers,
        "wall_s": round(sum(float(s.get("time") or 0.0) for s in suites), 1),
        "summed_test_s": round(sum(t for t, _ in cases), 1),
        **counts,
        "slowest": [{"test": name, "seconds": round(t, 1)} for t, name in cases[:SLOWEST]],
        "module_seconds": module_seconds(cases),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if setup_s is not None:
        result["setup_s"] = round(setup_s, 1)
    if update_tok_s is not None:
        result["machine_update_tok_s"] = round(update_tok_s, 1)
    if setup_s is not None and reference_settings_tok_s is not None:
        reference = float(json.loads(REFERENCE.read_text())["tokens_per_s"]["update"])
        result["reference_update_tok_s"] = reference
        result["reference_settings_update_tok_s"] = round(reference_settings_tok_s, 1)
        result["at_reference_speed_s"] = round((result["wall_s"] + setup_s) * reference_settings_tok_s / reference, 1)
    return result


def module_stem(test_id: str) -> str:
    """The test file's stem of a JUnit test id "<classname>::<name>" (classname "tests.test_x" or
    "tests.test_x.TestClass"): the first dotted part that starts with "test_"."""
    parts = test_id.split("::", 1)[0].split(".")
    return next((part for part in parts if part.startswith("test_")), parts[-1])


def module_seconds(cases: list[tuple[float, str]]) -> dict[str, float]:
    """Test file stem -> the summed seconds of its tests, slowest file first."""
    totals: dict[str, float] = {}
    for seconds, test_id in cases:
        stem = module_stem(test_id)
        totals[stem] = totals.get(stem, 0.0) + seconds
    return {stem: round(t, 1) for stem, t in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))}


def render(result: dict[str, Any]) -> str:
    """The test-suite block (docs/testing.md): the run's wall time (beside the machine's speed, when measured),
    its counts and its ten slowest tests."""
    setup = f", {result['setup_s'] / 60:.1f} min of setup before it on a fresh clone" if "setup_s" in result else ""
    if "at_reference_speed_s" in result:
        setup += (
            f" (setup and suite together {result['at_reference_speed_s'] / 60:.1f} min when scaled to the reference "
            f"machine: {result['reference_settings_update_tok_s']:,.0f} tokens/s here against its "
            f"{result['reference_update_tok_s']:,.0f}, both measured as benchmarks/results/learner_cpu.json was)"
        )
    speed = (
        f" (the machine's PPO update speed: {result['machine_update_tok_s']:,.0f} tokens/s, "
        "`benchmarks/bench_learner.py --shape small`)"
        if "machine_update_tok_s" in result
        else ""
    )
    lines = [
        f"The last measured `make test` ran {result['tests']} tests ({result['failures']} failed, {result['errors']} "
        f"errors, {result['skipped']} skipped) on {result['workers']} pytest-xdist workers in "
        f"{result['wall_s'] / 60:.1f} min{speed}{setup}; the tests' own times add up to "
        f"{result['summed_test_s'] / 60:.1f} "
        f"min (measured {result['measured_at']}, benchmarks/results/test_suite.json). The ten slowest, each timed "
        f"while the other workers ran on the same cores:",
        "",
        "| test | seconds |",
        "| --- | --- |",
        *(f"| `{row['test']}` | {row['seconds']:.0f} |" for row in result["slowest"]),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--junit", type=Path, default=ROOT / "data" / "logs" / "pytest.xml")
    parser.add_argument("--workers", type=int, required=True, help="TEST_WORKERS of the run")
    parser.add_argument("--setup-s", type=float, default=None, help="seconds of `make setup` before it")
    parser.add_argument("--output", type=Path, default=RESULT)
    speed = parser.add_mutually_exclusive_group()
    speed.add_argument(
        "--update-tok-s", type=float, default=None, help="the machine's PPO update speed, measured otherwise"
    )
    speed.add_argument(
        "--no-machine-speed", action="store_true", help="do not measure the machine's speed (no machine_update_tok_s)"
    )
    args = parser.parse_args(argv)
    update_tok_s = args.update_tok_s
    if update_tok_s is None and not args.no_machine_speed:
        update_tok_s = measure_update_tok_s()
    like = None
    if args.setup_s is not None and not args.no_machine_speed and REFERENCE.is_file():
        like = measure_like(json.loads(REFERENCE.read_text()))
    result = summarise(args.junit, args.workers, args.setup_s, update_tok_s, like)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
