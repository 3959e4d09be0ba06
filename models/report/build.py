"""The papers' report: one row per claim (and per domain or frame it was measured on), and every stage's numbers
and figures, built from a `Snapshot` of the instance.

A paper is a `PaperSpec` (models/socialrl/paper_claims.py, models/yoao/paper_claims.py): its claims, for each a
*measurer* that finds this project's value in the snapshot, and its stages (the assets whose every number and
figure the report lists). `build_report` applies the verdict rule (models/report/claims.py `decide`) to each
measurement; a claim nothing measured gets one "not measured" row with the reason. The caller passes the profiles
(the scale column: a run's model by its profile tag): the report sits below the papers in models/ and does not
import models/profiles.py, which carries the YOAO paper's settings (tests/test_layers.py `MODELS_FLOORS`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from models.report.claims import VERDICTS, Claim, Interval, Verdict, decide
from models.report.metrics import MetricRow, figures, metric_rows
from models.report.sources import Snapshot, StageRead
from models.tracking.links import UiLinks


@dataclass(frozen=True)
class Measurement:
    """This project's value for a claim on one scope (a domain, a frame, the pooled domains)."""

    read: StageRead | None
    """The materialisation it came from (None: nothing was read)."""
    key: str
    """The key of the stored output it is (its path)."""
    scope: str = ""
    estimate: Interval | None = None
    value_text: str = ""
    """What was measured, in words, when there is no interval (shown beside an interval otherwise)."""
    no_interval: str = ""
    """Why there is no interval."""
    missing: str = ""
    """Why nothing was measured (non-empty: not measured)."""
    baseline: str = ""
    """The best trivial baseline on the same episodes, where one applies."""


class ProfileLike(Protocol):
    """What the report reads of a profile (models/profiles.py `Profile`). The caller passes the profiles: the report
    sits below the papers, whose settings a profile carries, so it does not import them (tests/test_layers.py)."""

    @property
    def name(self) -> str: ...

    @property
    def base_model(self) -> str: ...


Measurer = Callable[[Snapshot], Sequence[Measurement]]
FigureMaker = Callable[[StageRead], Mapping[str, bytes]]


@dataclass(frozen=True)
class StageSpec:
    """A stage (an asset) whose every number and figure the report lists."""

    title: str
    asset: str
    draw: FigureMaker | None = None
    """Draws, with the stage's own plot functions, the figures its stored output does not carry."""
    expected: tuple[str, ...] = ()
    """The figures the stage draws (names as `draw` or the stored output's PNG fields give them)."""
    unavailable: str = "not kept in the stored output"
    """Why an expected figure the report cannot find is not available."""


@dataclass(frozen=True)
class PaperSpec:
    name: str
    title: str
    claims: tuple[Claim, ...]
    measurers: Mapping[str, Measurer] = field(repr=False)
    """claim_id -> its measurer."""
    stages: tuple[StageSpec, ...]
    model_of: Callable[[Any], str] = field(default=lambda p: p.base_model, repr=False)
    """The model this paper's runs use under a profile (one of those `build_report` is given)."""

    def __post_init__(self) -> None:
        ids = [c.claim_id for c in self.claims]
        if sorted(ids) != sorted(self.measurers) or len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: every claim needs exactly one measurer ({ids} vs {list(self.measurers)})")

    def assets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*(c.asset for c in self.claims), *(s.asset for s in self.stages)]))


@dataclass(frozen=True, kw_only=True)
class ClaimRow:
    claim: Claim
    scope: str
    value: str
    n: int | None
    clusters: str
    """The clusters behind the interval, flagged "< 8 clusters" when fewer."""
    baseline: str
    scale: str
    """Model, episodes (n) and profile."""
    source: str
    """The asset (and partition) and key the value came from, and the run."""
    dagster_url: str
    mlflow_url: str
    verdict: Verdict


@dataclass(frozen=True)
class Figure:
    name: str
    png: bytes | None = field(default=None, repr=False)
    note: str = ""
    """Why the figure is not available (png None)."""


@dataclass(frozen=True, kw_only=True)
class StageSection:
    paper: str
    title: str
    read: StageRead = field(repr=False)
    """The materialisation, without its stored output and metadata (the report keeps only what it shows)."""
    status: str
    """Empty when the stored output was read; else why not (not materialised, unreadable)."""
    scale: str
    dagster_url: str
    mlflow_url: str
    metrics: tuple[MetricRow, ...] = ()
    cut: int = 0
    """Metric rows left out beyond metrics.MAX_ROWS (0: none)."""
    figures: tuple[Figure, ...] = ()


@dataclass(frozen=True)
class PaperReport:
    generated_at: str
    papers: tuple[tuple[str, str], ...]
    """(name, title) of each paper, in order."""
    rows: tuple[ClaimRow, ...]
    sections: tuple[StageSection, ...]

    def counts(self) -> dict[str, int]:
        """Verdict -> rows with it (every verdict listed)."""
        return {v: sum(1 for r in self.rows if r.verdict.kind == v) for v in VERDICTS}

    def rows_of(self, paper: str) -> list[ClaimRow]:
        return [r for r in self.rows if r.claim.paper == paper]


# ------------------------------------------------------------------------------------------------ scale, links
def _profile(
    read: StageRead | None, profiles: Mapping[str, ProfileLike], default: ProfileLike | None
) -> tuple[ProfileLike | None, str]:
    if read is not None and read.profile_name in profiles:
        return profiles[read.profile_name], read.profile
    if default is not None:
        return default, f"{default.name} (the run carries no profile tag: the code location's)"
    return None, "unknown"


def scale(
    read: StageRead | None,
    n: int | None,
    model_of: Callable[[Any], str],
    profiles: Mapping[str, ProfileLike],
    default: ProfileLike | None,
) -> str:
    """'model, n = .., profile ..' of a measurement (without n when None): the profile of the run's tag among
    `profiles`, else `default`."""
    profile, label = _profile(read, profiles, default)
    model = model_of(profile) if profile is not None else "unknown model"
    return ", ".join([model, *([f"n = {n}"] if n is not None else []), f"profile {label}"])


def _mlflow_run_id(read: StageRead) -> str:
    entry = read.metadata.get("mlflow_run_id")
    if isinstance(entry, str) and entry:
        return entry
    value = read.value
    for holder in (value, getattr(value, "specialist", None)):
        run_id = getattr(holder, "mlflow_run_id", None)
        if isinstance(run_id, str) and run_id:
            return run_id
    return ""


def links_of(read: StageRead | None, links: UiLinks, experiment_id: str) -> tuple[str, str]:
    """The Dagster run's URL and the MLflow run's URL of a materialisation (empty where unknown)."""
    if read is None or not read.run_id:
        return "", ""
    dagster = links.dagster_run(read.run_id)
    mlflow = read.metadata.get("mlflow_run")
    if isinstance(mlflow, str) and mlflow.startswith("http"):
        return dagster, mlflow
    run_id = _mlflow_run_id(read)
    return dagster, links.mlflow_run(experiment_id, run_id) if run_id and experiment_id else ""


# --------------------------------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class _Context:
    snapshot: Snapshot
    links: UiLinks
    experiment_id: str
    profiles: Mapping[str, ProfileLike]
    default: ProfileLike | None


def _row(claim: Claim, m: Measurement, model_of: Callable[[Any], str], ctx: _Context) -> ClaimRow:
    verdict = decide(claim.direction, claim.null, m.estimate, m.missing, m.no_interval)
    e = m.estimate
    value = e.text() if e is not None else ""
    value = "; ".join(part for part in (value, m.value_text) if part) or "-"
    clusters = e.cluster_text() if e is not None and e.has_interval else ""
    n = e.n if e is not None else None
    source = f"{m.read.name}: {m.key}" if m.read is not None else f"{claim.asset}: {m.key or claim.key}"
    if m.read is not None and m.read.run_id:
        source += f" (run {m.read.run_id[:8]}, {m.read.when})"
    dagster, mlflow = links_of(m.read, ctx.links, ctx.experiment_id)
    return ClaimRow(
        claim=claim, scope=m.scope, value=value if not m.missing else "-", n=n, clusters=clusters, baseline=m.baseline or "-",
        scale=scale(m.read, n, model_of, ctx.profiles, ctx.default) if not m.missing else "-", source=source, dagster_url=dagster, mlflow_url=mlflow, verdict=verdict,
    )  # fmt: skip


def claim_rows(paper: PaperSpec, ctx: _Context) -> list[ClaimRow]:
    """One row per measurement of each claim; one "not measured" row for a claim nothing measured."""
    rows = []
    for claim in paper.claims:
        try:
            measured = list(paper.measurers[claim.claim_id](ctx.snapshot))
        except Exception as exc:  # a stored output of another shape: say so in the row, build the rest
            measured = [Measurement(None, claim.key, missing=f"could not be read: {type(exc).__name__}: {exc}")]
        if not measured:
            measured = [Measurement(None, claim.key, missing=ctx.snapshot.why_absent(claim.asset))]
        rows += [_row(claim, m, paper.model_of, ctx) for m in measured]
    return rows


# ------------------------------------------------------------------------------------------------ sections
def _figures(stage: StageSpec, read: StageRead) -> tuple[Figure, ...]:
    found = figures(read.value) if read.value is not None else {}
    if stage.draw is not None and read.value is not None:
        try:
            found.update(stage.draw(read))
        except Exception as exc:  # a figure that cannot be drawn is named, not fatal
            return (*(Figure(k, v) for k, v in found.items()), Figure("figures", None, f"not drawn: {exc}"))
    out = [Figure(name, png) for name, png in found.items()]
    out += [
        Figure(name, None, f"figure not available: {stage.unavailable}") for name in stage.expected if name not in found
    ]
    return tuple(out)


def _section(paper: PaperSpec, stage: StageSpec, read: StageRead, ctx: _Context) -> StageSection:
    dagster, mlflow = links_of(read, ctx.links, ctx.experiment_id)
    empty = "the stored output is empty (None): nothing to list"
    status = (read.error or empty) if read.value is None else ""
    rows, cut = metric_rows(read.value) if read.value is not None else ((), 0)
    return StageSection(
        paper=paper.name, title=stage.title, read=replace(read, value=None, metadata={}), status=status, scale=scale(read, None, paper.model_of, ctx.profiles, ctx.default), dagster_url=dagster, mlflow_url=mlflow,
        metrics=rows, cut=cut, figures=_figures(stage, read),
    )  # fmt: skip


def stage_sections(paper: PaperSpec, ctx: _Context) -> list[StageSection]:
    """One section per materialised asset (and partition) of the paper's stages; one per absent stage."""
    out = []
    for stage in paper.stages:
        reads = ctx.snapshot.of(stage.asset)
        if not reads:
            absent = StageRead(asset=stage.asset)
            why = f"not measured: {ctx.snapshot.why_absent(stage.asset)}"
            out.append(
                StageSection(
                    paper=paper.name,
                    title=stage.title,
                    read=absent,
                    status=why,
                    scale="-",
                    dagster_url="",
                    mlflow_url="",
                )
            )
        out += [_section(paper, stage, read, ctx) for read in reads]
    return out


def build_report(
    papers: Sequence[PaperSpec],
    snapshot: Snapshot,
    profiles: Mapping[str, ProfileLike],
    links: UiLinks | None = None,
    experiment_id: str = "",
    default_profile: ProfileLike | None = None,
    generated_at: str | None = None,
) -> PaperReport:
    """The report of `papers` over `snapshot` (module docstring). `profiles` (name -> profile: models/profiles.py
    `PROFILES`) give the scale of a run by its profile tag, `default_profile` that of runs without one (launched
    from the UI); `experiment_id` makes MLflow links from run ids."""
    ctx = _Context(snapshot, links or UiLinks(), experiment_id, profiles, default_profile)
    rows: list[ClaimRow] = []
    sections: list[StageSection] = []
    for paper in papers:
        rows += claim_rows(paper, ctx)
        sections += stage_sections(paper, ctx)
    when = generated_at or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return PaperReport(when, tuple((p.name, p.title) for p in papers), tuple(rows), tuple(sections))
