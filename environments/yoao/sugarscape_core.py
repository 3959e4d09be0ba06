"""The Sugarscape world with sugar and spice (Epstein & Axtell, ch. IV), vectorised with numpy.

This module holds everything that runs without language models: the configuration, the landscapes
(a generated two-peak map, or the classic 50x50 Epstein-Axtell map read from the shared data folder),
the Cobb-Douglas welfare and the marginal-rate-of-substitution (MRS) trade rule, and `SugarscapeWorld`,
whose tick is split in phases so that trades can be settled either by the built-in MRS rule (`step`) or
by negotiated encounters between agents (environments/yoao/sugarscape.py).

Vectorisation: every live agent's attributes are numpy arrays (rows compacted when agents die), and
the grid is a flat array of cells. Movement scores all cells in every agent's sight at once through a
per-tick table of log-welfare indexed by (agent, sugar level, spice level) of a cell, so a tick costs a
fixed number of numpy calls whatever the population; only the trade of agents that meet is a Python
loop (over the meetings of the tick, usually few).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from environments.core.base import ScenarioError
from environments.core.data import DataFileError, dataset_path
from environments.core.quoting import quote, show

ORIGINS = ("altruist", "exploiter", "survivor")
"""Origin identities of the agents."""
ORIGIN_LEANING: dict[str, float] = {"altruist": 0.8, "exploiter": -0.8, "survivor": 0.0}
"""Initial identity leaning of each origin, on the scale -1 (bad) .. +1 (good)."""
_PAIR_KEYS = [["-".join(sorted((a, b))) for b in ORIGINS] for a in ORIGINS]
"""Origin codes -> "altruist-exploiter"-style key of the origin pair (names sorted)."""
LEANING_THRESHOLD = 0.3
"""|leaning| above which an agent is labelled good- or bad-leaning."""
SUGAR_MAP_PARTS = ("sugarscape", "sugar-map.txt")
"""Where the classic Epstein-Axtell sugar map lives inside the shared data folder."""
STARVATION = "starvation"
OLD_AGE = "old_age"
_DIST_WEIGHT = 1e-10
"""Weight of the distance in the movement key: breaks ties between equal welfare, never outweighs welfare."""
_VARIANTS = 8
"""Number of precomputed random orders of the directions (one is drawn per tick for random tie-breaking)."""
_PREFERENCE_HEAD = 8
"""How many of its best cells a displaced agent has sorted in the batch (more are sorted when needed)."""
MAX_STOCK = 1_000_000
"""Upper bound on any sugar or spice stock, endowment, metabolism and offered amount. Memory grows with
stocks (`best_deal` scans every exchange up to the stocks; the movement keeps a table of logarithms up to the
largest stock), so stocks of 10**13 ran out of memory; at 10**6 an encounter needs at most ~100 MB. A world
stays far below it (an agent harvests at most `max_capacity` <= 100 per tick)."""
MAX_TICKS = 1_000_000
"""Upper bound on `max_ticks`."""


def leaning_label(leaning: float) -> str:
    """good-leaning above +0.3, bad-leaning below -0.3, otherwise mixed."""
    if leaning > LEANING_THRESHOLD:
        return "good-leaning"
    if leaning < -LEANING_THRESHOLD:
        return "bad-leaning"
    return "mixed"


def clip_leaning(value: float) -> float:
    return min(1.0, max(-1.0, float(value)))


# ---------------------------------------------------------------------------------------------- config
def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _as_range(name: str, value: Any, maximum: int = MAX_STOCK) -> tuple[int, int]:
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
        raise ScenarioError(f"sugarscape: {name} must be a pair (low, high) of integers, got {quote(value)}")
    if not all(_is_int(v) for v in value):
        raise ScenarioError(f"sugarscape: {name} must be a pair (low, high) of integers, got {quote(value)}")
    lo, hi = (int(v) for v in value)
    if lo > hi:
        raise ScenarioError(f"sugarscape: {name} low {lo} exceeds high {hi}")
    if hi > maximum:
        raise ScenarioError(f"sugarscape: {name} high {hi} exceeds the bound {maximum:,}")
    return lo, hi


def _as_mix(value: Any) -> tuple[tuple[str, float], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    try:
        mix = tuple((str(name), float(share)) for name, share in items)
    except (TypeError, ValueError):
        raise ScenarioError(f"sugarscape: origin_mix must map origins to shares, got {quote(value)}") from None
    for name, share in mix:
        if name not in ORIGINS:
            raise ScenarioError(f"sugarscape: unknown origin {quote(name)} in origin_mix; known: {', '.join(ORIGINS)}")
        if not share >= 0.0:
            raise ScenarioError(f"sugarscape: origin share of {name} must be >= 0, got {share}")
    if len({name for name, _ in mix}) != len(mix):
        raise ScenarioError(f"sugarscape: origin_mix names an origin twice: {quote(value)}")
    if abs(sum(share for _, share in mix) - 1.0) > 1e-6:
        raise ScenarioError(f"sugarscape: origin shares must sum to 1, got {sum(s for _, s in mix):.6f}")
    return mix


@dataclass(frozen=True)
class SugarscapeConfig:
    """Parameters of a Sugarscape run. Ranges are inclusive (low, high) pairs drawn uniformly per agent."""

    width: int = 20
    """Columns of the grid (>= 3)."""
    height: int = 20
    """Rows of the grid (>= 3)."""
    landscape: str = "generated"
    """"generated": two seeded sugar peaks (NE, SW) of height `max_capacity`; "epstein-axtell": the classic
    map read from shared/data/sugarscape/sugar-map.txt (its size must equal width x height, 50 x 50).
    Spice capacity is always the sugar map mirrored left-right (as Mesa's sugarscape_g1mt does), so its
    peaks lie NW and SE."""
    max_capacity: int = 4
    """Height of the generated peaks (largest cell capacity); ignored for the Epstein-Axtell map."""
    n_agents: int = 100
    """Initial population; agents are placed on distinct cells, so at most width x height."""
    sugar_endowment: tuple[int, int] = (5, 25)
    """Initial sugar of an agent."""
    spice_endowment: tuple[int, int] = (5, 25)
    """Initial spice of an agent."""
    sugar_metabolism: tuple[int, int] = (1, 4)
    """Sugar burnt per tick (>= 1)."""
    spice_metabolism: tuple[int, int] = (1, 4)
    """Spice burnt per tick (>= 1)."""
    vision: tuple[int, int] = (1, 6)
    """How many cells an agent sees (>= 1, and 2 x high < min(width, height) so that sight never wraps onto
    itself)."""
    max_age: tuple[int, int] = (60, 100)
    """Age (ticks) after which an agent dies of old age."""
    growback: int = 1
    """Units of sugar and of spice every cell regrows per tick, up to its capacity."""
    origin_mix: tuple[tuple[str, float], ...] = (("altruist", 0.2), ("exploiter", 0.6), ("survivor", 0.2))
    """Share of each origin identity (a mapping is accepted too); counts are rounded by largest remainder."""
    torus: bool = True
    """Edges wrap (movement, sight and meetings cross them). False: a bounded grid, as in Mesa's example."""
    vision_shape: str = "lattice"
    """"lattice": agents look along the 4 lattice directions only (Epstein-Axtell); "diamond": every cell
    within Manhattan distance `vision` (Mesa's von Neumann neighbourhood)."""
    starve_at_zero: bool = False
    """False: an agent starves when a stock is below 0 after metabolism. True: also at exactly 0 (Mesa)."""
    trade: bool = True
    """Whether agents on neighbouring cells meet and trade."""
    max_ticks: int = 100
    """Length of a run (it also stops when every agent is dead)."""
    window: int = 20
    """Width in ticks of the windows over which trade success is reported."""
    seed: int = 0
    """Seed of everything random in the run (landscape jitter, agents, move order, meeting order)."""

    def __post_init__(self) -> None:
        for name in ("sugar_endowment", "spice_endowment", "sugar_metabolism", "spice_metabolism", "vision", "max_age"):
            object.__setattr__(self, name, _as_range(name, getattr(self, name)))
        object.__setattr__(self, "origin_mix", _as_mix(self.origin_mix))
        self._check_types()
        self._check_grid()
        self._check_agents()
        self._check_run()

    def _check_types(self) -> None:
        for name in ("width", "height", "max_capacity", "n_agents", "growback", "max_ticks", "window", "seed"):
            if not _is_int(getattr(self, name)):
                raise ScenarioError(f"sugarscape: {name} must be an integer, got {quote(getattr(self, name))}")
        for name in ("torus", "starve_at_zero", "trade"):
            if not isinstance(getattr(self, name), bool):
                raise ScenarioError(f"sugarscape: {name} must be True or False, got {quote(getattr(self, name))}")
        for name in ("landscape", "vision_shape"):
            if not isinstance(getattr(self, name), str):
                raise ScenarioError(f"sugarscape: {name} must be a string, got {quote(getattr(self, name))}")

    def _check_grid(self) -> None:
        if self.width < 3 or self.height < 3:
            raise ScenarioError(f"sugarscape: the grid must be at least 3x3, got {self.width}x{self.height}")
        if self.landscape not in ("generated", "epstein-axtell"):
            raise ScenarioError(
                f"sugarscape: landscape must be 'generated' or 'epstein-axtell', got {quote(self.landscape)}"
            )
        if not 1 <= self.max_capacity <= 100:
            raise ScenarioError(f"sugarscape: max_capacity must lie in [1, 100], got {self.max_capacity}")
        if self.growback < 0:
            raise ScenarioError(f"sugarscape: growback must be >= 0, got {self.growback}")
        if self.vision_shape not in ("lattice", "diamond"):
            raise ScenarioError(
                f"sugarscape: vision_shape must be 'lattice' or 'diamond', got {quote(self.vision_shape)}"
            )

    def _check_agents(self) -> None:
        cells = self.width * self.height
        if not 0 <= self.n_agents <= cells:
            raise ScenarioError(
                f"sugarscape: n_agents must lie in [0, {cells}] (one agent per cell), got {self.n_agents}"
            )
        for name in ("sugar_endowment", "spice_endowment"):
            if getattr(self, name)[0] < 0:
                raise ScenarioError(f"sugarscape: {name} must be >= 0, got {getattr(self, name)}")
        for name in ("sugar_metabolism", "spice_metabolism", "max_age"):
            if getattr(self, name)[0] < 1:
                raise ScenarioError(f"sugarscape: {name} must be >= 1, got {getattr(self, name)}")
        lo, hi = self.vision
        if lo < 1 or 2 * hi >= min(self.width, self.height):
            raise ScenarioError(
                f"sugarscape: vision {self.vision} must satisfy 1 <= low and 2 x high < min(width, height) = "
                f"{min(self.width, self.height)}"
            )

    def _check_run(self) -> None:
        if not 0 <= self.max_ticks <= MAX_TICKS:
            raise ScenarioError(f"sugarscape: max_ticks must lie in [0, {MAX_TICKS:,}], got {self.max_ticks}")
        if self.window < 1:
            raise ScenarioError(f"sugarscape: window must be >= 1, got {self.window}")

    @classmethod
    def classic(cls, **overrides: Any) -> SugarscapeConfig:
        """The 50 x 50 Epstein-Axtell landscape (needs the shared data folder)."""
        return cls(**{"width": 50, "height": 50, "landscape": "epstein-axtell", **overrides})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# ------------------------------------------------------------------------------------------- landscape
_MAX_CAPACITY_CHARS = 32
"""Longest capacity token read (a capacity is a small whole number; a longer token is corrupt, not parsed)."""


def _parse_map_line(path: Path, lineno: int, line: str) -> list[int]:
    values = []
    for column, token in enumerate(line.split(), start=1):
        try:
            number = float(token) if len(token) <= _MAX_CAPACITY_CHARS else math.inf
        except ValueError:
            raise DataFileError(path, f"{quote(token)} is not a number", lineno, f"column {column}") from None
        if not number.is_integer() or number < 0:
            raise DataFileError(path, f"capacity {show(token)} is not a whole number >= 0", lineno, f"column {column}")
        values.append(int(number))
    return values


def load_sugar_map(path: str | Path) -> np.ndarray:
    """Read a whitespace-separated capacity map (one row per line) as an int array of shape (rows, cols).

    Raises DataFileError naming the file and, for a malformed row, the 1-based line number as `record`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFileError(path, f"cannot read the file: {exc}") from None
    rows: list[list[int]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row = _parse_map_line(path, lineno, line)
        if rows and len(row) != len(rows[0]):
            raise DataFileError(
                path, f"row has {len(row)} values, the rows above have {len(rows[0])}", lineno, "columns"
            )
        rows.append(row)
    if not rows:
        raise DataFileError(path, "the map is empty")
    return np.asarray(rows, dtype=np.int64)


def classic_sugar_map() -> np.ndarray:
    """The Epstein-Axtell 50 x 50 sugar map from the shared data folder."""
    path = dataset_path(*SUGAR_MAP_PARTS)
    if path is None:
        raise DataFileError(
            Path("shared/data", *SUGAR_MAP_PARTS), "not found (set SOCIALRL_SHARED_DATA or use landscape='generated')"
        )
    return load_sugar_map(path)


def generate_sugar_map(
    width: int, height: int, max_capacity: int, rng: np.random.Generator, torus: bool = True
) -> np.ndarray:
    """Two sugar peaks of height `max_capacity`, north-east and south-west (positions jittered by the seed),
    falling off linearly with the distance to the nearer peak to 0 at 0.45 x min(width, height)."""
    jitter = max(0, min(width, height) // 10)
    peaks = [(height / 4, 3 * width / 4), (3 * height / 4, width / 4)]
    rows, cols = np.mgrid[0:height, 0:width]
    radius = 0.45 * min(width, height)
    nearest = np.full((height, width), np.inf)
    for pr, pc in peaks:
        pr += rng.integers(-jitter, jitter + 1)
        pc += rng.integers(-jitter, jitter + 1)
        dr, dc = np.abs(rows - pr), np.abs(cols - pc)
        if torus:
            dr, dc = np.minimum(dr, height - dr), np.minimum(dc, width - dc)
        nearest = np.minimum(nearest, np.hypot(dr, dc))
    capacity = np.ceil(max_capacity * (1.0 - nearest / radius))
    return np.clip(capacity, 0, max_capacity).astype(np.int64)


def spice_map_of(sugar_map: np.ndarray) -> np.ndarray:
    """Spice capacity: the sugar map mirrored left-right (Mesa's sugarscape_g1mt does the same)."""
    return np.ascontiguousarray(np.flip(sugar_map, axis=1))


# ------------------------------------------------------------------------------------ welfare and MRS
def welfare(sugar: float, spice: float, metabolism_sugar: float, metabolism_spice: float) -> float:
    """Cobb-Douglas welfare W = sugar^(ms/mt) * spice^(mp/mt), mt = ms + mp (Growing Artificial Societies, p. 97)."""
    if sugar <= 0 or spice <= 0:
        return 0.0
    total = metabolism_sugar + metabolism_spice
    return sugar ** (metabolism_sugar / total) * spice ** (metabolism_spice / total)


def mrs(sugar: float, spice: float, metabolism_sugar: float, metabolism_spice: float) -> float:
    """Marginal rate of substitution (spice / spice metabolism) / (sugar / sugar metabolism): how many units
    of spice the agent would give for one unit of sugar. High MRS: sugar is scarce for it, it buys sugar."""
    return (spice / metabolism_spice) / (sugar / metabolism_sugar)


def unit_exchange(price: float) -> tuple[int, int]:
    """Sugar and spice changing hands in one MRS trade step at `price` (spice per sugar): 1 sugar for
    int(price) spice when price >= 1, else int(1 / price) sugar for 1 spice (Mesa's sugarscape_g1mt)."""
    if price >= 1:
        return 1, int(price)
    return int(1 / price), 1


def mrs_trade(a: Sequence[int], b: Sequence[int], max_steps: int = 100_000) -> tuple[int, int]:
    """Trade between two agents by the Epstein-Axtell MRS rule; returns (sugar a->b, spice a->b), signed.

    `a` and `b` are (sugar, spice, sugar metabolism, spice metabolism). Repeated one step at a time: the
    price is the geometric mean of the two MRS; the agent with the higher MRS buys sugar with spice
    (`unit_exchange`); a step happens only if both welfares strictly rise, every stock stays above 0 and
    the buyer's MRS stays above the seller's afterwards; trading stops at the first step that fails or
    when the MRS are equal (math.isclose). An agent holding none of a resource has no MRS: no trade."""
    return _mrs_trade(*a, *b, max_steps)


def _mrs_trade(
    sa: int, pa: int, msa: int, mpa: int, sb: int, pb: int, msb: int, mpb: int, max_steps: int
) -> tuple[int, int]:
    if sa <= 0 or pa <= 0 or sb <= 0 or pb <= 0:
        return 0, 0
    sa0, pa0 = sa, pa
    ea, eb = msa / (msa + mpa), msb / (msb + mpb)
    mrs_a, mrs_b = (pa / mpa) / (sa / msa), (pb / mpb) / (sb / msb)
    wa = wb = -1.0  # welfare before the step, computed when first needed
    for _ in range(max_steps):
        if abs(mrs_a - mrs_b) <= 1e-09 * max(mrs_a, mrs_b):  # math.isclose, inlined (MRS > 0)
            break
        price = math.sqrt(mrs_a * mrs_b)
        sugar, spice = (1, int(price)) if price >= 1 else (int(1 / price), 1)
        if mrs_a < mrs_b:  # a sells sugar for spice
            sugar, spice = -sugar, -spice
        na, npa, nb, npb = sa + sugar, pa - spice, sb - sugar, pb + spice
        if na <= 0 or npa <= 0 or nb <= 0 or npb <= 0:
            break
        nmrs_a, nmrs_b = (npa / mpa) / (na / msa), (npb / mpb) / (nb / msb)
        if (nmrs_a - nmrs_b) * sugar <= 0:
            break  # the MRS would cross (or meet)
        if wa < 0:
            wa, wb = sa**ea * pa ** (1 - ea), sb**eb * pb ** (1 - eb)
        nwa, nwb = na**ea * npa ** (1 - ea), nb**eb * npb ** (1 - eb)
        if nwa <= wa or nwb <= wb:
            break
        sa, pa, sb, pb, wa, wb, mrs_a, mrs_b = na, npa, nb, npb, nwa, nwb, nmrs_a, nmrs_b
    return sa0 - sa, pa0 - pa


def best_deal(own: Sequence[int], other: Sequence[int], strict: bool = False) -> tuple[int, int, float]:
    """The integer exchange that maximises own welfare while the other keeps at least its welfare before
    (strictly more when `strict`); returns (sugar own->other, spice own->other, own welfare after).

    For each sugar transfer x the other's participation bounds the spice it can give in closed form, so the
    search is one numpy pass over x. With `strict` the no-trade exchange is excluded and the result is
    checked exactly; (0, 0, own welfare) is returned when no such exchange improves own welfare."""
    so, po, mso, mpo = (int(v) for v in own)
    st, pt, mst, mpt = (int(v) for v in other)
    w_own, w_other = welfare(so, po, mso, mpo), welfare(st, pt, mst, mpt)
    x = np.arange(-st, so + 1)  # sugar own gives (negative: receives)
    sugar_other = (st + x).astype(float)
    a_t = mst / (mst + mpt)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        need = (w_other / sugar_other**a_t) ** (1.0 / (1.0 - a_t))  # spice the other must keep
    need = np.where(sugar_other > 0, need, 0.0 if (w_other == 0 and not strict) else np.inf)
    slack = pt - need
    y = np.ceil(slack - 1e-9) - 1 if strict else np.floor(slack + 1e-9)  # spice own receives
    y = np.minimum(y, pt)
    ok = np.isfinite(y) & (y >= -po) & (so - x >= 0)
    if strict:
        ok &= (x != 0) | (y != 0)
    if not ok.any():
        return 0, 0, w_own
    a_o = mso / (mso + mpo)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(ok, (so - x) ** a_o * np.maximum(po + y, 0) ** (1.0 - a_o), -np.inf)
    candidates = np.flatnonzero(ok)
    for i in candidates[np.argsort(-value[candidates], kind="stable")][:8]:
        gx, gy = int(x[i]), int(y[i])
        while strict and gy > -po and welfare(st + gx, pt - gy, mst, mpt) <= w_other:
            gy -= 1  # float safety: make the other's gain exact
        w_after = welfare(so - gx, po + gy, mso, mpo)
        if not strict or (w_after > w_own and welfare(st + gx, pt - gy, mst, mpt) > w_other):
            return gx, -gy, w_after
    return 0, 0, w_own


# ------------------------------------------------------------------------------------------- the world
@dataclass(frozen=True)
class AgentInit:
    """An agent placed by hand (tests, examples); unset attributes are drawn from the config's ranges."""

    row: int
    col: int
    sugar: int | None = None
    spice: int | None = None
    metabolism_sugar: int | None = None
    metabolism_spice: int | None = None
    vision: int | None = None
    max_age: int | None = None
    origin: str | None = None
    age: int = 0

    def __post_init__(self) -> None:
        for name in ("row", "col", "age"):
            if not _is_int(getattr(self, name)):
                raise ScenarioError(
                    f"sugarscape: AgentInit.{name} must be an integer, got {quote(getattr(self, name))}"
                )
        for name in ("sugar", "spice", "metabolism_sugar", "metabolism_spice", "vision", "max_age"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or not 0 <= value <= MAX_STOCK):
                raise ScenarioError(
                    f"sugarscape: AgentInit.{name} must be None or a whole number in [0, {MAX_STOCK:,}], got {quote(value)}"
                )
        if self.origin is not None and self.origin not in ORIGINS:
            raise ScenarioError(
                f"sugarscape: AgentInit.origin must be one of {', '.join(ORIGINS)}, got {quote(self.origin)}"
            )


@dataclass(frozen=True)
class DeathRecord:
    """An agent that died."""

    agent_id: int
    tick: int
    cause: str
    """"starvation" or "old_age" (starvation wins when both apply in the same tick)."""
    age: int
    sugar: int
    """Sugar left at death (after metabolism, never below 0)."""
    spice: int
    origin: str
    leaning: float


@dataclass(frozen=True)
class TickReport:
    """Resource flows of one tick, for conservation checks and monitoring."""

    tick: int
    alive: int
    """Agents alive at the end of the tick."""
    growback: tuple[int, int]
    """Sugar and spice regrown on the cells."""
    harvested: tuple[int, int]
    """Sugar and spice moved from cells to agents."""
    consumed: tuple[int, int]
    """Sugar and spice burnt by metabolism (what the agents held, at most their metabolism)."""
    dead_resources: tuple[int, int]
    """Sugar and spice held by the agents that died (removed with them)."""
    deaths: tuple[int, int]
    """Deaths by starvation and by old age."""
    encounters: int
    trades: int


@dataclass
class _TradeStats:
    attempted: int = 0
    completed: int = 0
    by_pair: dict[str, list[int]] = field(default_factory=dict)
    by_window: dict[int, list[int]] = field(default_factory=dict)
    invalid_actions: int = 0
    rejected_deals: int = 0


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def gini(values: np.ndarray) -> float:
    """Gini coefficient of non-negative values (0 = equal); 0 for an empty or all-zero array."""
    v = np.sort(np.asarray(values, dtype=float))
    if v.size == 0 or v.sum() <= 0:
        return 0.0
    ranks = np.arange(1, v.size + 1)
    return float((2 * ranks - v.size - 1) @ v / (v.size * v.sum()))


class SugarscapeWorld:
    """Grid, agents and the tick, vectorised.

    A tick is `begin_tick()` (growback, movement and harvest; returns the meetings of the tick), the trades
    of those meetings (`trade_mrs` for the built-in rule, or `apply_trade` with negotiated deals), then
    `end_tick()` (metabolism, ageing, death). `step()` does all three with the MRS rule.

    Movement is simultaneous: every agent looks over the cells in its sight (see
    `SugarscapeConfig.vision_shape`) and claims the free cell (or its own) that maximises its Cobb-Douglas
    welfare after harvesting it; ties go to the nearer cell, then to a random order of the directions drawn
    per tick. Cells occupied at the start of the tick are not free. A cell claimed by several agents goes
    to the earliest of them in a random order of the tick; the others, in that order, each take their best
    cell among those nobody has claimed. The agent then harvests everything on its cell.

    Meetings: every pair of agents on von Neumann neighbouring cells (across the edges on a torus) meets
    once per tick, in a random order; `trade_rounds` groups them into rounds of disjoint pairs that keep
    that order for every agent, so negotiating a round concurrently gives the same result as sequentially.

    Layout: live agents are rows of `stock` (2 x n: sugar, spice), `met` (2 x n metabolisms), `pos` (flat
    cell), `vision`, `age`, `max_age` and `ids`, compacted when agents die; `origin`, `leaning` and
    `leaning_start` are indexed by agent id. `grid` and `capacity` are 2 x (cells + 1): the last column is
    an "outside" cell (capacity 0, never free) that sight beyond a bounded grid points to.
    """

    def __init__(
        self,
        config: SugarscapeConfig,
        *,
        sugar_capacity: np.ndarray | None = None,
        spice_capacity: np.ndarray | None = None,
        agents: Sequence[AgentInit] | None = None,
    ) -> None:
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.tick = 0
        self._in_tick = False
        self._init_grid(sugar_capacity, spice_capacity)
        self._init_sight()
        self._init_agents(agents)
        self.deaths: list[DeathRecord] = []
        self.population: list[int] = []
        self.stats = _TradeStats()
        self._tick_encounters = 0
        self._tick_trades = 0
        self._flows: dict[str, tuple[int, int]] = {}
        self._cell_totals = self.grid[:, :-1].sum(axis=1)

    # ------------------------------------------------------------------------------------ construction
    def _init_grid(self, sugar_capacity: np.ndarray | None, spice_capacity: np.ndarray | None) -> None:
        cfg = self.config
        if sugar_capacity is None:
            if cfg.landscape == "epstein-axtell":
                sugar_capacity = classic_sugar_map()
            else:
                sugar_capacity = generate_sugar_map(cfg.width, cfg.height, cfg.max_capacity, self.rng, cfg.torus)
        sugar_capacity = np.asarray(sugar_capacity, dtype=np.int64)
        spice_capacity = (
            spice_map_of(sugar_capacity) if spice_capacity is None else np.asarray(spice_capacity, np.int64)
        )
        for name, cap in (("sugar", sugar_capacity), ("spice", spice_capacity)):
            if cap.shape != (cfg.height, cfg.width):
                raise ScenarioError(
                    f"sugarscape: the {name} map is {'x'.join(map(str, cap.shape))} (rows x cols) but the config "
                    f"asks for height x width = {cfg.height}x{cfg.width}"
                )
            if cap.min() < 0:
                raise ScenarioError(f"sugarscape: the {name} map has a negative capacity")
        self.cells = cfg.width * cfg.height
        self.levels = int(max(sugar_capacity.max(), spice_capacity.max())) + 1
        # The outside cell holds (levels, 0): its code sugar * levels + spice is the "never free" code.
        self.capacity = np.zeros((2, self.cells + 1), dtype=np.int64)
        self.capacity[0, :-1] = sugar_capacity.ravel()
        self.capacity[1, :-1] = spice_capacity.ravel()
        self.capacity[0, -1] = self.levels
        self.grid = self.capacity.copy()
        self.occupant = np.full(self.cells + 1, -1, dtype=np.int64)

    def _offsets(self) -> tuple[np.ndarray, np.ndarray]:
        vmax = self.config.vision[1]
        if self.config.vision_shape == "lattice":
            offs = [(0, 0)] + [o for d in range(1, vmax + 1) for o in ((-d, 0), (d, 0), (0, -d), (0, d))]
        else:
            square = [(dr, dc) for dr in range(-vmax, vmax + 1) for dc in range(-vmax, vmax + 1)]
            offs = sorted(
                (o for o in square if abs(o[0]) + abs(o[1]) <= vmax), key=lambda o: (o[0] ** 2 + o[1] ** 2, o)
            )
        offsets = np.asarray(offs, dtype=np.int64)
        reach = np.abs(offsets).sum(axis=1) if self.config.vision_shape == "diamond" else np.abs(offsets).max(axis=1)
        return offsets, reach

    def _cell_of(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Flat cell index, wrapped on a torus, the outside cell off a bounded grid."""
        h, w = self.config.height, self.config.width
        if self.config.torus:
            return (rows % h) * w + (cols % w)
        inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
        return np.where(inside, rows * w + cols, self.cells)

    def _init_sight(self) -> None:
        offsets, reach = self._offsets()
        self.reach = reach
        self.distance = np.hypot(offsets[:, 0], offsets[:, 1])
        rows, cols = np.divmod(np.arange(self.cells), self.config.width)
        table = self._cell_of(rows[:, None] + offsets[None, :, 0], cols[:, None] + offsets[None, :, 1])
        table = np.append(table, np.full((1, len(offsets)), self.cells), axis=0)
        # Random orders of the columns that only permute directions of equal reach and distance.
        groups: dict[tuple[int, float], list[int]] = {}
        for k in range(1, len(offsets)):
            groups.setdefault((int(reach[k]), round(float(self.distance[k]), 9)), []).append(k)
        perm_rng = np.random.default_rng([self.config.seed, 7])
        self._sight = []
        for _ in range(_VARIANTS):
            perm = np.arange(len(offsets))
            for members in groups.values():
                perm[members] = perm_rng.permutation(members)
            self._sight.append(np.ascontiguousarray(table[:, perm]))
        self.neighbours = np.stack([self._cell_of(rows, cols + 1), self._cell_of(rows + 1, cols)])
        self.neighbours = np.append(self.neighbours, np.full((2, 1), self.cells), axis=1)
        """2 x (cells + 1): the right and the lower neighbour of every cell (outside off a bounded grid)."""
        self._log_table = np.empty(0)  # log(0..size-1), grown on demand
        self._variants: list[int] = []

    def _draw(self, bounds: tuple[int, int], n: int) -> np.ndarray:
        return self.rng.integers(bounds[0], bounds[1], size=n, endpoint=True)

    def _origins(self, n: int) -> np.ndarray:
        mix = self.config.origin_mix
        quotas = np.array([share * n for _, share in mix])
        counts = np.floor(quotas).astype(int)
        for i in np.argsort(-(quotas - counts), kind="stable")[: n - counts.sum()]:
            counts[i] += 1
        codes = [np.full(c, ORIGINS.index(name), dtype=np.int64) for (name, _), c in zip(mix, counts, strict=True)]
        return self.rng.permutation(np.concatenate(codes)) if n else np.zeros(0, np.int64)

    def _init_agents(self, agents: Sequence[AgentInit] | None) -> None:
        cfg = self.config
        n = cfg.n_agents if agents is None else len(agents)
        if agents is None:
            pos = self.rng.choice(self.cells, size=n, replace=False).astype(np.int64)
        else:
            pos = self._cell_of(np.array([a.row for a in agents]), np.array([a.col for a in agents])).astype(np.int64)
            if len(set(pos.tolist())) != n or (pos == self.cells).any():
                raise ScenarioError("sugarscape: hand-placed agents must stand on distinct cells inside the grid")
        cols = {
            "sugar": self._draw(cfg.sugar_endowment, n),
            "spice": self._draw(cfg.spice_endowment, n),
            "metabolism_sugar": self._draw(cfg.sugar_metabolism, n),
            "metabolism_spice": self._draw(cfg.spice_metabolism, n),
            "vision": self._draw(cfg.vision, n),
            "max_age": self._draw(cfg.max_age, n),
            "origin": self._origins(n),
            "age": np.zeros(n, np.int64),
        }
        for i, a in enumerate(agents or ()):
            for name in cols:
                value = getattr(a, name)
                if value is not None:
                    cols[name][i] = ORIGINS.index(value) if name == "origin" else value
        if agents is not None:
            self._check_hand_placed(cols)
        self.ids = np.arange(n, dtype=np.int64)
        self.pos = pos
        self.stock = np.stack([cols["sugar"], cols["spice"]]).astype(np.int64)
        self.met = np.stack([cols["metabolism_sugar"], cols["metabolism_spice"]]).astype(np.int64)
        self.vision, self.max_age, self.age = cols["vision"], cols["max_age"], cols["age"]
        self.origin = cols["origin"]
        self.leaning = np.array([ORIGIN_LEANING[ORIGINS[o]] for o in self.origin], dtype=float)
        self.leaning_start = self.leaning.copy()
        self._derive()

    def _check_hand_placed(self, cols: dict[str, np.ndarray]) -> None:
        if (cols["sugar"] < 0).any() or (cols["spice"] < 0).any():
            raise ScenarioError("sugarscape: stocks must be >= 0")
        if (cols["sugar"] > MAX_STOCK).any() or (cols["spice"] > MAX_STOCK).any():
            raise ScenarioError(f"sugarscape: stocks must be at most {MAX_STOCK:,}")
        if (cols["metabolism_sugar"] < 1).any() or (cols["metabolism_spice"] < 1).any():
            raise ScenarioError("sugarscape: metabolisms must be >= 1")
        if (cols["metabolism_sugar"] > MAX_STOCK).any() or (cols["metabolism_spice"] > MAX_STOCK).any():
            raise ScenarioError(f"sugarscape: metabolisms must be at most {MAX_STOCK:,}")
        if (cols["vision"] < 1).any() or (cols["vision"] > self.config.vision[1]).any():
            raise ScenarioError(f"sugarscape: vision must lie in [1, {self.config.vision[1]}]")
        if (cols["origin"] < 0).any():
            raise ScenarioError("sugarscape: unknown origin")

    def _derive(self) -> None:
        """Per-agent arrays derived from the attributes, built once; `_compact` keeps them in step after deaths."""
        n = len(self.ids)
        self.occupant[self.pos] = np.arange(n)
        self.alpha = self.met[0] / (self.met[0] + self.met[1])
        in_sight = self.reach[None, :] <= self.vision[:, None]
        self._penalty = np.where(in_sight, -_DIST_WEIGHT * self.distance[None, :], -np.inf)
        self._all_rows = np.arange(n)
        self._all_offsets = (self._all_rows * (self.levels + 1) * self.levels)[:, None]
        self._all_tables = np.full((n, self.levels + 1, self.levels), -np.inf)
        self._steps = np.arange(self.levels)
        self._origin_codes = self.origin[self.ids].tolist()
        self._views()

    def _views(self) -> None:
        n = len(self.ids)
        self._alpha3 = self.alpha[:, None, None]
        self._beta3 = 1.0 - self._alpha3
        self._rows = self._all_rows[:n]
        self._row_offset = self._all_offsets[:n]
        self._table = self._all_tables[:n]  # rows only ever shrink: views of the first allocation
        self._table_body = self._table[:, : self.levels, :]
        total = self.met.sum(axis=1)
        self._met_total = (int(total[0]), int(total[1]))

    def _compact(self, dead: np.ndarray) -> None:
        """Drop the rows of dead agents from every per-agent array."""
        self.occupant[self.pos[dead]] = -1
        keep = np.flatnonzero(~dead)
        self.stock, self.met = self.stock[:, keep], self.met[:, keep]
        self.ids, self.pos, self.vision = self.ids[keep], self.pos[keep], self.vision[keep]
        self.max_age, self.age, self.alpha = self.max_age[keep], self.age[keep], self.alpha[keep]
        self._penalty = self._penalty[keep]
        codes = self._origin_codes
        self._origin_codes = [codes[i] for i in keep.tolist()]
        self.occupant[self.pos] = self._all_rows[: len(keep)]
        self._views()

    # ----------------------------------------------------------------------------------------- views
    @property
    def alive(self) -> int:
        return len(self.ids)

    @property
    def finished(self) -> bool:
        return self.tick >= self.config.max_ticks or self.alive == 0

    def agent_state(self, row: int) -> dict[str, Any]:
        """One live agent's attributes (by row of the live arrays)."""
        agent_id = int(self.ids[row])
        return {
            "agent_id": agent_id,
            "row": int(self.pos[row] // self.config.width),
            "col": int(self.pos[row] % self.config.width),
            "sugar": int(self.stock[0, row]),
            "spice": int(self.stock[1, row]),
            "metabolism_sugar": int(self.met[0, row]),
            "metabolism_spice": int(self.met[1, row]),
            "vision": int(self.vision[row]),
            "age": int(self.age[row]),
            "max_age": int(self.max_age[row]),
            "origin": ORIGINS[int(self.origin[agent_id])],
            "leaning": float(self.leaning[agent_id]),
        }

    def welfare_of_agents(self) -> np.ndarray:
        """Cobb-Douglas welfare of every live agent."""
        s, p = self.stock.astype(float)
        return s**self.alpha * p ** (1 - self.alpha)

    def resources(self) -> dict[str, int]:
        """Totals held by agents and lying on cells."""
        agents, cells = self.stock.sum(axis=1), self.grid[:, :-1].sum(axis=1)
        return {
            "agent_sugar": int(agents[0]),
            "agent_spice": int(agents[1]),
            "cell_sugar": int(cells[0]),
            "cell_spice": int(cells[1]),
        }

    # ------------------------------------------------------------------------------------------ tick
    def begin_tick(self) -> list[tuple[int, int]]:
        """Growback, movement and harvest; returns the meetings of the tick as pairs of rows, in order."""
        if self._in_tick:
            raise RuntimeError("sugarscape: begin_tick() called twice without end_tick()")
        self._in_tick = True
        self._tick_encounters = self._tick_trades = 0
        self._growback()
        if self.alive:
            self._move_and_harvest()
        else:
            self._flows["harvested"] = (0, 0)
        return self._meetings() if self.config.trade else []

    def _growback(self) -> None:
        np.add(self.grid, self.config.growback, out=self.grid)
        np.minimum(self.grid, self.capacity, out=self.grid)
        totals = self.grid[:, :-1].sum(axis=1)
        grown = totals - self._cell_totals
        self._flows["growback"] = (int(grown[0]), int(grown[1]))
        self._cell_totals = totals

    def _log_welfare_table(self) -> np.ndarray:
        """(agents, levels + 1, levels): log-welfare after harvesting a cell holding (sugar, spice); -inf where
        that welfare is 0 (the cell is then never chosen over staying). The extra sugar level is the code of
        occupied and outside cells (-inf)."""
        amounts = self.stock[:, :, None] + self._steps  # 2 x n x levels
        try:
            logs = self._log_table[amounts]
        except IndexError:  # a stock outgrew the table of logarithms
            size = max(2 * int(amounts.max()) + 2, 1024)
            with np.errstate(divide="ignore"):
                self._log_table = np.log(np.arange(size, dtype=float))  # log 0 = -inf: welfare 0
            logs = self._log_table[amounts]
        np.add(self._alpha3 * logs[0][:, :, None], self._beta3 * logs[1][:, None, :], out=self._table_body)
        return self._table

    def _move_and_harvest(self) -> None:
        n, lv = len(self.ids), self.levels
        table = self._log_welfare_table()
        code = self.grid[0] * lv + self.grid[1]
        own = table.reshape(n, -1)[self._rows, code[self.pos]]
        code[self.pos] = lv * lv  # occupied (the outside cell has that code already)
        sight = self._sight[self._next_variant()][self.pos]
        index = code[sight]
        index += self._row_offset
        key = table.ravel()[index]
        key += self._penalty
        key[:, 0] = own
        target = sight[self._rows, key.argmax(axis=1)]
        target = self._resolve_claims(key, sight, target)
        self.occupant[self.pos] = -1
        self.occupant[target] = self._rows
        self.pos = target
        harvest = self.grid[:, target]
        self.stock += harvest
        self.grid[:, target] = 0
        got = harvest.sum(axis=1)
        self._flows["harvested"] = (int(got[0]), int(got[1]))
        self._cell_totals = self._cell_totals - got

    def _next_variant(self) -> int:
        """Index of this tick's random order of the directions (drawn in batches: one draw costs microseconds)."""
        if not self._variants:
            self._variants = self.rng.integers(_VARIANTS, size=256).tolist()[::-1]
        return self._variants.pop()

    def _resolve_claims(self, key: np.ndarray, sight: np.ndarray, first: np.ndarray) -> np.ndarray:
        """Cells claimed by several agents go to the earliest claimant in a random order of the tick; the
        others, in that order, each take their best cell (key descending; ties to the first column, as
        argmax) among the cells nobody has claimed yet. An agent's own cell is never claimed by another
        (occupied cells are -inf in every other key row), so everyone finds a cell."""
        n = len(first)
        rank = self.rng.permutation(n)
        order = np.argsort(first * n + rank)
        ranked = first[order]
        earliest = np.ones(n, dtype=bool)
        np.not_equal(ranked[1:], ranked[:-1], out=earliest[1:])
        if earliest.all():
            return first  # no cell is claimed twice
        losers = order[~earliest]
        losers = losers[np.argsort(rank[losers])]
        # The head of each loser's preferences is enough almost always; the full order is the fallback.
        head = np.argsort(-key[losers], axis=1, kind="stable")[:, :_PREFERENCE_HEAD]
        taken = set(ranked[earliest].tolist())
        cells = []
        for i, prefs in zip(losers.tolist(), sight[losers[:, None], head].tolist(), strict=True):
            for cell in prefs:
                if cell not in taken:
                    break
            else:
                full = sight[i, np.argsort(-key[i], kind="stable")].tolist()
                cell = next(c for c in full if c not in taken)
            taken.add(cell)
            cells.append(cell)
        target = first.copy()
        target[losers] = cells
        return target

    def _meetings(self) -> list[tuple[int, int]]:
        if len(self.ids) < 2:
            return []
        other = self.occupant[self.neighbours[:, self.pos]]  # 2 x n: agent to the right, agent below
        side, rows = np.nonzero(other >= 0)
        if rows.size == 0:
            return []
        partners = other[side, rows]
        order = self.rng.permutation(rows.size)
        return list(zip(rows[order].tolist(), partners[order].tolist(), strict=True))

    @staticmethod
    def trade_rounds(meetings: Sequence[tuple[int, int]]) -> list[list[tuple[int, int]]]:
        """Group meetings into rounds of disjoint pairs; an agent's meetings keep their order across rounds."""
        last: dict[int, int] = {}
        rounds: list[list[tuple[int, int]]] = []
        for a, b in meetings:
            r = max(last.get(a, -1), last.get(b, -1)) + 1
            if r == len(rounds):
                rounds.append([])
            rounds[r].append((a, b))
            last[a] = last[b] = r
        return rounds

    def trade_mrs(self, meetings: Sequence[tuple[int, int]]) -> None:
        """Settle meetings in order by the MRS rule (`mrs_trade`)."""
        if not meetings:
            return
        (s, p), (ms, mp) = self.stock.tolist(), self.met.tolist()
        outcomes = []
        for a, b in meetings:
            sugar, spice = _mrs_trade(s[a], p[a], ms[a], mp[a], s[b], p[b], ms[b], mp[b], 100_000)
            if sugar or spice:
                s[a], s[b], p[a], p[b] = s[a] - sugar, s[b] + sugar, p[a] - spice, p[b] + spice
                outcomes.append(True)
            else:
                outcomes.append(False)
        self.stock[0] = s
        self.stock[1] = p
        self.record_encounters(meetings, outcomes)

    def apply_trade(self, a: int, b: int, sugar_a_to_b: int, spice_a_to_b: int) -> bool:
        """Move resources between rows a and b atomically; refused (False, nothing moves, counted in
        `rejected_deals`) when a stock would fall below 0."""
        if not self._in_tick:
            raise RuntimeError("sugarscape: trades happen between begin_tick() and end_tick()")
        move = np.array([int(sugar_a_to_b), int(spice_a_to_b)], dtype=np.int64)
        new_a, new_b = self.stock[:, a] - move, self.stock[:, b] + move
        if (new_a < 0).any() or (new_b < 0).any():
            self.stats.rejected_deals += 1
            return False
        self.stock[:, a], self.stock[:, b] = new_a, new_b
        return True

    def set_leaning(self, row: int, value: float) -> float:
        """Set a live agent's identity leaning, clipped to [-1, 1] (non-finite values are ignored)."""
        agent_id = self.ids[row]
        if math.isfinite(value):
            self.leaning[agent_id] = clip_leaning(value)
        return float(self.leaning[agent_id])

    def record_encounter(self, a: int, b: int, traded: bool, invalid_actions: int = 0) -> None:
        """Count a meeting of rows a and b (overall, by origin pair, by window of ticks)."""
        self.record_encounters([(a, b)], [traded])
        self.stats.invalid_actions += invalid_actions

    def record_encounters(self, meetings: Sequence[tuple[int, int]], traded: Sequence[bool]) -> None:
        st, codes = self.stats, self._origin_codes
        window = st.by_window.setdefault(self.tick // self.config.window, [0, 0])
        for (a, b), done in zip(meetings, traded, strict=True):
            pair = st.by_pair.setdefault(_PAIR_KEYS[codes[a]][codes[b]], [0, 0])
            pair[0] += 1
            pair[1] += done
        completed = sum(traded)
        window[0] += len(meetings)
        window[1] += completed
        st.attempted += len(meetings)
        st.completed += completed
        self._tick_encounters += len(meetings)
        self._tick_trades += completed

    def end_tick(self) -> TickReport:
        """Metabolism, ageing and death; returns the tick's resource flows."""
        if not self._in_tick:
            raise RuntimeError("sugarscape: end_tick() called without begin_tick()")
        self._in_tick = False
        stock = self.stock
        stock -= self.met
        self.age += 1
        low = stock <= 0 if self.config.starve_at_zero else stock < 0
        starved = low[0] | low[1]
        dead = starved | (self.age > self.max_age)
        consumed, dead_res, deaths = self._met_total, (0, 0), (0, 0)
        if dead.any():
            unpaid = np.minimum(stock, 0).sum(axis=1)  # what starving agents could not burn
            consumed = (consumed[0] + int(unpaid[0]), consumed[1] + int(unpaid[1]))
            np.maximum(stock, 0, out=stock)
            left = stock[:, dead].sum(axis=1)
            dead_res = (int(left[0]), int(left[1]))
            deaths = (int(starved.sum()), int(dead.sum() - starved.sum()))
            self._bury(np.flatnonzero(dead), starved)
            self._compact(dead)
        report = TickReport(
            tick=self.tick,
            alive=self.alive,
            growback=self._flows["growback"],
            harvested=self._flows["harvested"],
            consumed=consumed,
            dead_resources=dead_res,
            deaths=deaths,
            encounters=self._tick_encounters,
            trades=self._tick_trades,
        )
        self.population.append(self.alive)
        self.tick += 1
        return report

    def _bury(self, rows: np.ndarray, starved: np.ndarray) -> None:
        for r in rows.tolist():
            agent_id = int(self.ids[r])
            self.deaths.append(
                DeathRecord(
                    agent_id=agent_id,
                    tick=self.tick,
                    cause=STARVATION if starved[r] else OLD_AGE,
                    age=int(self.age[r]),
                    sugar=int(self.stock[0, r]),
                    spice=int(self.stock[1, r]),
                    origin=ORIGINS[int(self.origin[agent_id])],
                    leaning=float(self.leaning[agent_id]),
                )
            )

    def step(self) -> TickReport:
        """One tick with trades settled by the MRS rule."""
        self.trade_mrs(self.begin_tick())
        return self.end_tick()

    def run(self) -> dict[str, Any]:
        """Run to the end with the MRS rule; returns `metrics()`."""
        while not self.finished:
            self.step()
        return self.metrics()

    # --------------------------------------------------------------------------------------- metrics
    def metrics(self) -> dict[str, Any]:
        """Trade success, survival, lifespans, wealth at death, identity shifts and welfare (JSON-safe)."""
        return {
            "ticks": self.tick,
            "alive": self.alive,
            "population": list(self.population),
            "trade": self._trade_metrics(),
            **self._death_metrics(),
            **self._identity_metrics(),
            "welfare": self._welfare_metrics(),
        }

    def _trade_metrics(self) -> dict[str, Any]:
        st, width = self.stats, self.config.window
        return {
            "attempted": st.attempted,
            "completed": st.completed,
            "success_rate": _ratio(st.completed, st.attempted),
            "by_origin_pair": {
                k: {"attempted": v[0], "completed": v[1], "success_rate": _ratio(v[1], v[0])}
                for k, v in sorted(st.by_pair.items())
            },
            "by_window": [
                {
                    "start": w * width,
                    "end": (w + 1) * width - 1,
                    "attempted": v[0],
                    "completed": v[1],
                    "success_rate": _ratio(v[1], v[0]),
                }
                for w, v in sorted(st.by_window.items())
            ],
            "invalid_actions": st.invalid_actions,
            "rejected_deals": st.rejected_deals,
        }

    def _death_metrics(self) -> dict[str, Any]:
        starved = [d for d in self.deaths if d.cause == STARVATION]
        old = [d for d in self.deaths if d.cause == OLD_AGE]

        def mean(values: list[int]) -> float | None:
            return float(np.mean(values)) if values else None

        return {
            "deaths": {STARVATION: len(starved), OLD_AGE: len(old)},
            "survival": _ratio(len(old), len(old) + len(starved)),
            "mean_lifespan": mean([d.age for d in self.deaths]),
            "wealth_at_death": {
                "mean": mean([d.sugar + d.spice for d in self.deaths]),
                STARVATION: mean([d.sugar + d.spice for d in starved]),
                OLD_AGE: mean([d.sugar + d.spice for d in old]),
            },
        }

    def _identity_metrics(self) -> dict[str, Any]:
        shift, labels = {}, {}
        for code, name in enumerate(ORIGINS):
            members = self.origin == code
            if not members.any():
                continue
            shift[name] = float(np.mean(self.leaning[members] - self.leaning_start[members]))
            names = [leaning_label(v) for v in self.leaning[members]]
            labels[name] = {label: names.count(label) for label in ("good-leaning", "mixed", "bad-leaning")}
        return {"identity_shift": shift, "identity_labels": labels}

    def _welfare_metrics(self) -> dict[str, float]:
        """Over the live agents: utilitarian = sum of welfare, Nash = geometric mean, Rawlsian = minimum, Gini."""
        w = self.welfare_of_agents()
        if w.size == 0:
            return {"utilitarian": 0.0, "nash": 0.0, "rawlsian": 0.0, "gini": 0.0}
        nash = float(np.exp(np.mean(np.log(w)))) if (w > 0).all() else 0.0
        return {"utilitarian": float(w.sum()), "nash": nash, "rawlsian": float(w.min()), "gini": gini(w)}
