"""Result blocks in the README and docs, rendered from result files (never typed by hand).

Each block sits between `<!-- <name>: begin -->` and `<!-- <name>: end -->` in its document:

| block | document | result file | rendered by |
| --- | --- | --- | --- |
| `make_run_cpu` | README.md | benchmarks/results/make_run_cpu.json | each domain's `report_markdown` (models/socialrl/stage1/report.py, the tables `make run` prints and the `specialist_eval` asset shows) and the run's wall time from its own records |
| `yoao_cpu` | docs/yoao.md | benchmarks/results/yoao_cpu.json | `benchmark_markdown` (models/yoao/report.py) |
| `yoao_tutor_reference` | docs/yoao.md | benchmarks/results/yoao_tutor_reference.json | `benchmark_markdown` |
| `test_suite` | README.md | benchmarks/results/test_suite.json | `render` (benchmarks/bench_test_suite.py: `make test`'s JUnit XML) |
| `paper_report` | README.md | benchmarks/results/paper_report.json | `summary_markdown` (models/report/render.py: the verdicts `make report PUBLISH=1` published, linking the whole report beside it) |

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

from benchmarks import bench_test_suite
from models.report import summary_markdown
from models.socialrl.stage1.report import report_markdown
from models.yoao.report import benchmark_markdown

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RESULT = RESULTS / "make_run_cpu.json"
README = ROOT / "README.md"
BEGIN, END = "<!-- make_run_cpu: begin -->", "<!-- make_run_cpu: end -->"


def render(result: dict[str, Any]) -> str:
    """The README block (markdown) for one make-run result file."""
    parts = [report_markdown(report) for report in result["domains"].values()]
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
    """The README's results block: the published report's verdicts, linking the whole report."""
    return summary_markdown(summary, "benchmarks/results/paper_report.md")


PAPER_REPORT = Block("paper_report", README, RESULTS / "paper_report.json", render_paper_report)

BLOCKS = (
    Block("make_run_cpu", README, RESULT, render),
    Block("yoao_cpu", ROOT / "docs" / "yoao.md", RESULTS / "yoao_cpu.json", benchmark_markdown),
    Block("yoao_tutor_reference", ROOT / "docs" / "yoao.md", RESULTS / "yoao_tutor_reference.json", benchmark_markdown),
    Block("test_suite", README, bench_test_suite.RESULT, bench_test_suite.render),
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
