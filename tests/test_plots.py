"""The plotting module: every figure is a PNG, shapes are checked, missing values do not break a plot."""

from __future__ import annotations

import math

import pytest

from models.plots import MAX_INLINE_BYTES, Series, grouped_bars, heatmap, line_with_band, markdown_image, multi_line


def is_png(data: bytes) -> bool:
    return data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_every_plot_is_a_png_and_tolerates_missing_values() -> None:
    curve = Series("ppo", [0, 1, 2, 3], [0.1, math.nan, 0.3, 0.4], [0.0, math.nan, 0.2, 0.3], [0.2, math.nan, 0.4, 0.5])
    assert is_png(line_with_band([curve, Series("sft", [0, 3], [0.2, 0.2])], "t", "iteration", "reward", (0, 1)))
    assert is_png(multi_line({"kl": curve, "value loss": curve, "entropy": curve, "clip": curve}, "ppo", "it"))
    bars = {"base": [(0.1, 0.0, 0.2), None], "ppo": [(0.5, 0.4, 0.6), (0.3, math.nan, math.nan)]}
    assert is_png(grouped_bars(["craigslist", "dnd"], bars, "t", "reward", (0, 1)))
    assert is_png(heatmap([[0.1, None], [-0.2, 0.0]], ["a", "b"], ["x", "y"], "transfer", "recipient", "donor"))


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="points"):
        Series("bad", [0, 1], [0.1])
    with pytest.raises(ValueError, match="groups"):
        grouped_bars(["a", "b"], {"p": [(0.1, 0.0, 0.2)]}, "t", "y")
    with pytest.raises(ValueError, match="shape"):
        heatmap([[0.1]], ["a", "b"], ["x"], "t", "x", "y")


def test_markdown_image_inlines_small_figures_only() -> None:
    png = line_with_band([Series("a", [0, 1], [0.0, 1.0])], "t", "x", "y")
    assert markdown_image(png, "a").startswith("![a](data:image/png;base64,")
    assert "not inlined" in markdown_image(b"\x89PNG" + b"0" * (MAX_INLINE_BYTES + 1), "big")
