"""The report as markdown (figures as PNG files beside it) and as one standalone HTML page (figures inline as
data URIs), both from one list of blocks, so the two always say the same."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.report.build import ClaimRow, Figure, PaperReport, StageSection
from models.report.claims import MIN_CLUSTERS, VERDICTS, Interval

TITLE = "The papers' report: what this project's runs reproduced"
RULE = (
    "Verdict rule (models/report/claims.py, docs/report.md): *reproduced* when the 95% interval excludes the null "
    f"on the paper's side and rests on at least {MIN_CLUSTERS} clusters; *opposite* when it excludes "
    "it on the other side (same cluster bar); *not shown* when it includes the null, when there is no interval, "
    f"or when it rests on fewer than {MIN_CLUSTERS} clusters (flagged next to it); *not measured* when no result "
    "file and no materialisation holds the key; *stale* when the value was measured on another environment "
    "version than the current code's, or its result file records none (the reason keeps what the rule alone said)."
)


@dataclass(frozen=True)
class Link:
    text: str
    url: str


Cell = str | Link | tuple[str | Link, ...]


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    parts: tuple[str | Link, ...]


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]


@dataclass(frozen=True)
class FigureBlock:
    figure: Figure
    file: str
    """The PNG's file name beside the markdown."""


Block = Heading | Para | Table | FigureBlock


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "figure"


def _links(dagster: str, mlflow: str) -> tuple[str | Link, ...]:
    parts: list[str | Link] = []
    if dagster:
        parts.append(Link("Dagster run", dagster))
    if mlflow:
        parts += [" · ", Link("MLflow run", mlflow)] if parts else [Link("MLflow run", mlflow)]
    return tuple(parts)


def _claim_cells(r: ClaimRow) -> tuple[Cell, ...]:
    c = r.claim
    links = _links(r.dagster_url, r.mlflow_url)
    return (
        f"{c.claim_id}: {c.text}",
        r.scope or "-",
        f"{c.paper_value} ({c.paper_source})" if c.paper_value != c.paper_source else c.paper_value,
        r.value,
        "-" if r.n is None else str(r.n),
        r.clusters or "-",
        r.baseline,
        r.scale,
        r.env_version or "-",
        f"{r.verdict.kind}: {r.verdict.reason}",
        (r.source, *((" ", *links) if links else ())),
    )


CLAIM_HEADERS = (
    "claim", "scope", "paper", "this project [95% CI]", "n", "clusters", "best trivial baseline (same episodes)",
    "scale", "environment version", "verdict", "source",
)  # fmt: skip


def _section_blocks(s: StageSection) -> list[Block]:
    blocks: list[Block] = [Heading(3, f"{s.title}: {s.read.name}")]
    if s.status:
        return [*blocks, Para((s.status,))]
    if s.provenance:
        blocks.append(Para((f"{s.provenance}; {s.scale}.",)))
    else:
        when = f"materialised {s.read.when} by run {s.read.run_id[:8]}; " if s.read.run_id else ""
        blocks.append(Para((f"{when}{s.scale}. ", *_links(s.dagster_url, s.mlflow_url))))
    rows = tuple((m.path, m.value, "-" if m.n is None else str(m.n), m.clusters or "-") for m in s.metrics)
    blocks.append(Table(("key", "value [95% CI]", "n", "clusters"), rows))
    if s.cut:
        blocks.append(Para((f"{s.cut} more rows not shown (the listing stops at {len(s.metrics)}).",)))
    for f in s.figures:
        blocks.append(FigureBlock(f, f"{_slug(s.read.name)}--{_slug(f.name)}.png"))
    return blocks


def sources_text(report: PaperReport) -> str:
    """Where the report's numbers come from, in one paragraph."""
    files = ", ".join(f.name for f in report.files) or "none"
    parts = [f"Generated {report.generated_at} (`make report`) from the result files in {report.folder}: {files}"]
    if not report.folder:
        parts = [f"Generated {report.generated_at} (`make report`), no result folder read"]
    if report.stages_read is not None:
        parts.append(
            f"and {report.stages_read} materialisations on the Dagster instance (a claim both measured is read "
            "from the one measured on the current environment version, then the newer)"
        )
    return (
        " ".join(parts) + f". The current environment version is `{report.current_env_version}`. Every number "
        "below is read from a result file or a stored asset output; none is typed by hand."
    )


def document(report: PaperReport, stages: bool = True) -> list[Block]:
    """The report's blocks: the verdict counts, one claim table per paper, then (with `stages`) every stage's
    numbers and figures."""
    counts = report.counts()
    blocks: list[Block] = [
        Heading(1, TITLE),
        Para((sources_text(report),)),
        Para((RULE,)),
        Para(("Verdicts: " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS) + ".",)),
    ]
    for name, title in report.papers:
        blocks.append(Heading(2, f"{name}: {title}"))
        blocks.append(Table(CLAIM_HEADERS, tuple(_claim_cells(r) for r in report.rows_of(name))))
    if not stages:
        return blocks
    blocks.append(Heading(2, "Every number and figure of every stage"))
    for name, _ in report.papers:
        blocks.append(Heading(2, f"{name}: stages"))
        for section in (s for s in report.sections if s.paper == name):
            blocks += _section_blocks(section)
    return blocks


# ------------------------------------------------------------------------------------------------ markdown
def _md_cell(cell: Cell) -> str:
    if isinstance(cell, Link):
        return f"[{cell.text}]({cell.url})"
    if isinstance(cell, tuple):
        return "".join(_md_cell(c) for c in cell)
    return cell.replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block], figure_dir: str = "") -> str:
    """Markdown; figures link to `<figure_dir>/<file>` (written by `write_report`)."""
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            lines += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            lines += [_md_cell(b.parts), ""]
        elif isinstance(b, Table):
            lines += ["| " + " | ".join(b.headers) + " |", "|" + "---|" * len(b.headers)]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            lines.append("")
        elif b.figure.png is None:
            lines += [f"*{b.figure.name}: {b.figure.note}*", ""]
        else:
            lines += [f"![{b.figure.name}]({figure_dir.rstrip('/') + '/' if figure_dir else ''}{b.file})", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- html
def _html_cell(cell: Cell) -> str:
    if isinstance(cell, Link):
        return f'<a href="{html.escape(cell.url)}">{html.escape(cell.text)}</a>'
    if isinstance(cell, tuple):
        return "".join(_html_cell(c) for c in cell)
    return html.escape(cell)


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5em;max-width:110em}table{border-collapse:collapse;"
    "margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top;font-size:.9em}"
    "th{background:#f3f3f3}img{max-width:48em;display:block;margin:.5em 0}.missing{color:#666}"
)


def to_html(blocks: Sequence[Block]) -> str:
    """One standalone page: figures inline as data URIs."""
    body: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            body.append(f"<p>{_html_cell(b.parts)}</p>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in row) + "</tr>" for row in b.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b.figure.png is None:
            body.append(f'<p class="missing"><em>{html.escape(b.figure.name)}: {html.escape(b.figure.note)}</em></p>')
        else:
            data = base64.b64encode(b.figure.png).decode()
            alt = html.escape(b.figure.name)
            body.append(
                f'<figure><img alt="{alt}" src="data:image/png;base64,{data}"><figcaption>{alt}</figcaption></figure>'
            )
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(TITLE)}</title>'
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


def claims_markdown(report: PaperReport) -> str:
    """The verdict counts and the claim tables, without the stages (the asset's Dagster metadata)."""
    return to_markdown(document(report, stages=False))


def verdict_table(report: PaperReport) -> str:
    """The short table `make report` prints: paper, claim, scope, verdict."""
    lines = ["| paper | claim | scope | verdict |", "|---|---|---|---|"]
    lines += [f"| {r.claim.paper} | {r.claim.claim_id} | {r.scope or '-'} | {r.verdict.kind} |" for r in report.rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    figures: Path
    """The directory of the markdown's PNGs (absent when the report has none)."""


def write_report(report: PaperReport, directory: Path, stem: str = "paper_report") -> ReportFiles:
    """<directory>/<stem>.md with its figures in <stem>_figures/, and the standalone <stem>.html."""
    blocks = document(report)
    directory.mkdir(parents=True, exist_ok=True)
    figures = directory / f"{stem}_figures"
    for old in figures.glob("*.png"):  # a figure of an earlier report that this one no longer has
        old.unlink()
    for b in blocks:
        if isinstance(b, FigureBlock) and b.figure.png is not None:
            figures.mkdir(exist_ok=True)
            (figures / b.file).write_bytes(b.figure.png)
    markdown = directory / f"{stem}.md"
    markdown.write_text(to_markdown(blocks, figures.name))
    page = directory / f"{stem}.html"
    page.write_text(to_html(blocks))
    return ReportFiles(markdown, page, figures)


ROW_KEYS = (
    "paper", "claim", "paper_value", "value", "ci_low", "ci_high", "n", "clusters", "verdict", "reason", "source",
    "env_version",
)  # fmt: skip
"""The keys of each claim row of the published JSON (`summary`)."""


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def claim_json(r: ClaimRow) -> dict[str, Any]:
    """A claim row as plain data (`ROW_KEYS`): `value` is the estimate (a number) or, without one, what was
    measured in words (null when nothing was); the interval's ends, n and clusters are null where absent."""
    e = r.estimate
    text = r.value if r.value != "-" else None
    return {
        "paper": r.claim.paper,
        "claim": r.claim.claim_id,
        "paper_value": r.claim.paper_value,
        "value": _finite(e.mean) if e is not None else text,
        "ci_low": _finite(e.low) if e is not None else None,
        "ci_high": _finite(e.high) if e is not None else None,
        "n": r.n,
        "clusters": e.clusters if e is not None else None,
        "verdict": r.verdict.kind,
        "reason": r.verdict.reason,
        "source": r.source,
        "env_version": r.env_version,
    }


def summary(report: PaperReport) -> dict[str, Any]:
    """The report as plain data: what `make report PUBLISH=1` writes beside the published report
    (benchmarks/results/paper_report.json) and the README's results block renders (`summary_markdown`): the
    claim rows (`claim_json`), each result file read with its provenance, the claims it gave and those it is
    context for, the verdict counts and where it was built from."""
    return {
        "claims": [claim_json(r) for r in report.rows],
        "generated_from": [
            {
                "file": f.name,
                **f.provenance.as_json(),
                "claims": report.claims_of(f),
                "context_for": report.context_of(f),
            }
            for f in report.files
        ],
        "generated_at": report.generated_at,
        "current_env_version": report.current_env_version,
        "counts": report.counts(),
        "instance_stages_read": report.stages_read,
    }


def _value_cell(row: Mapping[str, Any]) -> str:
    value = row["value"]
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = (math.nan if row[k] is None else row[k] for k in ("ci_low", "ci_high"))
        return Interval(float(value), low, high, row["n"] or 0, row["clusters"]).text()
    return "-" if value is None else str(value)


def _md_text(value: Any) -> str:
    return "-" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def summary_markdown(data: Mapping[str, Any], report_link: str = "") -> str:
    """The README's results block: the verdict counts, the files read, and one line per claim row (the paper's
    value, this project's with its interval, n, clusters, verdict, reason and source) of a published `summary`;
    `report_link` names the full report."""
    counts = ", ".join(f"{kind} {n}" for kind, n in data["counts"].items())
    files = ", ".join(f"`{f['file']}` ({f['env_version']})" for f in data["generated_from"]) or "none"
    where = f" The whole report, with every number of every source: {report_link}." if report_link else ""
    reads = data.get("instance_stages_read")
    instance = f" and {reads} materialisations on a Dagster instance" if reads is not None else ""
    lines = [
        f"The papers' report of {data['generated_at']}, from the result files {files}{instance}; the current "
        f"environment version is `{data['current_env_version']}`.{where} Verdicts: {counts}.",
        "",
        "| paper | claim | paper's value | this project [95% CI] | n | clusters | verdict | reason | source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["claims"]:
        cells = (
            r["paper"], r["claim"], r["paper_value"], _value_cell(r), r["n"], r["clusters"], r["verdict"],
            r["reason"], r["source"],
        )  # fmt: skip
        lines.append("| " + " | ".join(_md_text(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def publish_report(report: PaperReport, directory: Path, stem: str = "paper_report") -> ReportFiles:
    """`write_report` into `directory` (the repository's benchmarks/results/ for `make report PUBLISH=1`) and
    <stem>.json, the `summary` the README's block is rendered from."""
    files = write_report(report, directory, stem)
    (directory / f"{stem}.json").write_text(json.dumps(summary(report), indent=1) + "\n")
    return files
