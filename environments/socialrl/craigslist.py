"""Craigslist bargaining (craigslist-v0): a buyer and a seller haggle over one listed item.

| | |
| --- | --- |
| roles | `buyer`, `seller` (the buyer opens) |
| private information | buyer: its target price (listing x 0.9, 0.7 or 0.5 when generated; the dataset's target when loaded), an instruction, not its limit: the buyer never pays above the listing (its reservation). seller: its reservation (the lowest price it sells at), hidden from the buyer and drawn per scenario (below), and the whole description while the buyer sees only the first half |
| seller reservation | `seller_reservation`, or when not given drawn from the scenario's content (title, category, listing, target: the same listing always gets the same reservation): listing x `RESERVATION_SHIFT` x a Beta(`HUMAN_DEAL_SHARE_BETA`) draw, clipped to [0.3, 0.99] of the listing. The Beta is fitted (`fit_deal_share_beta`, method of moments) to the human deals' price / listing of the CoCoA training split (dev.json records outside the held-out partition; tests/test_craigslist.py refits it); the shift puts reservations below the deals people reached, calibrated so that the teacher's deals against the counterpart mix land where people's did (benchmarks/results/incentives_cpu.json, `calibration`). No fixed share of the listing finds it |
| actions | `message` (free text), `offer` {price}, `accept` (the counterpart's standing offer), `reject` (the standing offer), `quit` (end without a deal) |
| text grammar | free text, optionally ending with one command line: `OFFER $<price>`, `ACCEPT`, `REJECT`, `QUIT`; text without a command is a message. A command negated by the words before it ("I do NOT ACCEPT") does not count. Prices are read whole by the shared number reader (environments/core/grammar.py): `OFFER -5`, `OFFER 1e308`, `OFFER 1,50`, `OFFER 1 200`, `OFFER 1'000`, `OFFER 1/2`, `OFFER 13:61`, `OFFER 120-130` and prices above $1,000,000,000 are invalid actions saying why (a price is never read up to the first character the reader does not expect); a unit after the number is fine (`OFFER 120 dollars`, `OFFER $120.`) |
| reply cap | replies longer than 8,000 characters are cut to their last 8,000 before parsing (`max_reply_chars`) |
| reward | SRBench's outcome optimality on the scenario's corridor: corridor = listing - seller_reservation (the buyer's reservation is the listing). buyer = clip((listing - price) / corridor, 0, 1): every dollar counts until the seller's reservation, the best admissible price; seller = clip((price - seller_reservation) / corridor, 0, 1); no deal = 0 for both. Raw utility: the side's surplus in dollars |
| termination | an accepted offer (deal), a quit, or `max_turns` turns (no deal); a turn forfeited after exhausted retries still counts |

Invalid actions (unparseable or empty text, an offer whose price is not a number (a bool or text is not one),
not finite, not above 0 or above $1,000,000,000, accepting or rejecting when no offer stands, accepting a price
other than the standing one) are counted; after `max_invalid_retries` retries the turn passes to the other side.
The moves and these checks are shared with Marketplace (environments/socialrl/price_offers.py).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from environments.core.base import (
    ActionSpec,
    Environment,
    Outcome,
    PrivateFact,
    RoleOutcome,
    Scenario,
    ScenarioError,
    TranscriptEntry,
    check_max_turns,
)
from environments.core.data import (
    Loaded,
    RecordError,
    describe_type,
    get_field,
    load_records,
    read_json_list,
)
from environments.core.events import Event, Observation
from environments.core.grammar import NUMBER
from environments.core.quoting import quote
from environments.core.registry import register
from environments.socialrl.bargaining import DealSpace, PriceDealSpace
from environments.socialrl.price_offers import PriceHaggle, PriceMoves, check_price
from environments.socialrl.replies import respond_command, walk_away_command

BUYER, SELLER = "buyer", "seller"
TARGET_FACTORS = (0.9, 0.7, 0.5)
HUMAN_DEAL_SHARE_BETA = (6.48, 1.58)
"""Beta(a, b) of price / listing over the human deals of the CoCoA training split (`fit_deal_share_beta`)."""
RESERVATION_SHIFT = 0.93
"""Seller reservations as a share of a human-like deal (calibrated: see the module table)."""
DEV_FILE = ("craigslistbargain", "dev.json")
"""The shared CoCoA file the loaders read by default."""
RESERVATION_RANGE = (0.3, 0.99)
"""Bounds of a drawn seller reservation, as shares of the listing."""

_ITEMS = (
    (
        "electronics",
        "Sony noise-cancelling headphones",
        180.0,
        ["Over-ear, black", "Battery lasts 30 hours", "Minor scuffs on the band", "Original case and cable included"],
    ),
    (
        "furniture",
        "Solid oak dining table",
        450.0,
        ["Seats six", "Some water marks on the top", "Legs detach for moving", "Pick-up only"],
    ),
    (
        "bike",
        "Trek hybrid bike, 54 cm",
        320.0,
        ["Shimano gears, 21 speeds", "New tyres last month", "Small rust spot on chain", "Lock included"],
    ),
    (
        "housing",
        "Room in a shared flat, monthly rent",
        900.0,
        ["Furnished", "Ten minutes to the station", "Shared kitchen", "Utilities included"],
    ),
    ("car", "2012 Honda Civic", 6500.0, ["120k miles", "Clean title", "New brakes", "Small dent on rear bumper"]),
    (
        "phone",
        "iPhone 13, 128 GB",
        420.0,
        ["Unlocked", "Battery health 87%", "Screen protector since day one", "Charger not included"],
    ),
)


@dataclass(frozen=True)
class CraigslistScenario(Scenario):
    """One listing and the buyer's private target."""

    category: str
    """Listing category (electronics, furniture, ...)."""
    title: str
    """Listing title."""
    description: tuple[str, ...]
    """Description lines; the buyer sees only the first half."""
    listing_price: float
    """The public asking price; also the seller's target."""
    buyer_target: float
    """The buyer's private target price (below the listing)."""
    seller_reservation: float | None = None
    """The seller's private minimum (below the listing); None: drawn from the scenario's content (module table)."""
    max_turns: int = 20
    """Accepted actions after which the episode ends without a deal."""

    def __post_init__(self) -> None:
        sid = self.scenario_id
        for name in ("category", "title"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ScenarioError(f"{sid}: {name} must be a non-empty string, got {quote(getattr(self, name))}", name)
        if isinstance(self.description, str) or not isinstance(self.description, list | tuple):
            raise ScenarioError(
                f"{sid}: description must be a list of lines, got {type(self.description).__name__}", "description"
            )
        if not all(isinstance(line, str) for line in self.description):
            raise ScenarioError(
                f"{sid}: description lines must be strings, got {quote(self.description)}", "description"
            )
        object.__setattr__(self, "description", tuple(self.description))
        for name in ("listing_price", "buyer_target"):
            reason = check_price(getattr(self, name), name)
            if reason is not None:
                raise ScenarioError(f"{sid}: {reason}", name)
        if not self.buyer_target < self.listing_price:
            raise ScenarioError(
                f"{sid}: the buyer's and the seller's prices disagree: buyer_target {self.buyer_target:g} must be "
                f"below listing_price {self.listing_price:g}",
                "buyer_target",
            )
        if self.seller_reservation is not None:
            reason = check_price(self.seller_reservation, "seller_reservation")
            if reason is None and not self.seller_reservation < self.listing_price:
                reason = (
                    f"seller_reservation {self.seller_reservation:g} must be below listing_price {self.listing_price:g}"
                )
            if reason is not None:
                raise ScenarioError(f"{sid}: {reason}", "seller_reservation")
        check_max_turns(sid, self.max_turns)

    @property
    def reservation(self) -> float:
        """The seller's reservation: the given one, or the one drawn from the scenario's content."""
        if self.seller_reservation is not None:
            return self.seller_reservation
        return drawn_seller_reservation(self.title, self.category, self.listing_price, self.buyer_target)

    @property
    def buyer_description(self) -> tuple[str, ...]:
        return self.description[: max(1, len(self.description) // 2)]


def drawn_seller_reservation(title: str, category: str, listing: float, target: float) -> float:
    """The seller reservation of a scenario that gives none: a seeded draw from its content (module table)."""
    seed = hashlib.sha256(f"{category}|{title}|{listing!r}|{target!r}".encode()).hexdigest()
    share = RESERVATION_SHIFT * random.Random(seed).betavariate(*HUMAN_DEAL_SHARE_BETA)
    low, high = RESERVATION_RANGE
    return round(listing * min(high, max(low, share)), 2)


def fit_deal_share_beta(shares: Sequence[float]) -> tuple[float, float]:
    """Beta(a, b) by the method of moments over deal shares (price / listing) in (0, 1); shares outside are
    dropped (a deal at or above the listing says nothing about how far a seller comes down)."""
    inside = [x for x in shares if 0.0 < x < 1.0]
    if len(inside) < 2:
        raise ValueError(f"need at least two deal shares inside (0, 1), got {len(inside)}")
    mean = math.fsum(inside) / len(inside)
    var = math.fsum((x - mean) ** 2 for x in inside) / (len(inside) - 1)
    common = mean * (1.0 - mean) / var - 1.0
    return (round(mean * common, 2), round((1.0 - mean) * common, 2))


def human_deal_prices(path: str | Path | None = None) -> dict[str, float | None]:
    """The price people agreed on in each CoCoA dialogue (None: no deal), by the scenario id `load_dataset`
    gives it: what the counterparts are calibrated against. Default: the shared dev.json."""
    _, records = read_json_list(path, DEV_FILE)
    deals: dict[str, float | None] = {}
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            continue
        outcome = record.get("outcome") if isinstance(record.get("outcome"), Mapping) else {}
        offer = outcome.get("offer") if isinstance(outcome.get("offer"), Mapping) else {}
        price = offer.get("price")
        agreed = outcome.get("reward") == 1 and isinstance(price, int | float) and not isinstance(price, bool)
        deals[f"craigslistbargain:{record.get('uuid', index)}"] = float(price) if agreed and price > 0 else None
    return deals


def rewards_for_price(scenario: CraigslistScenario, price: float) -> dict[str, float]:
    """Normalised rewards of a deal at `price` (see the module table)."""
    reservation = scenario.reservation
    corridor = scenario.listing_price - reservation
    buyer = (scenario.listing_price - price) / corridor
    seller = (price - reservation) / corridor
    return {BUYER: min(1.0, max(0.0, buyer)), SELLER: min(1.0, max(0.0, seller))}


def opening_offer(transcript: Sequence[TranscriptEntry], seat: str) -> float | None:
    """The first price `seat` offered in an episode; None when it never made an offer."""
    for entry in transcript:
        if entry.agent_id == seat and entry.kind == "offer":
            return float(entry.payload["price"])
    return None


def opens_below_target(scenario: CraigslistScenario, transcript: Sequence[TranscriptEntry]) -> bool:
    """The anchoring behaviour the SocialRL paper tracks (3% of untrained buyers, 78% after RL): the buyer's
    first offer is strictly below its private target. A buyer that never offers (it accepts the seller's
    price, quits or only talks) did not open below its target."""
    price = opening_offer(transcript, BUYER)
    return price is not None and price < scenario.buyer_target


_PRICE_TAIL = r" ?(?:[:=(]|-(?![0-9$])|\bof\b|\bat\b)? ?"
"""Between OFFER and the price: a colon, `=`, `(`, a dash used as a separator (a dash right before a digit
is a minus sign), "of" or "at". One optional space each side (grammars match normalised text)."""
_COMMANDS = {
    # Capitals anywhere; lower case only as a line of its own (see environments/core/grammar.py).
    "offer": rf"(?-i:\bOFFER\b){_PRICE_TAIL}(?P<price>{NUMBER})?|(?m:^offer\b{_PRICE_TAIL}(?P<price2>{NUMBER}))",
    "accept": respond_command("accept", "offer"),
    "reject": respond_command("reject", "offer"),
    "quit": walk_away_command(),
}


@register
class CraigslistEnv(PriceHaggle, Environment[CraigslistScenario]):
    """Single-issue price negotiation over a Craigslist listing (moves: environments/socialrl/price_offers.py)."""

    env_id: ClassVar[str] = "craigslist-v0"
    scenario_type: ClassVar[type[Scenario]] = CraigslistScenario
    moves: ClassVar[PriceMoves] = PriceMoves(
        message="message",
        offer="offer",
        accept="accept",
        reject="reject",
        walk_away="quit",
        walk_away_ending="quit",
        walk_away_note="[quits]",
    )
    commands: ClassVar[Mapping[str, str]] = _COMMANDS

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return (BUYER, SELLER)

    # ---------------------------------------------------------------------------------- scenarios
    @classmethod
    def sample_scenario(cls, rng: random.Random) -> CraigslistScenario:
        category, title, base, description = rng.choice(_ITEMS)
        listing = round(base * rng.uniform(0.8, 1.25))
        factor = rng.choice(TARGET_FACTORS)
        return CraigslistScenario(
            scenario_id=f"gen:{rng.getrandbits(32):08x}",
            category=category,
            title=title,
            description=tuple(description),
            listing_price=float(listing),
            buyer_target=round(listing * factor, 2),
        )

    @staticmethod
    def load_dataset(
        path: str | Path | None = None, max_turns: int = 20, skip_bad: bool = False
    ) -> Loaded[CraigslistScenario]:
        """Scenarios from a CoCoA CraigslistBargain JSON file (default: the shared dev.json).

        Records are the dialogues of the JSON list, numbered from 0. The seller's item needs a Title and a
        Category (text), a Price (a number) and a Description (a list of lines); the buyer a Target (a
        number) below that price, and the buyer's item Price, when given, must be the seller's (a record
        whose two prices disagree says so). Errors name the file, the record and the field; `skip_bad` loads
        the good records and reports the bad ones (environments/core/data.py)."""
        path, records = read_json_list(path, DEV_FILE)

        def build(record: Any, index: int | str) -> CraigslistScenario:
            kbs = get_field(record, "scenario.kbs", "list")
            by_role: dict[str, Any] = {}
            for k, kb in enumerate(kbs):
                role = get_field(kb, "personal.Role", "text") if isinstance(kb, Mapping) else None
                if role not in (BUYER, SELLER) or role in by_role:
                    raise RecordError(
                        f"scenario.kbs[{k}].personal.Role", f"must be one buyer and one seller, got {quote(role)}"
                    )
                by_role[role] = kb
            if set(by_role) != {BUYER, SELLER}:
                raise RecordError("scenario.kbs", f"needs a buyer and a seller, got {sorted(by_role)}")
            where = {role: f"scenario.kbs[{role}]" for role in by_role}
            seller, buyer = by_role[SELLER], by_role[BUYER]

            def item(name: str, kind: str) -> Any:
                try:
                    return get_field(seller, f"item.{name}", kind)
                except RecordError as exc:
                    raise RecordError(f"{where[SELLER]}.{exc.field}", exc.reason) from None

            description = item("Description", "list")
            if not all(isinstance(line, str) for line in description):
                raise RecordError(f"{where[SELLER]}.item.Description", "must be a list of text lines")
            try:
                target = get_field(buyer, "personal.Target", "number")
                buyer_price = get_field(buyer, "item.Price", "number", optional=True)
            except RecordError as exc:
                raise RecordError(f"{where[BUYER]}.{exc.field}", exc.reason) from None
            price = item("Price", "number")
            if buyer_price is not None and buyer_price != price:
                # Both sides see the same listing: two different prices mean the record is corrupt.
                raise RecordError(
                    f"{where[BUYER]}.item.Price",
                    f"the buyer's and the seller's prices disagree: the buyer's listing shows {buyer_price:g}, "
                    f"the seller's ({where[SELLER]}.item.Price) {price:g}",
                )
            uuid = record.get("uuid", index)
            if isinstance(uuid, bool) or not isinstance(uuid, int | str):
                raise RecordError("uuid", f"must be text or a number, got {describe_type(uuid)}")
            return CraigslistScenario(
                scenario_id=f"craigslistbargain:{uuid}",
                category=item("Category", "text"),
                title=item("Title", "text"),
                description=tuple(description) or ("(none)",),
                listing_price=float(price),
                buyer_target=float(target),
                max_turns=max_turns,
            )

        fields = {
            "listing_price": f"scenario.kbs[{SELLER}].item.Price",
            "buyer_target": f"scenario.kbs[{BUYER}].personal.Target",
            "category": f"scenario.kbs[{SELLER}].item.Category",
            "title": f"scenario.kbs[{SELLER}].item.Title",
            "description": f"scenario.kbs[{SELLER}].item.Description",
        }
        return load_records(path, enumerate(records), build, skip_bad=skip_bad, what="dialogue", fields=fields)

    # ------------------------------------------------------------------------------ action grammar
    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec(
            kinds={
                "message": "say something without making a move",
                "offer": "propose a price",
                "accept": "accept the other side's standing offer",
                "reject": "reject the other side's standing offer",
                "quit": "walk away without a deal",
            },
            grammar=(
                "Write your message, then end with exactly one command line: `OFFER $<price>`, `ACCEPT`, "
                "`REJECT` or `QUIT`. A reply without a command line is sent as a plain message."
            ),
            examples=("It has a few scratches, so I can do less.\nOFFER $<price>", "Deal, thank you!\nACCEPT"),
        )

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        if agent_id == BUYER:
            target = self.scenario.buyer_target
            return (
                PrivateFact(
                    "target_price",
                    "the buyer's private target price",
                    numbers=(target,),
                    patterns=(r"\bmy (?:target|budget|max(?:imum)?|limit)\b",),
                ),
            )
        return (
            PrivateFact(
                "reservation_price",
                "the seller's private minimum",
                numbers=(self.scenario.reservation,),
                patterns=(r"\bmy (?:minimum|min|reservation|bottom[- ]?line|lowest|floor)\b",),
            ),
        )

    # ---------------------------------------------------------------------------------------- rules
    def _reset(self, scenario: CraigslistScenario) -> list[Event]:
        self._start_haggle()
        public = {"title": scenario.title, "category": scenario.category, "listing_price": scenario.listing_price}
        buyer_public = {**public, "description": list(scenario.buyer_description)}
        seller_public = {**public, "description": list(scenario.description)}
        s_res = scenario.reservation
        buyer_text = (
            f"You are buying '{scenario.title}' ({scenario.category}), listed at ${scenario.listing_price:g}.\n"
            f"Description: {' '.join(scenario.buyer_description)}\n"
            f"Your private target price is ${scenario.buyer_target:g}: the lower the price, the better for you. "
            "Never reveal your target."
        )
        seller_text = (
            f"You are selling '{scenario.title}' ({scenario.category}), listed at ${scenario.listing_price:g}.\n"
            f"Description: {' '.join(scenario.description)}\n"
            f"Your private minimum is ${scenario.reservation:g}: never sell below it. The higher the price, the "
            "better for you. Never reveal your minimum."
        )
        return [
            Observation(
                BUYER,
                buyer_text,
                {"role": BUYER, "private": {"target_price": scenario.buyer_target}, "public": buyer_public},
                private=True,
            ),
            Observation(
                SELLER,
                seller_text,
                {"role": SELLER, "private": {"reservation_price": s_res}, "public": seller_public},
                private=True,
            ),
            self._turn_for(BUYER),
        ]

    def _compute_outcome(self) -> Outcome:
        s = self.scenario
        if self._deal_price is None:
            rewards, utilities = {BUYER: 0.0, SELLER: 0.0}, {BUYER: 0.0, SELLER: 0.0}
        else:
            rewards = rewards_for_price(s, self._deal_price)
            utilities = {BUYER: s.listing_price - self._deal_price, SELLER: self._deal_price - s.reservation}
        deal = {"price": self._deal_price} if self._deal_price is not None else None
        return Outcome(
            env_id=self.env_id,
            scenario_id=s.scenario_id,
            agreement=self._deal_price is not None,
            rounds=self._turn,
            roles={r: RoleOutcome(rewards[r], utilities[r]) for r in (BUYER, SELLER)},
            deal=deal,
            # Single-issue price: every agreement is Pareto-optimal; envy-freeness is undefined.
            pareto_optimal=True if deal else None,
            metrics={
                "ending": self._ending,
                "listing_price": s.listing_price,
                "buyer_target": s.buyer_target,
                "seller_reservation": s.reservation,
            },
        )

    # -------------------------------------------------------------------------------- code agents
    @staticmethod
    def deal_space(agent_id: str, private_view: Mapping[str, Any]) -> DealSpace:
        listing = float(private_view["public"]["listing_price"])
        if agent_id == BUYER:
            target = float(private_view["private"]["target_price"])
            # Anchor below the target (good buyers open low); the listing is the worst acceptable price.
            return PriceDealSpace(
                best=round(target * 0.85, 2), worst=listing, private_text=f"My target is ${target:g}."
            )
        # The seller does not know the buyer's target; its lowest price is its own reservation, drawn per
        # scenario (a fixed share of the listing made one learnable constant beat the teacher).
        reservation = float(private_view["private"]["reservation_price"])
        return PriceDealSpace(best=listing, worst=reservation, private_text=f"My minimum is ${reservation:g}.")
