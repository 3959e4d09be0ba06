"""Rule-based Sugarscape (trade by the MRS rule, no LLM): ticks per second of ours vs Mesa's sugarscape_g1mt.

Both run side by side in one process on the 50 x 50 Epstein-Axtell map with the same agent count and,
as far as configuration allows, the same rules: Mesa's rules (bounded grid, von Neumann sight within
`vision`, death when a stock reaches 0, no ageing) are set on our side through `SugarscapeConfig`, and
Mesa's traders are made to trade with their von Neumann neighbours (radius 1) as ours do, instead of with
everyone in sight. The agent parameters are set identically on both sides, in two sets: Mesa's example
defaults (endowments 25-50, metabolisms 1-5, vision 1-5) and ours (5-25, 1-4, 1-6; the set `issue`). Remaining
differences are listed in the results. Each measurement runs the same seeds; the best of `--repeats`
interleaved runs is kept for each side (the machine is shared, the best run is the least disturbed one),
and the median is reported too.

    python -m benchmarks.bench_sugarscape [--agents 100 200] [--ticks 100] [--seeds 3] [--repeats 3]
                                          [--params mesa issue]

Writes benchmarks/results/sugarscape.json and prints a table. Mesa is a benchmark-only dependency
(`pip install socialrl[bench]`); nothing under environments/ or agents/ imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from environments.core.data import dataset_path
from environments.yoao.sugarscape_core import SUGAR_MAP_PARTS, SugarscapeConfig, SugarscapeWorld, load_sugar_map

RESULTS = Path(__file__).resolve().parent / "results" / "sugarscape.json"
NO_AGEING = 10**9
DIFFERENCES = (
    "order within a tick: Mesa moves, eats and starves each agent in turn, then trades; ours moves everyone at "
    "once (a cell claimed by several goes to the earliest in a random order, the others choose again among "
    "unclaimed cells; cells vacated this tick are not yet free), harvests, trades, then burns metabolism and "
    "removes the dead",
    "meetings: each Mesa trader trades with every neighbour on its own turn, so a pair can trade twice in a "
    "tick; ours meet once per tick",
    "initial placement: Mesa may put several agents on one cell; ours places them on distinct cells",
    "movement ties: Mesa treats distances within 1% as equal; ours orders strictly by distance",
    "Mesa's datacollector runs every step (part of the example); the 'no collector' column removes it",
)


PARAMETER_SETS: dict[str, dict[str, tuple[int, int]]] = {
    "mesa": {"endowment": (25, 50), "metabolism": (1, 5), "vision": (1, 5)},
    "issue": {"endowment": (5, 25), "metabolism": (1, 4), "vision": (1, 6)},
}
"""Agent parameters set identically on both sides: Mesa's example defaults, and (named `issue` in the result file) our
defaults, without ageing, which Mesa's example does not have)."""


def our_config(agents: int, ticks: int, seed: int, params: str = "mesa") -> SugarscapeConfig:
    """Mesa's sugarscape_g1mt rules expressed in our config, with one of the PARAMETER_SETS."""
    p = PARAMETER_SETS[params]
    return SugarscapeConfig(
        width=50,
        height=50,
        landscape="epstein-axtell",
        n_agents=agents,
        sugar_endowment=p["endowment"],
        spice_endowment=p["endowment"],
        sugar_metabolism=p["metabolism"],
        spice_metabolism=p["metabolism"],
        vision=p["vision"],
        max_age=(NO_AGEING, NO_AGEING),
        torus=False,
        vision_shape="diamond",
        starve_at_zero=True,
        max_ticks=ticks,
        seed=seed,
    )


def mesa_kwargs(agents: int, seed: int, params: str = "mesa") -> dict[str, Any]:
    p = PARAMETER_SETS[params]
    return {
        "width": 50,
        "height": 50,
        "initial_population": agents,
        "endowment_min": p["endowment"][0],
        "endowment_max": p["endowment"][1],
        "metabolism_min": p["metabolism"][0],
        "metabolism_max": p["metabolism"][1],
        "vision_min": p["vision"][0],
        "vision_max": p["vision"][1],
        "seed": seed,
    }


def _mesa_map_path() -> Path:
    import mesa.examples.advanced.sugarscape_g1mt as example

    return Path(example.__file__).parent / "sugar-map.txt"


@dataclass(frozen=True)
class Run:
    """One timed run: wall-clock and CPU seconds, mean population, our meeting and trade counts."""

    wall: float
    cpu: float
    population: float
    meetings: int = 0
    trades: int = 0


def _timed(step: Callable[[], Any], ticks: int, population: Callable[[], int]) -> tuple[float, float, float]:
    sizes = []
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(ticks):
        step()
        sizes.append(population())
    return time.perf_counter() - wall, time.process_time() - cpu, statistics.fmean(sizes)


def run_ours(agents: int, ticks: int, seed: int, params: str) -> Run:
    config = our_config(agents, ticks, seed, params)
    capacity = None if dataset_path(*SUGAR_MAP_PARTS) else load_sugar_map(_mesa_map_path())
    world = SugarscapeWorld(config, sugar_capacity=capacity)
    wall, cpu, pop = _timed(world.step, ticks, lambda: world.alive)
    return Run(wall, cpu, pop, world.stats.attempted, world.stats.completed)


@contextlib.contextmanager
def _mesa_adjacent_trade() -> Iterator[Any]:
    """Mesa's example with traders trading only with their von Neumann neighbours (our meeting rule)."""
    from mesa.examples.advanced.sugarscape_g1mt import model as mesa_model
    from mesa.examples.advanced.sugarscape_g1mt.agents import Trader

    class AdjacentTrader(Trader):
        def trade_with_neighbors(self) -> None:
            for other in self.cell.get_neighborhood(radius=1).agents:
                self.trade(other)

    original = mesa_model.Trader
    mesa_model.Trader = AdjacentTrader
    try:
        yield mesa_model.SugarscapeG1mt
    finally:
        mesa_model.Trader = original


def run_mesa(agents: int, ticks: int, seed: int, params: str, collect: bool = True) -> Run:
    with _mesa_adjacent_trade() as model_class, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the example's price reporter averages empty lists
        model = model_class(**mesa_kwargs(agents, seed, params))
        if not collect:
            model.datacollector.collect = lambda _model: None
            model.datacollector._agent_records = defaultdict(list)
        wall, cpu, pop = _timed(model.step, ticks, lambda: len(model.agents))
    return Run(wall, cpu, pop)


SIDES: dict[str, Callable[[int, int, int, str], Run]] = {
    "ours": run_ours,
    "mesa": run_mesa,
    "mesa_no_collector": partial(run_mesa, collect=False),
}


def bench(agents: int, ticks: int, seeds: int, repeats: int, params: str) -> dict[str, Any]:
    runs: dict[str, dict[int, list[Run]]] = {side: defaultdict(list) for side in SIDES}
    for _ in range(repeats):  # interleave the sides so that machine load hits them alike
        for seed in range(seeds):
            for side, run in SIDES.items():
                runs[side][seed].append(run(agents, ticks, seed, params))

    def rate(side: str, clock: str, pick: Callable[[list[float]], float]) -> float:
        return seeds * ticks / sum(pick([getattr(r, clock) for r in rs]) for rs in runs[side].values())

    row: dict[str, Any] = {"params": params, **PARAMETER_SETS[params], "agents": agents, "ticks": ticks}
    row |= {"seeds": seeds, "repeats": repeats}
    for side in SIDES:
        row[f"{side}_ticks_per_s"] = rate(side, "wall", min)
        row[f"{side}_ticks_per_s_median"] = rate(side, "wall", statistics.median)
        row[f"{side}_cpu_ticks_per_s"] = rate(side, "cpu", min)
    row["ratio"] = row["ours_ticks_per_s"] / row["mesa_ticks_per_s"]
    row["ratio_median"] = row["ours_ticks_per_s_median"] / row["mesa_ticks_per_s_median"]
    row["ratio_cpu"] = row["ours_cpu_ticks_per_s"] / row["mesa_cpu_ticks_per_s"]
    row["ratio_vs_no_collector"] = row["ours_ticks_per_s"] / row["mesa_no_collector_ticks_per_s"]
    ours = [r for rs in runs["ours"].values() for r in rs]
    row["mean_population_ours"] = statistics.fmean(r.population for r in ours)
    row["mean_population_mesa"] = statistics.fmean(r.population for rs in runs["mesa"].values() for r in rs)
    row["ours_meetings_per_tick"] = sum(r.meetings for r in ours) / (len(ours) * ticks)
    row["ours_trades_per_tick"] = sum(r.trades for r in ours) / (len(ours) * ticks)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--params", nargs="+", choices=sorted(PARAMETER_SETS), default=["mesa", "issue"])
    args = parser.parse_args(argv)
    import mesa

    load_before = os.getloadavg()
    rows = [bench(n, args.ticks, args.seeds, args.repeats, p) for p in args.params for n in args.agents]
    load_after = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "load_average_before_after": [load_before[0], load_after[0]],
                "python": platform.python_version(),
                "mesa": mesa.__version__,
                "command": "python -m benchmarks.bench_sugarscape " + " ".join(sys.argv[1:] if argv is None else argv),
                "rules_differences": DIFFERENCES,
                "rows": rows,
            },
            indent=2,
        )
    )
    columns = (
        ("params", "params", "{:>6s}"),
        ("agents", "agents", "{:6d}"),
        ("ours_ticks_per_s", "ours t/s", "{:9.0f}"),
        ("mesa_ticks_per_s", "mesa t/s", "{:9.0f}"),
        ("ratio", "ratio", "{:6.1f}"),
        ("ratio_median", "median", "{:6.1f}"),
        ("ratio_cpu", "cpu", "{:6.1f}"),
        ("ratio_vs_no_collector", "vs-nc", "{:6.1f}"),
        ("mean_population_ours", "pop ours", "{:8.1f}"),
        ("mean_population_mesa", "pop mesa", "{:8.1f}"),
    )
    print(" ".join(f"{title:>{len(fmt.format(rows[0][key]))}s}" for key, title, fmt in columns))
    for r in rows:
        print(" ".join(fmt.format(r[key]) for key, _, fmt in columns))
    print(f"written to {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
