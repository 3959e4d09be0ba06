"""Pure-Python environments (no torch, no dagster): events, the environment contract, the async runtime,
scoring helpers, and the SocialRL and YOAO environments, registered by versioned id."""

from importlib import import_module

from environments.base import Environment, Outcome, ParseError, RoleOutcome, Scenario
from environments.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.registry import env_class, list_env_ids, make, register, sample_scenarios, seats

# Importing a module registers its environment.
BUILTIN_MODULES = (
    "dnd",
    "casino",
    "craigslist",
    "marketplace",
    "job_interview",
    "calendar_scheduling",
    "red_black",
    "sugarscape",
    "keyword",
)
for _name in BUILTIN_MODULES:
    import_module(f"environments.{_name}")

SOCIALRL_ENV_IDS = (
    "dnd-v0",
    "casino-v0",
    "craigslist-v0",
    "marketplace-v0",
    "job-interview-v0",
    "calendar-v0",
)
YOAO_ENV_IDS = ("red-black-v0", "sugarscape-v0")

__all__ = [
    "RAW_TEXT",
    "SOCIALRL_ENV_IDS",
    "YOAO_ENV_IDS",
    "Action",
    "Environment",
    "Event",
    "Notification",
    "NotificationKind",
    "Observation",
    "Outcome",
    "ParseError",
    "RoleOutcome",
    "Scenario",
    "env_class",
    "list_env_ids",
    "make",
    "register",
    "sample_scenarios",
    "seats",
]
