"""The papers' report (the `paper_report` asset, `make report`; docs/report.md): each paper's claims beside
this project's values with their intervals, a verdict by one rule, and every number and figure of every stage.

| module | what |
| --- | --- |
| claims.py | `Claim`, `Interval`, `Verdict` and the verdict rule `decide` (at least `MIN_CLUSTERS` clusters) |
| sources.py | `StageRead`, `Snapshot`: the latest materialisation of each asset with its stored output |
| metrics.py | every number (`metric_rows`) and every PNG (`figures`) of a stored output |
| build.py | `Measurement`, `PaperSpec`, `StageSpec`, `build_report` (given the profiles by the caller) -> `PaperReport` |
| render.py | the report as markdown and standalone HTML (`write_report`), the short verdict table, the published copy with its verdicts as JSON (`publish_report`, `summary`) and the README block (`summary_markdown`) |

Paper-free: each paper's claims and measurers live in its own package (models/socialrl/paper_claims.py,
models/yoao/paper_claims.py); the asset (assets/report.py) joins them and passes the profiles.
"""

from models.report.build import (
    ClaimRow,
    Figure,
    Measurement,
    PaperReport,
    PaperSpec,
    StageSection,
    StageSpec,
    build_report,
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
    VERDICTS,
    Claim,
    Interval,
    Verdict,
    decide,
)
from models.report.render import (
    ReportFiles,
    claims_markdown,
    document,
    publish_report,
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
    "NOT_SHOWN",
    "NOT_STATED",
    "OPPOSITE",
    "REPRODUCED",
    "VERDICTS",
    "Claim",
    "ClaimRow",
    "Figure",
    "Interval",
    "Measurement",
    "PaperReport",
    "PaperSpec",
    "ReportFiles",
    "Snapshot",
    "StageRead",
    "StageSection",
    "StageSpec",
    "Verdict",
    "build_report",
    "claims_markdown",
    "decide",
    "document",
    "publish_report",
    "summary",
    "summary_markdown",
    "to_html",
    "to_markdown",
    "verdict_table",
    "write_report",
]
