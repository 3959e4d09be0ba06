"""Result blocks in the README and docs, rendered from result files (never typed by hand).

Each block sits between `<!-- <name>: begin -->` and `<!-- <name>: end -->` in its document:

| block | document | result file | rendered by |
| --- | --- | --- | --- |
| `make_run_cpu` | docs/stage1.md | benchmarks/results/make_run_cpu.json (until a run on the current environment exists: make_run_cpu_before_audit.json) | each domain's `report_markdown` (models/socialrl/stage1/report.py, the tables `make run` prints and the `specialist_eval` asset shows) and the run's wall time from its own records; a run whose `env_version` is not the current code's is marked stale |
| `incentives_cpu` | docs/stage1.md | benchmarks/results/incentives_cpu.json | `incentives_markdown` (below: the audit's behaviours and reference policies per price domain) |
| `yoao_cpu` | docs/yoao.md | benchmarks/results/yoao_cpu.json | `benchmark_markdown` (models/yoao/report.py) |
| `yoao_tutor_reference` | docs/yoao.md | benchmarks/results/yoao_tutor_reference.json | `benchmark_markdown` |
| `yoao_incentives_cpu` | docs/yoao.md | benchmarks/results/yoao_incentives_cpu.json | `audit_markdown` (models/yoao/incentives.py: the YOAO incentive audit and the tutors' prior calibration) |
| `yoao_listener_cpu` | docs/yoao.md | benchmarks/results/yoao_listener_cpu.json | `recipes_markdown` (models/yoao/listening.py: format warm-up recipes compared by the listener probe, `benchmarks/bench_yoao_listener.py`) |
| `test_suite` | docs/testing.md | benchmarks/results/test_suite.json | `render` (benchmarks/bench_test_suite.py: `make test`'s JUnit XML) |
| `paper_report` | README.md | benchmarks/results/paper_report.json | `summary_markdown` (models/report/render.py: every claim row `make report PUBLISH=1` published from the result files, with its verdict, reason and source, linking the whole report beside it) |

A block whose result file does not exist yet is left as it is. tests/test_readme_results.py fails when a
document and its file disagree.

    python -m benchmarks.readme_results          # rewrite every block from its result file
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from benchmarks import bench_test_suite
from models.report import summary_markdown
from models.socialrl.stage1.report import report_markdown
from models.yoao.incentives import audit_markdown
from models.yoao.listening import recipes_markdown
from models.yoao.report import benchmark_markdown

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RESULT = RESULTS / "make_run_cpu.json"
RESULT_BEFORE_AUDIT = RESULTS / "make_run_cpu_before_audit.json"
"""The last make-run result, measured on the environment before the incentive audit (env_version "before-audit")."""
MAKE_RUN = RESULT if RESULT.exists() else RESULT_BEFORE_AUDIT
"""The make-run result the stage-1 block renders."""
README = ROOT / "README.md"
STAGE1 = ROOT / "docs" / "stage1.md"
"""The stage-1 document: the make-run and incentive-audit blocks."""
TESTING = ROOT / "docs" / "testing.md"
"""The setup and test-suite document: the test-suite block."""
BEGIN, END = "<!-- make_run_cpu: begin -->", "<!-- make_run_cpu: end -->"


def render(result: dict[str, Any]) -> str:
    """The stage-1 block (markdown, docs/stage1.md) for one make-run result file."""
    parts = []
    if result.get("env_version") != env_version():
        parts.append(
            f"**Stale:** measured on environment version `{result.get('env_version', 'unknown')}`, not the current "
            "code's; results of different environment versions are never compared."
        )
    parts += [report_markdown(report) for report in result["domains"].values()]
    timing = f"The run took {result['wall_s'] / 60:.1f} min of jobs"
    if result.get("wall_s_with_setup"):
        timing += f", {result['wall_s_with_setup'] / 60:.1f} min with setup from a fresh clone"
    measured = f", measured {result['measured_at']}" if result.get("measured_at") else ""
    parts.append(timing + f" (profile `{result['profile']}`{measured}).")
    return "\n\n".join(parts) + "\n"


@dataclass(frozen=True)
class Block:
    """One rendered block of a document."""

    name: str
    """The marker name: the block sits between `<!-- name: begin -->` and `<!-- name: end -->`."""
    document: Path
    result: Path
    render: Callable[[dict[str, Any]], str]

    @property
    def markers(self) -> tuple[str, str]:
        return f"<!-- {self.name}: begin -->", f"<!-- {self.name}: end -->"


def render_paper_report(summary: dict[str, Any]) -> str:
    """The README's results block: the published report's claim rows and verdicts, linking the whole report."""
    return summary_markdown(summary, "benchmarks/results/paper_report.md")


PAPER_REPORT = Block("paper_report", README, RESULTS / "paper_report.json", render_paper_report)


def incentives_markdown(result: dict[str, Any]) -> str:
    """The audit's table per price domain: each behaviour's paired effect, then the reference policies."""
    lines = [
        f"Environment version `{result['env_version']}`, profile `{result.get('profile', '?')}`; each effect is the "
        "paired difference (minuend - subtrahend) with its scenario-clustered 95% bootstrap interval, pooled over "
        "the base scripts.",
        "",
        "| domain | behaviour or policy | effect or mean reward | n (scenarios) |",
        "| --- | --- | --- | --- |",
    ]

    def interval(e: dict[str, Any], spec: str) -> str:
        return f"{e['mean']:{spec}} [{e['ci_low']:{spec}}, {e['ci_high']:{spec}}]"

    for env_id, d in result["domains"].items():
        size = f"{d['n']} ({d['clusters']})"
        for name, b in d["behaviours"].items():
            lines.append(f"| {env_id} | {name} | {interval(b, '+.3f')} | {b['n']} ({d['clusters']}) |")
        best = d["best_fixed_rule"]
        lines.append(f"| {env_id} | best fixed rule (f = {best['fraction']:g}) | {interval(best, '.3f')} | {size} |")
        lines.append(f"| {env_id} | teacher | {interval(d['teacher'], '.3f')} | {size} |")
        diff = d["teacher_minus_best_fixed_rule"]
        lines.append(f"| {env_id} | teacher - best fixed rule | {interval(diff, '+.3f')} | {size} |")
        lines.append(f"| {env_id} | oracle (told the reservation) | {interval(d['oracle'], '.3f')} | {size} |")
        for name, e in d["baselines"].items():
            lines.append(f"| {env_id} | {name} | {interval(e, '.3f')} | {size} |")
        c = d.get("calibration")
        if c:
            lines.append(
                f"| {env_id} | teacher deals vs people's | median price/listing {c['deal_over_listing_median']:.3f} vs "
                f"{c['human_deal_over_listing_median']:.3f}, KS {c['ks_distance']:.3f}, agreement {c['agreement']:.3f} vs "
                f"{c['human_agreement']:.3f} | {c['teacher_deals']} vs {c['human_deals']} deals |"
            )
    failures = result.get("failures") or []
    lines += ["", "Targets: " + ("all hold." if not failures else "; ".join(failures) + ".")]
    return "\n".join(lines) + "\n"


BLOCKS = (
    Block("make_run_cpu", STAGE1, MAKE_RUN, render),
    Block("incentives_cpu", STAGE1, RESULTS / "incentives_cpu.json", incentives_markdown),
    Block("yoao_cpu", ROOT / "docs" / "yoao.md", RESULTS / "yoao_cpu.json", benchmark_markdown),
    Block("yoao_tutor_reference", ROOT / "docs" / "yoao.md", RESULTS / "yoao_tutor_reference.json", benchmark_markdown),
    Block("yoao_incentives_cpu", ROOT / "docs" / "yoao.md", RESULTS / "yoao_incentives_cpu.json", audit_markdown),
    Block("yoao_listener_cpu", ROOT / "docs" / "yoao.md", RESULTS / "yoao_listener_cpu.json", recipes_markdown),
    Block("test_suite", TESTING, bench_test_suite.RESULT, bench_test_suite.render),
    PAPER_REPORT,
)


def block(text: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """The text between a document's markers."""
    begin, end = markers
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[start:stop].strip("\n") + "\n"


def rewrite(b: Block) -> bool:
    """Rewrite `b` in its document from its result file; False when the file does not exist yet."""
    if not b.result.exists():
        return False
    begin, end = b.markers
    text = b.document.read_text()
    start, stop = text.index(begin) + len(begin), text.index(end)
    b.document.write_text(text[:start] + "\n" + b.render(json.loads(b.result.read_text())) + text[stop:])
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    for b in BLOCKS:
        done = rewrite(b)
        print(f"{b.name}: {'wrote ' + str(b.document.relative_to(ROOT)) if done else 'no ' + b.result.name + ' yet'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
