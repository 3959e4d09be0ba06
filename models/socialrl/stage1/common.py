"""What every stage-1 step shares: the registry name of a domain's specialist and the seat it plays."""

from __future__ import annotations

from models.profiles import Profile
from models.training.config import learning_seat


def registered_name(env_id: str) -> str:
    """The MLflow registry name of a domain's specialist, e.g. socialrl-craigslist-specialist."""
    return f"socialrl-{env_id.removesuffix('-v0')}-specialist"


def specialist_seat(env_id: str, profile: Profile) -> str:
    """The seat a domain's specialist is trained and evaluated in (PPO's learning seat)."""
    return learning_seat(profile.ppo_for(env_id))
