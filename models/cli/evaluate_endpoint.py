"""Put any OpenAI-compatible endpoint on the leaderboard (models/cli/leaderboard.py).

    python -m models.cli.evaluate_endpoint --base-url https://api.example.com/v1 --model gpt-4.1 \\
        --api-key-env OPENAI_API_KEY
    python -m models.cli.evaluate_endpoint --model smollm2-135m-instruct --name smollm2-base
    python -m models.cli.evaluate_endpoint --model models:/socialrl-craigslist-specialist@champion

With `--base-url` the model is called there (the key, if any, is read from the environment variable
named by `--api-key-env`, default OPENAI_API_KEY, and never printed). Without it `--model` is a model
reference (a built-in name, a checkpoint directory, `models:/name@alias`) served by the project's
engine for the length of the run. The row is printed and merged into `--output` (default
benchmarks/results/leaderboard.json): a row of the same endpoint name and profile is replaced.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from contextlib import nullcontext
from pathlib import Path

from environments import SOCIALRL_ENV_IDS
from models.cli.leaderboard import Endpoint, evaluate_endpoint, markdown_table, merge_rows
from models.profiles import PROFILE_NAMES, get_profile
from models.settings import REPO_ROOT, DataPaths

DEFAULT_OUTPUT = REPO_ROOT / "benchmarks" / "results" / "leaderboard.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", default="", help="OpenAI base URL; empty = serve --model locally")
    parser.add_argument("--model", required=True, help="model name at the endpoint, or a local model reference")
    parser.add_argument("--name", default="", help="the row's label (default: the model)")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key")
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--domains", default=",".join(SOCIALRL_ENV_IDS), help="comma-separated SocialRL domains")
    parser.add_argument("--no-red-black", action="store_true", help="skip the Red-Black game")
    parser.add_argument("--data-dir", default="", help="data directory (default: $SOCIALRL_DATA_DIR or ./data)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="leaderboard JSON to merge the row into")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    profile = get_profile(args.profile)
    paths = DataPaths(Path(args.data_dir)) if args.data_dir else DataPaths.from_env()
    domains = tuple(d for d in args.domains.split(",") if d)
    unknown = set(domains) - set(SOCIALRL_ENV_IDS)
    if unknown:
        parser.error(f"unknown domains {sorted(unknown)}; choose from {', '.join(SOCIALRL_ENV_IDS)}")
    key = os.environ.get(args.api_key_env, "") if args.base_url and args.api_key_env else ""
    endpoint = Endpoint(args.name or args.model, args.model, args.base_url, api_key=key)

    if endpoint.local:
        from models.serving.local import serve_local
        from models.tracking import TrackingConfig

        serving = serve_local(args.model, profile.base_model, paths, profile.engine, TrackingConfig.from_env(paths))
    else:
        serving = nullcontext(None)
    with serving as served:
        url = served.base_url if served is not None else None
        model = served.model if served is not None else None
        if served is not None:  # the serving stack's proxy records the calls and wants its per-start token
            endpoint = dataclasses.replace(endpoint, api_key=served.api_key or "")
        evaluation = evaluate_endpoint(
            endpoint, profile, url, model, seed=args.seed, domains=domains, red_black=not args.no_red_black
        )
    row = evaluation.row.as_dict()
    output = Path(args.output)
    existing = json.loads(output.read_text()) if output.is_file() else []
    rows = merge_rows(existing, [row])
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown_table([row]))
    print(f"{row['calls']} calls, {row['failed_calls']} failed; {row['wall_seconds']:.0f} s; merged into {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
