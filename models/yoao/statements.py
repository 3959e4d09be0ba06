"""What the seeds said: the choice each statement of a seed-like seat states, beside its votes, per arm.

The mute test rests on what a seed says as much as on how it votes: a seed that votes the cooperative choice
while stating the selfish one (it echoed its selfish teammates in the cpu run of fa7b2df) lifts its teammates
more when muted than when heard. The statement's choice is the one the game itself read from it
(`GameRecord.seat_stated`: the first cooperative or selfish word the game's reader found, None for a statement
that names neither or a silent turn), counted in the rounds the seat played in the seed's place (a removed
seed's rounds after the removal belong to the untrained member who took the seat).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from environments.yoao.red_black import BLACK, RED
from models.yoao.games import SEED_LIKE, GameRecord


@dataclass(frozen=True, kw_only=True)
class SeedStatements:
    """Counts over an arm's games for the seats in the seed's place."""

    statements: int
    """Discussion turns of those seats (one per round and seat)."""
    stated_black: int
    """Statements that state the cooperative choice."""
    stated_red: int
    """Statements that state the selfish choice."""
    stated_none: int
    """Statements that state neither (or silent turns)."""
    votes: int
    """Counted votes of those seats (abstentions left out)."""
    black_votes: int
    """Of which for the cooperative choice."""

    def __post_init__(self) -> None:
        if self.stated_black + self.stated_red + self.stated_none != self.statements:
            raise ValueError("stated_black + stated_red + stated_none must equal statements")
        if not 0 <= self.black_votes <= self.votes:
            raise ValueError("black_votes must lie in [0, votes]")

    def as_json(self) -> dict[str, int]:
        return {
            "statements": self.statements,
            "stated_black": self.stated_black,
            "stated_red": self.stated_red,
            "stated_none": self.stated_none,
            "votes": self.votes,
            "black_votes": self.black_votes,
        }


def seed_statements(records: Iterable[GameRecord]) -> SeedStatements | None:
    """What the seed-like seats of one arm's games stated and voted (None for an arm without such seats)."""
    stated = {BLACK: 0, RED: 0, None: 0}
    votes = black_votes = 0
    seen_seed = False
    for record in records:
        seats = [i for i, role in enumerate(record.roles) if role in SEED_LIKE]
        seen_seed = seen_seed or bool(seats)
        for r in record.round_numbers():
            for i in seats:
                if record.role_in(i, r) == "untrained":
                    continue
                said = record.seat_stated.get(f"A{i}", ())
                stated[said[r - 1] if r <= len(said) else None] += 1
                vote = record.seat_votes[f"A{i}"][r - 1]
                if vote is not None:
                    votes += 1
                    black_votes += vote == BLACK
    if not seen_seed:
        return None
    return SeedStatements(
        statements=sum(stated.values()),
        stated_black=stated[BLACK],
        stated_red=stated[RED],
        stated_none=stated[None],
        votes=votes,
        black_votes=black_votes,
    )
