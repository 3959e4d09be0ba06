"""The episodes of one PPO iteration (or one MOPD step's domain): deterministic in (seed, iteration), so a
resumed run and a Ray rollout worker rebuild exactly the episodes one process would play.

It lives apart from models/training/ppo.py so that models/training/distributed.py (whose rollout workers
rebuild the specs) needs nothing from the module that imports it."""

from __future__ import annotations

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.socialrl.counterparts import LLMCounterpart, make_counterpart
from environments import make, seats
from environments.core.runtime import EpisodeSpec
from models.evaluation.scenarios import training_scenarios
from models.training.config import PPOConfig, learning_seat


def rollout_tag(run_name: str, iteration: int, attempt: str = "") -> str:
    """`<run>:<attempt>:it<i>` (`<run>:it<i>` without an attempt): the prefix of the iteration's episode ids and
    the run id of its episode rows. A trainer draws one `attempt` token per call: a resumed iteration replays
    the killed attempt's episodes with the same seeds, and the batch selects recorded calls by episode id, so
    the two attempts' calls must not share one."""
    return f"{run_name}:{attempt}:it{iteration}" if attempt else f"{run_name}:it{iteration}"


def rollout_specs(
    config: PPOConfig,
    iteration: int,
    proxy_base_url: str,
    model: str,
    api_key: str | None = None,
    attempt: str = "",
) -> list[EpisodeSpec]:
    """The iteration's episodes: deterministic in (seed, iteration), named under `rollout_tag` (so `attempt`
    changes the episode ids only); `api_key` is the proxy's token."""
    seat = learning_seat(config)
    # The training partition only: rollouts never see a held-out scenario's content.
    groups = config.episodes_per_iteration // config.group_size
    scenarios = training_scenarios(config.env_id, groups, config.seed * 100_003 + iteration, config.scenario_source)
    # An `llm` counterpart is the engine's model through the same proxy (recorded under its own seat).
    llm = LLMCounterpart(
        base_url=proxy_base_url,
        model=config.counterpart_model,
        api_key=api_key,
        temperature=config.temperature,
        max_tokens=config.max_new_tokens,
    )
    tag = rollout_tag(config.run_name, iteration, attempt)
    specs = []
    for index in range(config.episodes_per_iteration):
        # A group shares its scenario, counterpart and counterpart seed; only the policy's sampling seed differs.
        group, member = divmod(index, config.group_size)
        scenario = scenarios[group]
        episode_seed = (config.seed * 1_000_003 + iteration) * 10_007 + group
        counterpart = config.counterparts[group % len(config.counterparts)]
        agent_config = LLMAgentConfig(
            base_url=proxy_base_url,
            model=model,
            api_key_env=None,
            api_key=api_key,
            temperature=config.temperature,
            max_tokens=config.max_new_tokens,
            seed=(episode_seed * config.group_size + member) % (2**31),
            name=f"policy({model})",
            extra_body=dict(config.sampling_extra),
        )

        def agents(scenario=scenario, agent_config=agent_config, counterpart=counterpart, episode_seed=episode_seed):
            return {
                s: LLMAgent(agent_config) if s == seat else make_counterpart(counterpart, episode_seed, llm)
                for s in seats(config.env_id, scenario, episode_seed)
            }

        specs.append(
            EpisodeSpec(
                make_env=lambda: make(config.env_id),
                make_agents=agents,
                scenario=scenario,
                seed=episode_seed,
                episode_id=f"{tag}:ep{index}",
            )
        )
    return specs
