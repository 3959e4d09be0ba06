"""The papers' report: one row per claim (and per domain or frame it was measured on), and every stage's numbers
and figures, built from the committed result files (`ResultSources`) and, where given, a `Snapshot` of a Dagster
instance.

A paper is a `PaperSpec` (models/socialrl/paper_claims.py, models/yoao/paper_claims.py): its claims, for each two
*measurers* that find this project's value, one in the result files and one in the snapshot, the result files it
reads and its stages (the assets whose every number and figure the report lists). Per claim the report keeps the
measurements of one source: the one that measured it; where both did, the one measured on the current environment
version, then the newer (`choose`). `build_report` applies the verdict rule (models/report/claims.py `decide`,
then `stale`) to each measurement; a claim nothing measured gets one "not measured" row with the reason. The
caller passes the profiles (the scale column: a run's model by its profile) and the current environment version:
the report sits below the papers in models/ and does not import models/profiles.py, which carries the YOAO
paper's settings (tests/test_layers.py `MODELS_FLOORS`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from models.report.claims import OPPOSITE, REPRODUCED, VERDICTS, Claim, Interval, Verdict, decide, stale
from models.report.files import NOT_RECORDED, ResultFile, ResultSources
from models.report.metrics import MetricRow, figures, metric_rows
from models.report.sources import PROFILE_MARK, Snapshot, StageRead
from models.settings import REPO_ROOT
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
    file: ResultFile | None = None
    """The result file it came from (None: a materialisation on the instance, or nothing)."""
    cannot: str = ""
    """Why the claim cannot be tested at this scale, read from the data (e.g. the base scores 0, so a prompt cannot
    lower it); the row's reason leads with it unless the interval decides."""

    @property
    def measured(self) -> bool:
        return not self.missing

    @property
    def env_judged(self) -> bool:
        """Whether the row is judged against the current environment version: always for a result file (one
        that records no version cannot be matched to the current code), for a materialisation only when its
        metadata records one."""
        return self.file is not None or (self.read is not None and "env_version" in self.read.metadata)

    @property
    def measured_on(self) -> str | None:
        """The environment version it was measured on (None: not recorded)."""
        if self.file is not None:
            return self.file.env_version
        found = self.read.metadata.get("env_version") if self.read is not None else None
        return found if isinstance(found, str) else None

    @property
    def when(self) -> float:
        """When it was measured (seconds since the epoch; 0 when not recorded)."""
        if self.file is not None:
            return self.file.provenance.timestamp() or 0.0
        return self.read.timestamp if self.read is not None else 0.0

    @property
    def profile_tag(self) -> str:
        """The profile it was measured with ("" when not recorded)."""
        if self.file is not None:
            return self.file.provenance.profile or ""
        return self.read.profile if self.read is not None else ""


class ProfileLike(Protocol):
    """What the report reads of a profile (models/profiles.py `Profile`). The caller passes the profiles: the report
    sits below the papers, whose settings a profile carries, so it does not import them (tests/test_layers.py)."""

    @property
    def name(self) -> str: ...

    @property
    def base_model(self) -> str: ...


Measurer = Callable[[Snapshot], Sequence[Measurement]]
FileMeasurer = Callable[[ResultSources], Sequence[Measurement]]


def missing_files(files: ResultSources, *names: str) -> list[Measurement]:
    """The one measurement of a claim whose result files are absent, saying which."""
    return [Measurement(None, "", missing=files.why_absent(*names))]


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


@dataclass(frozen=True, kw_only=True)
class PaperSpec:
    """A paper as the report reads it."""

    name: str
    """"SocialRL" or "YOAO"."""
    title: str
    """The paper's title (and its arXiv number)."""
    claims: tuple[Claim, ...]
    measurers: Mapping[str, Measurer] = field(repr=False)
    """claim_id -> its measurer on a snapshot of the instance."""
    file_measurers: Mapping[str, FileMeasurer] = field(repr=False)
    """claim_id -> its measurer on the result files."""
    result_files: tuple[str, ...]
    """The result files its file measurers read (names in benchmarks/results/), each listed number by number."""
    stages: tuple[StageSpec, ...]
    model_of: Callable[[Any], str] = field(default=lambda p: p.base_model, repr=False)
    """The model this paper's runs use under a profile (one of those `build_report` is given)."""

    def __post_init__(self) -> None:
        ids = [c.claim_id for c in self.claims]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.name}: a claim is listed twice ({ids})")
        for kind, measurers in (("measurer", self.measurers), ("file measurer", self.file_measurers)):
            if sorted(ids) != sorted(measurers):
                raise ValueError(f"{self.name}: every claim needs exactly one {kind} ({ids} vs {list(measurers)})")
        if any(c.paper != self.name for c in self.claims):
            raise ValueError(f"{self.name}: a claim of another paper")

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
    estimate: Interval | None = None
    """The estimate behind `value` (None: none, or not measured)."""
    env_version: str | None = None
    """The environment version it was measured on, NOT_RECORDED where its source carries none (None: nothing was
    measured)."""


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
    provenance: str = ""
    """For a result file's section: where the file came from (`Provenance.text`); empty for a materialisation."""


@dataclass(frozen=True, kw_only=True)
class PaperReport:
    """Every claim row and every stage's section of both papers."""

    generated_at: str
    """UTC time the report was built."""
    papers: tuple[tuple[str, str], ...]
    """(name, title) of each paper, in order."""
    rows: tuple[ClaimRow, ...]
    sections: tuple[StageSection, ...]
    current_env_version: str
    """The environment version of the code that built the report; a row measured on another is stale."""
    files: tuple[ResultFile, ...] = field(default=(), repr=False)
    """Every result file read."""
    folder: str = ""
    """Where the result files were read from (empty: none was given)."""
    stages_read: int | None = None
    """Materialisations read from a Dagster instance (None: no instance was read)."""

    def __post_init__(self) -> None:
        if not self.current_env_version:
            raise ValueError("the current environment version is required: rows measured on another are stale")

    def counts(self) -> dict[str, int]:
        """Verdict -> rows with it (every verdict listed)."""
        return {v: sum(1 for r in self.rows if r.verdict.kind == v) for v in VERDICTS}

    def rows_of(self, paper: str) -> list[ClaimRow]:
        return [r for r in self.rows if r.claim.paper == paper]

    def claims_of(self, file: ResultFile) -> list[str]:
        """The claims whose rows came from `file`, in row order."""
        return list(dict.fromkeys(r.claim.claim_id for r in self.rows if r.source.startswith(f"{file.name}: ")))

    def context_of(self, file: ResultFile) -> list[str]:
        """The claims whose rows quote `file` beside their value (an incentive audit: what the environment pays)."""
        return list(dict.fromkeys(r.claim.claim_id for r in self.rows if f"({file.name}" in r.baseline))


# ------------------------------------------------------------------------------------------------ scale, links
def _profile(
    tag: str, profiles: Mapping[str, ProfileLike], default: ProfileLike | None
) -> tuple[ProfileLike | None, str]:
    name = tag.split(PROFILE_MARK)[0]
    if name in profiles:
        return profiles[name], tag
    if default is not None:
        return default, f"{default.name} (the run carries no profile tag: the code location's)"
    return None, NOT_RECORDED


def scale(
    tag: str,
    n: int | None,
    model_of: Callable[[Any], str],
    profiles: Mapping[str, ProfileLike],
    default: ProfileLike | None,
) -> str:
    """'model, n = .., profile ..' of a measurement (without n when None): the profile `tag` names (a run's tag,
    a result file's profile) among `profiles`, else `default`."""
    profile, label = _profile(tag, profiles, default)
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
    snapshot: Snapshot | None
    files: ResultSources | None
    current: str
    links: UiLinks
    experiment_id: str
    profiles: Mapping[str, ProfileLike]
    default: ProfileLike | None


def _verdict(claim: Claim, m: Measurement, current: str) -> Verdict:
    """The rule's verdict, led by why the claim cannot be tested where the data says so (`Measurement.cannot`, or
    an interval that is exactly the null: the arms do not differ on any episode), then judged for staleness."""
    verdict = decide(claim.direction, claim.null, m.estimate, m.missing, m.no_interval)
    e = m.estimate
    cannot = m.cannot
    if not cannot and e is not None and e.has_interval and e.low == e.high == e.mean == claim.null:
        cannot = f"every paired episode gives {claim.null:g}: the arms do not differ on any episode at this scale"
    if cannot and verdict.kind not in (REPRODUCED, OPPOSITE):
        verdict = Verdict(verdict.kind, f"{cannot}; {verdict.reason}")
    return stale(verdict, m.measured_on, current) if m.env_judged else verdict


def _source(claim: Claim, m: Measurement) -> str:
    if m.file is not None:
        return f"{m.file.name}: {m.key or claim.key}"
    source = f"{m.read.name}: {m.key}" if m.read is not None else f"{claim.asset}: {m.key or claim.key}"
    if m.read is not None and m.read.run_id:
        source += f" (run {m.read.run_id[:8]}, {m.read.when})"
    return source


def _row(claim: Claim, m: Measurement, model_of: Callable[[Any], str], ctx: _Context) -> ClaimRow:
    e = m.estimate if not m.missing else None
    value = "; ".join(part for part in (e.text() if e is not None else "", m.value_text) if part) or "-"
    clusters = e.cluster_text() if e is not None and e.has_interval else ""
    n = e.n if e is not None else None
    dagster, mlflow = links_of(m.read, ctx.links, ctx.experiment_id)
    origin = m.file is not None or m.read is not None
    env = (m.measured_on or NOT_RECORDED) if origin and m.measured else None
    measured_scale = scale(m.profile_tag, n, model_of, ctx.profiles, None if m.file else ctx.default)
    return ClaimRow(
        claim=claim, scope=m.scope, value=value, n=n, clusters=clusters, baseline=m.baseline or "-",
        scale=measured_scale if m.measured else "-", source=_source(claim, m), dagster_url=dagster,
        mlflow_url=mlflow, verdict=_verdict(claim, m, ctx.current), estimate=e, env_version=env,
    )  # fmt: skip


def _measurements(measurer: Callable[[Any], Sequence[Measurement]], source: Any, claim: Claim, absent: str):
    try:
        measured = list(measurer(source))
    except Exception as exc:  # a stored output or file of another shape: say so in the row, build the rest
        measured = [Measurement(None, claim.key, missing=f"could not be read: {type(exc).__name__}: {exc}")]
    return measured or [Measurement(None, claim.key, missing=absent)]


def choose(live: list[Measurement] | None, filed: list[Measurement] | None, current: str) -> list[Measurement]:
    """The measurements of one source for a claim: the source that measured it; where both did, the one
    measured on the `current` environment version, then the newer; where neither did, the result files' reasons
    (the instance's when no files were read)."""
    live_ok = [m for m in live or [] if m.measured]
    file_ok = [m for m in filed or [] if m.measured]
    if live_ok and file_ok:

        def rank(ms: list[Measurement]) -> tuple[bool, float]:
            return any(m.measured_on == current for m in ms), max(m.when for m in ms)

        return list(live or []) if rank(live_ok) > rank(file_ok) else list(filed or [])
    if live_ok or file_ok:
        return list(live or []) if live_ok else list(filed or [])
    return list(filed if filed is not None else live or [])


def claim_rows(paper: PaperSpec, ctx: _Context) -> list[ClaimRow]:
    """One row per measurement of each claim (`choose`); one "not measured" row for a claim nothing measured."""
    rows = []
    for claim in paper.claims:
        live = filed = None
        if ctx.snapshot is not None:
            why = ctx.snapshot.why_absent(claim.asset)
            live = _measurements(paper.measurers[claim.claim_id], ctx.snapshot, claim, why)
        if ctx.files is not None:
            why = f"no result file of {', '.join(paper.result_files)} gives it"
            filed = _measurements(paper.file_measurers[claim.claim_id], ctx.files, claim, why)
        rows += [_row(claim, m, paper.model_of, ctx) for m in choose(live, filed, ctx.current)]
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
        paper=paper.name, title=stage.title, read=replace(read, value=None, metadata={}), status=status,
        scale=scale(read.profile, None, paper.model_of, ctx.profiles, ctx.default), dagster_url=dagster,
        mlflow_url=mlflow, metrics=rows, cut=cut, figures=_figures(stage, read),
    )  # fmt: skip


def stage_sections(paper: PaperSpec, snapshot: Snapshot, ctx: _Context) -> list[StageSection]:
    """One section per materialised asset (and partition) of the paper's stages; one per absent stage."""
    out = []
    for stage in paper.stages:
        reads = snapshot.of(stage.asset)
        if not reads:
            absent = StageRead(asset=stage.asset)
            why = f"not measured: {snapshot.why_absent(stage.asset)}"
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


def file_sections(paper: PaperSpec, files: ResultSources, ctx: _Context) -> list[StageSection]:
    """One section per result file of the paper that was read: every number it holds, with its provenance."""
    out = []
    for name in paper.result_files:
        file = files.get(name)
        if file is None:
            continue
        rows, cut = metric_rows(file.data)
        profile = file.provenance.profile or ""
        out.append(
            StageSection(
                paper=paper.name,
                title="Result file",
                read=StageRead(asset=name),
                status="",
                scale=scale(profile, None, paper.model_of, ctx.profiles, None),
                dagster_url="",
                mlflow_url="",
                metrics=rows,
                cut=cut,
                provenance=file.provenance.text(),
            )
        )
    return out


def _shown(folder: Path) -> str:
    """`folder` relative to the repository where it lies inside it (the published report names no machine)."""
    return str(folder.relative_to(REPO_ROOT)) if folder.is_relative_to(REPO_ROOT) else str(folder)


def result_sources(papers: Sequence[PaperSpec], folder: Path) -> ResultSources:
    """The result files `papers` read (`PaperSpec.result_files`) that exist in `folder`."""
    return ResultSources.load(folder, [name for paper in papers for name in paper.result_files])


def build_report(
    papers: Sequence[PaperSpec],
    snapshot: Snapshot | None,
    profiles: Mapping[str, ProfileLike],
    *,
    current_env_version: str,
    files: ResultSources | None = None,
    links: UiLinks | None = None,
    experiment_id: str = "",
    default_profile: ProfileLike | None = None,
    generated_at: str | None = None,
) -> PaperReport:
    """The report of `papers` (module docstring) over the result `files` and the instance's `snapshot` (either
    may be None: not read). `current_env_version` (`agents.env_version.env_version()`) makes rows measured on
    another version stale; `profiles` (name -> profile: models/profiles.py `PROFILES`) give the scale of a run by
    its profile, `default_profile` that of runs without one (launched from the UI); `experiment_id` makes MLflow
    links from run ids."""
    if snapshot is None and files is None:
        raise ValueError("the report needs result files, a snapshot of an instance, or both")
    ctx = _Context(snapshot, files, current_env_version, links or UiLinks(), experiment_id, profiles, default_profile)
    rows: list[ClaimRow] = []
    sections: list[StageSection] = []
    for paper in papers:
        rows += claim_rows(paper, ctx)
        if files is not None:
            sections += file_sections(paper, files, ctx)
        if snapshot is not None:
            sections += stage_sections(paper, snapshot, ctx)
    return PaperReport(
        generated_at=generated_at or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        papers=tuple((p.name, p.title) for p in papers),
        rows=tuple(rows),
        sections=tuple(sections),
        current_env_version=current_env_version,
        files=files.files if files is not None else (),
        folder=_shown(files.folder) if files is not None and files.folder is not None else "",
        stages_read=len(snapshot.reads) if snapshot is not None else None,
    )
