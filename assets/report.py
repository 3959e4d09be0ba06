"""The papers' report as a Dagster asset: `paper_report` (models/report/, docs/report.md).

It reads the committed result files (`RESULTS`, the repository's benchmarks/results/) and the latest
materialisation of every stage from the instance (resources/instance.py `read_snapshot`, the stored outputs
through each asset's own IO manager) instead of taking them as inputs, so a stage measured nowhere reads "not
measured" rather than blocking the report; a claim both measured is read from the one measured on the current
environment version, then the newer. Its one graph edge, to `champion_evaluations`, only orders it after the
nightly re-evaluation in `nightly_job`.
"""

from dagster import AssetExecutionContext, IOManager, MetadataValue, Output, ResourceParam, asset

from agents.env_version import env_version
from assets.common import mlflow_links
from assets.monitoring import champion_evaluations
from models.profiles import PROFILES
from models.report import (
    MIN_CLUSTERS,
    PaperReport,
    PaperSpec,
    build_report,
    claims_markdown,
    result_sources,
    verdict_table,
    write_report,
)
from models.settings import REPO_ROOT
from models.socialrl import paper_claims as socialrl_claims
from models.yoao import paper_claims as yoao_claims
from resources import MlflowResource, SettingsResource
from resources.instance import io_manager_loader, read_snapshot

GROUP = "report"
PAPERS: tuple[PaperSpec, ...] = (socialrl_claims.SPEC, yoao_claims.SPEC)
REPORT_STEM = "paper_report"
RESULTS = REPO_ROOT / "benchmarks" / "results"
"""The committed result files the report reads beside the instance."""


@asset(group_name=GROUP, kinds={"python", "mlflow"}, deps=[champion_evaluations])
def paper_report(
    context: AssetExecutionContext,
    settings: SettingsResource,
    mlflow: MlflowResource,
    io_manager: ResourceParam[IOManager],
) -> Output[PaperReport]:
    """Both papers' claims beside this project's values (CI, n, clusters, the best trivial baseline, scale,
    source with links), a verdict by one rule, and every number and figure of every stage, from the committed
    result files and the latest materialisations on the instance. Writes <data>/reports/paper_report.{md,html}
    (figures beside the markdown) and logs both to MLflow. Runs nothing heavy."""
    assets = [a for paper in PAPERS for a in paper.assets()]
    load = io_manager_loader(io_manager, context.instance)  # the IO manager every stage stored through
    snapshot = read_snapshot(context.instance, load, assets)
    tracker = mlflow.tracker()
    sources = result_sources(PAPERS, RESULTS)
    report = build_report(
        PAPERS, snapshot, PROFILES, current_env_version=env_version(), files=sources, links=mlflow.links(),
        experiment_id=tracker.experiment_id, default_profile=settings.get_profile(),
    )  # fmt: skip
    files = write_report(report, settings.paths().reports, REPORT_STEM)
    with tracker.start_run("paper-report", params={"profile": settings.get_profile().name}) as run:
        run.log_file(files.markdown.name, files.markdown.read_text(), "report")
        run.log_file(files.html.name, files.html.read_text(), "report")
    counts = report.counts()
    return Output(
        report,
        metadata={
            "verdicts": MetadataValue.md(verdict_table(report)),
            **{kind.replace(" ", "_"): n for kind, n in counts.items()},
            "stages_read": len(snapshot.reads),
            "result_files_read": MetadataValue.json([f.name for f in sources.files]),
            "current_env_version": report.current_env_version,
            "min_clusters": MIN_CLUSTERS,
            "claims": MetadataValue.md(claims_markdown(report)),
            "html": MetadataValue.path(str(files.html)),
            "markdown": MetadataValue.path(str(files.markdown)),
            "mlflow_run_id": run.run_id,
            **mlflow_links(context, mlflow, run.run_id),
        },
    )
