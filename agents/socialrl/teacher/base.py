"""The domain-independent part of the teacher: the per-turn context, the plan a domain returns, and the
generic decision rule over a finite deal set with a posterior over counterpart types (`MatrixDomain`).

Decision rule (every domain follows it; price and calendar specialise the pieces):

* beliefs: a posterior over counterpart types, updated on every counterpart offer (likelihood
  ~ softmax(beta * counterpart utility of the offer) over all deals), on every offer of ours the
  counterpart let pass (it did not find it good enough), and on cheap keyword cues in its messages;
* estimated reward R(d) = E_type[own reward of deal d] (the rewards are calibrated on a reference agreement
  that depends on the counterpart's private values, so it is an expectation), walk-away reward W likewise;
* offers: a Boulware aspiration on own utility from an ambitious but plausible anchor down to the estimated
  reference; among the deals at or above the aspiration, the one with the highest *estimated counterpart
  utility* (selective concession: give on what they value and we value little);
* the final offer (when the counterpart's next turn is its last): the deal maximising the expected reward
  sum_type p * [P(accept | type) * R + (1 - P(accept)) * W], assuming a counterpart at its deadline takes
  anything clearly better than walking away;
* acceptance: the standing offer is accepted when it is worth at least what we would propose next (or the
  final offer's expected value), and on our very last action when it beats walking away.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.socialrl.teacher.beliefs import Posterior, mixture_log, sigmoid, softmax_logits
from environments.socialrl.bargaining import DealSpace

Deal = Hashable


@dataclass(frozen=True)
class TurnContext:
    """What the teacher knows when asked to act."""

    turn: int
    """Accepted actions so far (the TURN notification's `turn`)."""
    max_turns: int
    pending: Deal | None
    """The counterpart's standing offer (from our side), or None."""
    allowed: tuple[str, ...]
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def clock(self) -> float:
        return min(1.0, self.turn / max(1, self.max_turns))

    @property
    def my_last(self) -> bool:
        """This action is the last one of the negotiation."""
        return self.turn >= self.max_turns - 1

    @property
    def final_offer(self) -> bool:
        """The counterpart's next turn is at its deadline: our offer now is our final offer."""
        return not self.my_last and self.turn >= self.max_turns - 3


@dataclass
class Plan:
    """What the teacher decided this turn (the domain renders it as text)."""

    kind: str
    """"offer", "accept", "walk", "select" or "message"."""
    deal: Deal | None = None
    tag: str = ""
    """Why: "anchor", "concede", "hold", "final", "accept_good", "accept_deadline", "no_zone", ..."""
    value: float | None = None
    """Estimated own reward of the plan (expected value for a final offer)."""
    p_accept: float | None = None
    """Estimated probability that the counterpart accepts the offer."""
    alternative: Deal | None = None
    """For an acceptance: the offer we would have made instead."""


class Domain(ABC):
    """Per-environment strategy: opponent model, deal choice and language for one seat."""

    def __init__(self, agent_id: str, private_view: Mapping[str, Any], space: DealSpace, rng: random.Random) -> None:
        self.agent_id = agent_id
        self.view = private_view
        self.role = str(private_view.get("role", agent_id))
        self.space = space
        self.rng = rng
        self.my_offers: list[Deal] = []
        self.their_offers: list[Deal] = []
        self.messages_seen: list[str] = []
        self.passed: list[Deal] = []
        """Our offers the counterpart let pass."""

    # --------------------------------------------------------------------------- evidence (override)
    def on_offer(self, deal: Deal, turn: int, max_turns: int) -> None:
        """The counterpart proposed `deal` (from our side) at `turn`."""
        self.their_offers.append(deal)

    def on_not_accepted(self, deal: Deal, turn: int, max_turns: int, rejected: bool) -> None:
        """The counterpart let our standing offer `deal` pass at its turn `turn` (countered or rejected)."""
        self.passed.append(deal)

    def on_message(self, text: str) -> None:
        """The counterpart said `text` (cheap keyword cues)."""
        self.messages_seen.append(text)

    # -------------------------------------------------------------------------------------- decisions
    def special(self, ctx: TurnContext) -> Plan | None:
        """A turn outside the offer/accept loop (DnD's selection), or an immediate walk-away."""
        return None

    @abstractmethod
    def decide(self, ctx: TurnContext) -> Plan: ...

    # --------------------------------------------------------------------------------------- language
    @abstractmethod
    def render(self, plan: Plan, ctx: TurnContext) -> tuple[str, str, dict[str, Any]]:
        """(act text, intended action kind, intended payload): the text is a natural-language message
        followed by the environment's command line; kind/payload are what the environment's parser must
        turn that text into."""

    @abstractmethod
    def infer_text(self) -> str:
        """A one-line summary of the belief about the counterpart."""

    @abstractmethod
    def anticipate_text(self, plan: Plan, ctx: TurnContext) -> str:
        """The predicted next move of the counterpart."""

    def belief_summary(self) -> dict[str, Any]:
        """Structured belief (for tests and analysis)."""
        return {}


class MatrixDomain(Domain):
    """A finite deal set and a finite set of counterpart types, with the generic decision rule.

    Subclasses fill, in `__init__`, `deals` (D), `my_u` (D,) own utility on the deal space's scale,
    `their_u` (H, D) counterpart utility per type (best deal 1), `their_w` (H,) counterpart walk-away
    utility, `my_r` (H, D) own reward per type, `my_w` (H,) own walk-away reward, `ref_u` (H,) own
    reference utility per type, and `post` (the prior)."""

    beta: float = 12.0
    """Rationality of the counterpart's offers in the likelihood softmax(beta * utility)."""
    beta_decay: float = 0.8
    """Later offers concede, so each further offer counts a little less."""
    offer_noise: float = 0.1
    """Share of offers explained as noise (random counterparts)."""
    regress_penalty: float = 25.0
    """Log-likelihood penalty per unit of utility by which an offer is better for them than their last."""
    deadline_margin: float = 0.1
    """A counterpart at its deadline takes deals worth at least its walk-away plus this much."""
    anchor_margin: float = 0.2
    """The anchor leaves the counterpart at least its walk-away plus this much (plausible)."""
    concession_exponent: float = 0.5
    """Aspiration a(t) = lo + (hi - lo) * (1 - t^(1/e)): e < 1 is Boulware-like (slow at first)."""

    deals: list[Deal]
    my_u: np.ndarray
    their_u: np.ndarray
    their_w: np.ndarray
    my_r: np.ndarray
    my_w: np.ndarray
    ref_u: np.ndarray
    post: Posterior

    def _init_index(self) -> None:
        self.index = {d: i for i, d in enumerate(self.deals)}
        self.offer_log: list[tuple[int, float]] = []

    # ------------------------------------------------------------------------------------- evidence
    def on_offer(self, deal: Deal, turn: int, max_turns: int) -> None:
        super().on_offer(deal, turn, max_turns)
        i = self.index.get(deal)
        if i is None:
            return
        k = len(self.offer_log)
        beta = self.beta * self.beta_decay**k
        logp = softmax_logits(self.their_u, beta, axis=1)[:, i]
        n = self.their_u.shape[1]
        likelihood = np.exp(logp) * n
        if self.offer_log:
            # Offers concede: a type under which this offer is worth clearly more to them than their
            # previous one (taking a concession back) explains the sequence badly.
            previous = self.offer_log[-1][0]
            regress = np.maximum(self.their_u[:, i] - self.their_u[:, previous] - 0.01, 0.0)
            likelihood = likelihood * np.exp(-self.regress_penalty * regress)
        self.post.update(mixture_log(likelihood, self.offer_noise))
        self.offer_log.append((i, turn / max(1, max_turns)))

    def on_not_accepted(self, deal: Deal, turn: int, max_turns: int, rejected: bool) -> None:
        super().on_not_accepted(deal, turn, max_turns, rejected)
        i = self.index.get(deal)
        if i is None:
            return
        threshold = self._their_aspiration(turn, max_turns)
        p_accept = sigmoid((self.their_u[:, i] - threshold) / 0.05)
        self.post.update(mixture_log(1.0 - p_accept, 0.3 if not rejected else 0.2))

    def _their_aspiration(self, turn: int, max_turns: int) -> np.ndarray:
        """Per type: the utility the counterpart holds out for now (its last offer's utility, which its
        next offer will not exceed), or close to its best before it has offered."""
        if turn >= max_turns - 2:
            return self.their_w + self.deadline_margin
        if self.offer_log:
            last = self.offer_log[-1][0]
            return np.maximum(self.their_u[:, last] - 0.02, self.their_w + self.deadline_margin)
        return np.maximum(0.9 * np.ones(len(self.their_w)), self.their_w + self.deadline_margin)

    # ------------------------------------------------------------------------------------- estimates
    def active(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, weights) of the types that carry the posterior (the rest are negligible)."""
        p = self.post.p
        idx = np.flatnonzero(p >= p.max() * 1e-5)
        w = p[idx]
        return idx, w / w.sum()

    def estimates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(p, R, C, W): posterior, expected own reward per deal, expected counterpart utility, walk-away
        (cached until the posterior changes)."""
        key = (self.post.updates, id(self.post))
        if getattr(self, "_estimates_key", None) != key:
            idx, w = self.active()
            if len(idx) > len(self.post) // 2:
                p = self.post.p
                self._estimates = (p, p @ self.my_r, p @ self.their_u, float(p @ self.my_w))
            else:
                self._estimates = (self.post.p, w @ self.my_r[idx], w @ self.their_u[idx], float(w @ self.my_w[idx]))
            self._estimates_key = key
        return self._estimates

    def aspiration(self, clock: float) -> tuple[float, float, float]:
        """(aspiration, anchor utility, floor utility) on the own-utility scale."""
        p, _, c, _ = self.estimates()
        plausible = c >= float(p @ self.their_w) + self.anchor_margin
        hi = float(self.my_u[plausible].max()) if plausible.any() else float(self.my_u.max())
        walk_u = self.walk_utility()
        lo = float(p @ self.ref_u)
        lo = min(max(lo, walk_u + 0.02), hi)
        return lo + (hi - lo) * (1.0 - clock ** (1.0 / self.concession_exponent)), hi, lo

    def walk_utility(self) -> float:
        """Own walk-away on the own-utility scale."""
        return float(self.space.walk_away_utility())

    def final_offer_values(self) -> np.ndarray:
        """Expected reward of each deal offered as the final offer."""
        idx, w = self.active()
        accept = sigmoid((self.their_u[idx] - (self.their_w[idx] + self.deadline_margin)[:, None]) / 0.03)
        return w @ (accept * self.my_r[idx] + (1.0 - accept) * self.my_w[idx][:, None])

    def accept_probability(self, i: int, final: bool, ctx: TurnContext) -> float:
        p = self.post.p
        if final:
            threshold = self.their_w + self.deadline_margin
        else:
            threshold = self._their_aspiration(ctx.turn + 1, ctx.max_turns)
        return float(p @ sigmoid((self.their_u[:, i] - threshold) / 0.03))

    # ------------------------------------------------------------------------------------- decisions
    def decide(self, ctx: TurnContext) -> Plan:
        _p, r, c, w = self.estimates()
        if ctx.final_offer or ctx.my_last:
            ev = self.final_offer_values()
            i = int(np.argmax(ev + 1e-6 * c))
            planned = Plan("offer", self.deals[i], "final", float(ev[i]), self.accept_probability(i, True, ctx))
        else:
            a, _, _ = self.aspiration(ctx.clock)
            ok = self.my_u >= a - 1e-9
            if not ok.any():
                ok = self.my_u >= self.my_u.max() - 1e-9
            score = np.where(ok, c + 1e-3 * self.my_u, -np.inf)
            i = int(np.argmax(score))
            tag = "anchor" if not self.my_offers else ("hold" if self.deals[i] == self.my_offers[-1] else "concede")
            planned = Plan("offer", self.deals[i], tag, float(r[i]), self.accept_probability(i, False, ctx))
        pending = self.index.get(ctx.pending) if ctx.pending is not None else None
        if pending is not None:
            value = float(r[pending])
            if ctx.my_last:
                if value > w + 1e-9:
                    return Plan("accept", ctx.pending, "accept_deadline", value, alternative=planned.deal)
            elif value >= (planned.value or 0.0) - 1e-9 or value >= 0.995 or planned.deal == ctx.pending:
                return Plan("accept", ctx.pending, "accept_good", value, alternative=planned.deal)
        if ctx.my_last and self.prefers_walk_at_end():
            return Plan("walk", None, "deadline_walk", w)
        return planned

    def prefers_walk_at_end(self) -> bool:
        return True
