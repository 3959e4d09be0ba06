"""Opponents served by a model for `make play` (agents/web_play.py), and recording of played episodes.

| opponent name | what plays |
| --- | --- |
| `base` | the engine's base model (the profile's, e.g. smollm2-135m-instruct) |
| `models:/<name>@<alias>`, `models:/<name>/<version>` | a registered LoRA adapter, looked up in the project's MLflow registry and loaded into the engine at run time as `<name>-v<version>` |

A model opponent is an `agents.llm_agent.LLMAgent` per opponent seat, calling the engine through the
rollout proxy (so its calls are recorded in `recorded_calls`, tagged with the episode id). The engine and
proxy start on the first model game (`LocalServing`, ~40 s on CPU), not when the page opens, so playing
against code agents never waits for them; meanwhile the page says so ("Starting the model engine (this takes
about half a minute)", `ModelOpponents.preparing`) and counts the seconds.

What a registered model was trained for (`TrainedFor`) comes from its version's tags: `socialrl.domain` and
`socialrl.seat` (written by `Tracker.document_version` from the model card), or `socialrl.domains` (stage-2
policies); a version documented before the seat was tagged has it in its model card (README.md, "| Seat |").
The page lists it beside each model, seats the person so that the model plays the seat it was trained for
(`trained_seat`), and warns when a game puts the model outside it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.llm_agent import LLMAgent, LLMAgentConfig
from agents.web_play import OpponentOption, PlayError
from environments.core.runtime import Agent, EpisodeResult
from models.records import rows_for
from models.serving.engine_settings import EngineSettings
from models.storage import TableStore
from models.tracking import DOMAIN_TAG, DOMAINS_TAG, SEAT_TAG, RegisteredVersion, RegistryError, Tracker

log = logging.getLogger("socialrl.play")

BASE = "base"
"""Opponent name of the engine's base model."""
_MODEL_URI = re.compile(r"^models:/(?P<name>[^/@\s]+)(?:@(?P<alias>[^/\s]+)|/(?P<version>\d+))$")


@dataclass(frozen=True)
class ModelServing:
    """A running engine (with runtime LoRA loading) and the rollout proxy in front of it."""

    client: Any
    """`models.serving.engine.EngineClient` of the engine (loads adapters)."""
    proxy_base_url: str
    """OpenAI base URL of the proxy the agents call (records every call)."""
    base_model_name: str = BASE
    """The name the engine serves the base weights under."""
    proxy_api_key: str | None = field(default=None, repr=False)
    """The proxy's bearer token, which the agents send (None: the proxy has none)."""


_CARD_SEAT = re.compile(r"^\| Seat \| (?P<seat>[^|]+?) \|$", re.MULTILINE)


@dataclass(frozen=True)
class TrainedFor:
    """The domains and seat a registered model was trained for (empty: not recorded)."""

    domains: tuple[str, ...] = ()
    seat: str = ""

    def describe(self) -> str:
        """ "craigslist-v0 as buyer", "craigslist-v0, marketplace-v0"; "" when not recorded."""
        return ", ".join(self.domains) + (f" as {self.seat}" if self.seat and self.domains else "")

    def warning(self, model: str, env_id: str, seats: Sequence[str]) -> str:
        """Why `model` playing `seats` of `env_id` is outside its training ("" when it is not, or unknown)."""
        where = f"here it plays {', '.join(seats)} in {env_id}"
        if self.domains and env_id not in self.domains:
            return f"{model} was trained on {self.describe()}; {where}, outside its training."
        if self.seat and seats and self.seat not in seats:
            return f"{model} was trained as {self.seat} in {env_id}; {where}, outside its training."
        return ""


def trained_for(version: RegisteredVersion) -> TrainedFor:
    """What a version was trained for, from its tags (or, for the seat, its model card beside a local adapter)."""
    tags = version.tags
    domains = tuple(d for d in tags.get(DOMAINS_TAG, "").split(",") if d) or (
        (tags[DOMAIN_TAG],) if tags.get(DOMAIN_TAG) else ()
    )
    seat = tags.get(SEAT_TAG, "")
    if not seat and len(domains) == 1 and version.source.startswith("file:"):
        readme = Path(urllib.parse.unquote(urllib.parse.urlparse(version.source).path)) / "README.md"
        match = _CARD_SEAT.search(readme.read_text()) if readme.is_file() else None
        seat = match["seat"].strip() if match else ""
    return TrainedFor(domains, seat)


def parse_model_uri(uri: str) -> tuple[str, str | None, int | None]:
    """(name, alias, version) of `models:/name@alias` or `models:/name/version`; PlayError otherwise."""
    match = _MODEL_URI.match(uri.strip())
    if match is None:
        raise PlayError(f"{uri!r} is not a model URI; write models:/<name>@<alias> or models:/<name>/<version>")
    return match["name"], match["alias"], int(match["version"]) if match["version"] else None


class ModelOpponents:
    """Registered models (and the base model) as opponents of the web page."""

    def __init__(
        self,
        tracker: Tracker | None,
        serving: Callable[[], ModelServing],
        max_new_tokens: int = 128,
        temperature: float = 0.7,
        base_label: str = "",
        start_time: str = "about half a minute",
    ) -> None:
        """`start_time`: how long the engine takes to start, in words, for the page while it starts."""
        self.tracker = tracker
        self._serving_factory = serving
        self._serving: ModelServing | None = None
        self.max_new_tokens, self.temperature = max_new_tokens, temperature
        self.base_label = base_label
        self._lock = threading.Lock()
        self._loaded: dict[str, str] = {}
        self._trained: dict[tuple[str, int], TrainedFor] = {}
        self.start_time = start_time
        self._ready: set[str] = set()
        """Opponent names whose model is served (the engine runs, the adapter is loaded)."""

    def trained_for(self, model: str, version: int) -> TrainedFor:
        """What a registered version was trained for (read once per version)."""
        key = (model, version)
        if key not in self._trained:
            assert self.tracker is not None
            self._trained[key] = trained_for(self.tracker.get_version(model, version))
        return self._trained[key]

    def handles(self, name: str) -> bool:
        return name == BASE or name.startswith("models:")

    def options(self, env_id: str) -> list[OpponentOption]:
        label = f"base model ({self.base_label})" if self.base_label else "base model"
        out = [OpponentOption(BASE, label, "model")]
        if self.tracker is None:
            return out
        try:
            registered = self.tracker.version_numbers()
        except Exception as exc:  # an unreadable registry must not take the page down
            log.warning("cannot list the registry: %s", exc)
            return out
        domain = env_id.removesuffix("-v0")
        for name in sorted(registered, key=lambda n: (domain not in n, n)):
            for alias, version in sorted(self.tracker.aliases(name).items()):
                trained = self.trained_for(name, version)
                what = f"trained on {trained.describe()}" if trained.domains else "training domain not recorded"
                label = f"{name}@{alias} (v{version}; {what})"
                if trained.domains and env_id not in trained.domains:
                    label += " - outside its training here"
                out.append(
                    OpponentOption(
                        f"models:/{name}@{alias}", label, "model", trained.describe(), trained.domains, trained.seat
                    )
                )
        return out

    def _trained_for_uri(self, name: str) -> TrainedFor:
        model, alias, version = parse_model_uri(name)
        assert self.tracker is not None
        number = self.tracker.aliases(model)[alias] if alias is not None else version
        return self.trained_for(model, int(number))  # type: ignore[arg-type]

    def note(self, env_id: str, name: str, seats: Sequence[str]) -> str:
        if name == BASE or self.tracker is None:
            return ""
        return self._trained_for_uri(name).warning(name, env_id, seats)

    def trained_seat(self, env_id: str, name: str) -> str:
        if name == BASE or self.tracker is None:
            return ""
        return self._trained_for_uri(name).seat

    def preparing(self, name: str) -> str:
        if name in self._ready or (name == BASE and self._serving is not None):
            return ""
        if self._serving is None:
            return f"Starting the model engine (this takes {self.start_time})"
        return f"Loading {name} into the engine"

    def check(self, env_id: str, name: str) -> None:
        if name == BASE:
            return
        model, alias, version = parse_model_uri(name)
        if self.tracker is None:
            raise PlayError(f"{name}: no model registry is configured for this server")
        try:
            if alias is not None:
                known = self.tracker.aliases(model)
                if alias not in known:
                    raise PlayError(
                        f"unknown model alias {name!r}: {model} has aliases {', '.join(sorted(known)) or 'none'}"
                    )
            else:
                self.tracker.get_version(model, version)  # type: ignore[arg-type]
        except RegistryError as exc:
            raise PlayError(f"unknown model {name!r}: {exc}") from None

    def serving(self) -> ModelServing:
        """The engine and proxy, started on first use."""
        with self._lock:
            if self._serving is None:
                log.info("starting the model engine for play")
                self._serving = self._serving_factory()
            return self._serving

    def served_name(self, name: str) -> str:
        """The model name to request for opponent `name`, loading the adapter into the engine once."""
        serving = self.serving()
        if name == BASE:
            self._ready.add(name)
            return serving.base_model_name
        model, alias, version = parse_model_uri(name)
        assert self.tracker is not None  # checked before the game started
        local = self.tracker.lookup(model, alias=alias, version=version)
        with self._lock:
            if local.adapter_name not in self._loaded:
                serving.client.load_adapter(local.adapter_name, local.path)
                self._loaded[local.adapter_name] = str(local.path)
        self._ready.add(name)
        return local.adapter_name

    async def make_agents(self, env_id: str, name: str, seats: Sequence[str], seed: int) -> dict[str, Agent]:
        served = await asyncio.to_thread(self.served_name, name)
        serving = self.serving()
        return {
            seat: LLMAgent(
                LLMAgentConfig(
                    base_url=serving.proxy_base_url,
                    model=served,
                    api_key_env=None,
                    api_key=serving.proxy_api_key,
                    temperature=self.temperature,
                    max_tokens=self.max_new_tokens,
                    seed=seed * 101 + k,
                    fail_on_request_error=False,
                )
            )
            for k, seat in enumerate(seats)
        }


class LocalServing:
    """The serving stack (models/serving/stack.py): the profile's engine serving `model_dir` as "base" (LoRA
    enabled) and the rollout proxy recording into `table_root`, started by `start()` (the factory `ModelOpponents` calls on the first model game) and
    stopped by `stop()`. With `remote_base_url` no engine starts: the proxy forwards to that endpoint."""

    def __init__(
        self,
        model_dir: Callable[[], Path] | None,
        table_root: Path,
        log_dir: Path,
        engine: EngineSettings | None = None,
        remote_base_url: str = "",
    ) -> None:
        """`engine`: the profile's engine settings (default: `EngineSettings()`), every one carried over."""
        self.model_dir, self.table_root, self.log_dir = model_dir, table_root, log_dir
        self.engine = engine or EngineSettings()
        self.remote_base_url = remote_base_url
        self._servers: ExitStack | None = None

    def start(self) -> ModelServing:
        from models.serving.stack import serve_stack

        if not self.remote_base_url and self.model_dir is None:
            raise RuntimeError("no model to serve: give a model directory or a remote base URL")
        servers = ExitStack()
        try:
            stack = servers.enter_context(
                serve_stack(
                    settings=self.engine,
                    weights=None if self.remote_base_url else self.model_dir(),  # type: ignore[misc]
                    remote_base_url=self.remote_base_url,
                    base_name=BASE,
                    table_root=self.table_root,
                    log_dir=self.log_dir,
                    log_tag="play",
                    on_start=log.info,
                )
            )
        except BaseException:
            servers.close()
            raise
        self._servers = servers
        return ModelServing(stack.client, stack.proxy_base_url, proxy_api_key=stack.proxy_api_key)

    def stop(self) -> None:
        if self._servers is not None:
            try:
                self._servers.close()
            except Exception:  # a server that failed to stop must not hide the game's own outcome
                log.exception("stopping the play servers failed")
        self._servers = None


def record_played_episode(store: TableStore, result: EpisodeResult, run_id: str) -> None:
    """Append a played episode to the episode tables (episodes, episode_roles, episode_turns), exactly as
    evaluations and tournaments record theirs."""
    store.append_all({k: v for k, v in rows_for([result], run_id).items() if v})
