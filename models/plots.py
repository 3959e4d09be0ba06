"""The project's plots, in one place: matplotlib (Agg backend, no display) figures saved as PNG bytes.

Every function returns PNG bytes, so one figure can go to every place people look: an MLflow artifact
(`Tracker` run `.log_png`), Dagster metadata (`dagster_image(png)`, a markdown image with the bytes
inlined), and a file. Plots show intervals wherever the numbers have them.

| function | what it draws |
| --- | --- |
| `line_with_band(series, ...)` | one or more curves (e.g. reward per PPO iteration) with shaded interval bands |
| `grouped_bars(groups, ...)` | bars per group and policy (e.g. reward per domain and policy) with interval whiskers |
| `heatmap(matrix, ...)` | an annotated matrix (e.g. the transfer matrix, donor x recipient) on a diverging scale |
| `multi_line(series, ...)` | several metrics over a shared x axis, one panel each (e.g. KL, value loss, entropy) |
| `policy_comparison(policies, differences, ...)` | each policy's mean with its interval on an axis fitted to the data, beside the paired differences (the claims) with theirs and a line at 0 |
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # headless: no display here, and Dagster runs in worker processes
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

MAX_INLINE_BYTES = 400_000
"""Largest PNG inlined into Dagster metadata (larger ones are only written as files/artifacts)."""
DPI = 110
"""Resolution of every PNG."""
MAX_WIDTH_PX = 960
"""Widest PNG of a plot that Dagster shows whole in its metadata dialog, which is 80% of the window wide (1,120 px
in a 1,400-px window, 1,024 in a 1,280-px one) less its padding, and cuts a wider image off on the right, where
`policy_comparison` draws the paired differences."""


@dataclass(frozen=True)
class Series:
    """One curve: y values over x, with an optional interval per point."""

    label: str
    """Legend label."""
    x: Sequence[float]
    """x values (e.g. iterations)."""
    y: Sequence[float]
    """y values; NaN points are skipped."""
    low: Sequence[float] | None = None
    """Lower ends of the interval per point (None: no band)."""
    high: Sequence[float] | None = None
    """Upper ends of the interval per point."""

    def __post_init__(self) -> None:
        n = len(self.x)
        for name in ("y", "low", "high"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"series {self.label!r}: {name} has {len(values)} points, x has {n}")


def _png(figure: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _finite(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def line_with_band(
    series: Sequence[Series], title: str, xlabel: str, ylabel: str, ylim: tuple[float, float] | None = None
) -> bytes:
    """Curves with shaded interval bands (a learning curve with its CI per iteration, say)."""
    figure, axes = plt.subplots(figsize=(6.4, 3.8))
    for s in series:
        (line,) = axes.plot(s.x, _finite(s.y), marker="o", markersize=3, label=s.label)
        if s.low is not None and s.high is not None:
            axes.fill_between(s.x, _finite(s.low), _finite(s.high), alpha=0.2, color=line.get_color())
    if not any(math.isfinite(v) for s in series for v in _finite(s.y)):
        # An empty frame reads as a broken plot; say that every value is undefined.
        axes.text(0.5, 0.5, "no defined value to plot", ha="center", va="center", transform=axes.transAxes)
        xs = [float(x) for s in series for x in s.x]
        if xs and min(xs) < max(xs):
            axes.set_xlim(min(xs), max(xs))  # NaN lines set no limits of their own
    if all(float(x).is_integer() for s in series for x in s.x):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps and iterations, not 0.25s
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        axes.set_ylim(*ylim)
    axes.grid(alpha=0.3)
    if len(series) > 1:
        axes.legend(fontsize=8)
    return _png(figure)


def multi_line(series: Mapping[str, Series], title: str, xlabel: str) -> bytes:
    """One small panel per metric over a shared x axis (PPO diagnostics: KL, value loss, entropy, ...)."""
    if not series:
        raise ValueError("nothing to plot")
    columns = min(3, len(series))
    rows = math.ceil(len(series) / columns)
    figure, grid = plt.subplots(rows, columns, figsize=(3.6 * columns, 2.6 * rows), squeeze=False)
    for axes, (name, s) in zip(grid.ravel(), series.items(), strict=False):
        axes.plot(s.x, _finite(s.y), marker="o", markersize=3)
        if s.low is not None and s.high is not None:
            axes.fill_between(s.x, _finite(s.low), _finite(s.high), alpha=0.2)
        axes.set_title(name, fontsize=9)
        axes.set_xlabel(xlabel, fontsize=8)
        axes.grid(alpha=0.3)
    for axes in grid.ravel()[len(series) :]:
        axes.axis("off")
    figure.suptitle(title)
    figure.tight_layout()
    return _png(figure)


def grouped_bars(
    groups: Sequence[str],
    bars: Mapping[str, Sequence[tuple[float, float, float] | None]],
    title: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
) -> bytes:
    """Bars per group (x) and series (colour), each (mean, ci_low, ci_high) or None for a missing bar."""
    if not groups or not bars:
        raise ValueError("nothing to plot")
    figure, axes = plt.subplots(figsize=(max(6.4, 1.1 * len(groups) * max(1, len(bars)) / 2), 3.8))
    width = 0.8 / len(bars)
    for k, (label, values) in enumerate(bars.items()):
        if len(values) != len(groups):
            raise ValueError(f"bars {label!r}: {len(values)} values for {len(groups)} groups")
        xs, heights, below, above = [], [], [], []
        for i, value in enumerate(values):
            if value is None:
                continue
            mean, low, high = (math.nan if v is None else float(v) for v in value)
            xs.append(i - 0.4 + width * (k + 0.5))
            heights.append(mean)
            below.append(0.0 if math.isnan(low) else max(0.0, mean - low))
            above.append(0.0 if math.isnan(high) else max(0.0, high - mean))
        axes.bar(xs, heights, width=width, label=label, yerr=[below, above], capsize=3)
    axes.set_xticks(range(len(groups)), groups, rotation=20, ha="right", fontsize=8)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        axes.set_ylim(*ylim)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return _png(figure)


Interval = tuple[float, float, float]
"""(mean, ci_low, ci_high); NaN ends mean an undefined interval."""


def _fitted_limits(values: Sequence[float], pad: float = 0.12, floor: float | None = None) -> tuple[float, float]:
    """Axis limits around the finite `values` with `pad` of their span on each side (0.05 when they are all
    equal); `floor` clips the lower limit (e.g. 0 for rewards in [0, 1])."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return (0.0, 1.0)
    low, high = min(finite), max(finite)
    margin = (high - low) * pad if high > low else 0.05
    low, high = low - margin, high + margin
    return (max(floor, low) if floor is not None else low, high)


def policy_comparison_figure(
    policies: Mapping[str, Interval | None],
    differences: Mapping[str, Interval | None],
    title: str,
    ylabel: str = "mean reward",
    difference_label: str = "paired difference",
    floor: float | None = 0.0,
) -> plt.Figure:
    """Left: each policy's mean as a bar with its interval, on an axis fitted to the data (bars of 0.13 and 0.16
    on a 0-1 axis look the same); right: the paired differences (what a comparison claims) as points with their
    intervals and a line at 0, so an interval that includes 0 shows it (a difference whose interval excludes 0
    is drawn in colour). A None entry is left out. At most `MAX_WIDTH_PX` wide, so both panels show: where they
    would not fit side by side, the differences go below the bars."""
    if not policies:
        raise ValueError("nothing to plot")
    shown = {k: tuple(math.nan if x is None else float(x) for x in v) for k, v in policies.items() if v is not None}
    claims = {k: tuple(math.nan if x is None else float(x) for x in v) for k, v in differences.items() if v is not None}
    widest = MAX_WIDTH_PX / DPI - 0.3  # tight_layout's labels may reach a little past the figure's edge
    bars_width = max(3.6, 2.4 + 0.9 * len(shown))
    if not claims:
        figure, grid = plt.subplots(1, 1, figsize=(min(bars_width, widest), 3.9), squeeze=False)
    elif bars_width + 3.5 <= widest:
        ratios = [max(3, len(shown)), max(2, len(claims))]
        figure, grid = plt.subplots(
            1, 2, figsize=(bars_width + 3.5, 3.9), gridspec_kw={"width_ratios": ratios}, squeeze=False
        )
    else:
        heights = [3.9, 1.2 + 0.45 * len(claims)]
        figure, grid = plt.subplots(
            2,
            1,
            figsize=(min(bars_width, widest), sum(heights)),
            gridspec_kw={"height_ratios": heights},
            squeeze=False,
        )
    axes = list(grid.flat)  # the bars first, then the differences (beside them or below)
    left = axes[0]
    names = list(shown)
    means = [shown[n][0] for n in names]
    below = [0.0 if math.isnan(lo) else max(0.0, m - lo) for m, lo, _ in (shown[n] for n in names)]
    above = [0.0 if math.isnan(hi) else max(0.0, hi - m) for m, _, hi in (shown[n] for n in names)]
    left.bar(range(len(names)), means, yerr=[below, above], capsize=3, color="#6a8fc7")
    for x, mean in enumerate(means):
        if math.isfinite(mean):
            left.annotate(f"{mean:.3f}", (x, mean), textcoords="offset points", xytext=(4, 3), fontsize=7)
    left.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
    ends = [v for n in names for v in shown[n]]
    left.set_ylim(*_fitted_limits([*ends, 0.0] if floor is not None else ends, floor=floor))
    left.set_ylabel(ylabel)
    left.set_title(title, fontsize=10)
    left.grid(axis="y", alpha=0.3)
    if claims:
        right = axes[1]
        rows = list(claims)[::-1]  # the first claim on top
        for y, name in enumerate(rows):
            mean, low, high = claims[name]
            if math.isfinite(low) and math.isfinite(high):
                right.plot([low, high], [y, y], color="#333", linewidth=2)
            excludes_zero = (math.isfinite(low) and low > 0) or (math.isfinite(high) and high < 0)
            right.plot([mean], [y], "o", color=("#c0392b" if mean > 0 else "#2a6fdb") if excludes_zero else "#333")
            if math.isfinite(mean):
                right.annotate(f"{mean:+.3f}", (mean, y), textcoords="offset points", xytext=(0, 6), fontsize=7,
                               ha="center")  # fmt: skip
        right.axvline(0.0, color="#888", linestyle="--", linewidth=1)
        right.set_yticks(range(len(rows)), rows, fontsize=8)
        right.set_ylim(-0.6, len(rows) - 0.4)
        right.set_xlim(*_fitted_limits([v for name in rows for v in claims[name]] + [0.0]))
        right.set_xlabel(difference_label, fontsize=8)
        right.set_title("paired differences (95% CI)", fontsize=10)
        right.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    return figure


def policy_comparison(
    policies: Mapping[str, Interval | None],
    differences: Mapping[str, Interval | None],
    title: str,
    ylabel: str = "mean reward",
    difference_label: str = "paired difference",
    floor: float | None = 0.0,
) -> bytes:
    """`policy_comparison_figure` as PNG bytes."""
    return _png(policy_comparison_figure(policies, differences, title, ylabel, difference_label, floor))


def heatmap(
    matrix: Sequence[Sequence[float | None]],
    rows: Sequence[str],
    columns: Sequence[str],
    title: str,
    xlabel: str,
    ylabel: str,
    annotations: Sequence[Sequence[str]] | None = None,
) -> bytes:
    """An annotated matrix on a diverging scale centred at 0 (missing cells blank)."""
    values = [_finite(row) for row in matrix]
    if len(values) != len(rows) or any(len(row) != len(columns) for row in values):
        raise ValueError(f"matrix shape does not match {len(rows)} rows x {len(columns)} columns")
    finite = [abs(v) for row in values for v in row if not math.isnan(v)]
    bound = max(finite) if finite and max(finite) > 0 else 1.0
    figure, axes = plt.subplots(figsize=(1.1 * len(columns) + 2.5, 0.8 * len(rows) + 1.8))
    image = axes.imshow(values, cmap="RdBu", vmin=-bound, vmax=bound)
    axes.set_xticks(range(len(columns)), columns, rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(len(rows)), rows, fontsize=8)
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            text = annotations[i][j] if annotations is not None else ("" if math.isnan(value) else f"{value:+.2f}")
            axes.text(j, i, text, ha="center", va="center", fontsize=7)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    return _png(figure)


def markdown_image(png: bytes, alt: str) -> str:
    """Markdown embedding the PNG inline (a data URI), as Dagster's metadata panel renders it; a figure
    larger than MAX_INLINE_BYTES is replaced by a note (keep it as a file or an MLflow artifact)."""
    if len(png) > MAX_INLINE_BYTES:
        return f"*{alt}: figure of {len(png) // 1000} kB not inlined; see the MLflow artifact*"
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})"
