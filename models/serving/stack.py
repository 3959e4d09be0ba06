"""One serving stack: an engine for a resolved model (or a remote endpoint) and the rollout proxy in front of it,
up for the length of a `with` block. The pipeline's engine resource, `make play`, the local teacher and the
leaderboard's command line all serve through `serve_stack`, so each records its calls the same way.

| given | the engine | the proxy forwards to it as |
| --- | --- | --- |
| `weights` (a resolved checkpoint directory) | `local_engine`: the settings' kind (vLLM, or the tests' stand-in), serving `weights` as `base_name`, with `adapter` loaded under its name when given | "vllm" (token ids and log-probs) |
| `remote_base_url` | none: calls go to that OpenAI-compatible endpoint | "openai" (log-probs only) |

The engine's config is built from the resolved path (`EngineSettings.engine_config`), never from a placeholder
that is overwritten afterwards; each start gets fresh bearer tokens (the engine's, held by the client and the
proxy only; the proxy's, which the agents send).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.serving.engine import EngineClient, EngineConfig, VLLMEngine, new_token
from models.serving.engine_settings import ENGINE_KINDS, EngineSettings
from models.serving.proxy import ProxyConfig, ProxyServer
from models.serving.standin import StandInEngine


def local_engine(config: EngineConfig, log_path: Path | None = None) -> VLLMEngine | StandInEngine:
    """The server `config.kind` names, not yet started (a context manager, or `start()`/`stop()`)."""
    if config.kind not in ENGINE_KINDS:
        raise ValueError(f"kind must be one of {ENGINE_KINDS}, got {config.kind!r}")
    if config.kind == "standin":
        return StandInEngine(config, log_path=log_path)
    return VLLMEngine(config, log_path=log_path)


@dataclass(frozen=True, kw_only=True)
class ServingStack:
    """A started engine (or remote endpoint) and the proxy in front of it."""

    client: EngineClient
    """Talks to the engine itself (health, models, adapters: runtime LoRA loading goes only through it)."""
    engine_base_url: str
    """The engine's (or remote endpoint's) OpenAI base URL."""
    proxy_base_url: str
    """Where agents send their calls (recorded into `table_root`)."""
    proxy_api_key: str
    """The proxy's bearer token for this start."""
    model: str
    """The name to request: the adapter's when one was loaded, else the base's."""
    kind: str
    """"vllm", "standin" or "remote"."""
    engine_log: Path | None
    """The engine's log file (None when remote)."""

    def __post_init__(self) -> None:
        if self.kind not in (*ENGINE_KINDS, "remote"):
            raise ValueError(f"unknown serving kind {self.kind!r}")


@contextmanager
def serve_stack(
    *,
    settings: EngineSettings,
    table_root: Path,
    log_dir: Path,
    log_tag: str,
    weights: Path | None = None,
    base_name: str = "base",
    adapter: tuple[str, Path] | None = None,
    remote_base_url: str = "",
    remote_api_key: str | None = None,
    engine_overrides: Mapping[str, Any] | None = None,
    flush_every: int = 64,
    flush_interval_s: float = 2.0,
    on_start: Callable[[str], None] | None = None,
) -> Iterator[ServingStack]:
    """Serve `weights` (see the module table) or forward to `remote_base_url`; logs go to
    `log_dir/<engine kind>-<log_tag>.log` and `log_dir/proxy-<log_tag>.log`; `on_start` gets one line per server
    started. `engine_overrides` set engine fields beyond the settings (e.g. the YOAO engine's KV cache)."""
    if (weights is None) == (not remote_base_url):
        raise ValueError("serve either local weights or a remote endpoint, exactly one")
    say = on_start or (lambda line: None)
    if remote_base_url:
        client = EngineClient(remote_base_url, api_key=remote_api_key or None)
        try:
            with _proxy(remote_base_url, "openai", remote_api_key, base_name, table_root, log_dir, log_tag,
                        flush_every, flush_interval_s, say) as (url, key):  # fmt: skip
                yield ServingStack(
                    client=client,
                    engine_base_url=remote_base_url,
                    proxy_base_url=url,
                    proxy_api_key=key,
                    model=base_name,
                    kind="remote",
                    engine_log=None,
                )
        finally:
            client.close()
        return
    assert weights is not None
    overrides = {"served_model_name": base_name, "api_key": new_token(), **(engine_overrides or {})}
    config = settings.engine_config(weights, **overrides)
    log_path = log_dir / f"{config.kind}-{log_tag}.log"
    with local_engine(config, log_path=log_path) as engine:
        assert engine.client is not None
        say(f"{config.kind} serving {weights} at {engine.base_url} (log {log_path})")
        model = base_name
        if adapter is not None:
            engine.client.load_adapter(adapter[0], adapter[1])
            model = adapter[0]
        with _proxy(engine.base_url, "vllm", config.api_key, base_name, table_root, log_dir, log_tag,
                    flush_every, flush_interval_s, say) as (url, key):  # fmt: skip
            yield ServingStack(
                client=engine.client,
                engine_base_url=engine.base_url,
                proxy_base_url=url,
                proxy_api_key=key,
                model=model,
                kind=config.kind,
                engine_log=log_path,
            )


@contextmanager
def _proxy(
    upstream: str,
    kind: str,
    upstream_api_key: str | None,
    base_name: str,
    table_root: Path,
    log_dir: Path,
    log_tag: str,
    flush_every: int,
    flush_interval_s: float,
    say: Callable[[str], None],
) -> Iterator[tuple[str, str]]:
    config = ProxyConfig(
        upstreams=(upstream,),
        base_models=(base_name,),
        table_root=table_root,
        flush_every=flush_every,
        flush_interval_s=flush_interval_s,
        upstream_kind=kind,
        api_key=new_token(),
        upstream_api_key=upstream_api_key or None,
        port=0,
    )
    with ProxyServer(config, log_path=log_dir / f"proxy-{log_tag}.log") as server:
        say(f"rollout proxy at {server.base_url}, recording to {table_root}")
        assert config.api_key is not None
        yield server.base_url, config.api_key
