"""The code-agent tournament alone, outside Dagster (seconds): the six SocialRL environments, stored as
Parquet tables queried with DuckDB, printed as a per-environment table. `make run` materialises it as the
`code_agent_tournament` asset together with the rest of the lineage.

    python -m models.cli.run_tournament [--scenarios N] [--seed S] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

import pandas as pd

from agents.socialrl.tournament import TournamentConfig, run_tournament
from models.evaluation.reports import agent_summary, environment_summary
from models.records import rows_for
from models.settings import DataPaths
from models.storage import TableStore


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", type=int, default=4, help="scenarios per ordered agent pair and environment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    args = parser.parse_args(argv)
    paths = DataPaths(args.data_dir) if args.data_dir is not None else DataPaths.from_env()

    config = TournamentConfig(scenarios_per_pairing=args.scenarios, seed=args.seed)
    start = time.perf_counter()
    results = run_tournament(config)
    elapsed = time.perf_counter() - start
    run_id = f"tournament-{uuid.uuid4().hex[:8]}"
    store = TableStore(paths.tables)
    store.append_all(rows_for(results, run_id))

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 3):
        print(f"\nTournament {run_id}: {len(results)} episodes in {elapsed:.1f} s ({len(results) / elapsed:.0f}/s)\n")
        print(environment_summary(store, run_id).to_string(index=False))
        print("\nMean reward by code agent (all seats):\n")
        by_agent = agent_summary(store, run_id)
        print(by_agent.pivot(index="agent", columns="env_id", values="mean_reward").round(3).to_string())
    print(
        f"\nTables: {store.root} (Parquet; query with DuckDB, e.g. SELECT * FROM read_parquet('{store.root}/episodes/*.parquet'))"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
