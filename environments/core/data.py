"""Where the real public datasets live, the error raised when a file is broken, and strict record loading.

The datasets are optional: generators are the default. `shared_data_dir()` looks at
$SOCIALRL_SHARED_DATA first, then for `shared/data` beside or above the repository checkout.

Loaders share one discipline (`load_records`):

* an error names the file, the record and the field: `DataFileError("dev.json, record 12, field
  'scenario.kbs[buyer].personal.Target': must be a number, got None")`. Records of JSON and YAML lists are
  numbered from 0 (their index in the list), records of text files by their 1-based line number, blank lines
  counted;
* a file that cannot be read, is not valid UTF-8 (`read_text_file`), is empty or holds an empty list is an
  error;
* values of the wrong type are rejected, never coerced (`get_field`): a string where a list is expected is
  not split into characters, null/list/number where text is expected is not stored as text, `'no'` is not
  a boolean;
* with `skip_bad=True` the good records load and the bad ones are reported: logged one line each (logger
  `socialrl.data`) and kept, with their reasons, in the returned list's `skipped`. A file without a single
  good record is still an error;
* every record-level error names its field: a field check raises `RecordError(field, reason)`, and a
  scenario's own validation (`ScenarioError(message, field=<scenario field>)`, e.g. two prices that disagree)
  is reported under the file's field that holds that scenario field (`load_records(..., fields=...)`);
* messages are bounded: a bad value is quoted by a short prefix and its length (`show`/`quote`,
  environments/core/quoting.py), and every reason is clipped, so a 20 MB line gives a short error.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from environments.core.base import ScenarioError
from environments.core.quoting import clip, quote

_REPO_ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("socialrl.data")
T = TypeVar("T")


class DataFileError(ValueError):
    """A data file is missing, unreadable or has a malformed record. The message names the file, the record
    and the field where they are known."""

    def __init__(
        self, path: str | Path, reason: str, record: int | str | None = None, field: str | None = None
    ) -> None:
        reason = clip(reason)
        where = f"{path}" + (f", record {record}" if record is not None else "")
        where += f", field '{field}'" if field else ""
        super().__init__(f"{where}: {reason}")
        self.path = Path(path)
        self.record = record
        self.field = field
        self.reason = reason


class RecordError(ValueError):
    """One field of a record is missing or malformed; `load_records` adds the file and the record."""

    def __init__(self, field: str | None, reason: str) -> None:
        reason = clip(reason)
        super().__init__(f"field '{field}': {reason}" if field else reason)
        self.field = field
        self.reason = reason


class Loaded(list, Generic[T]):  # type: ignore[type-arg]
    """The records a loader built, in file order; `skipped` holds the bad ones left out (skip_bad=True)."""

    def __init__(self, items: Iterable[T] = (), skipped: Sequence[DataFileError] = (), path: Path | None = None):
        super().__init__(items)
        self.skipped: tuple[DataFileError, ...] = tuple(skipped)
        self.path = path


def read_text_file(path: str | Path) -> str:
    """The file's text, strictly UTF-8; DataFileError naming the file (and the bad byte) otherwise."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataFileError(path, f"cannot read: {exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFileError(path, f"not valid UTF-8 (byte {exc.start}: {exc.reason})") from exc
    if not text.strip():
        raise DataFileError(path, "the file is empty")
    return text


def describe_type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def get_field(
    record: Any, path: str, kind: str | None, *, optional: bool = False, default: Any = None, prefix: str = ""
) -> Any:
    """The value at a dotted `path` of a JSON/YAML record, checked to be of `kind`, else RecordError naming
    the field (`prefix` + path, e.g. "assistant.calendar[3]" + ".title"). Kinds: "text" (a non-empty string),
    "text?" (a string, may be empty), "number" (int or float, not bool, finite), "integer", "bool", "list"
    (a list, not a string), "mapping", or None (any value). Missing (or null) values are an error unless
    `optional` (then `default`)."""
    value: Any = record
    walked: list[str] = []

    def name(parts: list[str]) -> str:
        return ".".join(p for p in (prefix, *parts) if p) or "(record)"

    for key in path.split("."):
        if not isinstance(value, Mapping):
            raise RecordError(name(walked), f"must be a mapping, got {describe_type(value)}")
        walked.append(key)
        if key not in value or value[key] is None:
            if optional:
                return default
            raise RecordError(name(walked), "is missing" if key not in value else "is null")
        value = value[key]
    problem = _kind_problem(value, kind) if kind is not None else None
    if problem:
        raise RecordError(name(walked), problem)
    return value


def _kind_problem(value: Any, kind: str) -> str | None:
    got = f"got {describe_type(value)} {quote(value, 40)}" if value is not None else "got null"
    if kind in ("text", "text?"):
        if not isinstance(value, str):
            return f"must be text, {got}"
        if kind == "text" and not value.strip():
            return "must not be empty"
    elif kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number, {got}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, {got}"
        if kind == "integer" and not float(value).is_integer():
            return f"must be a whole number, {got}"
    elif kind == "bool":
        if not isinstance(value, bool):
            return f"must be true or false, {got}"
    elif kind == "list":
        if isinstance(value, str) or not isinstance(value, list | tuple):
            return f"must be a list, {got}"
    elif kind == "mapping":
        if not isinstance(value, Mapping):
            return f"must be a mapping, {got}"
    else:  # pragma: no cover - a programming error
        raise ValueError(f"unknown kind {kind!r}")
    return None


def load_records(
    path: str | Path,
    records: Iterable[tuple[int | str, Any]],
    build: Callable[[Any, int | str], T],
    *,
    skip_bad: bool = False,
    what: str = "record",
    fields: Mapping[str, str] | None = None,
) -> Loaded[T]:
    """Build every (record id, raw record) with `build`. A bad record (RecordError, or any KeyError,
    TypeError, ValueError or AttributeError while building, ScenarioError included) raises DataFileError
    naming the file, the record and the field; with `skip_bad` it is logged and kept in `skipped` instead.
    `fields` maps a scenario field to the file's field that holds it, so that a scenario's own validation
    error (`ScenarioError(..., field=...)`) names the file's field.
    No records at all, or no good one, is an error."""
    path = Path(path)
    good: list[T] = []
    bad: list[DataFileError] = []
    seen = 0
    for record_id, raw in records:
        seen += 1
        try:
            good.append(build(raw, record_id))
            continue
        except RecordError as exc:
            error = DataFileError(path, exc.reason, record_id, exc.field)
        except ScenarioError as exc:
            field = (fields or {}).get(exc.field, exc.field) if exc.field else None
            error = DataFileError(
                path, str(exc) if field else f"malformed {what} (ScenarioError: {exc})", record_id, field
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            error = DataFileError(path, f"malformed {what} ({type(exc).__name__}: {exc})", record_id)
        if not skip_bad:
            raise error
        log.warning("skipping a bad %s: %s", what, error)
        bad.append(error)
    if not seen:
        raise DataFileError(path, f"no {what}s: the file holds an empty list")
    if not good:
        raise DataFileError(path, f"none of the {seen} {what}s is usable; first problem: {bad[0]}")
    if bad:
        log.warning("%s: loaded %d %ss, skipped %d bad ones", path, len(good), what, len(bad))
    return Loaded(good, bad, path)


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


def read_json_list(path: str | Path | None, default: tuple[str, ...], what: str = "dialogue") -> tuple[Path, list[Any]]:
    """(the file, its records) of a JSON file holding a list (the CoCoA and CaSiNo layout). `path` None reads the
    shared dataset file `default` (folder parts then the file name); a missing, unreadable or non-JSON file, or
    one that is not a list, is a DataFileError naming it."""
    resolved = Path(path) if path is not None else dataset_path(*default)
    if resolved is None:
        raise DataFileError("/".join(default), "the shared dataset is not present")
    try:
        records = json.loads(read_text_file(resolved))
    except json.JSONDecodeError as exc:
        raise DataFileError(resolved, f"cannot read JSON: {exc}") from exc
    if not isinstance(records, list):
        raise DataFileError(resolved, f"expected a JSON list of {what}s, got {describe_type(records)}")
    return resolved, records


def load_yaml_tasks(
    path: str | Path | None,
    default: tuple[str, ...],
    build: Callable[[Any, int | str, Path], T],
    *,
    skip_bad: bool = False,
    what: str = "task",
    fields: Mapping[str, str] | None = None,
) -> Loaded[T]:
    """The records of a YAML task file: a mapping with a `tasks:` list, or a bare list of tasks (the
        SocialReasoning-Bench layout). `path` None reads the shared dataset file `default` (folder parts then the
        file name). Each task is built by `build(task, index, path)` under `load_records`' discipline; a missing,
        unreadable or non-YAML file, or one without a task list, is a DataFileError naming it. `fields`: as for
    `load_records`."""
    import yaml  # only the YAML datasets need it

    resolved = Path(path) if path is not None else dataset_path(*default)
    if resolved is None:
        raise DataFileError("/".join(default), "the shared dataset is not present")
    try:
        document = yaml.safe_load(read_text_file(resolved))
    except yaml.YAMLError as exc:
        raise DataFileError(resolved, f"cannot read YAML: {exc}") from exc
    tasks = document.get("tasks") if isinstance(document, dict) else document
    if not isinstance(tasks, list):
        raise DataFileError(resolved, f"expected a mapping with a `tasks:` list (or a list of {what}s)")
    return load_records(
        resolved,
        enumerate(tasks),
        lambda task, index: build(task, index, resolved),
        skip_bad=skip_bad,
        what=what,
        fields=fields,
    )
