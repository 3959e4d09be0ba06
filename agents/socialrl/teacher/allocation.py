"""Teacher domains for the item-division negotiations: Deal or No Deal and CaSiNo.

Counterpart types:

* DnD: every non-negative integer value vector that makes the pool worth 10 to the counterpart (the
  public rule), with a small prior weight on vectors the generator excludes (an item nobody values, or no
  item both value);
* CaSiNo: the 6 priority orders (High / Medium / Low = 5 / 4 / 3 points per package).

Per type the teacher computes the counterpart's utility of every split, the scenario's reference agreement
(the rewards are calibrated on it) and so its own reward of every split. Keyword cues: an explicit
statement of values or priorities (what an accommodating counterpart says) is strong evidence; need-words
next to an item ("we really need water", "it gets cold at night") are weak evidence that it ranks high.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from agents.socialrl.teacher.base import MatrixDomain, Plan, TurnContext
from agents.socialrl.teacher.beliefs import Posterior, allocation_reference_points, allocations
from agents.socialrl.teacher.language import join_words, leaks, pick
from environments.socialrl.allocation import describe_allocation
from environments.socialrl.bargaining import DealSpace

DND_ITEMS = ("book", "hat", "ball")
DND_PLURAL = {"book": "books", "hat": "hats", "ball": "balls"}
CASINO_ITEMS = ("food", "water", "firewood")
CASINO_LEVELS = ("High", "Medium", "Low")
CASINO_POINTS = (5, 4, 3)

_CASINO_CUES = {
    "food": r"\b(?:food|hungry|starv\w*|calories|eat\w*|snacks?|meals?)\b",
    "water": r"\b(?:water|thirst\w*|dehydrat\w*|drink\w*|hydrat\w*)\b",
    "firewood": r"\b(?:firewood|wood|cold|freez\w*|warm\w*|campfire|fire|marshmallows?)\b",
}
_NEED = r"\b(?:need|needs|want|really|important|essential|crucial|must|short\s+on|low\s+on|run\s+out|more)\b"
_NO_NEED = r"\b(?:don'?t|do\s+not|doesn'?t|won'?t)\s+(?:really\s+)?(?:need|care|want)\b|\bplenty\s+of\b|\benough\b"


class AllocationDomain(MatrixDomain):
    """Shared logic of DnD and CaSiNo (a deal is our own share, a tuple of counts)."""

    items: ClassVar[tuple[str, ...]]
    plural: ClassVar[dict[str, str]]
    command_items: ClassVar[tuple[str, ...]]

    def __init__(
        self,
        agent_id: str,
        private_view: Mapping[str, Any],
        space: DealSpace,
        rng: random.Random,
        *,
        hypotheses: list[tuple[float, ...]],
        log_prior: np.ndarray,
        their_walk_points: float,
        my_walk_points: float,
        disagreement: tuple[float, float],
    ) -> None:
        super().__init__(agent_id, private_view, space, rng)
        self.counts = tuple(int(c) for c in space.counts)  # type: ignore[attr-defined]
        self.values = np.array(space.values, dtype=float)  # type: ignore[attr-defined]
        self.total = float(self.values @ np.array(self.counts, dtype=float))
        shares = allocations(self.counts)
        self.deals = [tuple(int(x) for x in row) for row in shares]
        self._init_index()
        self.types = np.array(hypotheses, dtype=float)  # (H, items)
        theirs = np.array(self.counts, dtype=float)[None, :] - shares  # (D, items): counterpart's share
        their_totals = self.types @ np.array(self.counts, dtype=float)  # (H,)
        self.their_points = self.types @ theirs.T  # (H, D)
        self.their_u = self.their_points / their_totals[:, None]
        self.their_w = their_walk_points / their_totals
        my_points = shares @ self.values
        self.my_u = my_points / self.total
        refs = np.array(
            [
                allocation_reference_points(self.counts, self.values, t, disagreement, shares=shares)[0]
                for t in self.types
            ]
        )
        self.ref_points = refs
        self.ref_u = refs / self.total
        safe = np.maximum(refs, 1e-9)
        self.my_r = np.minimum(1.0, my_points[None, :] / safe[:, None])
        self.my_w = np.minimum(1.0, my_walk_points / safe)
        self.my_walk_points = my_walk_points
        self.post = Posterior(log_prior)
        self.agreed: tuple[int, ...] | None = None
        self.last_proposal: tuple[int, ...] | None = None
        """The most recent proposal on the table (our share), whoever made it."""

    # ----------------------------------------------------------------------------------- evidence
    def on_offer(self, deal, turn: int, max_turns: int) -> None:
        super().on_offer(deal, turn, max_turns)
        self.last_proposal = deal

    def expected_their_values(self) -> np.ndarray:
        """Posterior mean of the counterpart's per-item value (per package)."""
        return self.post.p @ self.types

    # ----------------------------------------------------------------------------------- language
    def share_text(self, share: tuple[int, ...]) -> str:
        return describe_allocation(self.items, share, self.plural)

    def command(self, share: tuple[int, ...], word: str = "PROPOSE") -> str:
        return f"{word} " + " ".join(f"{i}={n}" for i, n in zip(self.command_items, share, strict=True))

    def payload(self, share: tuple[int, ...]) -> dict[str, Any]:
        return {"mine": {i: int(n) for i, n in zip(self.items, share, strict=True)}}

    def their_share(self, share: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(c - s for c, s in zip(self.counts, share, strict=True))

    def leak_patterns(self) -> list[str]:
        return []

    def safe(self, text: str) -> str:
        if leaks(text, self.leak_patterns()):
            return "Let me put a concrete split on the table."
        return text

    def their_favourites(self) -> list[str]:
        """Items ordered by how much the counterpart seems to value them (most first)."""
        ev = self.expected_their_values() * np.array(self.counts, dtype=float)
        return [self.items[i] for i in np.argsort(-ev, kind="stable")]

    def offer_message(self, plan: Plan, ctx: TurnContext) -> str:
        share = plan.deal
        assert share is not None
        mine, theirs = self.share_text(share), self.share_text(self.their_share(share))
        rng = self.rng
        opener = ""
        if ctx.pending is not None:
            improved = len(self.their_offers) >= 2 and self.space.utility(self.their_offers[-1]) > self.space.utility(
                self.their_offers[-2]
            )
            options = (
                ("Thanks for moving, we're getting closer.", "That's better, but not quite there yet.")
                if improved
                else ("That split doesn't work for me.", "Thanks, but that leaves me too little.")
            )
            opener = pick(rng, options) + " "
        if plan.tag == "anchor":
            body = pick(
                rng,
                (
                    f"Here's a split I think can work for both of us: I'd take {mine} and you'd get {theirs}.",
                    f"Let's make this easy. How about I take {mine}, and you get {theirs}?",
                    f"I'd like to start here: {mine} for me, {theirs} for you.",
                ),
            )
        elif plan.tag == "final":
            body = pick(
                rng,
                (
                    f"We're running out of time, so this is my final offer: {mine} for me and {theirs} for you.",
                    f"Last offer from my side: I take {mine}, you get {theirs}. I think it's a good deal for you.",
                ),
            )
        elif plan.tag == "hold":
            body = pick(
                rng,
                (
                    f"I still think this is a fair split: {mine} for me, {theirs} for you.",
                    f"I'd like to stick with {mine} for me and {theirs} for you; you get a lot of what you want.",
                ),
            )
        else:
            body = self.concession_sentence(share) + f" So: {mine} for me, {theirs} for you."
        return opener + body

    def concession_sentence(self, share: tuple[int, ...]) -> str:
        previous = self.my_offers[-1] if self.my_offers else None
        favourites = self.their_favourites()
        if previous is None:
            return "Let me meet you partway."
        given = [i for i, a, b in zip(self.items, previous, share, strict=True) if b < a]
        if not given:
            return pick(self.rng, ("Let me rearrange things a little.", "Let me try a different mix."))
        liked = [g for g in given if g in favourites[:1]]
        names = join_words([self.plural[g] for g in given])
        if liked:
            return pick(
                self.rng,
                (
                    f"It sounds like {self.plural[liked[0]]} matter to you, so I can give you more {names}.",
                    f"You seem keen on {self.plural[liked[0]]}, so I'll move on {names}.",
                ),
            )
        return pick(self.rng, (f"I can give you more {names}.", f"I'm willing to move on {names}."))

    def render(self, plan: Plan, ctx: TurnContext) -> tuple[str, str, dict[str, Any]]:
        if plan.kind == "select":
            assert plan.deal is not None
            return self.command(plan.deal, "SELECT"), "select", self.payload(plan.deal)
        if plan.kind == "accept":
            assert plan.deal is not None
            text = pick(
                self.rng,
                (
                    f"Deal! {self.share_text(plan.deal)} for me and the rest for you works.",
                    "That works for me. Deal!",
                    "Great, I can accept that split.",
                ),
            )
            return f"{self.safe(text)}\nACCEPT", "accept", self.payload(plan.deal)
        if plan.kind == "walk":
            text = self.safe("I don't think we can find a split that works for both of us.")
            return f"{text}\n{self.walk_command}", self.walk_kind, {}
        assert plan.deal is not None
        text = self.safe(self.offer_message(plan, ctx))
        return f"{text}\n{self.command(plan.deal)}", "propose", self.payload(plan.deal)

    walk_command = "NO DEAL"
    walk_kind = "no_deal"

    def infer_text(self) -> str:
        favourites = self.their_favourites()
        (_top, p_top), *_ = self.post.top(1)
        ev = self.expected_their_values()
        parts = ", ".join(f"{self.plural[i]} ~{v:.1f}" for i, v in zip(self.items, ev, strict=True))
        return (
            f"They seem to value {self.plural[favourites[0]]} most and {self.plural[favourites[-1]]} least "
            f"(expected per-item values: {parts}; most likely type p={p_top:.2f}; "
            f"{len(self.their_offers)} offer(s) seen)."
        )

    def anticipate_text(self, plan: Plan, ctx: TurnContext) -> str:
        if plan.kind == "accept":
            return "The deal closes now."
        if plan.kind == "walk":
            return "The negotiation ends without a deal."
        if plan.kind == "select":
            return "They will state the same split, so the deal stands."
        p = plan.p_accept if plan.p_accept is not None else 0.0
        if p >= 0.6:
            return f"They will probably accept (p~{p:.2f})."
        want = self.their_favourites()[0]
        return f"They will probably counter (accept p~{p:.2f}) and push for more {self.plural[want]}."

    def belief_summary(self) -> dict[str, Any]:
        (top, p_top), *_ = self.post.top(1)
        return {
            "top_type": tuple(float(x) for x in self.types[top]),
            "p_top": p_top,
            "expected_values": dict(zip(self.items, map(float, self.expected_their_values()), strict=True)),
        }


# ---------------------------------------------------------------------------------------------- DnD
def _dnd_value_vectors(counts: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [
        v
        for v in itertools.product(range(11), repeat=len(counts))
        if sum(a * b for a, b in zip(counts, v, strict=False)) == 10
    ]


class DndDomain(AllocationDomain):
    items = DND_ITEMS
    plural: ClassVar[dict[str, str]] = DND_PLURAL
    command_items = DND_ITEMS

    def __init__(self, agent_id: str, private_view: Mapping[str, Any], space: DealSpace, rng: random.Random):
        counts = tuple(int(space.counts[i]) for i in range(3))  # type: ignore[attr-defined]
        mine = tuple(int(v) for v in space.values)  # type: ignore[attr-defined]
        hyps = _dnd_value_vectors(counts)
        log_prior = []
        for v in hyps:
            everyone = all(a > 0 or b > 0 for a, b in zip(mine, v, strict=True))
            shared = any(a > 0 and b > 0 for a, b in zip(mine, v, strict=True))
            log_prior.append(0.0 if everyone and shared else np.log(0.02))
        super().__init__(
            agent_id,
            private_view,
            space,
            rng,
            hypotheses=[tuple(map(float, v)) for v in hyps],
            log_prior=np.array(log_prior),
            their_walk_points=0.0,
            my_walk_points=0.0,
            disagreement=(0.0, 0.0),
        )

    def leak_patterns(self) -> list[str]:
        from environments.socialrl.dnd import value_patterns

        return [p for item, v in zip(self.items, self.values, strict=True) for p in value_patterns(item, int(v))]

    def on_message(self, text: str) -> None:
        super().on_message(text)
        stated = {}
        for match in re.finditer(r"\b(books?|hats?|balls?)\s+(?:at|=|:)\s*(\d+)\b", text, flags=re.IGNORECASE):
            item = match.group(1).lower().rstrip("s")
            stated[item] = int(match.group(2))
        if re.search(r"\bI\s+value\b", text, flags=re.IGNORECASE) and stated:
            idx = [self.items.index(i) for i in stated]
            target = np.array([stated[i] for i in stated], dtype=float)
            match_all = (np.abs(self.types[:, idx] - target[None, :]) < 1e-9).all(axis=1)
            self.post.update(np.where(match_all, 0.0, -6.0))
            return
        for pattern, sign in ((_NO_NEED, -1.0), (_NEED, 1.0)):
            for sentence in re.split(r"[.!?\n]", text):
                if not re.search(pattern, sentence, flags=re.IGNORECASE):
                    continue
                for k, item in enumerate(self.items):
                    if re.search(rf"\b{item}s?\b", sentence, flags=re.IGNORECASE) and not re.search(
                        r"\b(?:I|we)\s+(?:get|take|keep|have)\b|\byou\s+get\b", sentence, flags=re.IGNORECASE
                    ):
                        share = self.types[:, k] * self.counts[k] / 10.0
                        self.post.update(sign * 1.5 * share)
                if sign < 0:
                    break

    def special(self, ctx: TurnContext) -> Plan | None:
        if "select" not in ctx.allowed:
            return None
        agreed = self.agreed
        if agreed is None:
            agreed = self.last_proposal
            if agreed is not None and float(self.estimates()[1][self.index[agreed]]) <= 0.0:
                agreed = None
        if agreed is None:
            return Plan("walk", None, "no_agreement")
        return Plan("select", agreed, "select")

    def render(self, plan: Plan, ctx: TurnContext) -> tuple[str, str, dict[str, Any]]:
        if plan.kind == "walk" and "select" in ctx.allowed:
            return "NO DEAL", "no_deal", {}
        return super().render(plan, ctx)

    def prefers_walk_at_end(self) -> bool:
        # Walking away scores 0 like a failed selection; keep the last proposal on the table instead.
        return False


# ------------------------------------------------------------------------------------------- CaSiNo
class CasinoDomain(AllocationDomain):
    items = CASINO_ITEMS
    plural: ClassVar[dict[str, str]] = {i: i for i in CASINO_ITEMS}
    command_items = CASINO_ITEMS
    walk_command = "WALK AWAY"
    walk_kind = "walk_away"

    def __init__(self, agent_id: str, private_view: Mapping[str, Any], space: DealSpace, rng: random.Random):
        self.orders = list(itertools.permutations(CASINO_ITEMS))
        hyps = []
        for order in self.orders:
            points = {item: CASINO_POINTS[k] for k, item in enumerate(order)}
            hyps.append(tuple(float(points[i]) for i in CASINO_ITEMS))
        walk = float(private_view.get("public", {}).get("walk_away_points", 5))
        super().__init__(
            agent_id,
            private_view,
            space,
            rng,
            hypotheses=hyps,
            log_prior=np.zeros(len(hyps)),
            their_walk_points=walk,
            my_walk_points=walk,
            disagreement=(walk, walk),
        )
        private = private_view.get("private", {})
        self.my_levels = dict(private.get("priorities", {}))
        self.my_reasons = dict(private.get("reasons", {}))

    def leak_patterns(self) -> list[str]:
        from environments.socialrl.casino import priority_patterns, reason_patterns

        patterns = [p for item, level in self.my_levels.items() for p in priority_patterns(item, level)]
        for reason in self.my_reasons.values():
            patterns += list(reason_patterns(reason))
        return patterns

    def walk_utility(self) -> float:
        return self.my_walk_points / self.total

    def on_message(self, text: str) -> None:
        super().on_message(text)
        stated: dict[str, int] = {}
        for level, word in ((0, r"top|highest|first"), (1, r"second|medium|middle"), (2, r"lowest|least|last|third")):
            m = re.search(rf"\b(?:{word})\s+priority\s+is\s+(?:the\s+)?(food|water|firewood)\b", text, re.IGNORECASE)
            if m:
                stated[m.group(1).lower()] = level
        if stated:
            ok = np.array([all(order.index(i) == lvl for i, lvl in stated.items()) for order in self.orders])
            self.post.update(np.where(ok, 0.0, -6.0))
            return
        for sentence in re.split(r"[.!?\n]", text):
            negative = re.search(_NO_NEED, sentence, flags=re.IGNORECASE) is not None
            if not negative and not re.search(_NEED, sentence, flags=re.IGNORECASE):
                continue
            if re.search(r"\b(?:I|we)\s+(?:get|take|keep|have)\b|\byou\s+get\b", sentence, flags=re.IGNORECASE):
                continue  # a description of an offer, not a statement of needs
            for item, cue in _CASINO_CUES.items():
                if re.search(cue, sentence, flags=re.IGNORECASE):
                    rank = np.array([order.index(item) for order in self.orders], dtype=float)
                    weight = np.array([0.8, 0.1, -0.8])[rank.astype(int)]
                    self.post.update(-weight if negative else weight)

    def offer_message(self, plan: Plan, ctx: TurnContext) -> str:
        text = super().offer_message(plan, ctx)
        if plan.tag == "anchor" and not ctx.pending:
            text = pick(self.rng, ("Hi there! Excited for the trip?", "Hello, fellow camper!")) + " " + text
        return text

    def infer_text(self) -> str:
        (top, p_top), *_ = self.post.top(1)
        order = self.orders[top]
        p = self.post.p
        p_high = {item: float(sum(p[k] for k, o in enumerate(self.orders) if o[0] == item)) for item in self.items}
        best = max(p_high, key=p_high.get)
        return (
            f"They seem to value {best} most (p={p_high[best]:.2f}); most likely order "
            f"{' > '.join(order)} (p={p_top:.2f}); {len(self.their_offers)} offer(s) seen."
        )

    def belief_summary(self) -> dict[str, Any]:
        (top, p_top), *_ = self.post.top(1)
        p = self.post.p
        return {
            "top_order": self.orders[top],
            "p_top": p_top,
            "p_high": {
                item: float(sum(p[k] for k, o in enumerate(self.orders) if o[0] == item)) for item in self.items
            },
        }
