"""Teacher domain for calendar scheduling (either seat: the principal's assistant or the requestor).

Counterpart model: per candidate slot, a distribution over {busy, free with preference 0, 0.25, 0.5,
0.75, 1} (independent across slots). Evidence: a slot the counterpart proposes is almost surely free for
it and probably one it likes (early proposals most of all); a proposal of ours it lets pass is busy for it
or one it does not like; availability statements in its messages ("10:00 doesn't work", "I have X at
10:00") mark slots busy or free.

Own reward (public formula): a booked slot free for both earns pref(slot) / max pref over the mutually
free slots; a conflicting booking earns 0; ending on purpose earns 1 when no mutually free slot exists.
With independent slots the expected reward of proposing slot s is exact: P(s free for them) times the
expectation, over which of our better slots are also free for them, of pref(s) / max pref. Walking away
is worth P(no common free slot).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from agents.socialrl.teacher.base import Domain, Plan, TurnContext
from agents.socialrl.teacher.language import join_words, pick
from environments.socialrl.bargaining import DealSpace
from environments.socialrl.calendar_scheduling import format_time, parse_time

REPEAT_DISCOUNT = 0.75
LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
PRIOR = np.array([0.45, *([0.11] * 5)])  # busy, then free at each preference level
_PLAIN_WORDS = frozenset(
    ["with", "from", "that", "this", "into", "about", "after", "before", "their", "weekly", "daily", "monthly"]
)
"""Words of secret titles too plain to give anything away (the guard would only make messages bland)."""
_TIME = r"(?:noon|\d{1,2}(?::\d{2})?\s*(?:[ap]\.?\s*m\.?)?)"
_BUSY = r"\b(?:not\s+(?:available|free|possible)|unavailable|busy|booked|blocked|taken|doesn'?t\s+work|does\s+not\s+work|won'?t\s+work|can'?t|cannot|conflict)\b|\bI\s+have\s+['\"]"
_FREE = r"\b(?:available|free|works?\s+(?:for|on)|open)\b"
_CUE_WORDS = (
    r"\b(?:because|due\s+to|owing\s+to|appointment|doctor|dentist|medical|therapy|physio\w*|private|personal"
    r"|confidential|secret|meeting|call|session|class|lesson|event|review|sync|check-?in|1:1|one-on-one|interview"
    r"|lunch|training|practice|errand|engagement|preferences?|preferred|scores?|rating|rated)\b"
)


class CalendarDomain(Domain):
    def __init__(self, agent_id: str, private_view: Mapping[str, Any], space: DealSpace, rng: random.Random):
        super().__init__(agent_id, private_view, space, rng)
        public, private = private_view.get("public", {}), private_view.get("private", {})
        self.slots: list[str] = list(public["slots"])
        self.slot_minutes = int(public.get("slot_minutes", 60))
        self.starts = [parse_time(s) for s in self.slots]
        prefs = private.get("preferences", {})
        self.pref = np.array([float(prefs.get(s, 0.0)) for s in self.slots])
        self.util = np.array([space.utility(s) for s in self.slots])
        self.mine_free = self.util >= 0
        self.principal = str(public.get("principal", "them"))
        self.requestor_name = str(public.get("requestor", "the requestor"))
        self.assistant = self.role == "assistant"
        self.requested = private.get("requested_slot")
        calendar = private.get("calendar", [])
        words: set[str] = set()
        public_text = " ".join(
            [str(public.get("meeting", {}).get("title", "")), str(public.get("meeting", {}).get("description", ""))]
        )
        public_words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'&-]*", public_text)}
        for event in calendar:
            if event.get("secret"):
                for w in re.findall(r"[A-Za-z][A-Za-z'&-]*", str(event.get("title", ""))):
                    if len(w) >= 4 and w.lower() not in public_words and w.lower() not in _PLAIN_WORDS:
                        words.add(w.lower().removesuffix("'s"))
        self.secret_words = sorted(words)
        self.belief = np.tile(np.log(PRIOR), (len(self.slots), 1))  # (n, 6) log
        self.their_proposals: list[int] = []
        self.p_erratic = 0.1
        """Probability that the counterpart proposes slots at random (its proposals then say nothing)."""

    # --------------------------------------------------------------------------------- beliefs
    def probs(self) -> np.ndarray:
        b = np.exp(self.belief - self.belief.max(axis=1, keepdims=True))
        return b / b.sum(axis=1, keepdims=True)

    def p_free(self) -> np.ndarray:
        return 1.0 - self.probs()[:, 0]

    def _bump(self, j: int, factors: np.ndarray) -> None:
        self.belief[j] += np.log(np.maximum(factors, 1e-6))

    def slot_index(self, deal) -> int | None:
        try:
            return self.slots.index(str(deal))
        except ValueError:
            return None

    def on_offer(self, deal, turn: int, max_turns: int) -> None:
        super().on_offer(deal, turn, max_turns)
        j = self.slot_index(deal)
        if j is None:
            return
        # Is the counterpart erratic? A considered counterpart proposes the free slots it likes (by the
        # current belief, a softmax over slots); an erratic one any slot at all.
        probs = self.probs()
        appeal = probs[:, 1:] @ np.exp(2.5 * LEVELS)
        p_considered = appeal[j] / appeal.sum()
        p_uniform = 1.0 / len(self.slots)
        e = self.p_erratic
        self.p_erratic = e * p_uniform / (e * p_uniform + (1.0 - e) * p_considered)
        trust = 1.0 - self.p_erratic
        k = len(self.their_proposals)
        strength = 2.5 * (0.7**k)
        self._bump(j, (1.0 - trust) + trust * np.array([0.05, *np.exp(strength * LEVELS)]))
        # They chose this slot over every slot they have never proposed: those are less likely to be
        # free slots they like best.
        if j not in self.their_proposals:
            for other in range(len(self.slots)):
                if other != j and other not in self.their_proposals:
                    self._bump(other, (1.0 - trust) + trust * np.array([1.0, 1.0, 1.0, 1.0, 0.8, 0.6]))
        self.their_proposals.append(j)

    def on_not_accepted(self, deal, turn: int, max_turns: int, rejected: bool) -> None:
        super().on_not_accepted(deal, turn, max_turns, rejected)
        j = self.slot_index(deal)
        if j is None:
            return
        # A free slot is let pass when it is below what they hold out for now (little early, a lot at
        # their deadline); a busy one always is.
        if turn >= max_turns - 2:
            free_factor = np.full(5, 0.15)
        else:
            free_factor = 1.0 - 0.8 * self._like(LEVELS, turn / max(1, max_turns))
        trust = 1.0 - self.p_erratic
        self._bump(j, (1.0 - trust) + trust * np.array([1.0, *free_factor]))

    @staticmethod
    def _like(levels: np.ndarray, clock: float) -> np.ndarray:
        """Probability that a counterpart accepts a free slot of each preference level at `clock`."""
        threshold = 1.0 - 0.9 * clock**4
        return 1.0 / (1.0 + np.exp(-(levels - threshold) / 0.1))

    def on_message(self, text: str) -> None:
        super().on_message(text)
        for sentence in re.split(r"(?<=[.!?;])\s+|\n", text):
            times = []
            for m in re.finditer(_TIME, sentence, flags=re.IGNORECASE):
                token = m.group(0).strip()
                if re.search(r"[-\u2013]\s*$|\bto\s*$|\buntil\s*$", sentence[: m.start()]):
                    continue  # the end of a range
                if not re.search(r":|[ap]\.?\s*m|noon", token, flags=re.IGNORECASE):
                    continue  # a bare number is not a time
                start = parse_time(token, [s for s in self.starts if s is not None])
                if start is not None and format_time(start) in self.slots:
                    times.append(self.slots.index(format_time(start)))
            if not times:
                continue
            if re.search(_BUSY, sentence, flags=re.IGNORECASE):
                for j in times:
                    self._bump(j, np.array([1.0, *([0.1] * 5)]))
            elif re.search(_FREE, sentence, flags=re.IGNORECASE):
                for j in times:
                    self._bump(j, np.array([0.3, *([1.0] * 5)]))

    # ------------------------------------------------------------------------------- estimates
    def expected_rewards(self) -> tuple[np.ndarray, float]:
        """(R per slot, W): expected own reward of booking each slot (given it is accepted) and of
        ending on purpose, exact under slot independence."""
        pf = self.p_free()
        n = len(self.slots)
        r = np.zeros(n)
        free = [j for j in range(n) if self.mine_free[j]]
        order = sorted(free, key=lambda j: -self.pref[j])
        for s in free:
            above = [t for t in order if self.pref[t] > self.pref[s] + 1e-12]
            total, none_above = 0.0, 1.0
            for t in above:  # the best mutually free slot is t when t is free and none better is
                total += none_above * pf[t] * (self.pref[s] / self.pref[t])
                none_above *= 1.0 - pf[t]
            ratio_if_top = 1.0  # s is the best mutually free slot (pref / pref, or 0 / 0 read as 1)
            total += none_above * ratio_if_top
            r[s] = pf[s] * total
        w = float(np.prod([1.0 - pf[j] for j in free])) if free else 1.0
        return r, w

    def p_accept(self, j: int, clock: float, final: bool) -> float:
        probs = self.probs()[j]
        if final:
            return float(probs[2:].sum() + 0.5 * probs[1])
        return float((probs[1:] * self._like(LEVELS, clock)).sum())

    def their_value(self) -> np.ndarray:
        probs = self.probs()
        return probs[:, 1:] @ LEVELS - probs[:, 0]

    # ------------------------------------------------------------------------------- decisions
    def special(self, ctx: TurnContext) -> Plan | None:
        if not self.mine_free.any():
            return Plan("walk", None, "no_own_slot", 1.0)
        return None

    def decide(self, ctx: TurnContext) -> Plan:
        r, w = self.expected_rewards()
        pf = np.maximum(self.p_free(), 1e-9)
        r_if_free = r / pf  # expected reward of a slot given that it is free for them
        c = self.their_value()
        free = [int(j) for j in np.flatnonzero(self.mine_free)]
        pending = self.slot_index(ctx.pending) if ctx.pending is not None else None
        if pending is not None and not self.mine_free[pending]:
            pending = None
        pending_value = float(r[pending]) if pending is not None else 0.0
        if ctx.final_offer or ctx.my_last:
            # If they let our final offer pass and we still act afterwards, we can take their standing
            # offer or end on purpose then; otherwise the clock ends it with nothing.
            after = 0.0
            if ctx.turn + 2 <= ctx.max_turns - 1:
                # Their last counter-offer is most likely one of the slots they have proposed before.
                theirs = [float(r[k]) for k in set(self.their_proposals) if self.mine_free[k]]
                after = max(w, pending_value, 0.7 * max(theirs, default=0.0))
            ev = {}
            for j in free:
                p_acc = self.p_accept(j, ctx.clock, True)
                ev[j] = p_acc * r_if_free[j] + (1.0 - p_acc) * after
            j = max(ev, key=lambda k: (ev[k], c[k]))
            planned = Plan("offer", self.slots[j], "final", float(ev[j]), self.p_accept(j, ctx.clock, True))
            if w >= ev[j]:
                planned = Plan("walk", None, "no_common_time", w)
        else:
            a = 1.0 - ctx.clock ** (1.0 / 0.6)
            best = max(self.util[j] for j in free)
            ok = [j for j in free if self.util[j] >= min(a, best) - 1e-9]
            # Among the slots still good enough for us, the best expected reward (free for them and
            # good for us), rotating away from slots they have already let pass so that every good
            # slot gets a chance before the deadline.
            # (An erratic counterpart's refusals say nothing, so with one there is no reason to rotate.)
            tried = {k: sum(1 for d in self.my_offers if d == self.slots[k]) for k in ok}
            discount = 1.0 - (1.0 - REPEAT_DISCOUNT) * (1.0 - self.p_erratic)
            j = max(ok, key=lambda k: (r[k] * discount ** tried[k] + 0.05 * c[k], self.util[k]))
            tag = "anchor" if not self.my_offers else ("hold" if self.slots[j] == self.my_offers[-1] else "concede")
            planned = Plan("offer", self.slots[j], tag, float(r_if_free[j]), self.p_accept(j, ctx.clock, False))
            if w >= 0.85 and ctx.turn >= 3:
                planned = Plan("walk", None, "no_common_time", w)
        if pending is not None:
            # Their standing offer stays available while we keep negotiating, so it is taken only when it
            # is worth what our own plan would bring if accepted (or at the end, when it beats walking).
            if ctx.my_last and pending_value > w + 1e-9:
                return Plan("accept", self.slots[pending], "accept_deadline", pending_value, alternative=planned.deal)
            bar = planned.value if planned.value is not None else 0.0
            if not ctx.my_last and (
                pending_value >= bar - 1e-9 or pending_value >= 0.99 or planned.deal == ctx.pending
            ):
                return Plan("accept", self.slots[pending], "accept_good", pending_value, alternative=planned.deal)
        if ctx.my_last:
            return Plan("walk", None, "deadline_walk", w)
        return planned

    # -------------------------------------------------------------------------------- language
    def safe(self, text: str) -> str:
        low = text.lower()
        if any(re.search(rf"\b{re.escape(w)}", low) for w in self.secret_words) or re.search(
            _CUE_WORDS, text, flags=re.IGNORECASE
        ):
            return "Let's find a time that works for both sides."
        return text

    def render(self, plan: Plan, ctx: TurnContext) -> tuple[str, str, dict[str, Any]]:
        rng = self.rng
        who = self.requestor_name if self.assistant else self.principal
        if plan.kind == "accept":
            text = pick(rng, (f"{plan.deal} works. Thank you!", f"Great, {plan.deal} it is.", f"{plan.deal} is fine."))
            return f"{self.safe(text)}\nACCEPT", "accept", {"slot": str(plan.deal)}
        if plan.kind == "walk":
            if self.assistant:
                text = "I'm sorry, there is no time that works for both calendars today."
                return f"{self.safe(text)}\nDECLINE", "decline", {}
            text = "It looks like there is no time that works for both of us today. Let's try another day."
            return f"{self.safe(text)}\nEND", "end", {}
        slot = str(plan.deal)
        parts = []
        if ctx.pending is not None:
            pj = self.slot_index(ctx.pending)
            if pj is not None and not self.mine_free[pj]:
                parts.append(
                    pick(
                        rng,
                        (
                            f"Unfortunately {ctx.pending} doesn't work on our side.",
                            f"{ctx.pending} is not available for us.",
                        ),
                    )
                )
            else:
                parts.append(
                    pick(
                        rng,
                        (f"{ctx.pending} is possible, but not ideal for us.", f"Thanks for suggesting {ctx.pending}."),
                    )
                )
        if plan.tag == "anchor":
            if self.assistant:
                parts.append(
                    pick(
                        rng,
                        (
                            f"Thanks for reaching out, {who}! Would {slot} work for you?",
                            f"Hello {who}, could we do {slot}?",
                        ),
                    )
                )
            else:
                parts.append(
                    pick(
                        rng,
                        (
                            f"Hi! I'd like to find a time for {who} and me to get together. Would {slot} work?",
                            f"Hello! Could we meet at {slot}?",
                        ),
                    )
                )
        elif plan.tag == "final":
            parts.append(
                pick(
                    rng,
                    (
                        f"Could we settle on {slot}? It's the best option I see left.",
                        f"Let's lock in {slot} if that suits you.",
                    ),
                )
            )
        else:
            unavailable = [self.slots[j] for j in range(len(self.slots)) if not self.mine_free[j]]
            parts.append(pick(rng, (f"How about {slot}?", f"Would {slot} work instead?", f"We could also do {slot}.")))
            if unavailable and rng.random() < 0.3:
                parts.append(f"Note that {join_words(unavailable[:2])} won't work on our side.")
        text = self.safe(" ".join(parts))
        return f"{text}\nPROPOSE {slot}", "propose", {"slot": slot}

    def infer_text(self) -> str:
        pf = self.p_free()
        _, w = self.expected_rewards()
        likely = [f"{self.slots[j]} (p={pf[j]:.2f})" for j in np.argsort(-pf, kind="stable")[:2] if pf[j] >= 0.6]
        busy = [self.slots[j] for j in range(len(self.slots)) if pf[j] <= 0.2]
        text = f"They are likely free at {join_words(likely)}" if likely else "Their availability is still unclear"
        if busy:
            text += f"; likely busy at {join_words(busy[:3])}"
        return text + f"; P(no common free time)={w:.2f}."

    def anticipate_text(self, plan: Plan, ctx: TurnContext) -> str:
        if plan.kind == "accept":
            return "The slot is booked now."
        if plan.kind == "walk":
            return "The request ends without a booking."
        pa = plan.p_accept or 0.0
        if pa >= 0.6:
            return f"They will probably accept {plan.deal} (p~{pa:.2f})."
        c = self.their_value()
        j = int(np.argmax(c))
        return f"They will probably suggest another time, maybe {self.slots[j]} (accept p~{pa:.2f})."

    def belief_summary(self) -> dict[str, Any]:
        _, w = self.expected_rewards()
        return {"p_free": dict(zip(self.slots, map(float, self.p_free()), strict=True)), "p_no_common": w}
