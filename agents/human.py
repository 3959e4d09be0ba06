"""A human at a terminal as an agent: sees exactly what the seat may see, types the seat's moves.

The text typed is sent as RAW_TEXT, so the environment's own grammar parses it, exactly as for a
language model (malformed input gets the same invalid-action notification and retries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from environments.core.base import ActionSpec
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation


class HumanAgent:
    """Prints the events addressed to its seat and reads one move per turn request."""

    def __init__(
        self, read_line: Callable[[str], str] = input, write: Callable[[str], None] = print, name: str = "human"
    ) -> None:
        self.read_line, self.write, self.name = read_line, write, name

    def describe(self) -> str:
        return self.name

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id = agent_id
        self.write(f"=== {env_id}: you play '{agent_id}' ===")
        self.write(spec.grammar)

    async def observe(self, event: Event) -> None:
        if isinstance(event, Observation):
            self.write(event.text)
        elif event.kind != NotificationKind.TURN:
            self.write(f"[{event.kind.value}] {event.text}")

    async def act(self, request: Notification) -> Action:
        prompt = f"{request.text} [{' / '.join(request.allowed)}]\n> "
        text = await asyncio.to_thread(self.read_line, prompt)
        return Action(self.agent_id, RAW_TEXT, text)
