"""Every measured figure in README.md and docs/ comes from a source its section names: no number typed by
hand.

A *figure* is a number in a document's prose that reads as a measurement or a stated quantity: it has a
decimal point ("0.92", "83.2 min"), a thousands separator ("2,494"), or a unit ("12 s", "6 GiB", "72%", "1.9x",
"175 tokens/s"). Plain integers without a unit ("8 games", "step 24") are counts and names, not checked.
Fenced code, inline code and the rendered result blocks (`<!-- name: begin -->` ... `<!-- name: end -->`,
checked against their result files by tests/test_readme_results.py) are not prose.

A figure is *sourced* when a value of a file its section names gives it, to the figure's printed precision.
A section runs from one heading to the next (of any level); the file is named by its path anywhere in the
section:

| source named | its values |
| --- | --- |
| a result file, `benchmarks/results/<name>.json` or just `<name>.json` | its numeric values only: a number that appears only inside a string (a transcript, a note, a key such as "q75") is no record of a figure |
| a Python module (`models/yoao/config.py`) | its numeric literals and the numbers inside its string literals (the paper values quoted in `paper_claims.py`, a profile's sizes) |
| `Makefile`, `pyproject.toml` | the numbers in the file |

Every section also reads models/evaluation/stats.py, the module every interval of the project comes from (its
95% confidence level, its resample count), without naming it.

The figure's unit picks the conversions tried: `%` reads a fraction (0.72 -> 72%), `min` and `h` read seconds,
`ms` reads seconds, `GiB`/`MiB`/`GB`/`MB` read bytes, `k`/`M` multiply ("2.7M", "115k"); `x` also reads the
ratio of two values of the sources ("1.9x faster": 4,832 s / 2,494 s). Signs are ignored (a "-0.04" difference
is the value -0.04 printed with its sign, a "7%" drop a -0.07 change). A figure after "~", "about",
"roughly", "around" or "nearly" may differ by 10%.

What this cannot catch: a figure that equals some other value of a large source by chance (a result file
holds thousands of numbers, so a two-digit fraction usually appears somewhere in it), and counts without a
unit. It does catch what it is for: a number typed from a run whose record is not in the repository, a
figure left behind when its result file was measured again, and a section that quotes numbers without naming
where they come from.

    python -m benchmarks.doc_figures          # list every unsourced figure (exit 1 if any)
"""

from __future__ import annotations

import argparse
import ast
import bisect
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
EVERYWHERE = ("models/evaluation/stats.py",)
"""Sources every section reads without naming them (the statistics every interval comes from)."""

_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*")
_UNIT = re.compile(
    r"(?P<space>\s?)(?P<unit>%|×|x(?![a-zA-Z])|ms\b|min\b|minutes?\b|seconds?\b|s\b|h\b|hours?\b|tok/s|tokens/s"
    r"|calls/s|steps/s|GiB\b|MiB\b|GB\b|MB\b|TFLOPS\b|k\b|M\b)"
)
_APPROXIMATE = re.compile(r"(~|≈|about |roughly |around |nearly |some )$")
_SOURCE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.(?:json|py))\b|\b(Makefile|pyproject\.toml)\b")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_BLOCK = re.compile(r"<!-- (?P<name>[\w-]+): begin -->.*?<!-- (?P=name): end -->", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_HEADING = re.compile(r"^(#{1,6}) ", re.M)

# spelled-out units read as their symbol
_UNIT_SYMBOL = {"minute": "min", "minutes": "min", "hour": "h", "hours": "h", "second": "s", "seconds": "s", "×": "x"}
# suffixes that multiply the number ("2.7M")
_MULTIPLIER = {"k": 1e3, "M": 1e6}
# unit -> the factors a source value is multiplied by to give the figure
_SCALES: dict[str, tuple[float, ...]] = {
    "%": (100.0, 1.0),
    "min": (1 / 60, 1.0),
    "h": (1 / 3600, 1 / 60, 1.0),
    "s": (1.0, 60.0, 1e-3),
    "ms": (1e3, 1.0),
    "GiB": (1.0, 2.0**-30, 2.0**-20, 2.0**-10),
    "MiB": (1.0, 2.0**-20, 2.0**10),
    "GB": (1.0, 1e-9, 1e-3, 2.0**-30),
    "MB": (1.0, 1e-6, 1e3, 2.0**-20),
}


@dataclass(frozen=True)
class Figure:
    """One measured-looking number in a document's prose."""

    document: str
    """The document's path, relative to the repository root."""
    line: int
    """1-based line of the figure."""
    text: str
    """The figure as printed, with its unit ("83.2 min")."""
    value: float
    """The number, thousands separators removed, suffix multipliers (k, M) applied."""
    decimals: int
    """Digits after the decimal point: the printed precision the source must round to."""
    unit: str
    """The unit read after the number, as its symbol ("min" for "minutes"; "" for none)."""
    approximate: bool
    """Printed after "~", "about" and the like: 10% tolerance."""
    sources: tuple[str, ...]
    """The files the figure's section names, relative to the repository root (the existing ones)."""


@dataclass(frozen=True)
class Check:
    """The figures of the documents and those no named source gives."""

    figures: tuple[Figure, ...]
    """Every figure found."""
    unsourced: tuple[Figure, ...]
    """The figures no value of their section's sources gives."""

    def report(self) -> str:
        lines = [f"{len(self.unsourced)} of {len(self.figures)} figures match no source their section names:"]
        for f in self.unsourced:
            named = ", ".join(f.sources) or "none"
            lines.append(f"  {f.document}:{f.line}: {f.text!r} (sources named: {named})")
        return "\n".join(lines)


def _blank(match: re.Match[str]) -> str:
    """The matched text with everything but its newlines blanked, so line numbers stay."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose(text: str) -> str:
    """`text` with fenced code and rendered result blocks blanked out (line numbers kept); inline code is blanked
    per section after the section's sources are read, since paths are usually quoted."""
    for pattern in (_FENCE, _BLOCK):
        text = pattern.sub(_blank, text)
    return text


def resolve(name: str, root: Path) -> Path | None:
    """The file a document names: a path from the root, or a bare result file's name."""
    for candidate in (root / name, root / "benchmarks" / "results" / name):
        if candidate.is_file():
            return candidate
    return None


def named_sources(section: str, root: Path) -> tuple[Path, ...]:
    """The existing files a section names (inline code included: paths are usually quoted)."""
    found: dict[Path, None] = {}
    for match in _SOURCE.finditer(section):
        path = resolve(match.group(1) or match.group(2), root)
        if path is not None:
            found[path] = None
    return tuple(found)


def _numbers_in_text(text: str) -> Iterator[float]:
    for match in _NUMBER.finditer(text):
        token = match.group(0).rstrip(",")
        if token.count(".") > 1:  # a version or a dotted name
            continue
        try:
            yield float(token.replace(",", ""))
        except ValueError:
            continue


def _numbers_in_json(obj: object) -> Iterator[float]:
    """The numeric values of a result file. Strings and keys give none: a transcript's "$75", a note's "29 of 40"
    or a key's "q75" is text, not a measured value, and a figure that matches only there has no record."""
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float):
        yield float(obj)
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _numbers_in_json(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _numbers_in_json(value)


def _numbers_in_python(source: str) -> Iterator[float]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                continue
            if isinstance(node.value, int | float):
                yield float(node.value)
            elif isinstance(node.value, str):
                yield from _numbers_in_text(node.value)


@cache
def source_values(path: Path) -> tuple[float, ...]:
    """Every number a source file gives, as sorted absolute values."""
    text = path.read_text()
    if path.suffix == ".json":
        numbers: Iterable[float] = _numbers_in_json(json.loads(text))
    elif path.suffix == ".py":
        numbers = _numbers_in_python(text)
    else:
        numbers = _numbers_in_text(text)
    # NaN (a JSON field may hold one) is no figure's source, and it would leave the tuple unsorted for `_near`.
    return tuple(sorted({abs(v) for v in numbers if math.isfinite(v)}))


def _near(values: tuple[float, ...], target: float, tolerance: float) -> bool:
    i = bisect.bisect_left(values, target - tolerance)
    return i < len(values) and values[i] <= target + tolerance


def sourced(figure: Figure, values: tuple[float, ...]) -> bool:
    """Whether some value (or, for an `x` figure, some ratio of two values) gives the figure."""
    x = abs(figure.value)
    tolerance = 0.5 * 10.0**-figure.decimals * _MULTIPLIER.get(figure.unit, 1.0)
    if figure.approximate:
        tolerance = max(tolerance, 0.1 * x)
    tolerance += 1e-9
    if any(_near(values, x / scale, tolerance / scale) for scale in _SCALES.get(figure.unit, (1.0,))):
        return True
    if figure.unit == "x":
        return any(v > 0 and _near(values, x * v, tolerance * v) for v in values)
    return False


def figures_in(document: Path, root: Path = ROOT) -> list[Figure]:
    """The figures of one document, each with the sources its section names."""
    text = prose(document.read_text())
    headings = list(_HEADING.finditer(text))
    starts = [0, *(m.start() for m in headings), len(text)]
    levels = [0, *(len(m.group(1)) for m in headings)]
    found: list[Figure] = []
    everywhere = [root / name for name in EVERYWHERE if (root / name).is_file()]
    # a section also reads the sources its enclosing sections name ("### Reward" under "## Deal or No Deal")
    enclosing: list[tuple[int, tuple[Path, ...]]] = []
    for level, (begin, end) in zip(levels, itertools.pairwise(starts), strict=True):
        section = text[begin:end]
        enclosing = [(lv, s) for lv, s in enclosing if lv < level]
        own = named_sources(section, root)
        sources = tuple(dict.fromkeys([*everywhere, *(p for _, s in enclosing for p in s), *own]))
        enclosing.append((level, own))
        body = _INLINE_CODE.sub(_blank, section)
        first_line = text.count("\n", 0, begin) + 1
        for match in _NUMBER.finditer(body):
            token = match.group(0).rstrip(",")
            before = body[max(0, match.start() - 2) : match.start()]
            if before[-1:].isalnum() or before[-1:] in "._/" or (before[-1:] == "-" and before[:1].isalnum()):
                continue  # part of a name: SmolLM2-135M, v0, 1e-5, a path
            unit_match = _UNIT.match(body, match.end())
            after = body[match.end() : match.end() + 1]
            if token.count(".") > 1 or (not unit_match and (after.isalnum() or after == "_")):
                continue  # a version (0.32.0) or part of an identifier (3rd, 1e-5)
            unit = unit_match.group("unit") if unit_match else ""
            if unit in ("k", "M", "x") and unit_match is not None and unit_match.group("space"):
                unit = ""  # "4 M" / "3 x" with a space is not a suffix ("3 ×" is a ratio)
            unit = _UNIT_SYMBOL.get(unit, unit)
            if not ("." in token or "," in token or unit):
                continue
            if unit in _MULTIPLIER and "." not in token and "," not in token:
                continue  # "115k" alone is a count
            value = float(token.replace(",", "")) * _MULTIPLIER.get(unit, 1.0)
            decimals = len(token.split(".")[1]) if "." in token else 0
            approximate = bool(_APPROXIMATE.search(body[max(0, match.start() - 9) : match.start()]))
            found.append(
                Figure(
                    document=str(document.relative_to(root)),
                    line=first_line + section.count("\n", 0, match.start()),
                    text=token + (unit_match.group(0) if unit else ""),
                    value=value,
                    decimals=decimals,
                    unit=unit,
                    approximate=approximate,
                    sources=tuple(str(p.relative_to(root)) for p in sources),
                )
            )
    return found


def check(documents: Iterable[Path] = DOCUMENTS, root: Path = ROOT) -> Check:
    """Every figure of `documents` and those that match no source their section names."""
    figures = [f for d in documents for f in figures_in(d, root)]
    merged: dict[tuple[str, ...], tuple[float, ...]] = {}  # a section's figures share its sources: merge once
    unsourced = []
    for f in figures:
        if f.sources not in merged:
            merged[f.sources] = tuple(sorted({v for s in f.sources for v in source_values(root / s)}))
        if not sourced(f, merged[f.sources]):
            unsourced.append(f)
    return Check(figures=tuple(figures), unsourced=tuple(unsourced))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="*", type=Path, help="documents to check (default: README.md and docs/)")
    args = parser.parse_args(argv)
    documents = [d.resolve() for d in args.documents] or list(DOCUMENTS)
    result = check(documents)
    print(result.report() if result.unsourced else f"all {len(result.figures)} figures sourced")
    return 1 if result.unsourced else 0


if __name__ == "__main__":
    raise SystemExit(main())
