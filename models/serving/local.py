"""Serve one model reference on the project's engine for the length of a `with` block.

`serve_local(reference, ...)` resolves the reference (models/serving/model_store.py: a built-in name, a
checkpoint directory, `models:/name@alias`), starts the serving stack (the profile's engine and the rollout
proxy, models/serving/stack.py) and yields where to call it:

| the reference resolves to | served as |
| --- | --- |
| a full checkpoint (config.json) | the engine's base model, under `base_name` |
| a LoRA adapter (adapter_config.json), e.g. a registered specialist | the profile's base model with the adapter loaded at run time, under `adapter_name` |

Used by the local teacher (models/socialrl/teachers.py) and by the leaderboard's command line for
registered models; Dagster assets use the `engine` resource instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from models.serving.engine_settings import EngineSettings
from models.serving.model_store import resolve_model
from models.serving.stack import serve_stack
from models.settings import DataPaths

if TYPE_CHECKING:
    from models.tracking import TrackingConfig


@dataclass(frozen=True)
class ServedModel:
    """A model being served: where to call it and under which name."""

    base_url: str
    """OpenAI base URL the callers use: the rollout proxy in front of the engine (http://127.0.0.1:<port>/v1)."""
    model: str
    """The model name to request."""
    path: Path
    """The resolved checkpoint or adapter directory."""
    adapter: bool
    """Whether `path` is a LoRA adapter served on top of the base model."""
    api_key: str | None = field(default=None, repr=False)
    """The bearer token the callers send (the proxy's, per start); None where nothing asks for one."""


def is_adapter(path: Path) -> bool:
    """A LoRA adapter directory (PEFT's adapter_config.json) rather than a full checkpoint."""
    return (path / "adapter_config.json").is_file() and not (path / "config.json").is_file()


@contextmanager
def serve_local(
    reference: str,
    base_model: str,
    paths: DataPaths,
    settings: EngineSettings | None = None,
    tracking: TrackingConfig | None = None,
    base_name: str = "base",
    adapter_name: str = "adapter",
) -> Iterator[ServedModel]:
    """Serve `reference` (see the module table) through the serving stack (models/serving/stack.py), its calls
    recorded into `paths.tables`; `base_model` is the reference adapters are served on, `settings` the engine's
    (default `EngineSettings()`)."""
    path = resolve_model(reference, paths.models, tracking)
    adapter = is_adapter(path)
    weights = resolve_model(base_model, paths.models, tracking) if adapter else path
    with serve_stack(
        settings=settings or EngineSettings(),
        weights=weights,
        base_name=base_name,
        adapter=(adapter_name, path) if adapter else None,
        table_root=paths.tables,
        log_dir=paths.logs,
        log_tag=f"local-{uuid.uuid4().hex[:8]}",
    ) as stack:
        yield ServedModel(stack.proxy_base_url, stack.model, path, adapter, api_key=stack.proxy_api_key)
