"""The YOAO claims measured on the committed result files (models/report/files.py, docs/report.md): for each
claim of models/yoao/paper_claims.py, the file measurer that reads this project's value from the keys `make yoao`
writes (models/yoao/report.py `BENCHMARK_KEYS`).

| file | claims |
| --- | --- |
| yoao_cpu.json (frames in yoao_cpu_details.json) | the untrained players' cooperation per arm, paired against k = 0 by game (one seed, more seeds, persistence), against the same seed count's plain arm by game (mute, prompting baseline; a file without `untrained_cooperation_between_arms`: each arm's own), Sugarscape per seed share |
| yoao_incentives_cpu.json | what the untrained tutors respond to, with scripted seeds (context, and why an effect cannot show where they respond to nothing) |

Games are the clusters of every Red-Black estimate (the bootstrap resamples games).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from models.report import (
    FileMeasurer,
    Interval,
    Measurement,
    ResultFile,
    ResultSources,
    entry_interval,
    missing_files,
)

YOAO_FILE, YOAO_DETAILS = "yoao_cpu.json", "yoao_cpu_details.json"
INCENTIVES_FILE = "yoao_incentives_cpu.json"
RESULT_FILES = (YOAO_FILE, YOAO_DETAILS, INCENTIVES_FILE)
"""Every result file the YOAO claims read."""
TWO_ESTIMATES = (
    "two independent estimates (the worlds of each seed share); the stage gives no interval of their difference"
)
TWO_ARMS = "two arms' estimates on paired games; the file keeps each against k = 0 and no interval of their difference"
NO_CROSS_ARCHITECTURE = (
    "no asset of this project plays seeds among teammates of another architecture (seeds and teammates share one "
    "base model; docs/yoao.md)"
)
NO_BROADCAST_VS_PAIRWISE = (
    "no asset of this project compares broadcast with pairwise discussion (Red-Black discussion is broadcast "
    "within a team; docs/yoao.md)"
)


def _frames(files: ResultSources) -> str:
    details = files.get(YOAO_DETAILS)
    frames = (details.get("frames") if details is not None else None) or files.get(YOAO_FILE).get("frames") or []
    return f"frames {', '.join(frames) or 'not recorded'}"


def _tutors(files: ResultSources, key: str, what: str) -> tuple[str, str]:
    """What the untrained tutors respond to (`key` of the YOAO incentive audit, scripted seeds), and why the
    claim's effect cannot show where they do not (empty when they do, or no audit was read)."""
    audit = files.get(INCENTIVES_FILE)
    interval = entry_interval(audit.get(key)) if audit is not None else None
    if audit is None or interval is None:
        return "", ""
    said = f"{key} {interval.text()} ({interval.cluster_text()})"
    text = f"what the untrained tutors respond to ({INCENTIVES_FILE}, {audit.env_version or 'no version'}): {said}"
    return (
        text,
        "" if interval.low > 0 else f"the untrained tutors do not respond to {what} ({INCENTIVES_FILE}: {said})",
    )


def _seed_count(arm: str) -> int | None:
    return int(arm) if re.fullmatch(r"\d+", arm) else None


def vs_k0(largest: bool) -> FileMeasurer:
    """k = 1 (or the largest plain seed count above 1 with untrained players) against k = 0, paired by game."""

    def measure(files: ResultSources) -> list[Measurement]:
        file = files.get(YOAO_FILE)
        if file is None:
            return missing_files(files, YOAO_FILE)
        paired = file.get("untrained_cooperation_paired") or {}
        own = file.get("untrained_cooperation") or {}
        arms = [a for a in paired if _seed_count(a) and (own.get(a) or {}).get("mean") is not None]
        arms = sorted((a for a in arms if _seed_count(a) > 1), key=_seed_count)[-1:] if largest else ["1"]
        context, cannot = _tutors(files, "argue_minus_none", "an arguing seed")
        out = []
        for arm in (a for a in arms if a in paired):
            key = f"untrained_cooperation_paired.{arm}"
            scope = f"k={arm}, {_frames(files)}"
            out.append(Measurement(None, key, scope, entry_interval(paired[arm]), baseline=context, file=file,
                                   cannot=cannot))  # fmt: skip
        why = "no seed count above 1 with untrained players was played" if largest else "k = 1 was not played"
        return out or [Measurement(None, "untrained_cooperation_paired", missing=why, file=file)]

    return measure


def _arm_text(name: str, entry: Any) -> str:
    interval = entry_interval(entry)
    return f"{name} {interval.text()} ({interval.n} games)" if interval is not None else f"{name} -"


def _between(file: ResultFile, key: str, scope: str, **fields: Any) -> Measurement | None:
    """`untrained_cooperation_between_arms.<key>` as a paired measurement (None: a file from before the key)."""
    entry = (file.get("untrained_cooperation_between_arms") or {}).get(key)
    interval = entry_interval(entry) if entry is not None else None
    if interval is None:
        return None
    return Measurement(None, f"untrained_cooperation_between_arms.{key}", scope, interval, file=file, **fields)


def mute(files: ResultSources) -> list[Measurement]:
    """Each muted arm's untrained cooperation against the same seed count unmuted, paired by game (a file from
    before the paired key: the two arms' estimates)."""
    file = files.get(YOAO_FILE)
    if file is None:
        return missing_files(files, YOAO_FILE)
    own = file.get("untrained_cooperation") or {}
    context, cannot = _tutors(files, "argue_minus_vote_only", "arguments more than a bare vote")
    out = []
    for arm in (a for a in own if a.endswith("_muted")):
        k = arm.removesuffix("_muted")
        paired = _between(file, f"{k}_muted_minus_{k}", f"k={k} muted - k={k}, paired by game", baseline=context,
                          cannot=cannot)  # fmt: skip
        if paired is not None:
            out.append(paired)
        elif k in own:
            text = f"{_arm_text(f'k={k} muted', own[arm])} vs {_arm_text(f'k={k}', own[k])}"
            key = f"untrained_cooperation.{arm}, untrained_cooperation.{k}"
            out.append(Measurement(None, key, f"k={k} muted vs k={k}", None, text, TWO_ARMS, baseline=context,
                                   file=file, cannot=cannot))  # fmt: skip
    return out or [Measurement(None, "untrained_cooperation", missing="no muted arm was played", file=file)]


def persistence(files: ResultSources) -> list[Measurement]:
    """Each removed arm's untrained cooperation against k = 0 (never seeded), paired by game, the whole game."""
    file = files.get(YOAO_FILE)
    if file is None:
        return missing_files(files, YOAO_FILE)
    paired = file.get("untrained_cooperation_paired") or {}
    out = [
        Measurement(None, f"untrained_cooperation_paired.{arm}", f"k={arm.removesuffix('_removed')} removed vs k=0 "
                    "(never seeded), whole game", entry_interval(entry), file=file)
        for arm, entry in paired.items()
        if arm.endswith("_removed")
    ]  # fmt: skip
    return out or [Measurement(None, "untrained_cooperation_paired", missing="no removal arm was played", file=file)]


def prompting_baseline(files: ResultSources) -> list[Measurement]:
    """The seed's arm against the prompted model's arm in its seat, paired by game, where both were played (a file
    from before the paired key: the two arms' estimates)."""
    file = files.get(YOAO_FILE)
    if file is None:
        return missing_files(files, YOAO_FILE)
    own = file.get("untrained_cooperation") or {}
    out = []
    for arm in (a for a in own if a.endswith("_prompted")):
        k = arm.removesuffix("_prompted")
        paired = _between(file, f"{k}_minus_{k}_prompted", f"k={k} seed - prompted, paired by game")
        if paired is not None:
            out.append(paired)
        elif k in own:
            text = f"{_arm_text(f'k={k} seed', own[k])} vs {_arm_text(f'k={k} prompted', own[arm])}"
            key = f"untrained_cooperation.{k}, untrained_cooperation.{arm}"
            out.append(Measurement(None, key, f"k={k} seed vs prompted", None, text, TWO_ARMS, file=file))
    why = "not played in this run: the file has no prompted arm (its `prompting_baseline` is empty)"
    return out or [Measurement(None, "prompting_baseline", missing=why, file=file)]


def not_measured(reason: str) -> FileMeasurer:
    def measure(files: ResultSources) -> list[Measurement]:
        return [Measurement(None, "-", missing=reason)]

    return measure


def _share_value(entry: Any) -> tuple[Interval | None, str]:
    """A seed share's value: an estimate, or a plain number (its text)."""
    if isinstance(entry, int | float) and not isinstance(entry, bool):
        return None, f"{entry:.3g}"
    interval = entry_interval(entry)
    return interval, interval.text() if interval is not None else "-"


def _shares(file: ResultFile) -> dict[float, Mapping[str, Any]] | str:
    """Seed share -> its results, or why there are none (the profile's reason, from the file)."""
    sugarscape = file.get("sugarscape") or {}
    if sugarscape.get("skipped"):
        return f"not played: {sugarscape['skipped']}"
    shares = {float(k): v for k, v in sugarscape.items() if isinstance(v, Mapping)}
    return shares or "the file holds no Sugarscape world"


def sugarscape(fields: tuple[str, ...], difference: bool = True) -> FileMeasurer:
    """The largest seed share's first of `fields` present against the share without seeds (two estimates), or,
    with `difference` off, the largest share below 1's own value against 0."""

    def measure(files: ResultSources) -> list[Measurement]:
        file = files.get(YOAO_FILE)
        if file is None:
            return missing_files(files, YOAO_FILE)
        shares = _shares(file)
        if isinstance(shares, str):
            return [Measurement(None, "sugarscape", missing=shares, file=file)]
        field = next((f for f in fields if any(f in v for v in shares.values())), fields[0])
        values = {s: _share_value(v.get(field)) for s, v in shares.items()}
        same = {text for _, text in values.values()}
        cannot = f"every seed share gives {field} {same.pop()}: the seeds change nothing here" if len(same) == 1 else ""
        if not difference:
            below = [s for s in values if 0 < s < 1]
            if not below:
                return [Measurement(None, f"sugarscape[].{field}", missing="no seed share between 0 and 1", file=file)]
            top = max(below)
            interval, text = values[top]
            return [Measurement(None, f"sugarscape.{top:g}.{field}", f"{top:.0%} seeds", interval,
                                "" if interval else text, "the file gives it without an interval", file=file)]  # fmt: skip
        top = max(values)
        if 0.0 not in values or top == 0.0:
            return [Measurement(None, f"sugarscape[].{field}", missing="no world with and without seeds", file=file)]
        text = f"{top:.0%} seeds {values[top][1]} vs no seeds {values[0.0][1]}"
        return [Measurement(None, f"sugarscape[{top:g}, 0].{field}", f"{top:.0%} vs 0% seeds", None, text,
                            TWO_ESTIMATES, file=file, cannot=cannot)]  # fmt: skip

    return measure


FILE_MEASURERS: dict[str, FileMeasurer] = {
    "one_seed": vs_k0(largest=False),
    "more_seeds": vs_k0(largest=True),
    "mute": mute,
    "persistence": persistence,
    "prompting_baseline": prompting_baseline,
    "cross_architecture": not_measured(NO_CROSS_ARCHITECTURE),
    "sugarscape_trades": sugarscape(("trade_rate", "trade_success")),
    "survival": sugarscape(("survival",)),
    "lifespan": sugarscape(("mean_lifespan",)),
    "identity_leaning": sugarscape(("leaning_shift_untrained",), difference=False),
    "broadcast_vs_pairwise": not_measured(NO_BROADCAST_VS_PAIRWISE),
}
"""claim_id -> its file measurer (models/yoao/paper_claims.py `CLAIMS`)."""
