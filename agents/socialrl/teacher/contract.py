"""Teacher domain for the Job Interview contract negotiation (five issues, 2240 contracts).

Counterpart types are a coarse grid drawn once per episode from the public structure of the problem
(seeded particles): issue weights w_i = 0.1 + 0.5 * r_i / sum(r), salary and holidays opposed to ours
and linear, and a random preference over the four options of position, workplace and company (best 1,
worst 0). Per particle: the counterpart's utility of every contract, the Nash bargaining reference (the
rewards are calibrated on it) and so our reward of every contract. Evidence: the counterpart's proposals
(softmax likelihood), the proposals of ours it let pass, and stated priorities/weights in its messages.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from agents.socialrl.teacher.base import MatrixDomain, Plan, TurnContext
from agents.socialrl.teacher.beliefs import Posterior, nash_reference_utilities
from agents.socialrl.teacher.language import join_words, leaks, pick
from environments.socialrl.bargaining import DealSpace
from environments.socialrl.job_interview import ISSUE_WORDS

ISSUES = ("salary", "holidays", "position", "workplace", "company")
NUMERIC = ("salary", "holidays")
N_PARTICLES = 400


class ContractDomain(MatrixDomain):
    beta = 14.0

    def __init__(self, agent_id: str, private_view: Mapping[str, Any], space: DealSpace, rng: random.Random):
        super().__init__(agent_id, private_view, space, rng)
        self.options = {i: tuple(space.options[i]) for i in ISSUES}  # type: ignore[attr-defined]
        self.weights = dict(space.weights)  # type: ignore[attr-defined]
        self.deals = list(space.deals())
        self._init_index()
        # space.deals() is itertools.product over the options in issue order, so indices follow the same order.
        idx = np.array(list(itertools.product(*(range(len(self.options[i])) for i in ISSUES))))
        parts = [np.array(space.values[i]) * self.weights[i] for i in ISSUES]  # type: ignore[attr-defined]
        self.my_u = np.round(sum(parts[j][idx[:, j]] for j in range(len(ISSUES))), 12)
        self.deal_idx = idx  # (D, 5)
        np_rng = np.random.default_rng(rng.getrandbits(63))
        n = N_PARTICLES
        r = np_rng.random((n, len(ISSUES))) + 1e-9
        self.pw = 0.1 + 0.5 * r / r.sum(axis=1, keepdims=True)  # (H, 5)
        self.pv: dict[str, np.ndarray] = {}
        counterpart_is_candidate = self.role == "recruiter"
        for issue in ISSUES:
            k = len(self.options[issue])
            if issue in NUMERIC:
                order = np.argsort(np.array(self.options[issue], dtype=float), kind="stable")
                rising = np.empty(k)
                rising[order] = np.arange(k) / max(k - 1, 1)
                vals = rising if counterpart_is_candidate else 1.0 - rising
                self.pv[issue] = np.tile(vals, (n, 1))
            else:
                raw = np_rng.random((n, k))
                lo, hi = raw.min(axis=1, keepdims=True), raw.max(axis=1, keepdims=True)
                self.pv[issue] = (raw - lo) / np.maximum(hi - lo, 1e-9)
        self.their_u = sum(self.pw[:, j : j + 1] * self.pv[i][:, idx[:, j]] for j, i in enumerate(ISSUES))
        self.their_w = np.zeros(n)
        self.ref_u = nash_reference_utilities(self.my_u, self.their_u)
        safe = np.maximum(self.ref_u, 1e-9)
        self.my_r = np.minimum(1.0, self.my_u[None, :] / safe[:, None])
        self.my_w = np.zeros(n)
        self.post = Posterior.uniform(n)

    # ---------------------------------------------------------------------------------- evidence
    def on_message(self, text: str) -> None:
        super().on_message(text)
        stated = {}
        for issue in ISSUES:
            m = re.search(rf"\b{issue}\s*[:=]?\s*(0?\.\d+|[01](?:\.\d+)?)\b", text, re.IGNORECASE)
            if m and re.search(r"\bweights?\b", text, re.IGNORECASE):
                stated[issue] = float(m.group(1))
        if stated:
            ll = np.zeros(len(self.pw))
            for j, issue in enumerate(ISSUES):
                if issue in stated:
                    ll -= 0.5 * ((self.pw[:, j] - stated[issue]) / 0.04) ** 2
            self.post.update(ll)
        for j, issue in enumerate(ISSUES):
            words = ISSUE_WORDS[issue]
            if re.search(
                rf"\b(?:care\s+(?:the\s+)?most\s+about|most\s+important[^.]*?)\s+(?:the\s+|my\s+)?{words}",
                text,
                re.IGNORECASE,
            ) or re.search(rf"\b{words}\s+(?:is|are|matters?)\s+(?:the\s+)?most\b", text, re.IGNORECASE):
                top = np.argmax(self.pw, axis=1) == j
                self.post.update(np.where(top, 0.0, -3.0))

    # ---------------------------------------------------------------------------------- beliefs
    def expected_weights(self) -> dict[str, float]:
        p = self.post.p
        return {i: float(p @ self.pw[:, j]) for j, i in enumerate(ISSUES)}

    def favourite_option(self, issue: str) -> tuple[str, float]:
        p = self.post.p
        ev = p @ self.pv[issue]
        k = int(np.argmax(ev))
        return str(self.options[issue][k]), float(ev[k])

    # ---------------------------------------------------------------------------------- language
    @staticmethod
    def _quote(option: Any) -> str:
        return f'"{option}"'

    def command(self, deal: tuple) -> str:
        salary, holidays, position, workplace, company = deal
        return (
            f"PROPOSE salary={salary} holidays={holidays} position={self._quote(position)} "
            f"workplace={self._quote(workplace)} company={self._quote(company)}"
        )

    def payload(self, deal: tuple) -> dict[str, Any]:
        return dict(zip(ISSUES, deal, strict=True))

    def package(self, deal: tuple) -> str:
        salary, holidays, position, workplace, company = deal
        return (
            f"the {position} position in {workplace} with {company}, at ${salary} per hour "
            f"with {holidays} days of holidays a week"
        )

    def leak_patterns(self) -> list[str]:
        from environments.socialrl.job_interview import priority_patterns, weight_patterns

        top = max(ISSUES, key=lambda i: self.weights[i])
        return [*priority_patterns(top), *(p for i in ISSUES for p in weight_patterns(i, self.weights[i]))]

    def safe(self, text: str) -> str:
        numbers = [round(self.weights[i], 2) for i in ISSUES]
        if leaks(text, self.leak_patterns(), numbers):
            return "Here is a package I can offer."
        return text

    def concession_note(self, deal: tuple) -> str:
        previous = self.my_offers[-1] if self.my_offers else None
        if previous is None:
            return ""
        moved = [i for i, a, b in zip(ISSUES, previous, deal, strict=True) if a != b]
        if not moved:
            return ""
        weights = self.expected_weights()
        theirs = sorted(moved, key=lambda i: -weights[i])
        return pick(
            self.rng,
            (
                f"I've reworked the {join_words(theirs)} to meet you where it seems to matter to you.",
                f"I can move on {join_words(theirs)}.",
            ),
        )

    def render(self, plan: Plan, ctx: TurnContext) -> tuple[str, str, dict[str, Any]]:
        if plan.kind == "accept":
            text = pick(self.rng, ("That works for me. Deal!", "Great, I agree to these terms.", "Agreed, let's sign."))
            return f"{self.safe(text)}\nACCEPT", "accept", self.payload(plan.deal)
        if plan.kind == "walk":
            return f"{self.safe('I am afraid we cannot agree on a contract.')}\nQUIT", "quit", {}
        deal = plan.deal
        package = self.package(deal)
        rng = self.rng
        counter = ""
        if ctx.pending is not None:
            counter = pick(rng, ("Thanks, but those terms don't work for me yet. ", "I can't agree to that package. "))
        if plan.tag == "anchor":
            body = pick(
                rng,
                (
                    f"Thanks for meeting with me. I'd like to suggest {package}.",
                    f"Here's what I have in mind: {package}.",
                ),
            )
        elif plan.tag == "final":
            body = f"We're nearly out of time, so here is my final offer: {package}."
        elif plan.tag == "hold":
            body = f"I still think {package} is a fair package."
        else:
            note = self.concession_note(deal)
            body = (note + " " if note else "") + f"How about {package}?"
        text = self.safe(counter + body)
        return f"{text}\n{self.command(deal)}", "propose", self.payload(deal)

    def infer_text(self) -> str:
        weights = self.expected_weights()
        top = max(weights, key=weights.get)
        p = self.post.p
        p_top = float(p[np.argmax(self.pw, axis=1) == ISSUES.index(top)].sum())
        likes = []
        for issue in ("position", "workplace", "company"):
            option, value = self.favourite_option(issue)
            if value >= 0.6:
                likes.append(f"{issue} {option}")
        liked = f"; they seem to like {join_words(likes)}" if likes else ""
        return f"They seem to weigh {top} most (p={p_top:.2f}){liked}; {len(self.their_offers)} proposal(s) seen."

    def anticipate_text(self, plan: Plan, ctx: TurnContext) -> str:
        if plan.kind == "accept":
            return "The contract is agreed now."
        if plan.kind == "walk":
            return "The negotiation ends without a contract."
        pa = plan.p_accept or 0.0
        if pa >= 0.6:
            return f"They will probably accept (p~{pa:.2f})."
        weights = self.expected_weights()
        top = max(weights, key=weights.get)
        return f"They will probably counter (accept p~{pa:.2f}) and push on {top}."

    def belief_summary(self) -> dict[str, Any]:
        weights = self.expected_weights()
        return {"expected_weights": weights, "top_issue": max(weights, key=weights.get)}
