"""The LLM agent: plays any seat of any environment through an OpenAI-compatible chat endpoint.

What the model sees, as chat messages:

* system: the principal's instructions, the seat's private facts (the text of the private observations
  that open the episode) and the environment's action grammar (`ActionSpec.grammar` and examples);
* user: every later observation and notification addressed to this seat (TURN requests, relayed moves,
  invalid-action notices with the parser's error, deals, the end), consecutive ones merged into one message;
* assistant: the model's own replies, verbatim (so turn k+1's prompt extends turn k's prompt + completion).

The agent sends the reply as RAW_TEXT and the environment parses it with its own grammar: malformed text
comes back as an INVALID_ACTION notification carrying the parser's error and the TURN request again,
which the agent answers with a new call (the retry message is that notification; the environment bounds
the retries and applies its rule). Problems the agent can see itself (an empty reply; in ToM mode a reply
without an ACT part) are retried locally, at most `max_retries` times per turn, with the problem stated.

Every call carries the tags the rollout proxy records: X-Episode-Id, X-Agent-Id (the seat), X-Turn-Index
(0-based index of this seat's turn; retries of a turn share it) and X-Attempt (0 for the first call of a
turn, then 1, 2, ... for every further call in that turn, whether the environment or the agent asked).

ToM scaffold (`tom=True`): the model answers in three labelled parts, INFER (the counterpart's likely
preferences) -> ACT (the move, in the environment's grammar) -> ANTICIPATE (the counterpart's next move).
Only ACT goes to the environment; all three are kept per call in `agent.tom_records`.

Context window: when the engine rejects a prompt as longer than the model's context (HTTP 400 naming the
context length), the agent drops the oldest half of the exchanges in the prompt (pairs of user and
assistant messages; the system prompt and the pending turn stay) and asks again, until the prompt fits.
Later prompts start from the same point, so they extend each other again (PPO packs them) until the
context fills up once more. Its own history is kept whole; only prompts are shortened (counted in
`metrics["context_trims"]`). A long negotiation thus goes on instead of failing the episode.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from environments.core.base import ActionSpec
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.grammar import cap_reply, squeeze

DEFAULT_SYSTEM_TEMPLATE = """\
You negotiate on behalf of your principal in "{env_id}", playing the role "{agent_id}". Serve your principal's \
interests: aim for the best outcome for them, keep their private information to yourself, and make one move \
per turn.

{private}

How to answer:
{grammar}{examples}{tom}"""
"""Placeholders: {env_id}, {agent_id}, {private}, {grammar}, {examples}, {tom} (each may be empty)."""

TOM_INSTRUCTIONS = """\
Answer every turn in exactly three labelled parts, in this order:
INFER: what the other side most likely wants and how far they may move.
ACT: your move, written exactly as the rules above require. Only this part is sent.
ANTICIPATE: the other side's most likely next move."""

# Request headers that tag every call; the rollout proxy (models/serving/proxy.py) records them.
HEADER_EPISODE = "X-Episode-Id"
HEADER_AGENT = "X-Agent-Id"
HEADER_TURN = "X-Turn-Index"
HEADER_ATTEMPT = "X-Attempt"
MAX_BACKOFF_S = 8.0
"""Longest wait between two tries of a failed call (exponential back-off from `retry_backoff_s`)."""


def check_retry_backoff(retry_backoff_s: float) -> None:
    """The one rule for a first-retry wait, shared by every config that sets one: 0 <= wait <= MAX_BACKOFF_S."""
    if not 0.0 <= retry_backoff_s <= MAX_BACKOFF_S:
        raise ValueError(f"retry_backoff_s must lie in [0, {MAX_BACKOFF_S}], got {retry_backoff_s}")


TURN_MARGIN_S = 30.0
"""Slack on top of a turn's worst case (prompt building, parsing, the event loop)."""

_TEMPLATE_FIELDS = {"env_id": "", "agent_id": "", "private": "", "grammar": "", "examples": "", "tom": ""}
_RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}
# vLLM's and OpenAI's wording when a prompt does not fit the model's context.
_CONTEXT_OVERFLOW = re.compile(r"maximum context length|context_length_exceeded|context length", re.IGNORECASE)


def drop_oldest_exchange(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """`messages` without its oldest exchange: everything after the system prompt up to and including the
    first assistant message (a user turn and the reply to it). The last message always stays."""
    head = messages[:1] if messages and messages[0]["role"] == "system" else []
    rest = messages[len(head) :]
    cut = next((i + 1 for i, m in enumerate(rest[:-1]) if m["role"] == "assistant"), max(0, len(rest) - 1))
    return head + rest[cut:]


class LLMAgentError(RuntimeError):
    """The endpoint could not answer (after transport retries) or refused the request."""


@dataclass(frozen=True)
class LLMAgentConfig:
    """How an LLM agent calls its endpoint and prompts its model."""

    base_url: str
    """OpenAI base URL of the endpoint, e.g. the rollout proxy's http://127.0.0.1:8100/v1."""
    model: str
    """Model name to request (a base model or a LoRA adapter name)."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Name of the environment variable holding the bearer token (never the token); unset/None = no token.
    Read only when `api_key` is None."""
    api_key: str | None = field(default=None, repr=False)
    """The bearer token itself, e.g. the rollout proxy's per-run token (EngineResource.proxy_api_key). Not in
    the repr, never logged or recorded; takes precedence over `api_key_env`."""
    temperature: float = 0.7
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_tokens: int = 256
    """Most tokens per reply."""
    seed: int | None = None
    """Sampling seed sent with each request (None = the engine's)."""
    max_retries: int = 1
    """Local retries per turn of a reply the agent itself sees is malformed (empty; in ToM mode no ACT part).
    Grammar errors are the environment's to judge: it re-asks with the parser's error, bounded by its own
    `max_invalid_retries`."""
    request_retries: int = 2
    """Retries of a call that failed in transport or with 408/429/5xx, with exponential back-off."""
    retry_backoff_s: float = 0.5
    """Wait before the first retry of a failed call; it doubles with each further retry, up to MAX_BACKOFF_S."""
    request_timeout_s: float = 120.0
    """Seconds one call may take."""
    fail_on_request_error: bool = True
    """True: a call that still fails after its retries raises LLMAgentError (ending the episode run).
    False: the agent answers with an empty reply instead (the environment counts it as invalid)."""
    tom: bool = False
    """Theory-of-mind scaffold: INFER -> ACT -> ANTICIPATE, only ACT is sent to the environment."""
    system_prompt_template: str = DEFAULT_SYSTEM_TEMPLATE
    """System prompt; placeholders {env_id}, {agent_id}, {private}, {grammar}, {examples}, {tom}."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """More request fields (e.g. {"stop": [...]}); they override the fields above."""
    name: str | None = None
    """Description used in episode records (default: llm(<model>) or llm-tom(<model>))."""

    @property
    def turn_budget_s(self) -> float:
        """The longest one turn can take: each local try's call with all its retries and the back-off between
        them, plus a margin. A runtime turn timeout shorter than this cuts answers the agent would still give:
        on a busy engine they become timeouts, counted as invalid actions, and the engine keeps generating the
        abandoned calls."""
        call = (self.request_retries + 1) * self.request_timeout_s + MAX_BACKOFF_S * self.request_retries
        return (self.max_retries + 1) * call + TURN_MARGIN_S

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be a non-empty name")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must be None or a non-empty token")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must lie in [0, 2], got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.request_retries < 0:
            raise ValueError(f"request_retries must be >= 0, got {self.request_retries}")
        if not self.request_timeout_s > 0:
            raise ValueError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")
        check_retry_backoff(self.retry_backoff_s)
        try:
            self.system_prompt_template.format(**_TEMPLATE_FIELDS)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"system_prompt_template has an unknown or malformed placeholder ({exc!r}); "
                f"allowed: {', '.join('{' + k + '}' for k in _TEMPLATE_FIELDS)}"
            ) from exc


# ------------------------------------------------------------------------------------------ ToM parsing
@dataclass(frozen=True)
class ToMParts:
    """The three parts of a ToM-scaffolded reply (None where missing or empty)."""

    infer: str | None
    act: str | None
    anticipate: str | None


_SECTION_NAMES = {
    "infer": "infer",
    "inference": "infer",
    "act": "act",
    "action": "act",
    "anticipate": "anticipate",
    "anticipation": "anticipate",
}
_WORDS = "INFER(?:ENCE)?|ACT(?:ION)?|ANTICIPAT(?:E|ION)"
MAX_TOM_CHARS = 32_000
"""A ToM reply longer than this is cut to its last characters before it is split (linear-time parsing)."""
# Both patterns run on squeezed text (every whitespace run one character) and bound every run of decoration
# they skip, so that no two quantifiers can share a long run: splitting a reply costs time linear in its length.
# A label at the start of a line, any case, with markdown around it: "INFER:", "**Act:**", "## Anticipate -",
# "1. ACT =>", "*ACT*:", "ACT (move):".
_LINE_LABEL = re.compile(
    rf"^[>#*_\-+\d.) ]{{0,12}}\b({_WORDS})\b[ *_]{{0,6}}(?:\([^)\n]*\))?[ *_]{{0,6}}(?:[:=\-–—>]+|\n)[ *_]{{0,6}}",
    re.IGNORECASE | re.MULTILINE,
)
# Inline labels only in capitals ("... INFER: x ACT: y"), so that prose like "time to act: now" stays prose.
_INLINE_LABEL = re.compile(rf"(?<![A-Za-z*])\*{{0,3}}({_WORDS})\*{{0,3}} ?:[ *_]{{0,6}}")


def parse_tom(text: str) -> ToMParts:
    """Split a reply into INFER / ACT / ANTICIPATE (tolerant of case, markdown and missing parts). The reply is
    cut to its last `MAX_TOM_CHARS` characters and its whitespace squeezed first (environments/core/grammar.py)."""
    text = squeeze(cap_reply(text, MAX_TOM_CHARS))
    marks: list[tuple[int, int, str]] = []
    for pattern in (_LINE_LABEL, _INLINE_LABEL):
        for m in pattern.finditer(text):
            marks.append((m.start(), m.end(), _SECTION_NAMES[m.group(1).lower()]))
    marks.sort()
    kept: list[tuple[int, int, str]] = []
    for start, end, name in marks:
        if kept and start < kept[-1][1]:
            continue  # the same label matched by both patterns
        kept.append((start, end, name))
    parts: dict[str, str | None] = {"infer": None, "act": None, "anticipate": None}
    for i, (_, end, name) in enumerate(kept):
        stop = kept[i + 1][0] if i + 1 < len(kept) else len(text)
        body = text[end:stop].strip().strip("*_").strip()
        if parts[name] is None and body:
            parts[name] = body
    return ToMParts(parts["infer"], parts["act"], parts["anticipate"])


# --------------------------------------------------------------------------------------------- the agent
class LLMAgent:
    """An agent backed by a chat model behind an OpenAI-compatible endpoint (see the module docstring).

    Pass `client` to share one httpx.AsyncClient between many agents (the caller then closes it);
    otherwise the agent opens its own on first use and closes it at the end of the episode (or `aclose`).
    """

    def __init__(self, config: LLMAgentConfig, client: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._shared_client = client
        self._own_client: httpx.AsyncClient | None = None
        self._new_episode("", "", ActionSpec({}, ""), "")

    def describe(self) -> str:
        if self.config.name:
            return self.config.name
        return f"llm{'-tom' if self.config.tom else ''}({self.config.model})"

    def _new_episode(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self.agent_id, self.env_id, self.spec, self.episode_id = agent_id, env_id, spec, episode_id
        self.private_texts: list[str] = []
        self.history: list[dict[str, str]] = []
        self._window_start = 0  # history messages left out of prompts since the context filled up
        self._pending: list[str] = []
        self._opening = True  # still in the run of private observations that opens the episode
        self._system: str | None = None
        self._retry_pending = False
        self.turn_index = -1
        self.attempt = 0
        self.tom_records: list[dict[str, Any]] = []
        self.metrics: dict[str, Any] = {
            "calls": 0,
            "turns": 0,
            "invalid_actions": 0,
            "malformed_replies": 0,
            "request_errors": 0,
            "context_trims": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }

    # ------------------------------------------------------------------------------ Agent protocol
    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self._new_episode(agent_id, env_id, spec, episode_id)

    async def observe(self, event: Event) -> None:
        if isinstance(event, Observation):
            if event.private and self._opening:
                self.private_texts.append(event.text)
                return
            self._opening = False
            if event.text:
                self._pending.append(event.text)
            return
        self._opening = False
        if event.kind == NotificationKind.INVALID_ACTION:
            self.metrics["invalid_actions"] += 1
            self._retry_pending = int(event.data.get("retries_left", 0) or 0) > 0
        elif event.kind == NotificationKind.TIMEOUT:
            self._retry_pending = True
        if event.text:
            self._pending.append(event.text)
        if event.kind == NotificationKind.EPISODE_END:
            self.metrics["reward"] = event.data.get("reward")
            await self.aclose()

    def begin_turn(self, request: Notification) -> None:
        """Turn bookkeeping before a reply: turn index or retry attempt, and a user message saying whose
        turn it is when the request came without text. Public so that a traced agent renders alike."""
        if self._retry_pending and self.turn_index >= 0:
            self.attempt += 1
        else:  # a first turn is never a retry, even after a rejection of the seat's earlier player (SwapAgent)
            self.turn_index += 1
            self.attempt = 0
            self.metrics["turns"] += 1
        self._retry_pending = False
        if not self._pending and (not self.history or self.history[-1]["role"] == "assistant"):
            # A turn request without text: say whose turn it is so that the chat has a user message.
            self._pending.append(f"Your turn. Allowed moves: {', '.join(request.allowed)}.")

    def record_reply(self, text: str) -> None:
        """Append a reply (written by the model, or by a teacher being traced) to the conversation."""
        self._commit_reply(text)

    def transcript_messages(self) -> list[dict[str, str]]:
        """System message and the conversation so far (without events not yet answered)."""
        return [{"role": "system", "content": self.system_prompt()}, *self.history]

    async def act(self, request: Notification) -> Action:
        self.begin_turn(request)
        text = ""
        parts = ToMParts(None, None, None)
        for local_try in range(self.config.max_retries + 1):
            if local_try:
                self.attempt += 1
            text = await self._complete(self.messages())
            self._commit_reply(text)
            problem = self._local_problem(text)
            if self.config.tom:
                parts = parse_tom(text)
                self.tom_records.append(
                    {
                        "turn_index": self.turn_index,
                        "attempt": self.attempt,
                        "infer": parts.infer,
                        "act": parts.act,
                        "anticipate": parts.anticipate,
                        "raw": text,
                    }
                )
            if problem is None:
                break
            self.metrics["malformed_replies"] += 1
            if local_try < self.config.max_retries:
                self._pending.append(f"Your reply could not be used: {problem} Answer again.")
        move = parts.act if self.config.tom and parts.act else text
        return Action(self.agent_id, RAW_TEXT, move)

    # ------------------------------------------------------------------------------------ rendering
    def system_prompt(self) -> str:
        """The system message (fixed at the first call so that later prompts extend earlier ones)."""
        if self._system is not None:
            return self._system
        examples = ""
        if self.spec.examples:
            examples = "\nExamples of the format (use your own words and numbers):\n" + "\n---\n".join(
                self.spec.examples
            )
        text = self.config.system_prompt_template.format(
            env_id=self.env_id,
            agent_id=self.agent_id,
            private="\n".join(self.private_texts),
            grammar=self.spec.grammar,
            examples=examples,
            tom=("\n\n" + TOM_INSTRUCTIONS) if self.config.tom else "",
        )
        return re.sub(r"\n{3,}", "\n\n", text).strip()

    def messages(self) -> list[dict[str, str]]:
        """The chat messages the next call sends: system, history, and the pending events as one user turn."""
        messages = [{"role": "system", "content": self.system_prompt()}, *self.history[self._window_start :]]
        if self._pending:
            messages.append({"role": "user", "content": "\n".join(self._pending)})
        return messages

    def _commit_reply(self, text: str) -> None:
        if self._system is None:
            self._system = self.system_prompt()
        if self._pending:
            self.history.append({"role": "user", "content": "\n".join(self._pending)})
            self._pending = []
        self.history.append({"role": "assistant", "content": text})

    def _local_problem(self, text: str) -> str | None:
        if not text.strip():
            return "it was empty."
        if self.config.tom and parse_tom(text).act is None:
            return "it has no 'ACT:' part. Write INFER:, ACT: (your move, following the rules) and ANTICIPATE:."
        return None

    # ----------------------------------------------------------------------------------------- HTTP
    def _client(self) -> httpx.AsyncClient:
        if self._shared_client is not None:
            return self._shared_client
        if self._own_client is None or self._own_client.is_closed:
            self._own_client = httpx.AsyncClient(timeout=self.config.request_timeout_s)
        return self._own_client

    async def _backoff_wait(self, delay_s: float) -> None:
        """Wait between two tries of a failed call (its own method so a test can record the waits)."""
        await asyncio.sleep(delay_s)

    def _headers(self) -> dict[str, str]:
        headers = {
            HEADER_EPISODE: self.episode_id,
            HEADER_AGENT: self.agent_id,
            HEADER_TURN: str(self.turn_index),
            HEADER_ATTEMPT: str(self.attempt),
        }
        key = self.config.api_key
        if key is None and self.config.api_key_env:
            key = os.environ.get(self.config.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _complete(self, messages: list[dict[str, str]]) -> str:
        c = self.config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": messages,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "max_tokens": c.max_tokens,
        }
        if c.seed is not None:
            body["seed"] = c.seed
        body.update(c.extra_body)
        url = c.base_url.rstrip("/") + "/chat/completions"
        problem = ""
        for retry in range(c.request_retries + 1):
            if retry:
                await self._backoff_wait(min(MAX_BACKOFF_S, c.retry_backoff_s * 2 ** (retry - 1)))
            self.metrics["calls"] += 1
            try:
                response = await self._client().post(
                    url, json=body, headers=self._headers(), timeout=c.request_timeout_s
                )
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
                self.metrics["request_errors"] += 1
                continue
            if response.status_code == 200:
                try:
                    data = response.json()
                    choice = data["choices"][0]
                    usage = data.get("usage") or {}
                    self.metrics["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
                    self.metrics["completion_tokens"] += int(usage.get("completion_tokens") or 0)
                    return (choice.get("message") or {}).get("content") or ""
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    problem = f"unreadable response: {exc}"
                    self.metrics["request_errors"] += 1
                    continue
            self.metrics["request_errors"] += 1
            problem = f"HTTP {response.status_code}: {response.text[:500]}"
            if response.status_code == 400 and _CONTEXT_OVERFLOW.search(response.text) and len(messages) > 2:
                # Drop half the exchanges in the prompt (at least one) and keep that window for later turns,
                # so the following prompts extend each other again until the context fills up once more.
                self.metrics["context_trims"] += 1
                shorter = messages
                for _ in range(max(1, sum(m["role"] == "assistant" for m in messages) // 2)):
                    shorter = drop_oldest_exchange(shorter)
                self._window_start += len(messages) - len(shorter)  # `messages` is self.messages()
                return await self._complete(shorter)
            if response.status_code not in _RETRYABLE_STATUS:
                break
        message = f"{self.describe()} ({self.agent_id}, episode {self.episode_id}): the call to {url} failed: {problem}"
        if c.fail_on_request_error:
            raise LLMAgentError(message)
        return ""

    async def aclose(self) -> None:
        """Close the agent's own HTTP client (a shared client is the caller's to close)."""
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None
