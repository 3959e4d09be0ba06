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

Inside `shared_engines()` (the command lines that launch several Dagster runs one after another: `make run`,
run_stage2), a block that serves the same weights with the same settings as the block before it takes that
block's engine instead of starting another (`SharedEngines`): vLLM takes 15-60 s to start, once per run
otherwise. Each block still starts its own proxy (its own token, log and recording).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from models.serving.adapters import serve_adapter
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


class SharedEngines:
    """The engine kept between `serve_stack` blocks inside `shared_engines()`. One at a time: a block with other
    weights or engine settings stops the kept engine before starting its own, so two models never sit in memory
    together; an engine that died or stopped answering is started anew. Written here because Dagster's resources
    live for one run, and the runs of one command line follow each other in one process."""

    def __init__(self) -> None:
        self._engine: VLLMEngine | StandInEngine | None = None
        self._key: dict[str, Any] | None = None
        self.started = 0
        """Engines started inside the block."""
        self.reused = 0
        """Blocks that took the kept engine instead of starting one."""

    def engine(self, config: EngineConfig, log_path: Path) -> VLLMEngine | StandInEngine:
        """The kept engine when it serves `config` (its bearer token aside) and answers; else a new one (the kept
        one stopped first), started with `config` and logging to `log_path`."""
        key = {f.name: getattr(config, f.name) for f in fields(config) if f.name != "api_key"}
        kept = self._engine
        if kept is not None and (
            key != self._key or not kept.alive() or kept.client is None or not kept.client.healthy()
        ):
            self.close()
        if self._engine is None:
            engine = local_engine(config, log_path)
            engine.start()
            self._engine, self._key = engine, key
            self.started += 1
        else:
            self.reused += 1
        return self._engine

    def close(self) -> None:
        """Stop the kept engine (if any)."""
        if self._engine is not None:
            self._engine.stop()
        self._engine, self._key = None, None


_SHARED: SharedEngines | None = None


@contextmanager
def shared_engines() -> Iterator[SharedEngines]:
    """Within the block, `serve_stack` keeps its engine for the next block that serves the same (`SharedEngines`);
    the engine stops when the block ends. A nested block is the outer one."""
    global _SHARED
    if _SHARED is not None:
        yield _SHARED
        return
    _SHARED = SharedEngines()
    try:
        yield _SHARED
    finally:
        _SHARED.close()
        _SHARED = None


@contextmanager
def _engine_for(config: EngineConfig, log_path: Path) -> Iterator[VLLMEngine | StandInEngine]:
    """A started engine for `config`: the shared one inside `shared_engines()` (left running), else its own."""
    if _SHARED is not None:
        yield _SHARED.engine(config, log_path)
        return
    with local_engine(config, log_path=log_path) as engine:
        yield engine


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
    with _engine_for(config, log_path) as engine:
        assert engine.client is not None
        say(f"{config.kind} serving {weights} at {engine.base_url} (log {engine.log_path})")
        model = base_name
        if adapter is not None:
            model = serve_adapter(engine.client, adapter[0], adapter[1])  # a kept engine may serve it already
        # The engine's own token: a kept engine holds the one it was started with.
        with _proxy(engine.base_url, "vllm", engine.config.api_key, base_name, table_root, log_dir, log_tag,
                    flush_every, flush_interval_s, say) as (url, key):  # fmt: skip
            yield ServingStack(
                client=engine.client,
                engine_base_url=engine.base_url,
                proxy_base_url=url,
                proxy_api_key=key,
                model=model,
                kind=config.kind,
                engine_log=engine.log_path,
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
