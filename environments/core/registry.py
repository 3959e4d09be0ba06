"""Environment registry: versioned ids ("dnd-v0") to classes, `make`, and seeded scenario sampling.

The built-in environments register themselves when the `environments` package is imported, which Python does
before any of its modules (this one included), so the registry never imports the package back."""

from __future__ import annotations

import random
import re
from typing import Any

from environments.core.base import Environment, Scenario

_ID = re.compile(r"^[a-z][a-z0-9-]*-v\d+$")
_REGISTRY: dict[str, type[Environment]] = {}


def register(cls: type[Environment]) -> type[Environment]:
    """Class decorator: register an environment under its `env_id`."""
    env_id = cls.env_id
    if not _ID.match(env_id):
        raise ValueError(f"environment id {env_id!r} must look like 'name-v0'")
    if env_id in _REGISTRY and _REGISTRY[env_id] is not cls:
        raise ValueError(f"environment id {env_id!r} is already registered to {_REGISTRY[env_id].__name__}")
    _REGISTRY[env_id] = cls
    return cls


def env_class(env_id: str) -> type[Environment]:
    try:
        return _REGISTRY[env_id]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"unknown environment {env_id!r}; registered: {known}") from None


def make(env_id: str, **config: Any) -> Environment:
    """A fresh environment instance; `config` goes to the class constructor."""
    return env_class(env_id)(**config)


def seats(env_id: str, scenario: Scenario, seed: int = 0, **config: Any) -> tuple[str, ...]:
    """The seats of an episode of `scenario`, read off a freshly reset environment (seats can depend on the
    scenario, e.g. Red-Black's team sizes)."""
    env = make(env_id, **config)
    env.reset(scenario, seed)
    return tuple(env.agent_ids)


def list_env_ids() -> list[str]:
    return sorted(_REGISTRY)


def sample_scenarios(env_id: str, n: int, seed: int) -> list[Scenario]:
    """`n` generated scenarios; the same (env_id, n, seed) always gives the same list."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    cls = env_class(env_id)
    rng = random.Random(f"{env_id}:{seed}")
    return [cls.sample_scenario(rng) for _ in range(n)]
