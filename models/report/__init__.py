"""The papers' report (the `paper_report` asset, `make report`; docs/report.md): each paper's claims beside
this project's values with their intervals, a verdict by one rule, and every number and figure of every stage.

| module | what |
| --- | --- |
| claims.py | `Claim`, `Interval`, `Verdict`, the verdict rule `decide` (at least `MIN_CLUSTERS` clusters) and `stale` (another environment version) |
| files.py | `ResultFile`, `ResultSources`, `Provenance`: the committed result files (benchmarks/results/) with where each came from |
| sources.py | `StageRead`, `Snapshot`: the latest materialisation of each asset with its stored output |
| metrics.py | every number (`metric_rows`) and every PNG (`figures`) of a stored output or result file |
| build.py | `Measurement`, `PaperSpec`, `StageSpec`, `build_report` (given the profiles and the current environment version by the caller) -> `PaperReport` |
| render.py | the report as markdown and standalone HTML (`write_report`), the short verdict table, the published copy with its claim rows as JSON (`publish_report`, `summary`) and the README block (`summary_markdown`) |

Paper-free: each paper's claims and measurers live in its own package (models/socialrl/paper_claims.py and
paper_files.py, models/yoao/paper_claims.py and paper_files.py); the asset (assets/report.py) and `make report`
(pipelines/run_report.py) join them and pass the profiles and the environment version.
"""

from models.report.build import (
    ClaimRow,
    Figure,
    FileMeasurer,
    Measurement,
    Measurer,
    PaperReport,
    PaperSpec,
    StageSection,
    StageSpec,
    build_report,
    choose,
    missing_files,
    result_sources,
)
from models.report.claims import (
    HIGHER,
    LOWER,
    MIN_CLUSTERS,
    NOT_MEASURED,
    NOT_SHOWN,
    NOT_STATED,
    OPPOSITE,
    REPRODUCED,
    STALE,
    VERDICTS,
    Claim,
    Interval,
    Verdict,
    decide,
    stale,
)
from models.report.files import (
    NOT_RECORDED,
    PROVENANCE_FIELDS,
    Provenance,
    ResultFile,
    ResultSources,
    entry_interval,
)
from models.report.render import (
    ROW_KEYS,
    ReportFiles,
    claim_json,
    claims_markdown,
    document,
    publish_report,
    sources_text,
    summary,
    summary_markdown,
    to_html,
    to_markdown,
    verdict_table,
    write_report,
)
from models.report.sources import Snapshot, StageRead

__all__ = [
    "HIGHER",
    "LOWER",
    "MIN_CLUSTERS",
    "NOT_MEASURED",
    "NOT_RECORDED",
    "NOT_SHOWN",
    "NOT_STATED",
    "OPPOSITE",
    "PROVENANCE_FIELDS",
    "REPRODUCED",
    "ROW_KEYS",
    "STALE",
    "VERDICTS",
    "Claim",
    "ClaimRow",
    "Figure",
    "FileMeasurer",
    "Interval",
    "Measurement",
    "Measurer",
    "PaperReport",
    "PaperSpec",
    "Provenance",
    "ReportFiles",
    "ResultFile",
    "ResultSources",
    "Snapshot",
    "StageRead",
    "StageSection",
    "StageSpec",
    "Verdict",
    "build_report",
    "choose",
    "claim_json",
    "claims_markdown",
    "decide",
    "document",
    "entry_interval",
    "missing_files",
    "publish_report",
    "result_sources",
    "sources_text",
    "stale",
    "summary",
    "summary_markdown",
    "to_html",
    "to_markdown",
    "verdict_table",
    "write_report",
]
