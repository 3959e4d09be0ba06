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


def test_the_evaluation_plot_fits_its_axis_and_plots_the_paired_differences(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.13 against 0.16 must not look flat on a 0-1 axis, and the claim (the paired difference) is drawn with
    its interval and a line at 0 (stage1.evaluation_plot, what specialist_eval shows and logs to MLflow)."""
    from models import plots
    from models.evaluation.policy import EvaluationSummary
    from models.evaluation.stats import Estimate
    from models.socialrl import stage1

    def policy(label: str, mean: float, low: float, high: float) -> stage1.PolicyResult:
        summary = EvaluationSummary(
            n=48,
            mean_reward=mean,
            ci_low=low,
            ci_high=high,
            ci_method="bootstrap",
            confidence=0.95,
            agreement_rate=0.5,
            pareto_optimal_rate=math.nan,
            invalid_action_rate=0.1,
            leakage_rate=0.0,
            mean_rounds=6.0,
        )
        return stage1.PolicyResult(label, label, "model", summary, {})

    specialist = stage1.Specialist(
        env_id="craigslist-v0",
        seat="buyer",
        adapter_dir="/a",
        run_name="run",
        served_name="run-v2",
        init_adapter_dir=None,
        curve=(),
    )
    policies = {"base": policy("base", 0.012, 0.0, 0.037), "sft": policy("sft", 0.13, 0.05, 0.2)}
    policies["ppo"] = policy("ppo", 0.16, 0.09, 0.25)
    paired = {"ppo_minus_sft": Estimate(0.03, -0.02, 0.08, 48), "ppo_minus_base": Estimate(0.148, 0.07, 0.22, 48)}
    evaluation = stage1.SpecialistEvaluation(
        env_id="craigslist-v0",
        seat="buyer",
        run_id="r",
        scenario_source="generated",
        policies=policies,
        paired=paired,
        behaviour_paired={},
        best_baseline=None,
        imitation={},
        specialist=specialist,
    )
    figures = []
    monkeypatch.setattr(plots, "_png", lambda figure: figures.append(figure) or b"png")
    assert stage1.evaluation_plot(evaluation) == b"png"
    (figure,) = figures
    rewards, differences = figure.axes[:2]
    low, high = rewards.get_ylim()
    assert low == 0.0 and 0.25 <= high < 0.4  # fitted to the highest interval end, not 0..1
    assert [t.get_text() for t in rewards.get_xticklabels()] == ["base", "sft", "ppo"]
    # The paired differences: one row each (first on top), its interval as a line, a dashed line at 0.
    assert [t.get_text() for t in differences.get_yticklabels()] == ["ppo_minus_base", "ppo_minus_sft"]
    intervals = sorted(tuple(line.get_xdata()) for line in differences.get_lines() if len(line.get_xdata()) == 2)
    assert (-0.02, 0.08) in intervals and (0.07, 0.22) in intervals
    zero = [line for line in differences.get_lines() if line.get_linestyle() == "--"]
    assert zero and tuple(zero[0].get_xdata()) == (0.0, 0.0)
    left, right = differences.get_xlim()
    assert left < -0.02 and right > 0.22
    plots.plt.close(figure)
    monkeypatch.undo()
    assert is_png(plots.policy_comparison({"a": (0.1, math.nan, math.nan), "b": None}, {}, "t"))


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_a_comparison_of_every_policy_fits_the_metadata_dialog(monkeypatch: pytest.MonkeyPatch) -> None:
    """specialist_eval's plot holds eight policies and five paired differences. Dagster's metadata dialog is 80%
    of the window wide and cuts a wider image off on the right: a 1,529-px figure lost its paired differences in a
    1,280-px dialog, and a 1,200-px one still did in a 1,400-px window (1,120-px dialog). Where the two panels
    do not fit side by side, the differences go below the bars, whole."""
    from models import plots

    policies = {name: (0.3, 0.2, 0.4) for name in ("base", "sft", "ppo", "teacher", "accept_first", "hold_target", "split_difference", "best_fixed_rule")}  # fmt: skip
    names = ("ppo_minus_sft", "sft_minus_base", "ppo_minus_base", "ppo_minus_best_baseline", "ppo_minus_teacher")
    args = (
        policies,
        dict.fromkeys(names, (0.05, -0.02, 0.1)),
        "craigslist-v0: held-out reward (95% CI)",
        "mean reward",
        "paired reward difference (same episodes)",
    )
    width, height = png_size(plots.policy_comparison(*args))
    assert width <= plots.MAX_WIDTH_PX <= 0.8 * 1280 - 40 and height < 1000
    few = plots.policy_comparison({"a": (0.3, 0.2, 0.4)}, {"a_minus_b": (0.1, 0.0, 0.2)}, "t")
    few_width, few_height = png_size(few)
    assert few_width < width or few_height < height  # a small comparison keeps one row
    figures = []
    monkeypatch.setattr(plots, "_png", lambda figure: figures.append(figure) or b"png")
    plots.policy_comparison(*args)
    plots.policy_comparison({"a": (0.3, 0.2, 0.4)}, {"a_minus_b": (0.1, 0.0, 0.2)}, "t")
    (stacked, side_by_side) = figures
    bars, differences = stacked.axes
    assert bars.get_position().y0 > differences.get_position().y1  # the differences below the bars
    assert [t.get_text() for t in differences.get_yticklabels()] == list(names)[::-1]  # every one, first on top
    one, other = side_by_side.axes
    assert one.get_position().x1 < other.get_position().x0  # a small comparison: side by side
    for figure in figures:
        plots.plt.close(figure)


def test_the_imitation_plot_compares_the_warm_start_with_its_teacher_and_the_baselines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """warmstart_imitation's plot (also logged to the warm-start's MLflow run): each policy's mean reward, and the
    paired differences warm-start - teacher and warm-start - each baseline, on the same episodes."""
    from models import plots
    from models.evaluation.policy import EvaluationPlan
    from models.socialrl import stage1
    from models.socialrl.imitation import imitation_report

    plan = EvaluationPlan("craigslist-v0", 2, seat="buyer", counterparts=("boulware",), seed=1)
    code = stage1.evaluate_code_policies(plan)
    (student, student_result), (teacher, teacher_result) = code["accept_first"], code["teacher"]
    sft = stage1.PolicyResult("sft", "sft", "model", student.summary, student.metrics, student.records)
    imitation = stage1.WarmStartImitation(
        env_id="craigslist-v0",
        seat="buyer",
        run_id="r",
        plan="2 scenarios",
        sft=sft,
        teacher=teacher,
        baselines={label: p for label, (p, _) in code.items() if label != "teacher"},
        report=imitation_report(student_result, teacher_result, student.records, teacher.records),
    )
    png = stage1.imitation_plot(imitation)
    assert is_png(png) and png_size(png)[0] <= plots.MAX_WIDTH_PX
    figures = []
    monkeypatch.setattr(plots, "_png", lambda figure: figures.append(figure) or b"png")
    stage1.imitation_plot(imitation)
    (figure,) = figures
    rewards, differences = figure.axes[:2]
    assert [t.get_text() for t in rewards.get_xticklabels()] == [
        "sft", "teacher", "accept_first", "hold_target", "split_difference", "best_fixed_rule"
    ]  # fmt: skip
    assert [t.get_text() for t in differences.get_yticklabels()][::-1] == [
        "sft_minus_teacher", "sft_minus_accept_first", "sft_minus_hold_target", "sft_minus_split_difference",
        "sft_minus_best_fixed_rule",
    ]  # fmt: skip
    plots.plt.close(figure)
