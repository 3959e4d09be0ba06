"""Hot-swapping LoRA adapters in a running engine: the one place for the unload-then-load dance that every
stage does (evaluation policies, cascade checkpoints, MOPD teachers and student versions, YOAO seeds).

vLLM refuses to load an adapter under a name it already serves, so a re-executed asset (or a resumed trainer)
that serves the same name again must unload it first."""

from __future__ import annotations

import shutil
from pathlib import Path

from models.serving.engine import EngineClient


def serve_adapter(engine: EngineClient, name: str, path: Path) -> str:
    """Serve the adapter at `path` under `name`, replacing one the engine already serves under that name;
    returns `name` (what a request's `model` field names)."""
    if name in engine.models():
        engine.unload_adapter(name)
    engine.load_adapter(name, path)
    return name


def advance_adapter(engine: EngineClient, name: str, directory: Path, previous: str | None) -> str:
    """A trainer's next adapter version: serve `directory` under `name`, then unload the `previous` version and
    remove its directory (a sibling of `directory` named after it); returns `name`."""
    serve_adapter(engine, name, directory)
    if previous is not None and previous != name:
        engine.unload_adapter(previous)
        shutil.rmtree(directory.parent / previous, ignore_errors=True)
    return name
