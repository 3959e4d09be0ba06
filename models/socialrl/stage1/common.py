"""What every stage-1 step shares: the registry name of a domain's specialist, the seat it plays, and who
trained it."""

from __future__ import annotations

from models.profiles import Profile
from models.training.config import learning_seat

TRAINED_BY_TAG = "socialrl.trained_by"
"""Model-version tag of a specialist: who trained it, `STAGE1` or `STAGE2`."""
STAGE1 = "stage1"
"""Trained by `make run`'s stage 1 at the profile's sizes: the specialists the champion alias is for."""
STAGE2 = "stage2"
"""Trained by `run_stage2` for a domain without a stage-1 specialist, at the profile's `stage2.specialist_*`
sizes; never the champion (models/socialrl/stage1/registry.py)."""


def registered_name(env_id: str) -> str:
    """The MLflow registry name of a domain's specialist, e.g. socialrl-craigslist-specialist."""
    return f"socialrl-{env_id.removesuffix('-v0')}-specialist"


def specialist_seat(env_id: str, profile: Profile) -> str:
    """The seat a domain's specialist is trained and evaluated in (PPO's learning seat)."""
    return learning_seat(profile.ppo_for(env_id))
