"""`make play`: play a negotiation in the browser against a code agent or a registered model.

Serves the page of agents/web_play.py (default http://127.0.0.1:8300). Opponents: every code agent (the
six SocialRL domains) and scripted strategy (Red-Black), the profile's base model (`base`) and every model
of the project's MLflow registry by alias (`models:/socialrl-craigslist-specialist@champion`). A model
opponent is served by a local vLLM engine with the rollout proxy in front of it, started on the first model
game (about 40 s on CPU) and stopped with the server; --engine-url uses a running OpenAI-compatible endpoint
instead. Every finished game is recorded in the episode tables (run id `play-<UTC date>`), the model's calls
in `recorded_calls`.

    python -m models.cli.play [--host 127.0.0.1] [--port 8300] [--profile smoke|cpu|paper]
                             [--data-dir DIR] [--engine-url URL] [--no-models]
"""

import argparse
import logging
import time

from agents.web_play import CodeOpponents, create_app
from models.play import LocalServing, ModelOpponents, record_played_episode
from models.profiles import PROFILE_NAMES, Profile, get_profile
from models.serving.model_store import resolve_model
from models.settings import DataPaths
from models.storage import TableStore
from models.tracking import Tracker, TrackingConfig


def local_serving(profile: Profile, paths: DataPaths, tracking: TrackingConfig, engine_url: str = "") -> LocalServing:
    """The engine and proxy model opponents play through: the profile's base model on the profile's engine
    (started on the first model game), or the running endpoint at `engine_url`."""
    return LocalServing(
        (lambda: resolve_model(profile.base_model, paths.models, tracking)) if not engine_url else None,
        table_root=paths.tables,
        log_dir=paths.logs,
        engine=profile.engine,
        remote_base_url=engine_url,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    parser.add_argument("--port", type=int, default=8300)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--data-dir", default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument("--engine-url", default="", help="an OpenAI-compatible endpoint instead of a local vLLM")
    parser.add_argument("--no-models", action="store_true", help="code opponents only (no registry, no engine)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # httpx logs every model call ("HTTP Request: POST ...") at INFO: one console line per move of a game.
    logging.getLogger("httpx").setLevel(logging.WARNING)

    import uvicorn

    paths = DataPaths(args.data_dir) if args.data_dir else DataPaths.from_env()
    profile = get_profile(args.profile)
    store = TableStore(paths.tables)
    run_id = f"play-{time.strftime('%Y%m%d', time.gmtime())}"
    providers: list = [CodeOpponents()]
    serving = None
    if not args.no_models:
        tracking = TrackingConfig.from_env(paths)
        serving = local_serving(profile, paths, tracking, args.engine_url)
        providers.append(
            ModelOpponents(
                Tracker(tracking),
                serving.start,
                max_new_tokens=profile.max_new_tokens,
                base_label=args.engine_url or profile.base_model,
            )
        )
    app = create_app(
        providers,
        record=lambda result: record_played_episode(store, result, run_id),
        on_shutdown=serving.stop if serving is not None else None,
    )
    print(f"Play in your browser: http://{args.host}:{args.port}/  (games recorded as run {run_id}; Ctrl-C stops)")
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        if serving is not None:
            serving.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
