"""Which episodes represent a policy: best, median and worst by the policy seat's reward, and the one with the
most refused attempts where any has one (models/evaluation/transcripts.py shows them).

Ties break by episode id; an episode that earns several labels is shown once with all of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

MOST_REFUSED = "most refused"
"""Label of the episode whose policy seat had the most refused attempts (only where some episode has one)."""
LABELS = ("best", "median", "worst", MOST_REFUSED)
"""Labels of the representative episodes, in the order they are shown."""


@dataclass(frozen=True)
class ScoredEpisode:
    """One episode of a policy with the reward of the policy's seat (what the choice ranks by)."""

    episode_id: str
    """The episode's id (also the tie-breaker)."""
    reward: float
    """The policy seat's normalised reward."""
    seat: str = ""
    """The policy's seat in this episode."""
    policy: str = ""
    """Which policy played it (the grouping key of `representatives_by_policy`)."""
    refused: int = 0
    """Refused attempts of the policy's seat (its invalid actions): what `most refused` ranks by."""

    def __post_init__(self) -> None:
        if not isinstance(self.reward, int | float) or math.isnan(float(self.reward)):
            raise ValueError(f"episode {self.episode_id!r}: reward must be a number, got {self.reward!r}")
        if self.refused < 0:
            raise ValueError(f"episode {self.episode_id!r}: refused must be >= 0, got {self.refused}")


@dataclass(frozen=True)
class Representative:
    """An episode chosen to represent a policy, with every label it earned."""

    labels: tuple[str, ...]
    """A subset of `LABELS` ("best", "median", "worst", "most refused"), in that order."""
    episode: ScoredEpisode


def pick_representatives(scored: Iterable[ScoredEpisode]) -> list[Representative]:
    """Best, median and worst episode by the policy seat's reward, and the one with the most refused attempts
    where any has one (rules and tie-breaking in the module docstring); one entry per distinct episode, in the
    order of `LABELS`. Empty input: []."""
    episodes = list(scored)
    if not episodes:
        return []
    ids = [e.episode_id for e in episodes]
    if len(set(ids)) != len(ids):
        duplicated = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"episode ids must be unique, repeated: {duplicated[:5]}")
    ascending = sorted(episodes, key=lambda e: (float(e.reward), e.episode_id))
    best = min(episodes, key=lambda e: (-float(e.reward), e.episode_id))
    chosen = {"best": best, "median": ascending[(len(ascending) - 1) // 2], "worst": ascending[0]}
    refused = min(episodes, key=lambda e: (-e.refused, e.episode_id))
    if refused.refused > 0:  # picked by reward alone, none of the three may show a refused attempt
        chosen[MOST_REFUSED] = refused
    out: list[Representative] = []
    for label in (label for label in LABELS if label in chosen):
        episode = chosen[label]
        for i, existing in enumerate(out):
            if existing.episode.episode_id == episode.episode_id:
                out[i] = Representative((*existing.labels, label), existing.episode)
                break
        else:
            out.append(Representative((label,), episode))
    return out


def representatives_by_policy(scored: Iterable[ScoredEpisode]) -> dict[str, list[Representative]]:
    """`pick_representatives` for each policy (`ScoredEpisode.policy`), policies in first-seen order."""
    groups: dict[str, list[ScoredEpisode]] = {}
    for episode in scored:
        groups.setdefault(episode.policy, []).append(episode)
    return {policy: pick_representatives(episodes) for policy, episodes in groups.items()}
