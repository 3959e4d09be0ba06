"""LLM players of the YOAO games: prompts, agent factories and the seat swap used by the persistence test.

Every YOAO LLM agent is an `agents.llm_agent.LLMAgent` (any OpenAI-compatible endpoint); what differs is the
model (the base model, the format warm-up adapter, the seed adapter, a remote model) and the system prompt:

| prompt | used by | what it says |
| --- | --- | --- |
| `RED_BLACK_TEMPLATE` | untrained teammates, seeds, teacher candidates without a meta-prompt; the seed's SFT data is rendered with it | the game and the answer format only, no disposition |
| `COOPERATIVE_META_PROMPT` (appended) | the prompted teacher candidates and the prompting baseline | the YOAO paper's five properties of a cooperative meta-prompt |
| `SUGARSCAPE_EXPLOITATIVE_TEMPLATE` | every Sugarscape trader, seed and untrained alike (the zero-shot test) | maximise your own resources, exploit your neighbours |
"""

from __future__ import annotations

from agents.llm_agent import LLMAgentConfig
from environments.core.base import ActionSpec
from environments.core.events import Action, Event, Notification, Observation

RED_BLACK_TEMPLATE = """\
You are {agent_id}, a member of a team in a repeated team decision game. Each round your team discusses, \
then every member votes; the team's majority decides.

How to answer:
{grammar}{examples}"""
"""The neutral Red-Black system prompt (placeholders of `LLMAgentConfig.system_prompt_template`)."""

COOPERATIVE_META_PROMPT = """

How to play: aim for the best collective outcome of both teams together. Vary your messages; argue from the \
welfare of everyone; refer to what your teammates said before you; keep choosing the cooperative option even \
after the other team exploited you; persuade your teammates instead of retaliating."""
"""The five properties of the YOAO paper's cooperative meta-prompt, appended to `RED_BLACK_TEMPLATE`."""

SUGARSCAPE_EXPLOITATIVE_TEMPLATE = """\
You are {agent_id}, a trader in Sugarscape. Your only goal is to maximise your own sugar and spice: exploit \
your neighbours whenever you can and give away as little as possible.

{private}

How to answer:
{grammar}{examples}"""
"""The exploitative Sugarscape system prompt every trader gets (seed and untrained alike)."""

RENDER_URL = "http://render.invalid/v1"
"""Base URL of render-only configs (never called)."""


def red_black_config(
    base_url: str,
    model: str,
    *,
    seed: int | None = None,
    cooperative_prompt: bool = False,
    max_tokens: int = 64,
    temperature: float = 0.7,
    api_key_env: str | None = None,
    name: str | None = None,
    api_key: str | None = None,
) -> LLMAgentConfig:
    """The LLM agent config of a Red-Black seat (neutral prompt, or with the cooperative meta-prompt);
    `api_key` is the token itself (e.g. the rollout proxy's), else `api_key_env` names where it is."""
    template = RED_BLACK_TEMPLATE + (COOPERATIVE_META_PROMPT if cooperative_prompt else "")
    return _player_config(template, base_url, model, seed, max_tokens, temperature, api_key_env, name, api_key)


def _player_config(
    template: str,
    base_url: str,
    model: str,
    seed: int | None,
    max_tokens: int,
    temperature: float,
    api_key_env: str | None,
    name: str | None,
    api_key: str | None,
) -> LLMAgentConfig:
    """The one LLM agent config of a YOAO game seat (Red-Black or Sugarscape), given its system prompt."""
    return LLMAgentConfig(
        base_url=base_url,
        model=model,
        api_key_env=api_key_env,
        api_key=api_key,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        # A failing call becomes an empty reply, i.e. an invalid answer the game retries and then abstains:
        # an off-format or unreachable seat still plays and is counted.
        fail_on_request_error=False,
        request_retries=1,
        system_prompt_template=template,
        name=name,
    )


def render_config() -> LLMAgentConfig:
    """What `agents.traces.TracedAgent` renders Red-Black traces with: the deployment prompt, never called."""
    return red_black_config(RENDER_URL, "render-only")


def sugarscape_config(
    base_url: str,
    model: str,
    *,
    seed: int | None = None,
    max_tokens: int = 48,
    temperature: float = 0.7,
    name: str | None = None,
    api_key: str | None = None,
) -> LLMAgentConfig:
    """The LLM agent config of a Sugarscape trader (the exploitative prompt); `api_key`: the server's token."""
    return _player_config(
        SUGARSCAPE_EXPLOITATIVE_TEMPLATE, base_url, model, seed, max_tokens, temperature, None, name, api_key
    )


class SwapAgent:
    """Plays as `first` up to and including round `last_round`, then as `then` (the persistence test: a seed
    leaves its seat and an untrained member takes it over).

    `first` observes everything. `then` observes the game's intro and every event from round `last_round` on,
    so it takes the seat having heard the departed seed's last round of arguments and its result (the whole
    game would not fit a 2,048-token context: ~400 tokens per round of relayed opinions and results)."""

    def __init__(self, first: object, then: object, last_round: int) -> None:
        if last_round < 0:
            raise ValueError(f"last_round must be >= 0, got {last_round}")
        self.first, self.then, self.last_round = first, then, last_round
        self._round = 1

    def describe(self) -> str:
        from environments.core.runtime import describe_agent

        return f"Swap({describe_agent(self.first)} -> {describe_agent(self.then)} after round {self.last_round})"

    async def reset(self, agent_id: str, env_id: str, spec: ActionSpec, episode_id: str) -> None:
        self._round = 1
        await self.first.reset(agent_id, env_id, spec, episode_id)  # type: ignore[attr-defined]
        await self.then.reset(agent_id, env_id, spec, episode_id)  # type: ignore[attr-defined]

    async def observe(self, event: Event) -> None:
        await self.first.observe(event)  # type: ignore[attr-defined]
        if isinstance(event.data.get("round"), int):
            self._round = event.data["round"]
        intro = isinstance(event, Observation) and event.data.get("event") == "intro"
        if intro or self._round >= max(1, self.last_round):
            await self.then.observe(event)  # type: ignore[attr-defined]

    async def act(self, request: Notification) -> Action:
        active = self.first if int(request.data.get("round", 1)) <= self.last_round else self.then
        return await active.act(request)  # type: ignore[attr-defined]
