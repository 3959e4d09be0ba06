"""`make report`: the papers' report from the committed result files (benchmarks/results/) and, where the Dagster
instance holds materialisations of the stages, from those too. It runs nothing heavy (no engine, no training),
then prints where the report is and a short table of verdicts.

    python -m pipelines.run_report [--profile smoke|cpu|paper] [--data-dir DIR] [--files-only] [--publish [DIR]]

Where the data directory's instance (the one `make ui` opens) holds a materialisation of a stage the report
reads, `report_job` runs through pipelines/launcher.py and the `paper_report` asset reads both the instance and
the result files (a claim both measured is read from the one measured on the current environment version, then
the newer). Otherwise (no instance, none of its stages materialised, or `--files-only`) the report is built here
from the result files alone, without Dagster. Files: <data>/reports/paper_report.html (standalone) and
paper_report.md; docs/report.md. `--publish` (`make report PUBLISH=1`) also writes them, with the claim rows as
paper_report.json, into the repository's benchmarks/results/ (or DIR); `make report PUBLISH=1` then renders the
README's results block from that JSON (benchmarks/readme_results.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from agents.env_version import env_version
from models.profiles import PROFILE_NAMES, PROFILES, Profile, get_profile
from models.report import PaperReport, build_report, publish_report, result_sources, verdict_table, write_report
from models.settings import DataPaths
from pipelines.launcher import Launcher
from pipelines.run_lineage import configure_logging

PUBLISHED = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
"""Where `--publish` writes by default: the repository's result files."""
REPORT_STEM = "paper_report"


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


def files_report(profile: Profile, paths: DataPaths) -> tuple[PaperReport, dict[str, str]]:
    """The report from the result files alone (no Dagster), written to <data>/reports/ as the asset writes it."""
    from assets.report import PAPERS, RESULTS

    files = result_sources(PAPERS, RESULTS)
    report = build_report(
        PAPERS, None, PROFILES, current_env_version=env_version(), files=files, default_profile=profile
    )
    written = write_report(report, paths.reports, REPORT_STEM)
    return report, {"html": str(written.html), "markdown": str(written.markdown)}


def instance_holds_runs(paths: DataPaths, assets: Iterable[str]) -> bool:
    """Whether the data directory's Dagster instance holds a materialisation of any of `assets` (no instance:
    False, and none is created to find out)."""
    if not (paths.root / "dagster_home").is_dir():
        return False
    from dagster import DagsterInstance

    from resources.instance import latest_materialisation

    with DagsterInstance.from_config(str(paths.dagster_home)) as instance:
        return any(latest_materialisation(instance, asset, limit=1) is not None for asset in dict.fromkeys(assets))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument("--files-only", action="store_true", help="read the result files alone, not the instance")
    parser.add_argument(
        "--publish", type=Path, nargs="?", const=PUBLISHED, default=None, metavar="DIR",
        help=f"also write the report and its claim rows (paper_report.json) to DIR (default {PUBLISHED})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    paths = DataPaths(args.data_dir) if args.data_dir is not None else DataPaths.from_env()
    log_file = paths.log_file("report")
    configure_logging(log_file)
    from assets.report import PAPERS, RESULTS

    if args.files_only or not instance_holds_runs(paths, [a for paper in PAPERS for a in paper.assets()]):
        print(f"[report] from the result files in {RESULTS} (no Dagster instance read)")
        report, files = files_report(profile, paths)
    else:
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
