"""`make report`: materialise `paper_report` from what the Dagster instance holds (it runs nothing heavy: no
engine, no training), then print where the report is and a short table of verdicts.

    python -m pipelines.run_report [--profile smoke|cpu|paper] [--data-dir DIR] [--publish [DIR]]

`report_job` runs through pipelines/launcher.py on the instance `make ui` opens; the report reads the latest
materialisation of every stage there (a stage never materialised reads "not measured"). Files:
<data>/reports/paper_report.html (standalone) and paper_report.md (figures in paper_report_figures/);
docs/report.md. `--publish` (`make report PUBLISH=1`) also writes them, with the verdicts as
paper_report.json, into the repository's benchmarks/results/ (or DIR): the copy to commit after a cpu run of
every stage; `make report PUBLISH=1` then renders the README's results block from that JSON
(benchmarks/readme_results.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from models.profiles import PROFILE_NAMES, get_profile
from models.report import PaperReport, publish_report, verdict_table
from models.settings import DataPaths
from pipelines.launcher import Launcher
from pipelines.run_lineage import configure_logging

PUBLISHED = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
"""Where `--publish` writes by default: the repository's result files."""


def run_report(
    profile: str, data: Path | None = None, log_file: Path | None = None
) -> tuple[PaperReport, dict[str, str]] | str:
    """Materialise `paper_report`; its value read back through the instance with the files it wrote (`html`,
    `markdown`), or the error that stopped it."""
    paths = DataPaths(data) if data is not None else DataPaths.from_env()
    launcher = Launcher(profile, paths, "make report", log_file=log_file)
    run = launcher.run("report_job")
    done = launcher.latest("paper_report") if run.success else None
    if done is None:
        return run.error or "report_job failed"
    files = {k: str(done.metadata.get(k, "")) for k in ("html", "markdown")}
    return launcher.load("paper_report"), files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument(
        "--publish", type=Path, nargs="?", const=PUBLISHED, default=None, metavar="DIR",
        help=f"also write the report and its verdicts (paper_report.json) to DIR (default {PUBLISHED})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    paths = DataPaths(args.data_dir) if args.data_dir is not None else DataPaths.from_env()
    log_file = paths.log_file("report")
    configure_logging(log_file)
    result = run_report(profile.name, paths.root, log_file)
    if isinstance(result, str):
        print(f"[report] FAILED: {result}\nFull log: {log_file}")
        return 1
    report, files = result
    counts = ", ".join(f"{kind} {n}" for kind, n in report.counts().items())
    print(verdict_table(report) + "\n")
    print(f"Verdicts: {counts}.")
    print(f"Report: {files['html']}\nMarkdown: {files['markdown']} (figures beside it)")
    if args.publish is not None:
        published = publish_report(report, args.publish)
        print(f"Published: {published.markdown}, {published.html} and {args.publish / 'paper_report.json'}")
    print(f"Full log: {log_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
