"""The proxy's command line: `python -m models.serving.proxy --upstream URL --table-root DIR [--port N]`.

Tokens are read from environment variables (`--api-key-env`, default SOCIALRL_PROXY_API_KEY; the upstreams'
from `--upstream-api-key-env`), never from the command line, where `ps` would show them. Without a token the
proxy only listens on loopback: `--host 0.0.0.0` without one refuses to start.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from models.serving.proxy.app import create_app
from models.serving.proxy.config import (
    API_KEY_ENV,
    CLI_PORT,
    INSTANCE_ENV,
    UPSTREAM_API_KEY_ENV,
    UPSTREAM_KINDS,
    ProxyConfig,
)

DESCRIPTION = "The rollout proxy: an OpenAI-compatible server that records every call."


def parse_args(argv: Sequence[str] | None = None) -> ProxyConfig:
    p = argparse.ArgumentParser(prog="python -m models.serving.proxy", description=DESCRIPTION)
    p.add_argument("--upstream", action="append", required=True, help="engine base URL (repeatable)")
    p.add_argument("--route", action="append", default=[], metavar="MODEL=URL", help="send MODEL to URL (repeatable)")
    p.add_argument("--base-model", action="append", default=[], help="base model name (repeatable)")
    p.add_argument("--table-root", type=Path, required=True, help="TableStore root the calls are recorded to")
    p.add_argument("--flush-every", type=int, default=ProxyConfig.flush_every)
    p.add_argument("--flush-interval", type=float, default=ProxyConfig.flush_interval_s)
    p.add_argument("--max-body-bytes", type=int, default=ProxyConfig.max_body_bytes)
    p.add_argument("--upstream-kind", choices=UPSTREAM_KINDS, default=ProxyConfig.upstream_kind)
    p.add_argument("--upstream-timeout", type=float, default=ProxyConfig.upstream_timeout_s)
    p.add_argument("--upstream-retries", type=int, default=ProxyConfig.upstream_retries)
    p.add_argument("--health-interval", type=float, default=ProxyConfig.health_interval_s)
    p.add_argument("--keepalive-expiry", type=float, default=ProxyConfig.keepalive_expiry_s)
    p.add_argument("--max-connections", type=int, default=ProxyConfig.max_connections)
    p.add_argument("--upstream-pools", type=int, default=ProxyConfig.upstream_pools)
    p.add_argument("--max-json-depth", type=int, default=ProxyConfig.max_json_depth)
    p.add_argument("--api-key-env", default=API_KEY_ENV, help="env var holding the clients' bearer token")
    p.add_argument("--upstream-api-key-env", default=UPSTREAM_API_KEY_ENV, help="env var holding the upstreams' token")
    p.add_argument("--host", default=ProxyConfig.host, help="bind address; other than loopback needs a token")
    p.add_argument("--port", type=int, default=CLI_PORT)
    p.add_argument("--log-level", default=ProxyConfig.log_level)
    args = p.parse_args(argv)
    routes = {}
    for item in args.route:
        model, sep, url = item.partition("=")
        if not sep or not model or not url:
            p.error(f"--route needs MODEL=URL, got {item!r}")
        routes[model] = url
    return ProxyConfig(
        upstreams=tuple(args.upstream),
        routes=routes,
        base_models=tuple(args.base_model),
        table_root=args.table_root,
        flush_every=args.flush_every,
        flush_interval_s=args.flush_interval,
        max_body_bytes=args.max_body_bytes,
        api_key=os.environ.get(args.api_key_env) or None,
        upstream_api_key=os.environ.get(args.upstream_api_key_env) or None,
        upstream_kind=args.upstream_kind,
        upstream_timeout_s=args.upstream_timeout,
        upstream_retries=args.upstream_retries,
        health_interval_s=args.health_interval,
        keepalive_expiry_s=args.keepalive_expiry,
        max_connections=args.max_connections,
        upstream_pools=args.upstream_pools,
        max_json_depth=args.max_json_depth,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        instance=os.environ.get(INSTANCE_ENV, ""),
    )


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    try:
        config = parse_args(argv)
    except ValueError as exc:  # e.g. a non-loopback --host without a token
        raise SystemExit(f"python -m models.serving.proxy: {exc}") from None
    if config.port == 0:
        raise SystemExit("--port 0 is not supported from the command line; pick a port")
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    uvicorn.run(
        create_app(config),
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )
    return 0
