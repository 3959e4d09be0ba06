"""Teacher domain for the single-issue price negotiations: Craigslist and Marketplace.

Counterpart model: a time-dependent concession tactic, the standard opponent class of the bargaining
literature. A type is (S, F, e): the counterpart's offers follow q(t) = S + (F - S) * t^(1/e) from its
opening S to its final price F (its effective reservation: what it accepts at its deadline), with
concession exponent e (e < 1 Boulware, e > 1 conceder). The posterior over a grid of types is updated on
each counterpart offer (Gaussian around the curve, with a share of noise for erratic counterparts), on each
of our offers it let pass (it was below the curve), and on a stated reservation or target price.

Own reward per type, from the environment's public formulas:

* Craigslist buyer: clip((listing - p) / (listing - seller reservation)), the reservation ~ F;
* Craigslist seller: clip((p - T) / (listing - T)) with the buyer's target T unknown (estimated as a bit
  above the buyer's opening, or as stated);
* Marketplace buyer: clip((own max - p) / (own max - seller min)), the seller's minimum ~ F;
* Marketplace seller: clip((p - own min) / (buyer max - own min)), the buyer's maximum ~ F.

Play: an anchor beyond the target (buyers open below their target), a Boulware path towards the price that
maximises the expected reward of a final offer, the final offer itself when the counterpart's next turn
is its deadline, and acceptance when the standing price is worth what we would ask next.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from agents.socialrl.teacher.base import Domain, Plan, TurnContext
from agents.socialrl.teacher.beliefs import Posterior, mixture_log, sigmoid
from agents.socialrl.teacher.language import clip_words, leaks, money, nice_step, pick
from environments.socialrl.bargaining import DealSpace

_STATED = re.compile(
    r"\bmy\s+(reservation(?:\s+price)?|target|budget|limit|minimum|maximum)\b[^$\d]{0,20}\$?\s*(\d[\d,]*(?:\.\d+)?)",
    re.IGNORECASE,
)
LAMBDAS = (0.0, 0.25, 0.5, 0.75, 0.9)
LAMBDA_PRIOR = (0.4, 0.15, 0.15, 0.15, 0.15)
"""How far beyond its curve's end a buyer goes at its deadline, towards its limit (the listing)."""
QUOTED_WORDS = 8
"""Most words of a title or description line a reply quotes (measured: with whole lines 3% of buyer replies
exceeded the rollouts' 64-token budget, the longest 303 tokens)."""
FINAL_CREDIBILITY = 0.6
"""How often the teacher expects a final offer inside the counterpart's reservation to be taken."""
EXPONENTS = (0.1, 0.14, 0.2, 0.27, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 5.0)


class PriceDomain(Domain):
    def __init__(
        self, env_id: str, agent_id: str, private_view: Mapping[str, Any], space: DealSpace, rng: random.Random
    ) -> None:
        super().__init__(agent_id, private_view, space, rng)
        self.env_id = env_id
        public, private = private_view.get("public", {}), private_view.get("private", {})
        self.buyer = self.role == "buyer"
        self.marketplace = env_id == "marketplace-v0"
        self.listing = float(public.get("listed_price" if self.marketplace else "listing_price"))
        self.title = str(public.get("product") or public.get("title") or "item")
        description = public.get("description") or []
        self.description = [description] if isinstance(description, str) else list(description)
        self.target = float(private["target_price"]) if "target_price" in private else None
        self.reservation = float(private["reservation_price"]) if "reservation_price" in private else None
        self.private_numbers = [x for x in (self.target, self.reservation) if x is not None]
        self.stated_target: float | None = None
        L = self.listing
        self.step = nice_step(L)
        lo, hi = 0.2 * L, 1.25 * L
        self.prices = np.round(np.arange(np.ceil(lo / self.step), np.floor(hi / self.step) + 1) * self.step, 2)
        self.prices = self.prices[self.prices > 0]
        self.sigma = 0.008 * L
        self.offer_times: list[tuple[float, float]] = []  # (clock, price) of the counterpart's offers
        self.evidence: list[tuple[str, float, int, int, bool]] = []
        self.opening: float | None = None
        self._build_grid(None)

    def _build_grid(self, opening: float | None) -> None:
        """Hypotheses (S, F, e) about the counterpart's concession curve. Before the counterpart has
        offered, S ranges widely; afterwards S lies at or a little beyond its opening offer (it may have
        conceded before its first offer)."""
        L = self.listing
        offsets = L * np.array([0.0, 0.005, 0.01, 0.02, 0.035, 0.05, 0.08, 0.12, 0.18, 0.25, 0.35])
        if self.buyer:  # the counterpart sells: it opens high and comes down
            starts = L * np.array([0.85, 0.92, 1.0, 1.08, 1.2]) if opening is None else opening + offsets
            finals = L * np.linspace(0.3, 1.05, 61)
            keep = lambda s, f: f <= s  # noqa: E731
        else:  # the counterpart buys: it opens low and comes up
            starts = L * np.linspace(0.2, 0.95, 16) if opening is None else np.maximum(opening - offsets, 0.01 * L)
            finals = L * np.linspace(0.3, 1.15, 69)
            keep = lambda s, f: f >= s  # noqa: E731
        rows = [(s, f, e) for s in starts for f in finals for e in EXPONENTS if keep(s, f)]
        self.S = np.array([r[0] for r in rows])
        self.F = np.array([r[1] for r in rows])
        self.E = np.array([r[2] for r in rows])
        self.post = Posterior.uniform(len(rows))

    # ------------------------------------------------------------------------------------ model
    def curve(self, clock: float) -> np.ndarray:
        """Each type's offer (= acceptance threshold) at `clock`."""
        return self.S + (self.F - self.S) * (max(clock, 0.0) ** (1.0 / self.E))

    def their_threshold(self, turn: int, max_turns: int) -> np.ndarray:
        if turn >= max_turns - 2:
            return self.F
        return self.curve(turn / max(1, max_turns))

    def _acc_gap(self, prices: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        scale = 0.01 * self.listing
        if self.buyer:  # the counterpart is a seller: accepts p >= threshold
            return (prices[None, :] - threshold[:, None]) / scale
        return (threshold[:, None] - prices[None, :]) / scale

    def active(self) -> tuple[np.ndarray, np.ndarray]:
        """(indices, weights) of the hypotheses that carry the posterior (the rest are negligible)."""
        p = self.post.p
        idx = np.flatnonzero(p >= p.max() * 1e-4)
        w = p[idx]
        return idx, w / w.sum()

    def reward_matrix(self, prices: np.ndarray, F: np.ndarray) -> np.ndarray:
        """(len(F), P): own reward of each price for counterparts whose final price is F."""
        return self._reward(prices[None, :], F)

    def _reward(self, p: np.ndarray, F: np.ndarray) -> np.ndarray:
        """Own reward of prices `p` (broadcastable against (len(F), k)) for counterpart final prices F."""
        L = self.listing
        if not self.marketplace:
            if self.buyer:
                # The corridor runs from the listing (0) to the seller's reservation (1), estimated by F.
                zone = np.maximum(L - F, 0.02 * L)
                return np.clip((L - p) / zone[:, None], 0.0, 1.0)
            if self.stated_target is not None:
                t = np.full(len(F), self.stated_target)
            else:
                # Buyers usually open some 15% below their target.
                opening = self.opening if self.opening is not None else 0.6 * L
                t = np.minimum(np.clip(opening / 0.85, 0.3 * L, 0.95 * L), F - 0.01 * L)
            return np.clip((p - t[:, None]) / np.maximum(L - t[:, None], 0.02 * L), 0.0, 1.0)
        assert self.reservation is not None
        own = self.reservation
        if self.buyer:
            zone = np.maximum(own - F, 0.02 * L)
            return np.clip((own - p) / zone[:, None], 0.0, 1.0)
        zone = np.maximum(F - own, 0.02 * L)
        return np.clip((p - own) / zone[:, None], 0.0, 1.0)

    def feasible(self, prices: np.ndarray) -> np.ndarray:
        """Prices we may agree to at all (never beyond our own reservation)."""
        if self.marketplace and self.reservation is not None:
            return prices <= self.reservation + 1e-9 if self.buyer else prices >= self.reservation - 1e-9
        if self.buyer:
            return prices < self.listing
        return prices > 0

    def reward(self, price: float) -> float:
        """Expected own reward of a deal at `price`."""
        idx, w = self.active()
        return float(w @ self.reward_matrix(np.array([price]), self.F[idx])[:, 0])

    # --------------------------------------------------------------------------------- evidence
    def on_offer(self, deal, turn: int, max_turns: int) -> None:
        super().on_offer(deal, turn, max_turns)
        q = float(deal)
        self.offer_times.append((turn / max(1, max_turns), q))
        self.evidence.append(("offer", q, turn, max_turns, False))
        if self.opening is None:
            self.opening = q
            self._build_grid(q)
            for item in self.evidence:
                self._apply(*item)
        else:
            self._apply("offer", q, turn, max_turns, False)

    def on_not_accepted(self, deal, turn: int, max_turns: int, rejected: bool) -> None:
        if deal is None:
            return
        super().on_not_accepted(deal, turn, max_turns, rejected)
        self.evidence.append(("passed", float(deal), turn, max_turns, rejected))
        self._apply("passed", float(deal), turn, max_turns, rejected)

    def _apply(self, what: str, price: float, turn: int, max_turns: int, rejected: bool) -> None:
        if what == "offer":
            mean = self.curve(turn / max(1, max_turns))
            density = np.exp(-0.5 * ((price - mean) / self.sigma) ** 2) / (self.sigma * np.sqrt(2 * np.pi))
            uniform = 1.0 / (1.5 * self.listing)
            self.post.update(np.log(0.92 * density + 0.08 * uniform) - np.log(uniform))
        else:
            threshold = self.their_threshold(turn, max_turns)
            p_acc = sigmoid(self._acc_gap(np.array([price]), threshold))[:, 0]
            self.post.update(mixture_log(1.0 - p_acc, 0.15))

    def on_message(self, text: str) -> None:
        super().on_message(text)
        m = _STATED.search(text)
        if m is None:
            return
        value = float(m.group(2).replace(",", ""))
        if m.group(1).lower().startswith("target") and not self.marketplace and not self.buyer:
            self.stated_target = value
            return
        self.post.update(-0.5 * ((self.F - value) / (0.03 * self.listing)) ** 2)

    # --------------------------------------------------------------------------------- decisions
    def deadline_thresholds(self, F: np.ndarray) -> list[tuple[float, np.ndarray]]:
        """(prior weight, threshold per final price F) of what the counterpart accepts at its deadline.

        The curve's end F is what it has been heading for; at its deadline a counterpart may go beyond
        that, towards its structural limit (a fraction lambda of the way, with a prior over lambda). A
        buyer's limit is the listing (no buyer gains from paying the listing price or more); a seller's
        is taken as half the listing (the lowest price anyone lists at)."""
        if self.buyer:
            limit = 0.5 * self.listing
            return [(w, F - lam * np.maximum(F - limit, 0.0)) for lam, w in zip(LAMBDAS, LAMBDA_PRIOR, strict=True)]
        limit = self.listing - self.step
        return [(w, F + lam * np.maximum(limit - F, 0.0)) for lam, w in zip(LAMBDAS, LAMBDA_PRIOR, strict=True)]

    def final_values(self, ctx: TurnContext | None = None) -> np.ndarray:
        """Expected reward of each price as our final offer: accepted at the counterpart's deadline, or
        else (when we still act after it) its last counter-offer, which we then accept if it helps.

        Acceptance and reward depend on a type only through its final price F, so the posterior is
        collapsed onto F first (with the expected fallback reward per F)."""
        idx, w = self.active()
        fallback = np.zeros(len(idx))
        if ctx is not None and ctx.turn + 2 <= ctx.max_turns - 1:
            counter = self.curve((ctx.turn + 1) / ctx.max_turns)[idx]
            ok = self.feasible(counter)
            fallback = np.where(ok, self._reward(counter[:, None], self.F[idx])[:, 0], 0.0)
        finals, inverse = np.unique(self.F[idx], return_inverse=True)
        weight_f = np.bincount(inverse, weights=w, minlength=len(finals))
        fallback_f = np.bincount(inverse, weights=w * fallback, minlength=len(finals))
        rewards = self.reward_matrix(self.prices, finals)
        ev = np.zeros(len(self.prices))
        for prior, threshold in self.deadline_thresholds(finals):
            acc = sigmoid(self._acc_gap(self.prices, threshold))
            ev += prior * (weight_f @ (acc * rewards) + fallback_f @ (1.0 - acc))
        return np.where(self.feasible(self.prices), ev, -1.0)

    def anchor_price(self) -> float:
        L = self.listing
        if self.buyer:
            if self.target is not None:
                # Below the target, but not so far below the listing that a seller takes it as an insult.
                return max(0.85 * self.target, min(0.5 * L, 0.95 * self.target))
            assert self.reservation is not None
            return min(0.55 * L, 0.8 * self.reservation)
        return L

    def snap(self, price: float) -> float:
        """Round to the price step, towards the counterpart (a buyer rounds up, a seller down)."""
        units = price / self.step
        units = np.ceil(units - 1e-9) if self.buyer else np.floor(units + 1e-9)
        return float(round(units * self.step, 2))

    def decide(self, ctx: TurnContext) -> Plan:
        ev = self.final_values(ctx)
        best = int(np.argmax(ev))
        p_star, v_star = float(self.prices[best]), float(ev[best])
        if ctx.final_offer or ctx.my_last:
            price = p_star
            planned = Plan("offer", price, "final", v_star, self._p_accept(price, ctx, final=True))
        else:
            anchor = self.anchor_price()
            anchor = min(anchor, p_star) if self.buyer else max(anchor, p_star)
            price = self.snap(anchor + (p_star - anchor) * ctx.clock)
            feasible = self.feasible(np.array([price]))[0]
            if not feasible:
                price = p_star
            if self.my_offers:
                last = float(self.my_offers[-1])
                # Never take back a concession, and move a step every turn until the target price: a partner
                # who stands still is one counterparts walk away from, and concessions are answered. Past the
                # target price it holds at most one turn in a row, then moves a step towards the standing offer.
                held = len(self.my_offers) >= 2 and float(self.my_offers[-2]) == last
                toward = (p_star > last if self.buyer else p_star < last) or (held and ctx.pending is not None)
                moved = last + self.step if self.buyer else last - self.step
                if ctx.pending is not None:
                    q = float(ctx.pending)
                    moved = min(moved, q) if self.buyer else max(moved, q)
                price = max(price, moved if toward else last) if self.buyer else min(price, moved if toward else last)
            tag = "anchor" if not self.my_offers else ("hold" if price == float(self.my_offers[-1]) else "concede")
            planned = Plan("offer", price, tag, self.reward(price), self._p_accept(price, ctx, final=False))
        if ctx.pending is not None:
            q = float(ctx.pending)
            ok = bool(self.feasible(np.array([q]))[0])
            value = self.reward(q)
            if ok and ctx.my_last and value > 1e-9:
                return Plan("accept", q, "accept_deadline", value, alternative=planned.deal)
            # A final offer is believed only some of the time: accept a standing offer worth more than that.
            credited = (planned.value or 0.0) * (FINAL_CREDIBILITY if planned.tag == "final" else 1.0)
            if ok and not ctx.my_last and (value >= credited - 1e-9 or value >= 0.995):
                return Plan("accept", q, "accept_good", value, alternative=planned.deal)
        if ctx.my_last:
            return Plan("walk", None, "deadline_walk", 0.0)
        return planned

    def _p_accept(self, price: float, ctx: TurnContext, final: bool) -> float:
        threshold = self.F if final else self.their_threshold(ctx.turn + 1, ctx.max_turns)
        return float(self.post.p @ sigmoid(self._acc_gap(np.array([price]), threshold))[:, 0])

    # ---------------------------------------------------------------------------------- language
    def commands(self) -> dict[str, tuple[str, str]]:
        if self.marketplace:
            return {"offer": ("OFFER", "make_offer"), "accept": ("ACCEPT", "accept_offer"), "walk": ("END", "end")}
        return {"offer": ("OFFER", "offer"), "accept": ("ACCEPT", "accept"), "walk": ("QUIT", "quit")}

    def _flaw(self) -> str:
        lines = [d for d in self.description if d]
        if not lines:
            return ""
        line = clip_words(pick(self.rng, lines), QUOTED_WORDS).rstrip(".").strip()
        return line[0].lower() + line[1:] if line else ""

    def offer_message(self, plan: Plan, ctx: TurnContext, price: str) -> str:
        rng = self.rng
        item = clip_words(self.title, QUOTED_WORDS)
        if plan.tag == "anchor":
            if self.buyer:
                flaw = self._flaw()
                reason = f' Considering it\'s listed with "{flaw}", ' if flaw else " "
                return pick(
                    rng,
                    (
                        f"Hi! I'm interested in the {item}.{reason}would you take {price}?",
                        f"Hello, I'd like to buy the {item}. I can pay {price} and pick it up quickly.",
                    ),
                ).replace("  ", " ")
            return pick(
                rng,
                (
                    f"Thanks for your interest! The {item} is in good shape and priced fairly at {price}.",
                    f"Hi! I'm asking {price} for the {item}; it's a good deal for what you get.",
                ),
            )
        if plan.tag == "final":
            return pick(
                rng,
                (
                    f"We're almost out of time, so this is my final offer: {price}.",
                    f"Let's close this. {price} is the best I can do, and it's my last offer.",
                ),
            )
        if plan.tag == "hold":
            return pick(
                rng,
                (
                    f"I think {price} is already a fair price.",
                    f"I'd like to stay at {price}; it's a fair price for both of us.",
                ),
            )
        counter = ""
        if ctx.pending is not None:
            counter = pick(rng, ("That's more than I hoped for. ", "That's a bit far from what I had in mind. "))
            if not self.buyer:
                counter = pick(rng, ("That's too low for me. ", "I can't go that low. "))
        move = pick(
            rng,
            ("I can move a little: how about {p}?", "Let's meet partway: {p}.", "I could do {p}."),
        ).format(p=price)
        return counter + move

    def render(self, plan: Plan, ctx: TurnContext) -> tuple[str, str, dict[str, Any]]:
        commands = self.commands()
        if plan.kind == "accept":
            word, kind = commands["accept"]
            text = pick(self.rng, ("Deal, thank you!", "That works for me. Deal!", "Sounds good, let's do it."))
            return f"{text}\n{word}", kind, {"price": float(plan.deal)}
        if plan.kind == "walk":
            word, kind = commands["walk"]
            text = "I'm sorry, I don't think we can agree on a price."
            return f"{text}\n{word}", kind, {}
        price = float(plan.deal)
        word, kind = commands["offer"]
        label = money(price)
        text = self.offer_message(plan, ctx, label)
        patterns = [r"\bmy (?:target|budget|max(?:imum)?|min(?:imum)?|limit|reservation|bottom[- ]?line)\b"]
        if leaks(text, patterns, self.private_numbers, exempt=[price]):
            text = f"How about {label}?"
        return f"{text}\n{word} {label}", kind, {"price": price}

    def _price(self, value: float) -> str:
        """`value` rounded to the price step, as text (no spurious cents in the reasoning)."""
        return money(round(round(value / self.step) * self.step, 2))

    def infer_text(self) -> str:
        """The counterpart's walk-away estimate, with the evidence it rests on (its offers so far, or the
        listing before it has offered), so that the text varies with the scenario and what was seen."""
        p = self.post.p
        f_mean = float(p @ self.F)
        f_sd = float(np.sqrt(max(p @ (self.F - f_mean) ** 2, 0.0)))
        e_mean = float(np.exp(p @ np.log(self.E)))
        pace = "slowly" if e_mean < 0.8 else ("steadily" if e_mean < 1.5 else "fast")
        who = "seller" if self.buyer else "buyer"
        estimate = f"{who.capitalize()}'s walk-away ~{self._price(f_mean)} (+/- {self._price(f_sd)})"
        offers = [float(d) for d in self.their_offers]
        if not offers:
            return f"{estimate}, judged from the {money(self.listing)} listing: no offer yet."
        first, last = offers[0], offers[-1]
        if len(offers) == 1:
            return f"{estimate}: opened at {money(first)}, {round(100 * first / self.listing)}% of the listing."
        moved = self._price(abs(last - first))
        change = "not moved" if moved == "$0" else f"{'down' if self.buyer else 'up'} {moved}, {pace}"
        return f"{estimate}: opened {money(first)}, now {money(last)} after {len(offers)} offers ({change})."

    def anticipate_text(self, plan: Plan, ctx: TurnContext) -> str:
        """The counterpart's next move: acceptance, or the counter-offer its fitted concession curve expects
        next, beside its last offer (the evidence the extrapolation starts from)."""
        if plan.kind == "accept":
            return "The deal closes now."
        if plan.kind == "walk":
            return "The negotiation ends without a deal."
        pa = plan.p_accept or 0.0
        if pa >= 0.6:
            return f"They will probably accept {money(float(plan.deal))} (p~{pa:.2f})."
        nxt = self.snap(float(self.post.p @ self.curve((ctx.turn + 1) / ctx.max_turns)))
        # What the prediction extrapolates from: its last offer, or the listing before it has offered.
        basis = f"their last {money(float(self.their_offers[-1]))}" if self.their_offers else "no offer yet"
        return f"They will probably counter around {money(nxt)} ({basis}; accept p~{pa:.2f})."

    def belief_summary(self) -> dict[str, Any]:
        p = self.post.p
        return {"final_price_mean": float(p @ self.F), "exponent_geo_mean": float(np.exp(p @ np.log(self.E)))}
