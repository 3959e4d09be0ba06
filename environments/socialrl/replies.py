"""What the six negotiation grammars share: the prelude of every parse and the replies to a standing offer.

* `CommandReplies.parse` (a mixin placed before `Environment` in the bases): the reply is capped to
  `max_reply_chars` (environments/core/grammar.py's `cap_reply`), an empty one is refused with the
  environment's example command (`reply_example`), the last command of `commands` found
  (`find_last_command`) goes to the environment's `_parse_command`, and a reply without one to
  `_without_command` (plain talk of kind `message_kind`, unless the environment reads more into it).
* `CommandReplies._standing_offer`: the counterpart's standing offer, which an acceptance echoes in its
  payload (the action then describes itself, and restating the accepted terms is not taken for a leak).
* The command words of a reply to a standing offer, in two styles: `respond_command` and
  `walk_away_command` for the single-line grammars (Craigslist, Marketplace, Job Interview: capitals
  anywhere, lower case on a line of its own), `allocation_reply` and `NO_DEAL` for the item-division
  grammars (CaSiNo, Deal or No Deal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from environments.core.base import ParseError
from environments.core.events import Action
from environments.core.grammar import CommandMatch, cap_reply, find_last_command, own_line, squeeze
from environments.socialrl.allocation import bare_command


class CommandReplies:
    """The parse prelude of a negotiation environment (module docstring); the environment writes
    `_parse_command` (what each of its commands means) and sets `commands` and `reply_example`."""

    commands: ClassVar[Mapping[str, str]]
    """The command grammar for `find_last_command`: action kind (or a name the environment maps) -> pattern."""
    reply_example: ClassVar[str]
    """The example command an empty reply is answered with, e.g. "`OFFER $120`"."""
    message_kind: ClassVar[str] = "message"
    """The action kind of a reply without a command."""
    max_reply_chars: int

    # Provided by the environment.
    _other: Any

    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        text = cap_reply(text, self.max_reply_chars)
        if not text.strip():
            return ParseError(f"empty reply; write a message or a command such as {self.reply_example}")
        match = find_last_command(text, self.commands)
        if match is None:
            return self._without_command(agent_id, text)
        return self._parse_command(agent_id, match)

    def _without_command(self, agent_id: str, text: str) -> Action | ParseError:
        """A reply in which no command was found: plain talk."""
        return Action(agent_id, self.message_kind, squeeze(text))

    def _parse_command(self, agent_id: str, match: CommandMatch) -> Action | ParseError:
        """The action of the last command found (`match.kind` is a key of `commands`)."""
        raise NotImplementedError

    def _standing_offer(self, agent_id: str) -> Any:
        """The counterpart's standing offer to `agent_id` (None when none stands, or before the first reset:
        `parse` may run before it)."""
        return getattr(self, "_standing", {}).get(self._other(agent_id))


def respond_command(verb: str, objects: str, attached: str = "") -> str:
    """Accepting or rejecting the standing offer in a single-line grammar: `VERB`, `VERBED` or `VERBS` in
    capitals anywhere (followed by `ATTACHED`, with or without a space, when given: `ACCEPT OFFER`,
    `ACCEPT_OFFER`); in any case on a line of its own, `[I ]verb[ attached| your/the/this <object>]`, where
    `objects` is an alternation of the objects the domain names."""
    upper_tail = f"(?: ?{attached.upper()})?" if attached else ""
    lower_attached = f" ?{attached}|" if attached else ""
    named = f"(?:{objects})" if "|" in objects else objects
    lower = rf"(?:i )?{verb}(?:{lower_attached} (?:your|the|this) {named})?"
    return rf"(?-i:\b{verb.upper()}(?:ED|S)?{upper_tail}\b)|" + own_line(lower)


def walk_away_command(upper: str = "QUIT", lower: str = "quit|walk away") -> str:
    """Ending without a deal in a single-line grammar: one of the `upper` words in capitals anywhere, or in
    any case on a line of its own `[I ]<one of the lower phrases>`."""
    words = f"(?:{upper})" if "|" in upper else upper
    return rf"(?-i:\b{words}\b)|" + own_line(rf"(?:i )?(?:{lower})")


def allocation_reply(verb: str, anywhere: bool = False) -> str:
    """Accepting or rejecting the standing split in an item-division grammar (`bare_command`): `VERB[ED|S]`
    (and `VERB DEAL/OFFER/PROPOSAL`) in capitals anywhere, or a line such as "I accept the deal" /
    "rejected that"; with `anywhere`, the dataset's own token (`Accept-Deal`) in any case anywhere."""
    return bare_command(
        rf"{verb.upper()}(?:ED|S)?(?:[ _-](?:DEAL|OFFER|PROPOSAL))?",
        rf"(?:i )?{verb}(?:ed|s)?(?: (?:the|your|this|that))?(?: (?:deal|offer|proposal|it|that))?",
        rf"{verb}[-_]deal" if anywhere else None,
    )


NO_DEAL = bare_command(r"WALK[ _-]?AWAY|NO[ _-]?DEAL", r"(?:i )?walk[ _-]?away|no[ _-]?deal")
"""Ending an item division without a deal: `WALK AWAY` / `NO DEAL` in capitals anywhere, or as a line."""
