"""Pure-Python environments (no torch, no dagster), registered by versioned id.

- `environments.core`: events, the environment contract, the async runtime, the registry, grammar and
  leakage helpers, scoring, data-file access; nothing paper-specific.
- `environments.socialrl`: the six negotiation domains of the SocialRL paper and their shared deal spaces.
- `environments.yoao`: the Red-Black game and Sugarscape of the YOAO paper.
- `environments.toy`: tiny tasks that check a learner learns.
"""

from importlib import import_module

from environments.core.base import Environment, Outcome, ParseError, RoleOutcome, Scenario
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.registry import env_class, list_env_ids, make, register, sample_scenarios, seats

# Importing a module registers its environment.
BUILTIN_MODULES = (
    "socialrl.dnd",
    "socialrl.casino",
    "socialrl.craigslist",
    "socialrl.marketplace",
    "socialrl.job_interview",
    "socialrl.calendar_scheduling",
    "yoao.red_black",
    "yoao.sugarscape",
    "toy.keyword",
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
