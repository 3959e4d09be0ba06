"""The README's stage-1 results, rendered from benchmarks/results/make_run_cpu.json (never typed by hand).

The block between `<!-- make_run_cpu: begin -->` and `<!-- make_run_cpu: end -->` in README.md is each domain's
report rendered by `report_markdown` (models/socialrl/stage1/report.py, the same tables `make run` prints and
the `specialist_eval` asset shows), followed by the run's wall time from its own records.
tests/test_readme_results.py fails when the README and the file disagree.

    python -m benchmarks.readme_results          # rewrite the README block from the result file
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from models.socialrl.stage1.report import report_markdown

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "make_run_cpu.json"
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
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    args.readme.write_text(text[:start] + "\n" + render(json.loads(args.result.read_text())) + text[end:])
    print(f"wrote {args.readme} from {args.result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
