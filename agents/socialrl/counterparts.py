"""Who sits in the counterpart's seat: a code agent by name, or a language model over any OpenAI-compatible endpoint.

| name | counterpart |
| --- | --- |
| a code agent (`CODE_AGENTS`: `boulware`, `conceder`, `reciprocal`, `accommodating`, `random`) | agents/socialrl/code_agents.py; in the price domains the first three listen (agents/socialrl/price_counterpart.py) |
| `llm` | an `LLMAgent` playing the seat from the environment's own observations, so it is given the seat's private facts in its prompt (the Craigslist seller its minimum, the Marketplace seller its reservation): the engine's base model through the rollout proxy by default, or any endpoint (`LLMCounterpart`) |

The paper trains against heterogeneous counterparts; the paper profile mixes an `llm` counterpart into its PPO
counterparts (models/profiles.py). Its calls are recorded by the proxy like the policy's, under its own seat,
so the learner (which reads the learning seat's calls only) never trains on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents.socialrl.code_agents import CODE_AGENTS, make_code_agent
from environments.core.runtime import Agent

LLM_COUNTERPART = "llm"
"""The counterpart name of a language model in the counterpart's seat."""
COUNTERPART_NAMES = (*CODE_AGENTS, LLM_COUNTERPART)
"""Every counterpart a training or evaluation plan may name."""


@dataclass(frozen=True, kw_only=True)
class LLMCounterpart:
    """The endpoint and sampling of an `llm` counterpart."""

    base_url: str
    """OpenAI base URL (…/v1): the rollout proxy (so its calls are recorded) or any compatible endpoint."""
    model: str
    """Served model name (the engine's base model is served as "base")."""
    api_key: str | None = None
    """Bearer token of the endpoint (the proxy's per-run token), or None."""
    temperature: float = 0.7
    """Sampling temperature."""
    max_tokens: int = 64
    """Completion cap per turn."""

    def __post_init__(self) -> None:
        if not self.base_url.strip() or not self.model.strip():
            raise ValueError("an llm counterpart needs a base_url and a model")
        if self.temperature < 0 or self.max_tokens < 1:
            raise ValueError(f"temperature must be >= 0 and max_tokens >= 1, got {self.temperature}, {self.max_tokens}")


def check_counterparts(names: tuple[str, ...]) -> None:
    """ValueError naming the unknown counterparts (or an empty list)."""
    unknown = [c for c in names if c not in COUNTERPART_NAMES]
    if unknown or not names:
        raise ValueError(f"counterparts must be among {list(COUNTERPART_NAMES)}, got {list(names)}")


def make_counterpart(name: str, seed: int, llm: LLMCounterpart | None = None) -> Agent:
    """The counterpart `name` (see the module table), seeded; `llm` is required for an `llm` counterpart."""
    if name != LLM_COUNTERPART:
        return make_code_agent(name, seed=seed)
    if llm is None:
        raise ValueError("an 'llm' counterpart needs an endpoint (LLMCounterpart): none was configured")
    # Imported here: the training configs that name counterparts load where only torch, transformers and peft
    # are installed (the GPU check), and the LLM agent needs an HTTP client.
    from agents.llm_agent import LLMAgent, LLMAgentConfig

    return LLMAgent(
        LLMAgentConfig(
            base_url=llm.base_url,
            model=llm.model,
            api_key_env=None,
            api_key=llm.api_key,
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            seed=seed % (2**31),
            name=f"counterpart({llm.model})",
            fail_on_request_error=False,
        )
    )


def counterpart_factory(llm: LLMCounterpart | None = None) -> Callable[[str, int], Agent]:
    """`make_counterpart` with its endpoint bound: what `evaluate_policy(make_counterpart=...)` takes."""
    return lambda name, seed: make_counterpart(name, seed, llm)
