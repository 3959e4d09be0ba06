"""The proxy's configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from models.serving.process import is_loopback

CLI_PORT = 8100
"""The command line's default port (`python -m models.serving.proxy`)."""
INSTANCE_ENV = "SOCIALRL_PROXY_INSTANCE"
"""The environment variable the command line reads `ProxyConfig.instance` from."""
API_KEY_ENV = "SOCIALRL_PROXY_API_KEY"
"""Environment variable the proxy process reads its bearer token from (never put on a command line)."""
UPSTREAM_API_KEY_ENV = "SOCIALRL_UPSTREAM_API_KEY"
"""Environment variable the proxy process reads the upstreams' bearer token from."""
TABLE = "recorded_calls"
UPSTREAM_KINDS = ("vllm", "openai")


@dataclass(frozen=True)
class ProxyConfig:
    """How the rollout proxy forwards and records calls."""

    upstreams: tuple[str, ...]
    """OpenAI base URLs of the engines (including `/v1`, e.g. http://127.0.0.1:8000/v1); one or more. Several
    upstreams are replicas serving the same models: calls go to the one with the fewest calls in flight
    (models/serving/proxy/replicas.py), and a call that fails in transport on one is retried on another."""
    table_root: Path
    """Root of the TableStore the rows go to (table `recorded_calls`)."""
    routes: Mapping[str, str] = field(default_factory=dict)
    """Model name -> upstream (one of `upstreams`). Models not listed go to the replica with the fewest calls
    in flight (ties round-robin); a pinned model goes only to its upstream, also when that one is out of
    rotation."""
    base_models: tuple[str, ...] = ()
    """Base model names, used for `adapter_version` only when an upstream's /v1/models cannot tell
    (see `RolloutProxy.adapter_version`)."""
    flush_every: int = 64
    """Write a shard as soon as this many rows are buffered."""
    flush_interval_s: float = 5.0
    """Write a shard when the oldest buffered row is this many seconds old."""
    max_body_bytes: int = 8 * 1024 * 1024
    """Largest request body accepted; larger requests get a 413."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token clients must send (`Authorization: Bearer <token>`) on every route but /health; None = no
    authentication, allowed only on a loopback `host`. Never logged; a subprocess gets it in its environment."""
    upstream_api_key: str | None = field(default=None, repr=False)
    """Bearer token sent to the upstreams (remote endpoints); None = none."""
    upstream_kind: str = "vllm"
    """"vllm": ask for log-probs and token ids (`return_token_ids`); "openai": log-probs only, no token ids."""
    upstream_timeout_s: float = 600.0
    """Seconds one upstream call may take before the client gets a 504."""
    upstream_retries: int = 1
    """Extra tries of an upstream call that failed in transport before any answer (connection refused, or
    a kept-alive connection the engine closed just as it was reused); timeouts are not retried."""
    health_interval_s: float = 5.0
    """Seconds between health probes (GET <upstream without /v1>/health) of every upstream when there are
    several: a replica whose probe fails (no answer, or HTTP 5xx) leaves the rotation, one out of it whose
    probe succeeds comes back. A single upstream is never probed in the background."""
    keepalive_expiry_s: float = 4.0
    """Idle seconds after which the proxy drops a kept-alive upstream connection; keep it below the
    engine's own keep-alive timeout (vLLM: 5 s) so that the proxy, not the engine, closes idle ones."""
    max_connections: int = 1024
    """Most connections towards the upstreams, over all pools (each pool gets an equal share)."""
    upstream_pools: int = 8
    """httpx connection pools, used in turn. httpcore scans every connection of a pool on each request, so
    at high concurrency several small pools cost less CPU than one large one (measured: ~35% less proxy CPU
    per call at 32 concurrent calls with 8 pools)."""
    max_json_depth: int = 64
    """Deepest nesting of arrays and objects a request body may have; deeper bodies get a 400 (chat messages
    nest 4 levels; 1,000 levels made the JSON decoder raise RecursionError, a 500)."""
    host: str = "127.0.0.1"
    """Bind address; loopback by default. Any other address needs an `api_key`."""
    port: int = 0
    """TCP port; 0 (the default): ProxyServer/ProxyThread pick a free one (the command line's default is
    `CLI_PORT`). A fixed default made every proxy a test started without a port bind 8100, so two test workers
    collided and one talked to the other's proxy."""
    instance: str = ""
    """An identifier `/health` echoes, so that a launcher can tell its own process from another server that
    answers on the same port (ProxyServer sets a fresh one per start)."""
    log_level: str = "warning"
    """uvicorn log level."""

    def __post_init__(self) -> None:
        upstreams = (self.upstreams,) if isinstance(self.upstreams, str) else tuple(self.upstreams)
        upstreams = tuple(u.rstrip("/") for u in upstreams)
        if not upstreams:
            raise ValueError("at least one upstream is needed")
        for url in upstreams:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"upstream {url!r} must be an http(s) base URL such as http://127.0.0.1:8000/v1")
        if len(set(upstreams)) != len(upstreams):
            raise ValueError(f"upstreams must be distinct, got {upstreams}")
        object.__setattr__(self, "upstreams", upstreams)
        routes = {str(k): str(v).rstrip("/") for k, v in dict(self.routes).items()}
        for model, url in routes.items():
            if url not in upstreams:
                raise ValueError(f"route {model!r} -> {url!r}: the target must be one of the upstreams {upstreams}")
        object.__setattr__(self, "routes", routes)
        object.__setattr__(self, "base_models", tuple(self.base_models))
        object.__setattr__(self, "table_root", Path(self.table_root))
        if self.flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {self.flush_every}")
        if not self.flush_interval_s > 0:
            raise ValueError(f"flush_interval_s must be > 0, got {self.flush_interval_s}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must be None or a non-empty token")
        if self.upstream_kind not in UPSTREAM_KINDS:
            raise ValueError(f"upstream_kind must be one of {UPSTREAM_KINDS}, got {self.upstream_kind!r}")
        if not self.upstream_timeout_s > 0:
            raise ValueError(f"upstream_timeout_s must be > 0, got {self.upstream_timeout_s}")
        if self.upstream_retries < 0:
            raise ValueError(f"upstream_retries must be >= 0, got {self.upstream_retries}")
        if not self.health_interval_s > 0:
            raise ValueError(f"health_interval_s must be > 0, got {self.health_interval_s}")
        if not self.keepalive_expiry_s > 0:
            raise ValueError(f"keepalive_expiry_s must be > 0, got {self.keepalive_expiry_s}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {self.max_connections}")
        if self.upstream_pools < 1:
            raise ValueError(f"upstream_pools must be >= 1, got {self.upstream_pools}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.max_json_depth < 8:
            raise ValueError(f"max_json_depth must be >= 8, got {self.max_json_depth}")
        if self.api_key is None and not is_loopback(self.host):
            raise ValueError(
                f"refusing to listen on {self.host!r} without an api_key: set one (--api-key-env) or bind to 127.0.0.1"
            )
