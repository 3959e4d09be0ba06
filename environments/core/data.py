"""Where the real public datasets live, and the error raised when a file is broken.

The datasets are optional: generators are the default. `shared_data_dir()` looks at
$SOCIALRL_SHARED_DATA first, then for `shared/data` beside or above the repository checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]


class DataFileError(ValueError):
    """A data file is missing, unreadable or has a malformed record. The message names both."""

    def __init__(self, path: str | Path, reason: str, record: int | str | None = None) -> None:
        where = f"{path}" + (f", record {record}" if record is not None else "")
        super().__init__(f"{where}: {reason}")
        self.path = Path(path)
        self.record = record
        self.reason = reason


def shared_data_dir() -> Path | None:
    """The folder holding the public datasets, or None when this checkout has none."""
    env = os.environ.get("SOCIALRL_SHARED_DATA")
    if env:
        path = Path(env)
        return path if path.is_dir() else None
    for parent in [_REPO_ROOT, *_REPO_ROOT.parents]:
        candidate = parent / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


def dataset_path(*parts: str) -> Path | None:
    """Path of a file in the shared data folder, or None when it is absent."""
    root = shared_data_dir()
    if root is None:
        return None
    path = root.joinpath(*parts)
    return path if path.exists() else None
