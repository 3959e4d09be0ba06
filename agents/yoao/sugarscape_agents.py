"""Rule-based traders for the Sugarscape trade encounter (`sugarscape-v0`).

All of them state their holdings and metabolisms in the first round of small talk (text for language
models, `{"share": ...}` payload for code agents), so that two of them can compute the same Epstein-Axtell
MRS trade (`mrs_trade`: price = geometric mean of the two MRS, one unit step at a time while both welfares
strictly rise). When the counterpart shares nothing they make no offer of their own and judge what is
offered by their own welfare only.

| agent | intent | offer phase | execution | reflection delta |
| --- | --- | --- | --- | --- |
| `MRSTrader` | trade iff the MRS rule finds a trade (or the counterpart's holdings are unknown) | passes when the offer on the table strictly helps it, else offers the MRS trade (if any) | accept iff own welfare strictly rises | 0 |
| `AltruistTrader` | always trade | as MRSTrader | accept iff own welfare does not fall | +0.05 after a trade |
| `ExploiterTrader` | as MRSTrader | offers the deal best for itself that still strictly helps the counterpart (by what it shared); passes only on an offer at least as good for it | accept iff own welfare strictly rises | -0.05 after a trade |
| `SurvivorTrader` | trade only when a stock lasts fewer than `horizon` ticks of metabolism | as MRSTrader | as MRSTrader | 0 |

Two `MRSTrader`s reach exactly the trade of the built-in MRS path, which is what makes a world negotiated
by them identical to `run_simulation(config)` without agents (tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from environments.core.base import ActionSpec
from environments.core.events import Action, Event, Notification, NotificationKind, Observation
from environments.core.runtime import Agent
from environments.yoao.sugarscape import (
    EXECUTE,
    INTENT,
    OFFER,
    REFLECT,
    SHARE_KEYS,
    TALK,
    TraderInfo,
    best_deal,
    mrs_trade,
    welfare,
)

Bundle = tuple[int, int, int, int]
"""(sugar, spice, sugar metabolism, spice metabolism)."""


class MRSTrader:
    """Trades by the marginal-rate-of-substitution rule (see the module docstring)."""

    name: ClassVar[str] = "mrs"
    reflection_delta: ClassVar[float] = 0.0
    """Leaning shift reported after a completed trade."""

    def __init__(self, share: bool = True) -> None:
        self.share = share
        self.agent_id = ""
        self.me: Bundle | None = None
        self.partner: Bundle | None = None
        self.traded = False

    def describe(self) -> str:
        return f"{self.name}(share={self.share})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id, self.me, self.partner, self.traded = agent_id, None, None, False

    async def observe(self, event: Event) -> None:
        if isinstance(event, Observation):
            if event.private and "private" in event.data:
                p = event.data["private"]
                self.me = (p["sugar"], p["spice"], p["metabolism_sugar"], p["metabolism_spice"])
            shared = event.data.get("share")
            if event.sender is not None and isinstance(shared, Mapping) and set(SHARE_KEYS) <= set(shared):
                self.partner = tuple(int(shared[k]) for k in SHARE_KEYS)  # type: ignore[assignment]
        elif isinstance(event, Notification) and event.kind == NotificationKind.DEAL:
            self.traded = True

    async def act(self, request: Notification) -> Action:
        if self.me is None:
            raise RuntimeError(f"{self.describe()}: no private observation before the first turn")
        phase = request.data.get("phase")
        if phase == TALK:
            return self.talk(int(request.data.get("round", 1)))
        if phase == INTENT:
            wants = self.wants_trade()
            return Action(self.agent_id, "intent", "Let's trade." if wants else "Not this time.", {"trade": wants})
        if phase == OFFER:
            return self.offer_or_pass(request.data)
        if phase == EXECUTE:
            ok = self.acceptable(request.data.get("offer_on_table"))
            return Action(self.agent_id, "accept" if ok else "reject", "Deal." if ok else "No, thank you.")
        if phase == REFLECT:
            delta = self.reflection_delta if self.traded else 0.0
            return Action(self.agent_id, "reflect", "", {"delta": delta})
        raise RuntimeError(f"{self.describe()}: unknown phase {phase!r}")

    # ------------------------------------------------------------------------------------------ talk
    def talk(self, round_: int) -> Action:
        assert self.me is not None
        s, p, ms, mp = self.me
        if round_ == 1 and self.share:
            text = f"Hello! I hold {s} sugar and {p} spice, and I burn {ms} sugar and {mp} spice per tick."
            return Action(self.agent_id, "message", text, {"share": dict(zip(SHARE_KEYS, self.me, strict=True))})
        return Action(self.agent_id, "message", "Good to meet you.")

    # ---------------------------------------------------------------------------------------- deciding
    def wants_trade(self) -> bool:
        bundle = self.proposal()
        return self.partner is None or bundle != (0, 0)

    def mrs_bundle(self) -> tuple[int, int]:
        """(sugar, spice) this trader gives the partner under the MRS rule; (0, 0) when unknown or none."""
        if self.me is None or self.partner is None:
            return 0, 0
        return mrs_trade(self.me, self.partner)

    def proposal(self) -> tuple[int, int]:
        """What this trader offers: (sugar, spice) it gives (negative: receives)."""
        return self.mrs_bundle()

    def welfare_after(self, view: Mapping[str, Any] | None) -> float | None:
        """Own welfare if the offer (seen from this trader's side) were executed; None if impossible."""
        if self.me is None or not view:
            return None
        give, get = view["you_give"], view["you_get"]
        s = self.me[0] - give["sugar"] + get["sugar"]
        p = self.me[1] - give["spice"] + get["spice"]
        return None if s < 0 or p < 0 else welfare(s, p, self.me[2], self.me[3])

    def own_welfare(self) -> float:
        assert self.me is not None
        return welfare(*self.me)

    def acceptable(self, view: Mapping[str, Any] | None) -> bool:
        after = self.welfare_after(view)
        return after is not None and after > self.own_welfare()

    def offer_or_pass(self, data: Mapping[str, Any]) -> Action:
        pending = data.get("pending_offer")
        if pending and self.acceptable(pending):
            return Action(self.agent_id, "pass", "That offer works for me.")
        sugar, spice = self.proposal()
        table = data.get("offer_on_table")
        if (sugar, spice) == (0, 0) or (table and table["by"] == self.agent_id and _same(table, sugar, spice)):
            return Action(self.agent_id, "pass", "")
        return _offer_action(self.agent_id, sugar, spice)


class AltruistTrader(MRSTrader):
    """Always willing; accepts any deal that does not lower its welfare; its leaning rises after trading."""

    name: ClassVar[str] = "altruist"
    reflection_delta: ClassVar[float] = 0.05

    def wants_trade(self) -> bool:
        return True

    def acceptable(self, view: Mapping[str, Any] | None) -> bool:
        after = self.welfare_after(view)
        return after is not None and after >= self.own_welfare()


class ExploiterTrader(MRSTrader):
    """Asks for the most the counterpart would still gain from; its leaning falls after trading."""

    name: ClassVar[str] = "exploiter"
    reflection_delta: ClassVar[float] = -0.05

    def proposal(self) -> tuple[int, int]:
        if self.me is None or self.partner is None:
            return 0, 0
        sugar, spice, w = best_deal(self.me, self.partner, strict=True)
        return (sugar, spice) if w > self.own_welfare() else self.mrs_bundle()

    def offer_or_pass(self, data: Mapping[str, Any]) -> Action:
        pending = data.get("pending_offer")
        sugar, spice = self.proposal()
        if pending and (sugar, spice) != (0, 0):
            target = welfare(self.me[0] - sugar, self.me[1] - spice, self.me[2], self.me[3])  # type: ignore[index]
            after = self.welfare_after(pending)
            if after is not None and after >= target:
                return Action(self.agent_id, "pass", "Fine.")
            return _offer_action(self.agent_id, sugar, spice)
        return super().offer_or_pass(data)


class SurvivorTrader(MRSTrader):
    """Trades (by the MRS rule) only when one of its stocks would run out within `horizon` ticks."""

    name: ClassVar[str] = "survivor"

    def __init__(self, share: bool = True, horizon: int = 5) -> None:
        super().__init__(share)
        self.horizon = horizon

    def describe(self) -> str:
        return f"{self.name}(share={self.share}, horizon={self.horizon})"

    def wants_trade(self) -> bool:
        assert self.me is not None
        s, p, ms, mp = self.me
        return min(s / ms, p / mp) < self.horizon and super().wants_trade()


IDENTITY_TRADERS: dict[str, type[MRSTrader]] = {
    "altruist": AltruistTrader,
    "exploiter": ExploiterTrader,
    "survivor": SurvivorTrader,
}
"""Origin identity -> rule-based trader class."""


def mrs_trader(info: TraderInfo) -> Agent:
    """Agent factory for `run_simulation`: every agent trades by the MRS rule."""
    return MRSTrader()


def identity_trader(info: TraderInfo) -> Agent:
    """Agent factory for `run_simulation`: the trader of the agent's origin identity."""
    return IDENTITY_TRADERS[info.origin]()


def _same(view: Mapping[str, Any], sugar: int, spice: int) -> bool:
    give, get = view["you_give"], view["you_get"]
    return (give["sugar"] - get["sugar"], give["spice"] - get["spice"]) == (sugar, spice)


def _offer_action(agent_id: str, sugar: int, spice: int) -> Action:
    """An offer giving `sugar` and `spice` (one positive, the other negative = received)."""
    if sugar > 0:
        resource, give, get = "sugar", sugar, max(-spice, 0)
    else:
        resource, give, get = "spice", max(spice, 0), max(-sugar, 0)
    text = f"I give {give} {resource} for {get} {'spice' if resource == 'sugar' else 'sugar'}."
    return Action(agent_id, "offer", text, {"give_resource": resource, "give": give, "get": get})
