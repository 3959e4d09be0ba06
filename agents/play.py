"""Play any bargaining environment from the terminal against a code agent.

python -m agents.play craigslist-v0 --seat buyer --opponent boulware --seed 3
"""

from __future__ import annotations

import argparse
import asyncio
import random

from agents.human import HumanAgent
from agents.socialrl.code_agents import CODE_AGENTS, make_code_agent
from environments import make
from environments.core.runtime import run_episode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id")
    parser.add_argument("--seat", default=None, help="seat to play (default: the first)")
    parser.add_argument("--opponent", default="boulware", choices=list(CODE_AGENTS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    env = make(args.env_id)
    scenario = type(env).sample_scenario(random.Random(args.seed))
    env.reset(scenario, args.seed)
    seats = env.agent_ids
    seat = args.seat or seats[0]
    if seat not in seats:
        parser.error(f"--seat must be one of {', '.join(seats)}")
    agents = {s: HumanAgent() if s == seat else make_code_agent(args.opponent, args.seed) for s in seats}
    result = asyncio.run(run_episode(make(args.env_id), agents, scenario, args.seed, turn_timeout=None))
    mine = result.outcome.roles[seat]
    print(
        f"\nAgreement: {result.outcome.agreement}; your reward {mine.reward:.3f}; leaked: {list(mine.leaked) or 'nothing'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
