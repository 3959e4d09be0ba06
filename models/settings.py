"""Where the project keeps its data: one directory, chosen by $SOCIALRL_DATA_DIR (default ./data)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The project's data directory (tables, models, logs), created on first use."""
    path = Path(os.environ.get("SOCIALRL_DATA_DIR", REPO_ROOT / "data")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def tables_dir() -> Path:
    return data_dir() / "tables"
