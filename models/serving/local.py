"""Serve one model reference on the project's engine for the length of a `with` block.

`serve_local(reference, ...)` resolves the reference (models/serving/model_store.py: a built-in name, a
checkpoint directory, `models:/name@alias`), starts a vLLM server and yields where to call it:

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from models.serving.engine import EngineConfig, VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths

if TYPE_CHECKING:
    from models.tracking import TrackingConfig


@dataclass(frozen=True)
class ServedModel:
    """A model being served: where to call it and under which name."""

    base_url: str
    """OpenAI base URL of the engine (http://127.0.0.1:<port>/v1)."""
    model: str
    """The model name to request."""
    path: Path
    """The resolved checkpoint or adapter directory."""
    adapter: bool
    """Whether `path` is a LoRA adapter served on top of the base model."""


def is_adapter(path: Path) -> bool:
    """A LoRA adapter directory (PEFT's adapter_config.json) rather than a full checkpoint."""
    return (path / "adapter_config.json").is_file() and not (path / "config.json").is_file()


@contextmanager
def serve_local(
    reference: str,
    base_model: str,
    paths: DataPaths,
    engine_config: EngineConfig | None = None,
    tracking: TrackingConfig | None = None,
    base_name: str = "base",
    adapter_name: str = "adapter",
) -> Iterator[ServedModel]:
    """Serve `reference` (see the module table); `base_model` is the reference adapters are served on.
    `engine_config` gives the engine's settings (its `model_path` and `served_model_name` are replaced)."""
    path = resolve_model(reference, paths.models, tracking)
    adapter = is_adapter(path)
    weights = resolve_model(base_model, paths.models, tracking) if adapter else path
    base = engine_config or EngineConfig(model_path=weights)
    config = EngineConfig(**{**base.__dict__, "model_path": weights, "served_model_name": base_name})
    log = paths.logs / f"vllm-local-{uuid.uuid4().hex[:8]}.log"
    with VLLMEngine(config, log_path=log) as engine:
        assert engine.client is not None
        model = base_name
        if adapter:
            engine.client.load_adapter(adapter_name, path)
            model = adapter_name
        yield ServedModel(engine.base_url, model, path, adapter)
