"""Zero-shot Sugarscape: seed and untrained LLM traders under the same exploitative prompt.

Each world (environments/yoao/sugarscape_core.py, sized by `SugarscapeSettings`) runs with a share f of its
agents played by the seed adapter and the rest by the untrained model (the base model with the same
format-only warm-up adapter as in the Red-Black experiments), every one of them prompted to exploit
(`SUGARSCAPE_EXPLOITATIVE_TEMPLATE`). Every meeting of neighbours is a negotiated `sugarscape-v0` encounter
(small talk, intent, offers, execution, reflection) between fresh LLM agents. Which agents are seeds: the first
round(f x n) agent ids of a seeded permutation, so the seeds of a smaller share are among those of a larger.

| measure | definition |
| --- | --- |
| `trades` | completed trades (summed over the share's worlds) |
| `trade_success` (`trade_rate` in the result file) | completed trades / encounters (the world's count) |
| `invalid_rate` | invalid actions / LLM replies (each reply is one accepted action or one invalid attempt) |
| `survival` | share of the initial agents that did not starve during the run (alive at the end or dead of old age) |
| `mean_lifespan` | mean age reached: at death, or at the end of the run for the living (censored at `max_ticks`) |
| `leaning_shift_seed` / `_untrained` | mean change of identity leaning (end minus start, in [-2, 2]) of the seed / untrained agents |

Intervals: with two or more worlds per share they resample worlds; with one world they resample agents (and
ticks, for trade success), which treats them as independent and understates the uncertainty.

A profile may leave Sugarscape out (`SugarscapeSettings.skip`, the reason): `sugarscape_zero_shot` then plays
nothing and returns a result that says why (the cpu profile: see docs/yoao.md).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.llm_agent import LLMAgent
from agents.yoao.llm_players import sugarscape_config
from environments.yoao.sugarscape import (
    STARVATION,
    SugarscapeConfig,
    SugarscapeWorld,
    TickReport,
    TraderInfo,
    run_simulation_async,
)
from models.display import fixed
from models.evaluation.stats import Estimate, mean_estimate
from models.yoao.config import SugarscapeSettings

log = logging.getLogger("socialrl.yoao")


def seed_ids(n_agents: int, fraction: float, seed: int = 0) -> frozenset[int]:
    """The agent ids played by seeds: the first round(fraction x n) of a seeded permutation of the ids."""
    order = list(range(n_agents))
    random.Random(f"yoao-sugarscape-seeds:{seed}").shuffle(order)
    return frozenset(order[: round(fraction * n_agents)])


def world_config(settings: SugarscapeSettings, seed: int) -> SugarscapeConfig:
    return SugarscapeConfig(
        width=settings.width,
        height=settings.height,
        n_agents=settings.n_agents,
        max_ticks=settings.max_ticks,
        vision=settings.vision,
        sugar_endowment=settings.sugar_endowment,
        spice_endowment=settings.spice_endowment,
        max_age=settings.max_age,
        window=max(1, settings.max_ticks),
        seed=seed,
    )


@dataclass(frozen=True, kw_only=True)
class WorldRecord:
    """One finished world."""

    fraction: float
    seed: int
    seeds: tuple[int, ...]
    """Agent ids played by the seed adapter."""
    encounters: int
    trades: int
    tick_encounters: tuple[tuple[int, int], ...]
    """(encounters, trades) per tick."""
    starved: tuple[bool, ...]
    """Per initial agent id: starved during the run."""
    lifespan: tuple[int, ...]
    """Per agent id: age at death or at the end."""
    leaning_shift: tuple[float, ...]
    """Per agent id: leaning at the end minus at the start."""
    llm_calls: int
    invalid_actions: int
    wall_s: float


@dataclass(frozen=True)
class FractionResult:
    """The measures of one seed share (pooled over its worlds)."""

    fraction: float
    worlds: int
    trade_success: Estimate
    survival: Estimate
    mean_lifespan: Estimate
    leaning_shift_seed: Estimate
    leaning_shift_untrained: Estimate
    survival_seed: float
    survival_untrained: float
    lifespan_seed: float
    lifespan_untrained: float
    llm_calls: int
    invalid_actions: int
    trades: int = 0
    """Completed trades over the share's worlds."""

    @property
    def invalid_rate(self) -> float:
        """Invalid actions per LLM reply."""
        return self.invalid_actions / self.llm_calls if self.llm_calls else math.nan

    def as_dict(self) -> dict[str, Any]:
        def mean(e: Estimate) -> float | None:
            return e.as_dict()["mean"]

        def num(value: float) -> float | None:
            return None if math.isnan(value) else round(value, 4)

        return {
            "trades": self.trades,
            "trade_rate": mean(self.trade_success),
            "invalid_rate": num(self.invalid_rate),
            "trade_success": mean(self.trade_success),
            "survival": mean(self.survival),
            "mean_lifespan": mean(self.mean_lifespan),
            "leaning_shift_seed": mean(self.leaning_shift_seed),
            "leaning_shift_untrained": mean(self.leaning_shift_untrained),
            "intervals": {
                name: getattr(self, name).as_dict()
                for name in (
                    "trade_success",
                    "survival",
                    "mean_lifespan",
                    "leaning_shift_seed",
                    "leaning_shift_untrained",
                )
            },
            "by_group": {
                "survival_seed": num(self.survival_seed),
                "survival_untrained": num(self.survival_untrained),
                "lifespan_seed": num(self.lifespan_seed),
                "lifespan_untrained": num(self.lifespan_untrained),
            },
            "worlds": self.worlds,
            "llm_calls": self.llm_calls,
            "invalid_actions": self.invalid_actions,
        }


@dataclass(frozen=True)
class SugarscapeResult:
    """Every seed share of the zero-shot test."""

    fractions: tuple[FractionResult, ...]
    worlds: tuple[WorldRecord, ...]
    settings: SugarscapeSettings
    llm_calls: int
    wall_s: float
    skipped: str = ""
    """Why the profile left Sugarscape out (empty: it ran)."""

    def table_markdown(self) -> str:
        if self.skipped:
            return f"not run: {self.skipped}"
        lines = [
            "| seed share | trade success | survival | mean lifespan | leaning shift seed | leaning shift untrained | calls |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for f in self.fractions:
            d = f.as_dict()
            lines.append(
                f"| {f.fraction:.0%} | {_f(d['trade_success'])} | {_f(d['survival'])} | {_f(d['mean_lifespan'], 1)} | "
                f"{_f(d['leaning_shift_seed'], 3)} | {_f(d['leaning_shift_untrained'], 3)} | {f.llm_calls} |"
            )
        return "\n".join(lines)


def _f(value: float | None, digits: int = 2) -> str:
    return fixed(value, f".{digits}f")


async def run_world(
    settings: SugarscapeSettings,
    fraction: float,
    seed: int,
    base_url: str,
    seed_model: str,
    untrained_model: str,
    api_key: str | None = None,
) -> WorldRecord:
    """One world with the given seed share, every encounter negotiated by LLM traders."""
    start = time.perf_counter()
    config = world_config(settings, seed)
    seeds = seed_ids(settings.n_agents, fraction, seed)
    made: list[LLMAgent] = []
    counter = iter(range(10**9))

    def factory(info: TraderInfo) -> LLMAgent:
        model = seed_model if info.agent_id in seeds else untrained_model
        agent = LLMAgent(
            sugarscape_config(
                base_url,
                model,
                seed=seed * 100_003 + next(counter),
                max_tokens=settings.max_new_tokens,
                api_key=api_key,
            )
        )
        made.append(agent)
        return agent

    def progress(report: TickReport) -> None:
        # One line per tick and world: the worlds run at once and take minutes on CPU.
        log.info(
            "sugarscape seed share %.0f%% world %d: tick %d/%d, %d encounters, %d trades, %d alive, %.0f s",
            100 * fraction, seed, report.tick + 1, config.max_ticks, report.encounters, report.trades, report.alive,
            time.perf_counter() - start,
        )  # fmt: skip

    world = SugarscapeWorld(config)
    result = await run_simulation_async(
        config, factory, concurrency=settings.concurrency, turn_timeout=None, world=world, keep_reports=True,
        on_tick=progress,
    )  # fmt: skip
    n = settings.n_agents
    starved, lifespan = [False] * n, [0] * n
    for death in world.deaths:
        starved[death.agent_id] = death.cause == STARVATION
        lifespan[death.agent_id] = death.age
    for row, agent_id in enumerate(world.ids.tolist()):
        lifespan[agent_id] = int(world.age[row])
    shift = (world.leaning - world.leaning_start).tolist()
    record = WorldRecord(
        fraction=fraction,
        seed=seed,
        seeds=tuple(sorted(seeds)),
        encounters=int(world.stats.attempted),
        trades=int(world.stats.completed),
        tick_encounters=tuple((r.encounters, r.trades) for r in result.reports),
        starved=tuple(starved),
        lifespan=tuple(lifespan),
        leaning_shift=tuple(float(s) for s in shift[:n]),
        llm_calls=sum(a.metrics["calls"] for a in made),
        invalid_actions=int(world.stats.invalid_actions),
        wall_s=time.perf_counter() - start,
    )
    log.info(
        "sugarscape seed share %.0f%% world %d: %d encounters, %d trades, %d starved, %d calls, %.0f s",
        100 * fraction,
        seed,
        record.encounters,
        record.trades,
        sum(starved),
        record.llm_calls,
        record.wall_s,
    )
    return record


def _group_mean(values: list[float], mask: list[bool]) -> float:
    chosen = [v for v, m in zip(values, mask, strict=True) if m]
    return float(np.mean(chosen)) if chosen else math.nan


def summarise_fraction(fraction: float, worlds: list[WorldRecord]) -> FractionResult:
    many = len(worlds) >= 2
    trades, trade_clusters = [], []
    agents: dict[str, list] = {"survived": [], "lifespan": [], "shift": [], "seed": [], "cluster": []}
    for w in worlds:
        for tick, (encounters, done) in enumerate(w.tick_encounters):
            trades += [1.0] * done + [0.0] * (encounters - done)
            trade_clusters += [w.seed if many else f"{w.seed}:{tick}"] * encounters
        for agent_id in range(len(w.starved)):
            agents["survived"].append(0.0 if w.starved[agent_id] else 1.0)
            agents["lifespan"].append(float(w.lifespan[agent_id]))
            agents["shift"].append(w.leaning_shift[agent_id])
            agents["seed"].append(agent_id in w.seeds)
            agents["cluster"].append(w.seed if many else f"{w.seed}:{agent_id}")

    def by_group(name: str, seed: bool) -> Estimate:
        pairs = [(v, c) for v, s, c in zip(agents[name], agents["seed"], agents["cluster"], strict=True) if s == seed]
        return mean_estimate([v for v, _ in pairs], [c for _, c in pairs], (-2.0, 2.0))

    cluster = agents["cluster"]
    untrained = [not s for s in agents["seed"]]
    return FractionResult(
        fraction=fraction,
        worlds=len(worlds),
        trade_success=mean_estimate(trades, trade_clusters, (0.0, 1.0)),
        survival=mean_estimate(agents["survived"], cluster, (0.0, 1.0)),
        mean_lifespan=mean_estimate(agents["lifespan"], cluster),
        leaning_shift_seed=by_group("shift", True),
        leaning_shift_untrained=by_group("shift", False),
        survival_seed=_group_mean(agents["survived"], agents["seed"]),
        survival_untrained=_group_mean(agents["survived"], untrained),
        lifespan_seed=_group_mean(agents["lifespan"], agents["seed"]),
        lifespan_untrained=_group_mean(agents["lifespan"], untrained),
        llm_calls=sum(w.llm_calls for w in worlds),
        invalid_actions=sum(w.invalid_actions for w in worlds),
        trades=sum(w.trades for w in worlds),
    )


def sugarscape_zero_shot(
    settings: SugarscapeSettings, base_url: str, seed_model: str, untrained_model: str, api_key: str | None = None
) -> SugarscapeResult:
    """Every seed share x every world (module docstring); all worlds run at once, so their encounters'
    calls batch in the engine; nothing when the profile skips it (`settings.skip`)."""
    if settings.skip:
        return SugarscapeResult((), (), settings, 0, 0.0, skipped=settings.skip)
    start = time.perf_counter()

    async def every_world() -> list[WorldRecord]:
        jobs = [
            run_world(settings, fraction, seed, base_url, seed_model, untrained_model, api_key)
            for fraction in settings.seed_fractions
            for seed in range(settings.worlds)
        ]
        return list(await asyncio.gather(*jobs))

    worlds = asyncio.run(every_world())
    fractions = tuple(summarise_fraction(f, [w for w in worlds if w.fraction == f]) for f in settings.seed_fractions)
    return SugarscapeResult(
        fractions, tuple(worlds), settings, sum(w.llm_calls for w in worlds), time.perf_counter() - start
    )
