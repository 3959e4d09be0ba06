"""Scenario splits: which generated scenarios are for training and which are held out for evaluation.

Held-out scenarios (`held_out_scenarios`): the scenario *content* (every field but the id) is hashed
with the environment id, and the lowest `HELD_OUT_FRACTION` of the hash range is the held-out partition.
Held-out scenarios are drawn from their own random stream (`"<env_id>:heldout:<seed>"`, where
`sample_scenarios` uses `"<env_id>:<seed>"`), keeping only held-out contents, and get ids
`heldout:<hash>`. A generator's scenario space can be small (200 draws of `dnd-v0` or `craigslist-v0`
share a large part of their contents with 1000 training draws; the share varies with the seeds), so a
different seed alone does not make a held-out set: training must draw from `training_scenarios` (the `sample_scenarios`
stream with held-out contents skipped), or filter with `is_held_out`, for the guarantee to hold.
An environment that defines its own held-out split (a classmethod `sample_held_out_scenario(rng)`,
e.g. Red-Black's held-out frames, whose training sampler never draws them) is sampled through it, and
no hash partition is applied.

Real data (`source="dataset"`): where a domain has a loader and the shared data is present, its records
(`DATASETS` below: CoCoA Craigslist listings, SRBench marketplace and calendar tasks, Deal-or-No-Deal
contexts, CaSiNo dialogues) are split by the same content hash: the held-out partition is evaluation
data, the rest training data, so training scenarios (PPO rollouts, teacher traces) and evaluation
scenarios never share content. A draw of n takes the first n of the partition in a seeded order (cycling
if n exceeds it). A domain without a dataset (Job Interview), or a machine without the shared data, falls
back to the generator (logged), so the project runs without them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import random
from collections.abc import Callable

from environments.core.base import Scenario
from environments.core.data import DataFileError, dataset_path
from environments.core.registry import env_class, sample_scenarios

log = logging.getLogger("socialrl.scenarios")

HELD_OUT_FRACTION = 0.2
"""Share of each environment's scenario-content hash range reserved for evaluation."""
HELD_OUT_HOOK = "sample_held_out_scenario"
"""Optional classmethod `(rng) -> Scenario` of an environment with its own held-out split."""
SOURCES = ("generated", "dataset")
"""Where scenarios come from: the environment's generator, or its real dataset where it has one."""

DATASETS: dict[str, tuple[dict[str, object], ...]] = {
    "craigslist-v0": ({"path": ("craigslistbargain", "dev.json")},),
    "marketplace-v0": (
        {"path": ("srbench-marketplace", "small.yaml")},
        {"path": ("srbench-marketplace", "medium.yaml")},
    ),
    "calendar-v0": (
        {"path": ("srbench-calendar-scheduling", "small.yaml")},
        {"path": ("srbench-calendar-scheduling", "medium.yaml")},
    ),
    "dnd-v0": ({"path": ("dealornodeal", "selfplay.txt")},),
    "casino-v0": ({"path": ("casino", "casino_train.json")}, {"path": ("casino", "casino_valid.json")}),
}
"""The shared files each domain's real scenarios are loaded from (the loader's `load_dataset(path)`); the
SRBench whimsical-privacy files are adversarial and kept for the privacy red-team, not listed here."""


def scenario_key(env_id: str, scenario: Scenario) -> str:
    """sha256 of the environment id and the scenario's content (every field but `scenario_id`)."""
    content = dataclasses.asdict(scenario)
    content.pop("scenario_id", None)
    text = json.dumps({"env_id": env_id, "scenario": content}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def is_held_out(env_id: str, scenario: Scenario, fraction: float = HELD_OUT_FRACTION) -> bool:
    """Whether the scenario's content lies in the held-out partition of `env_id`."""
    return int(scenario_key(env_id, scenario)[:15], 16) / 16**15 < fraction


def _draw(env_id: str, n: int, stream: str, keep: Callable[[Scenario], bool]) -> list[Scenario]:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    cls = env_class(env_id)
    rng = random.Random(stream)
    out: list[Scenario] = []
    budget = 1000 + 100 * n
    while len(out) < n:
        if budget == 0:
            raise RuntimeError(f"{env_id}: could not draw {n} scenarios from stream {stream!r} (got {len(out)})")
        budget -= 1
        scenario = cls.sample_scenario(rng)
        if keep(scenario):
            out.append(scenario)
    return out


def _own_split(env_id: str) -> Callable[[random.Random], Scenario] | None:
    """The environment's own held-out sampler (`sample_held_out_scenario(rng)` classmethod), if it has one."""
    sampler = getattr(env_class(env_id), HELD_OUT_HOOK, None)
    return sampler if callable(sampler) else None


@functools.cache
def dataset_scenarios(env_id: str) -> tuple[Scenario, ...] | None:
    """Every real scenario of a domain (deduplicated by content), or None when the domain has no dataset
    or the shared files are absent. A present but broken file is an error (DataFileError names it)."""
    files = DATASETS.get(env_id)
    if not files:
        return None
    loaded: dict[str, Scenario] = {}
    for spec in files:
        path = dataset_path(*spec["path"])  # type: ignore[misc]
        if path is None:
            return None
        for scenario in env_class(env_id).load_dataset(path):
            loaded.setdefault(scenario_key(env_id, scenario), scenario)
    if not loaded:
        raise DataFileError(str(files[0]["path"]), f"{env_id}: the dataset holds no scenarios")
    return tuple(loaded.values())


def _dataset_draw(env_id: str, n: int, seed: int, held_out: bool) -> list[Scenario] | None:
    pool = dataset_scenarios(env_id)
    if pool is None:
        return None
    part = [s for s in pool if is_held_out(env_id, s) == held_out]
    if not part:
        raise RuntimeError(f"{env_id}: the {'held-out' if held_out else 'training'} partition of the dataset is empty")
    order = sorted(part, key=lambda s: scenario_key(env_id, s))
    random.Random(f"{env_id}:dataset:{'heldout' if held_out else 'train'}:{seed}").shuffle(order)
    return [order[i % len(order)] for i in range(n)]


def _check_source(source: str) -> None:
    if source not in SOURCES:
        raise ValueError(f"scenario source must be one of {SOURCES}, got {source!r}")


def held_out_scenarios(env_id: str, n: int, seed: int = 0, source: str = "generated") -> list[Scenario]:
    """`n` generated evaluation scenarios of the held-out partition (deterministic in env_id, n, seed);
    ids are `heldout:<content hash prefix>`. See the module docstring for the guarantee; a small scenario
    space can give repeated contents. An environment with its own held-out split (a classmethod
    `sample_held_out_scenario(rng)`, e.g. held-out frames) is sampled through it instead. With
    `source="dataset"` they are real scenarios of the dataset's held-out partition (ids kept)."""
    _check_source(source)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if source == "dataset":
        drawn = _dataset_draw(env_id, n, seed, held_out=True)
        if drawn is not None:
            return drawn
        log.info("%s: no dataset here, held-out scenarios come from the generator", env_id)
    own = _own_split(env_id)
    if own is not None:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        rng = random.Random(f"{env_id}:heldout:{seed}")
        drawn = [own(rng) for _ in range(n)]
    else:
        drawn = _draw(env_id, n, f"{env_id}:heldout:{seed}", lambda s: is_held_out(env_id, s))
    return [dataclasses.replace(s, scenario_id=f"heldout:{scenario_key(env_id, s)[:16]}") for s in drawn]


def training_scenarios(env_id: str, n: int, seed: int, source: str = "generated") -> list[Scenario]:
    """The `sample_scenarios(env_id, ., seed)` stream with held-out contents skipped: `n` training scenarios
    that never coincide with any held-out scenario (the plain stream for an environment with its own split).
    With `source="dataset"`: real scenarios of the dataset's training partition."""
    _check_source(source)
    if source == "dataset":
        drawn = _dataset_draw(env_id, n, seed, held_out=False)
        if drawn is not None:
            return drawn
        log.info("%s: no dataset here, training scenarios come from the generator", env_id)
    if _own_split(env_id) is not None:
        return sample_scenarios(env_id, n, seed)
    return _draw(env_id, n, f"{env_id}:{seed}", lambda s: not is_held_out(env_id, s))
