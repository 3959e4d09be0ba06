"""MLflow tracking and model registry: a thin client over `mlflow.tracking.MlflowClient`.

One `Tracker` is built from plain settings (`TrackingConfig`: tracking URI, artifact root, experiment
name), so that a Dagster ConfigurableResource can wrap it later; it never touches MLflow's global state
(`mlflow.set_tracking_uri`, the active-run stack). MLflow's file store is disabled, so the backend is a
sqlite database by default (`<data>/mlflow/mlflow.db`) with a local artifact root
(`<data>/mlflow/artifacts`); any SQLAlchemy URI or an `http(s)://` tracking server works too.

| task | call |
| --- | --- |
| one run per training job | `with tracker.start_run(name, params, tags=run_tags(domain=..., profile=..., git_commit=git_commit(), dagster_run_id=..., parent_run_id=...)) as run:` then `run.log_metrics(step, loss=...)`, `run.log_artifact_dir(adapter_dir, "adapter")`; the run ends FINISHED, or FAILED (KILLED on Ctrl-C) when the body raises |
| per-step metrics | `run.log_history(trainer_log_history)` (one dict per step, e.g. transformers' `state.log_history`) |
| evaluation on the run | `run.log_evaluation(summary)` inside the run, `tracker.log_run_metrics(run_id, summary, prefix="eval/")` after it |
| register a trained adapter | `tracker.register_adapter(run_id, "adapter", "socialrl-craigslist-specialist") -> version`; alias `candidate` moves to it |
| describe a version | `tracker.document_version(name, version, ModelCard(...))`: description, tags, README.md model card and a base-model *name* in adapter_config.json beside the adapter |
| promote on evaluation | `tracker.promote_if_better(name, version, "mean_reward", 0.61)`: stores tag `eval.mean_reward` on the version, moves alias `champion` when it beats the champion's stored value |
| re-evaluations with history | `tracker.record_evaluation_history(name, version, summary, suite="nightly")`: latest values as tags `eval.nightly.<metric>`, every evaluation as metric `nightly/<metric>` of the version's run |
| serve a registered adapter | `local = tracker.lookup(name, "champion")`, then `EngineClient.load_adapter(local.adapter_name, local.path)` |
| nightly re-evaluation | `tracker.champion_versions()` lists every registered model's champion |
| the UI (`make ui`) | `server_command(config, port=5000)` is the argv of `mlflow server` over the same store |

Offline and quiet: importing this module sets (unless already set) MLFLOW_DISABLE_TELEMETRY=true,
MLFLOW_ENABLE_ASYNC_LOGGING=false, MLFLOW_LOGGING_LEVEL=WARNING and MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false; MLflow itself is imported lazily, on
first use, so these take effect as long as nothing imported mlflow earlier in the process.

Registry caveat: MLflow resolves `models:/name@alias` URIs (`mlflow.artifacts.download_artifacts`)
against the *global* registry URI (MLFLOW_TRACKING_URI, else `sqlite:///mlflow.db` in the current
directory, which it silently creates). `lookup` therefore resolves the alias with this tracker's own
client and fetches the version's source URI directly; registered sources are the run's concrete
artifact URI (e.g. `file:///.../artifacts/adapter`), not `runs:/`, for the same reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.settings import REPO_ROOT, DataPaths

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.entities.model_registry import ModelVersion
    from mlflow.tracking import MlflowClient

log = logging.getLogger(__name__)

QUIET_ENVIRONMENT: dict[str, str] = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "MLFLOW_ENABLE_ASYNC_LOGGING": "false",
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
"""Environment defaults that keep MLflow offline (no telemetry) and quiet, for this process and `mlflow server`."""

for _key, _value in QUIET_ENVIRONMENT.items():
    os.environ.setdefault(_key, _value)

CANDIDATE = "candidate"
"""Alias moved to every newly registered version."""
CHAMPION = "champion"
"""Alias of the best evaluated version (see `Tracker.promote_if_better`)."""
EVAL_TAG_PREFIX = "eval."
"""Model-version tags holding evaluation values: `eval.<metric>` -> the value as text."""
ARTIFACT_PATH_TAG = "socialrl.artifact_path"
"""Model-version tag: the run-relative artifact path the version was registered from."""
EVALUATED_TAG_PREFIX = "evaluated."
"""Model-version tags of an evaluation suite's bookkeeping: `evaluated.<suite>.at` (ISO time of the latest),
`evaluated.<suite>.source` (e.g. the nightly run id), `evaluated.<suite>.count` (evaluations so far)."""

DOMAIN_TAG = "socialrl.domain"
PROFILE_TAG = "socialrl.profile"
STAGE_TAG = "socialrl.stage"
DAGSTER_RUN_TAG = "dagster.run_id"
GIT_COMMIT_TAG = "mlflow.source.git.commit"
"""MLflow's own tag for the source commit (its UI shows it on the run page)."""
PARENT_RUN_TAG = "mlflow.parentRunId"
"""MLflow's own tag for the parent run (its UI nests the run under the parent)."""
_SUITE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

# Tracking URI schemes accepted (the part before any "+driver"): SQLAlchemy databases and a tracking server.
_DB_SCHEMES = {"sqlite", "postgresql", "mysql", "mssql"}
_SERVER_SCHEMES = {"http", "https", "databricks"}


def _import_mlflow() -> Any:
    """Import mlflow with the quiet defaults in place; drop a telemetry client if one slipped through."""
    import mlflow

    with contextlib.suppress(Exception):  # telemetry internals move between MLflow versions
        from mlflow.telemetry.client import get_telemetry_client, set_telemetry_client
        from mlflow.telemetry.utils import is_telemetry_disabled

        if get_telemetry_client() is not None and is_telemetry_disabled():
            set_telemetry_client()  # re-initialises to None when telemetry is disabled
    return mlflow


def default_tracking_uri(paths: DataPaths) -> str:
    """`sqlite:///<data>/mlflow/mlflow.db` (an absolute path, so four slashes on POSIX)."""
    return f"sqlite:///{paths.mlflow / 'mlflow.db'}"


def default_artifact_root(paths: DataPaths) -> str:
    """`<data>/mlflow/artifacts` as a file URI."""
    return (paths.mlflow / "artifacts").as_uri()


def _scheme(uri: str) -> str:
    return urllib.parse.urlparse(uri).scheme.lower()


def _sqlite_path(uri: str) -> str | None:
    """The database file of a sqlite URI (None for in-memory)."""
    path = uri.split("://", 1)[1].split("?", 1)[0]
    path = path[1:] if path.startswith("/") else path  # sqlite:///x -> "x" relative, sqlite:////x -> "/x"
    return None if path in ("", ":memory:") else path


@dataclass(frozen=True)
class TrackingConfig:
    """Where runs, registered models and artifacts live. Plain values only (a Dagster resource's config)."""

    tracking_uri: str
    """Backend store for runs and the model registry: `sqlite:///<path>` (default
    `sqlite:///<data>/mlflow/mlflow.db` from `for_data`), another SQLAlchemy URI (`postgresql://...`), or an
    `http(s)://` MLflow server. MLflow's file store (`file:` URIs, plain directories) is disabled and
    rejected. A relative sqlite path is made absolute against the current directory."""
    artifact_root: str
    """Where new experiments store artifacts (the LoRA adapter directories): a local directory or a URI
    (`file://`, `s3://`, `mlflow-artifacts:/`, ...). `for_data`: `<data>/mlflow/artifacts`. A plain path
    is turned into an absolute file URI. Existing experiments keep the location they were created with."""
    experiment: str = "socialrl"
    """Experiment that runs are created in (created on first use with `artifact_root` as its location)."""
    download_dir: str = ""
    """Where `Tracker.lookup` copies artifacts of a non-local store (empty: the system's temporary directory)."""

    def __post_init__(self) -> None:
        uri = self.tracking_uri.strip() if isinstance(self.tracking_uri, str) else ""
        scheme = _scheme(uri).split("+", 1)[0]
        if scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":"):  # "", file:, C:\...
            raise ValueError(
                f"tracking_uri {self.tracking_uri!r}: MLflow's file store is disabled; use a database such as "
                "'sqlite:////abs/path/mlflow.db' or an http(s) MLflow server"
            )
        if scheme not in _DB_SCHEMES | _SERVER_SCHEMES:
            raise ValueError(
                f"tracking_uri {self.tracking_uri!r}: unsupported scheme {scheme!r}; "
                f"use one of {sorted(_DB_SCHEMES | _SERVER_SCHEMES)}"
            )
        if scheme == "sqlite":
            if not uri.lower().startswith("sqlite:///"):
                raise ValueError(f"tracking_uri {self.tracking_uri!r}: a sqlite URI looks like 'sqlite:///<path>'")
            path = _sqlite_path(uri)
            if path is None:
                raise ValueError(f"tracking_uri {self.tracking_uri!r}: an in-memory registry would lose every run")
            if not Path(path).is_absolute():
                uri = f"sqlite:///{Path(path).resolve()}"
        object.__setattr__(self, "tracking_uri", uri)

        root = self.artifact_root.strip() if isinstance(self.artifact_root, str) else ""
        if not root:
            raise ValueError("artifact_root must be a directory or a URI, got an empty value")
        root_scheme = _scheme(root)
        if root_scheme == "" or (len(root_scheme) == 1 and root[1:2] == ":"):
            root = Path(root).expanduser().resolve().as_uri()
        elif root_scheme == "file":
            root = Path(_file_uri_to_path(root)).expanduser().resolve().as_uri()
        else:
            while root.endswith("/") and not root.endswith((":/", "://")):  # keep "mlflow-artifacts:/"
                root = root[:-1]
        object.__setattr__(self, "artifact_root", root)

        if not isinstance(self.experiment, str) or not self.experiment.strip():
            raise ValueError("experiment must be a non-empty name")
        if self.experiment != self.experiment.strip():
            raise ValueError(f"experiment {self.experiment!r} must not start or end with whitespace")

    @classmethod
    def for_data(cls, paths: DataPaths, experiment: str = "socialrl") -> TrackingConfig:
        """The project default under a data directory: sqlite registry and local artifacts in <data>/mlflow."""
        return cls(
            tracking_uri=default_tracking_uri(paths),
            artifact_root=default_artifact_root(paths),
            experiment=experiment,
            download_dir=str(paths.mlflow / "downloads"),
        )

    @classmethod
    def from_env(cls, paths: DataPaths, experiment: str = "socialrl") -> TrackingConfig:
        """`for_data(paths)`, overridden by $SOCIALRL_MLFLOW_TRACKING_URI (else $MLFLOW_TRACKING_URI) and
        $SOCIALRL_MLFLOW_ARTIFACT_ROOT (for the edges: command lines and the Dagster resource)."""
        base = cls.for_data(paths, experiment)
        uri = os.environ.get("SOCIALRL_MLFLOW_TRACKING_URI") or os.environ.get("MLFLOW_TRACKING_URI")
        root = os.environ.get("SOCIALRL_MLFLOW_ARTIFACT_ROOT")
        return dataclasses.replace(
            base, tracking_uri=uri or base.tracking_uri, artifact_root=root or base.artifact_root
        )

    @property
    def local_artifact_dir(self) -> Path | None:
        """The artifact root as a local directory, when it is one."""
        return Path(_file_uri_to_path(self.artifact_root)) if _scheme(self.artifact_root) == "file" else None


def server_command(config: TrackingConfig, port: int = 5000, host: str = "127.0.0.1") -> list[str]:
    """argv of `mlflow server` (the UI and REST API) over the same store; run it with `quiet_environment()`."""
    if not 0 < port < 65536:
        raise ValueError(f"port must lie in 1..65535, got {port}")
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        config.tracking_uri,
        "--default-artifact-root",
        config.artifact_root,
        "--host",
        host,
        "--port",
        str(port),
    ]


def quiet_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with MLflow's telemetry off and logging at WARNING."""
    return {**(os.environ if base is None else base), **QUIET_ENVIRONMENT}


def _file_uri_to_path(uri: str) -> str:
    parsed = urllib.parse.urlparse(uri)
    return urllib.parse.unquote(parsed.path)


def flatten_params(params: Mapping[str, Any] | Any, prefix: str = "") -> dict[str, str]:
    """Nested mappings and dataclasses as dotted keys with text values (what MLflow params are)."""
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        params = dataclasses.asdict(params)
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = dataclasses.asdict(value)
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, prefix=f"{name}."))
        else:
            flat[name] = str(value)
    return flat


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def git_commit(repo: str | Path = REPO_ROOT) -> str | None:
    """The commit checked out in `repo` (full sha, with "-dirty" when tracked files changed), or None
    when it is not a git work tree or git is missing."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True,
            timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None


def run_tags(
    *,
    domain: str | None = None,
    profile: str | None = None,
    git_commit: str | None = None,
    dagster_run_id: str | None = None,
    parent_run_id: str | None = None,
    stage: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The tags that say what a run is, for `Tracker.start_run(..., tags=...)`; callers pass the values
    (none is read from the environment). Empty values are left out.

    | argument | tag |
    | --- | --- |
    | domain | `socialrl.domain` (an environment id, e.g. craigslist-v0) |
    | profile | `socialrl.profile` (smoke, cpu, paper) |
    | git_commit | `mlflow.source.git.commit` (shown by the MLflow UI; see `git_commit()`) |
    | dagster_run_id | `dagster.run_id` (the Dagster run that launched it) |
    | parent_run_id | `mlflow.parentRunId` (the UI nests the run under it, e.g. PPO under its SFT warm-start) |
    | stage | `socialrl.stage` (sft, ppo, eval, cascade, mopd, ...) |
    """
    tags = {
        DOMAIN_TAG: domain,
        PROFILE_TAG: profile,
        GIT_COMMIT_TAG: git_commit,
        DAGSTER_RUN_TAG: dagster_run_id,
        PARENT_RUN_TAG: parent_run_id,
        STAGE_TAG: stage,
        **dict(extra or {}),
    }
    return {k: str(v) for k, v in tags.items() if v is not None and str(v) != ""}


def _finite_metrics(values: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of `values` (bools and text left out) under `prefix<key>`."""
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[f"{prefix}{key}"] = float(value)
    return out


def _log_metric_entries(client: MlflowClient, run_id: str, entries: Sequence[Any]) -> None:
    from mlflow.utils.validation import MAX_METRICS_PER_BATCH

    for chunk in _chunks(list(entries), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=chunk)


# ------------------------------------------------------------------------------------------ model card
def _is_path_like(reference: str) -> bool:
    return reference.startswith(("/", "~", "./", "../", "file:")) or (len(reference) > 2 and reference[1:3] == ":\\")


@dataclass(frozen=True)
class ModelCard:
    """What a registered version is, for people: the version description and the README.md beside the
    adapter. The caller gives every value (what it trained on, how it compares with its parent)."""

    name: str
    """Registered model name, e.g. socialrl-craigslist-specialist."""
    base_model: str
    """The base model by name (a profile's model reference such as smollm2-135m-instruct, or a hub id such
    as Qwen/Qwen3-4B-Instruct-2507), never a path of the machine that trained it."""
    domain: str
    """What it plays, e.g. craigslist-v0 (or "all" for a unified policy)."""
    profile: str
    """The profile it was trained with (smoke, cpu, paper)."""
    training: str
    """How it was trained, e.g. "PPO, 2 iterations x 4 episodes, from the SFT warm-start"."""
    training_data: str
    """What it was trained on, e.g. "28 teacher traces (reward >= 0.3) of 64 training scenarios, seed 0"."""
    evaluation: Mapping[str, float] = field(default_factory=dict)
    """This version's held-out evaluation (mean_reward, ci_low, ci_high, n, agreement_rate, ...)."""
    evaluation_suite: str = ""
    """Where that evaluation comes from, e.g. "heldout(n=32, seed=0), seat buyer, vs boulware, conceder, reciprocal"."""
    parent: str = ""
    """What it started from / is compared with, e.g. "SFT warm-start" or "socialrl-craigslist-specialist v2"."""
    versus_parent: Mapping[str, Any] | None = None
    """Paired difference this - parent on the same episodes: {"mean", "ci_low", "ci_high", "n"}
    (`Estimate.as_dict()` of models.evaluation.stats)."""
    seat: str = ""
    """The seat it plays in its domain."""
    git_commit: str = ""
    run_id: str = ""
    """The MLflow training run."""
    dagster_run_id: str = ""
    version: int | None = None
    """The registry version (filled in by `Tracker.document_version`)."""
    notes: str = ""
    """Anything else a reader should know (limits, caveats)."""

    def __post_init__(self) -> None:
        for name in ("name", "base_model", "domain", "profile", "training", "training_data"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"model card: {name} must be a non-empty text")
        if _is_path_like(self.base_model):
            raise ValueError(
                f"model card: base_model {self.base_model!r} is a path; give the model by name "
                "(the profile's base_model, e.g. smollm2-135m-instruct, or a hub id)"
            )

    def _versus_parent_text(self) -> str:
        if not self.versus_parent or not self.parent:
            return ""
        v = self.versus_parent
        mean, low, high = v.get("mean"), v.get("ci_low"), v.get("ci_high")
        if mean is None or not math.isfinite(float(mean)):
            return f"vs {self.parent}: no paired difference (undefined)"
        interval = "" if low is None or high is None else f" [{float(low):+.3f}, {float(high):+.3f}]"
        return f"vs {self.parent}: {float(mean):+.3f}{interval} mean reward difference, n={v.get('n', '?')} paired episodes"

    def _evaluation_text(self) -> str:
        e = self.evaluation
        if "mean_reward" not in e:
            return ""
        text = f"mean reward {float(e['mean_reward']):.3f}"
        if "ci_low" in e and "ci_high" in e:
            text += f" [{float(e['ci_low']):.3f}, {float(e['ci_high']):.3f}]"
        if "n" in e:
            text += f" (n={int(e['n'])})"
        return text + (f", {self.evaluation_suite}" if self.evaluation_suite else "")

    def description(self) -> str:
        """The registry version's description (MLflow renders it as markdown): what, from what, how good."""
        lines = [
            f"**{self.domain}** policy ({self.training}) on base model `{self.base_model}`, profile `{self.profile}`.",
            f"Trained on: {self.training_data}.",
        ]
        if evaluation := self._evaluation_text():
            lines.append(f"Held-out: {evaluation}.")
        if versus := self._versus_parent_text():
            lines.append(f"Paired {versus}.")
        if self.notes:
            lines.append(self.notes)
        return "\n\n".join(lines)

    def readme(self) -> str:
        """The model card (README.md beside the adapter), with Hugging Face-style front matter."""
        title = self.name + (f" v{self.version}" if self.version is not None else "")
        front = [
            "---",
            f"base_model: {json.dumps(self.base_model)}",
            "library_name: peft",
            "tags:",
            "- socialrl",
            f"- {json.dumps(self.domain)}",
            f"- {json.dumps('profile-' + self.profile)}",
            "---",
        ]
        rows = [("Registered model", title), ("Base model", f"`{self.base_model}`"), ("Domain", self.domain)]
        rows += [("Seat", self.seat)] if self.seat else []
        rows += [("Profile", self.profile), ("Training", self.training), ("Training data", self.training_data)]
        rows += [("Parent", self.parent)] if self.parent else []
        rows += [("Git commit", f"`{self.git_commit}`")] if self.git_commit else []
        rows += [("MLflow run", f"`{self.run_id}`")] if self.run_id else []
        rows += [("Dagster run", f"`{self.dagster_run_id}`")] if self.dagster_run_id else []
        body = [*front, "", f"# {title}", "", "| | |", "| --- | --- |"]
        body += [f"| {k} | {str(v).replace('|', '/')} |" for k, v in rows]
        body += ["", "## Evaluation", ""]
        if self.evaluation:
            body += [f"Suite: {self.evaluation_suite or 'not stated'}", "", "| metric | value |", "| --- | --- |"]
            body += [
                f"| {k} | {float(v):.4g} |"
                if isinstance(v, int | float) and math.isfinite(float(v))
                else f"| {k} | n/a |"
                for k, v in self.evaluation.items()
            ]
        else:
            body.append("Not evaluated when this card was written.")
        if versus := self._versus_parent_text():
            body += [
                "",
                f"Paired comparison {versus} (same scenarios, seats and seeds; scenario-clustered bootstrap 95% CI).",
            ]
        body += [
            "",
            "## How to use",
            "",
            f"Serve it on `{self.base_model}` with vLLM's runtime LoRA loading, or resolve "
            f"`models:/{self.name}@champion` with `models.serving.model_store.resolve_model`.",
        ]
        if self.notes:
            body += ["", "## Notes", "", self.notes]
        return "\n".join(body) + "\n"


def write_model_card(adapter_dir: str | Path, card: ModelCard) -> Path:
    """Write `card` as README.md in the adapter directory (replacing PEFT's empty template) and name the
    base model in adapter_config.json by `card.base_model` instead of the training machine's path (vLLM and
    PEFT load an adapter onto whatever base they are given; they do not read that field). Returns the
    README path."""
    directory = Path(adapter_dir)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory}: not an adapter directory")
    config_path = directory / "adapter_config.json"
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text())
        except ValueError as exc:
            raise ValueError(f"{config_path}: not valid JSON ({exc})") from exc
        if isinstance(config, dict) and "base_model_name_or_path" in config:
            config["base_model_name_or_path"] = card.base_model
            config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    readme = directory / "README.md"
    readme.write_text(card.readme())
    return readme


class RegistryError(LookupError):
    """A registered model, version or alias does not exist, or an artifact is missing."""


@dataclass(frozen=True)
class RegisteredVersion:
    """One model version of the registry."""

    name: str
    """Registered model name, e.g. "socialrl-craigslist-specialist"."""
    version: int
    """Version number (1, 2, ...)."""
    run_id: str | None
    """The training run that produced it."""
    source: str
    """Where its artifacts live (the run's artifact URI of the adapter directory)."""
    tags: dict[str, str]
    """Model-version tags (evaluation values under `eval.<metric>`)."""
    aliases: tuple[str, ...] = ()
    """Aliases pointing at this version ("candidate", "champion", ...)."""

    def evaluation(self, suite: str | None = None) -> dict[str, float]:
        """The stored evaluation values by metric name: the promotion values (`eval.<metric>` tags, what
        `promote_if_better` compares) by default, or the latest of a suite (`eval.<suite>.<metric>`, written
        by `Tracker.record_evaluation_history`)."""
        prefix = EVAL_TAG_PREFIX if suite is None else f"{EVAL_TAG_PREFIX}{suite}."
        out = {}
        for key, value in self.tags.items():
            if key.startswith(prefix) and "." not in key[len(prefix) :]:
                with contextlib.suppress(ValueError):
                    out[key[len(prefix) :]] = float(value)
        return out

    def evaluated_at(self, suite: str) -> datetime | None:
        """When the suite last evaluated this version (tag `evaluated.<suite>.at`), if ever."""
        value = self.tags.get(f"{EVALUATED_TAG_PREFIX}{suite}.at")
        return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class LocalModel(RegisteredVersion):
    """A model version whose artifact directory is on the local disk (usable by the engine)."""

    path: Path = field(kw_only=True)
    """Local directory holding the adapter (adapter_config.json, weights)."""

    @property
    def adapter_name(self) -> str:
        """A stable served-model name for the engine: `<name>-v<version>`."""
        return f"{self.name}-v{self.version}"


def _log_file(client: MlflowClient, run_id: str, name: str, content: bytes | str, artifact_path: str) -> None:
    if not name or "/" in name:
        raise ValueError(f"artifact file name must be a plain name, got {name!r}")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        client.log_artifact(run_id, str(path), artifact_path.strip("/") or None)


@dataclass(frozen=True)
class ChampionComparison:
    """A candidate version against the current champion under the registry's one promotion rule."""

    wins: bool
    """The candidate is (or becomes) the champion: there is none, it is the champion already, the champion
    has no stored value, or the candidate's value is strictly better."""
    candidate_value: float
    champion_version: int | None
    champion_value: float | None


class TrackedRun:
    """A run in progress (made by `Tracker.start_run`): params, per-step metrics, artifacts, tags."""

    def __init__(self, client: MlflowClient, run_id: str, experiment_id: str, artifact_uri: str) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.artifact_uri = artifact_uri
        """Root artifact URI of the run (artifact paths are relative to it)."""

    def log_params(self, params: Mapping[str, Any] | Any = None, **more: Any) -> None:
        """Log parameters (nested mappings/dataclasses flattened to dotted keys). MLflow params are
        write-once: logging a key again with another value raises."""
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAMS_TAGS_PER_BATCH

        flat = {**flatten_params(params or {}), **flatten_params(more)}
        for chunk in _chunks(sorted(flat.items()), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in chunk])

    def log_metrics(self, step: int, metrics: Mapping[str, float] | None = None, **more: float) -> None:
        """Log metric values at a training step (names with "/" or "." go through `metrics`)."""
        from mlflow.entities import Metric

        if int(step) != step or step < 0:
            raise ValueError(f"step must be a non-negative integer, got {step!r}")
        values = {**(metrics or {}), **more}
        now = int(time.time() * 1000)
        entries = [Metric(k, float(v), now, int(step)) for k, v in sorted(values.items())]
        _log_metric_entries(self.client, self.run_id, entries)

    def log_history(self, history: Sequence[Mapping[str, Any]], step_key: str = "step", prefix: str = "") -> int:
        """Log per-step records (one mapping per logged step, e.g. transformers' `trainer.state.log_history`):
        every finite number of a record at the record's `step_key`; records without a step are skipped.
        Returns how many values were logged."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        entries = []
        for record in history:
            step = record.get(step_key)
            if isinstance(step, bool) or not isinstance(step, int | float) or int(step) != step or step < 0:
                continue
            values = _finite_metrics({k: v for k, v in record.items() if k != step_key}, prefix)
            entries += [Metric(k, v, now, int(step)) for k, v in sorted(values.items())]
        _log_metric_entries(self.client, self.run_id, entries)
        return len(entries)

    def log_evaluation(
        self, summary: Mapping[str, Any] | Any, prefix: str = "eval/", step: int = 0
    ) -> dict[str, float]:
        """Log an evaluation's numbers (a mapping or a dataclass such as EvaluationSummary) as metrics
        `<prefix><name>`; NaN, text and bools are left out. Returns what was logged."""
        if dataclasses.is_dataclass(summary) and not isinstance(summary, type):
            summary = dataclasses.asdict(summary)
        values = _finite_metrics(summary, prefix)
        if values:
            self.log_metrics(step, values)
        return values

    def set_tags(self, tags: Mapping[str, Any] | None = None, **more: Any) -> None:
        from mlflow.entities import RunTag
        from mlflow.utils.validation import MAX_PARAMS_TAGS_PER_BATCH

        values = {**(tags or {}), **more}
        for chunk in _chunks(sorted(values.items()), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in chunk])

    def log_file(self, name: str, content: bytes | str, artifact_path: str = "") -> str:
        """Store `content` as the artifact `<artifact_path>/<name>` (a plot's PNG bytes, a markdown
        transcript); returns its artifact URI."""
        _log_file(self.client, self.run_id, name, content, artifact_path)
        prefix = f"{self.artifact_uri.rstrip('/')}/{artifact_path.strip('/')}".rstrip("/")
        return f"{prefix}/{name}"

    def log_artifact_dir(self, local_dir: str | Path, artifact_path: str = "adapter") -> str:
        """Upload a directory (e.g. the LoRA adapter) under `artifact_path`; returns its artifact URI."""
        local = Path(local_dir)
        if not local.is_dir():
            raise NotADirectoryError(f"{local}: not a directory")
        if not any(local.iterdir()):
            raise ValueError(f"{local}: the directory is empty")
        artifact_path = artifact_path.strip("/")
        self.client.log_artifacts(self.run_id, str(local), artifact_path or None)
        return f"{self.artifact_uri.rstrip('/')}/{artifact_path}" if artifact_path else self.artifact_uri


class Tracker:
    """MLflow tracking and registry over one `MlflowClient` (see the module docstring)."""

    def __init__(self, config: TrackingConfig) -> None:
        self.config = config
        mlflow = _import_mlflow()
        if _scheme(self.config.tracking_uri) == "sqlite":
            path = _sqlite_path(self.config.tracking_uri)
            if path is not None:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
        local_root = self.config.local_artifact_dir
        if local_root is not None:
            local_root.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # MLflow's sqlalchemy store trips SQLAlchemy deprecation warnings when it first opens the database.
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(mlflow|sqlalchemy)\.")
            self.client: MlflowClient = mlflow.tracking.MlflowClient(
                tracking_uri=self.config.tracking_uri, registry_uri=self.config.tracking_uri
            )
            self.experiment_id = self._ensure_experiment()

    # ------------------------------------------------------------------------------------ tracking
    def _ensure_experiment(self) -> str:
        from mlflow.exceptions import MlflowException

        name = self.config.experiment
        experiment = self.client.get_experiment_by_name(name)
        if experiment is None:
            try:
                return self.client.create_experiment(name, artifact_location=self.config.artifact_root)
            except MlflowException as exc:  # created concurrently by another process
                experiment = self.client.get_experiment_by_name(name)
                if experiment is None:
                    raise RuntimeError(f"cannot create MLflow experiment {name!r}: {exc}") from exc
        if experiment.lifecycle_stage == "deleted":
            self.client.restore_experiment(experiment.experiment_id)
        if experiment.artifact_location.rstrip("/") != self.config.artifact_root.rstrip("/"):
            log.warning(
                "experiment %r keeps its artifact location %s (configured artifact_root: %s)",
                name,
                experiment.artifact_location,
                self.config.artifact_root,
            )
        return experiment.experiment_id

    @contextlib.contextmanager
    def start_run(
        self, name: str, params: Mapping[str, Any] | Any = None, tags: Mapping[str, Any] | None = None
    ) -> Iterator[TrackedRun]:
        """One run (one training job). It ends FINISHED when the body returns, FAILED when it raises (the
        error is kept in tag `socialrl.error`), KILLED on KeyboardInterrupt; the exception propagates."""
        run = self.client.create_run(
            self.experiment_id, run_name=name, tags={k: str(v) for k, v in (tags or {}).items()}
        )
        tracked = TrackedRun(self.client, run.info.run_id, self.experiment_id, run.info.artifact_uri)
        try:
            if params:
                tracked.log_params(params)
            yield tracked
        except BaseException as exc:
            status = "KILLED" if isinstance(exc, KeyboardInterrupt | GeneratorExit) else "FAILED"
            try:
                self.client.set_tag(tracked.run_id, "socialrl.error", f"{type(exc).__name__}: {exc}"[:5000])
                self.client.set_terminated(tracked.run_id, status)
            except Exception:  # never hide the body's exception behind a bookkeeping one
                log.exception("could not mark run %s as %s", tracked.run_id, status)
            raise
        else:
            self.client.set_terminated(tracked.run_id, "FINISHED")

    def run_status(self, run_id: str) -> str:
        return self.client.get_run(run_id).info.status

    def latest_run_artifact(
        self, run_name: str, artifact_path: str, params: Mapping[str, str] | None = None
    ) -> Path | None:
        """A local directory of `artifact_path` of the newest FINISHED run of this experiment named `run_name`
        whose params have the given values (e.g. the `sft-<domain>` warm-start of a profile); None if none."""
        clauses = [f"attributes.run_name = '{run_name}'", "attributes.status = 'FINISHED'"]
        clauses += [f"params.`{k}` = '{v}'" for k, v in (params or {}).items()]
        runs = self.client.search_runs(
            [self.experiment_id], " AND ".join(clauses), order_by=["attributes.start_time DESC"], max_results=1
        )
        if not runs:
            return None
        run = runs[0]
        uri = f"{run.info.artifact_uri.rstrip('/')}/{artifact_path.strip('/')}"
        if _scheme(uri) == "file":
            path = Path(_file_uri_to_path(uri))
            return path if path.is_dir() else None
        target = Path(self.config.download_dir or tempfile.gettempdir()) / "runs" / run.info.run_id
        target.mkdir(parents=True, exist_ok=True)
        return Path(self.client.download_artifacts(run.info.run_id, artifact_path.strip("/"), str(target)))

    # ------------------------------------------------------------------------------------ registry
    def _version(self, name: str, version: int | str) -> ModelVersion:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version(name, str(version))
        except MlflowException as exc:
            raise RegistryError(f"model {name!r} has no version {version}: {exc.message}") from exc

    def _alias_version(self, name: str, alias: str) -> ModelVersion | None:
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version_by_alias(name, alias)
        except MlflowException:
            return None

    def _info(self, mv: ModelVersion) -> RegisteredVersion:
        return RegisteredVersion(
            name=mv.name,
            version=int(mv.version),
            run_id=mv.run_id or None,
            source=mv.source,
            tags=dict(mv.tags or {}),
            aliases=tuple(sorted(mv.aliases or ())),
        )

    def get_version(self, name: str, version: int | str) -> RegisteredVersion:
        return self._info(self._version(name, version))

    def register_adapter(
        self,
        run_id: str,
        artifact_path: str,
        name: str,
        tags: Mapping[str, Any] | None = None,
        description: str | None = None,
        wait_s: float = 60.0,
    ) -> int:
        """Register the run's artifact directory `artifact_path` as a new version of model `name` (created
        if missing) and move alias `candidate` to it. Returns the version number."""
        from mlflow.exceptions import MlflowException

        artifact_path = artifact_path.strip("/")
        run = self.client.get_run(run_id)
        if not self.client.list_artifacts(run_id, artifact_path or None):
            raise RegistryError(f"run {run_id} has no artifacts under {artifact_path!r}; log the adapter first")
        try:
            self.client.create_registered_model(name)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        if _scheme(self.config.tracking_uri).split("+", 1)[0] in _DB_SCHEMES:
            # The concrete artifact URI: resolvable without any global MLflow state (see the module docstring).
            base = run.info.artifact_uri.rstrip("/")
        else:
            # A tracking server accepts only sources it can resolve itself (it refuses local paths).
            base = f"runs:/{run_id}"
        source = f"{base}/{artifact_path}" if artifact_path else base
        version_tags = {ARTIFACT_PATH_TAG: artifact_path, **{k: str(v) for k, v in (tags or {}).items()}}
        mv = self.client.create_model_version(
            name, source=source, run_id=run_id, tags=version_tags, description=description
        )
        deadline = time.monotonic() + wait_s
        while mv.status == "PENDING_REGISTRATION" and time.monotonic() < deadline:  # remote registries
            time.sleep(0.5)
            mv = self._version(name, mv.version)
        if mv.status != "READY":
            raise RegistryError(f"{name} version {mv.version} is {mv.status}: {mv.status_message}")
        self.client.set_registered_model_alias(name, CANDIDATE, str(mv.version))
        return int(mv.version)

    def record_evaluation(self, name: str, version: int | str, metrics: Mapping[str, float]) -> None:
        """Store evaluation values on a version as tags `eval.<metric>` (full float precision)."""
        for metric, value in metrics.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"evaluation value {metric}={value} is not finite")
            self.client.set_model_version_tag(name, str(version), f"{EVAL_TAG_PREFIX}{metric}", repr(value))

    def document_version(self, name: str, version: int | str, card: ModelCard) -> RegisteredVersion:
        """Make a version explain itself: its description (`card.description()`), tags (base model, domain,
        profile, parent, git commit) and, beside the adapter in the version's artifacts, a README.md model card
        and an adapter_config.json naming the base model by name (see `write_model_card`). Returns the
        updated version."""
        mv = self._version(name, version)
        card = dataclasses.replace(card, version=int(mv.version), run_id=card.run_id or (mv.run_id or ""))
        self.client.update_model_version(name, str(mv.version), description=card.description())
        tags = {
            "socialrl.base_model": card.base_model,
            DOMAIN_TAG: card.domain,
            PROFILE_TAG: card.profile,
            "socialrl.parent": card.parent,
            GIT_COMMIT_TAG: card.git_commit,
        }
        for key, value in tags.items():
            if value:
                self.client.set_model_version_tag(name, str(mv.version), key, value)
        artifact_path = (mv.tags or {}).get(ARTIFACT_PATH_TAG)
        if mv.run_id and artifact_path is not None:
            with tempfile.TemporaryDirectory() as directory:
                local = Path(directory)
                with contextlib.suppress(Exception):  # an adapter without a config still gets its card
                    self.client.download_artifacts(
                        mv.run_id, f"{artifact_path}/adapter_config.json".lstrip("/"), directory
                    )
                write_model_card(local, card)
                for path in (local / "adapter_config.json", local / "README.md"):
                    if path.is_file():
                        self.client.log_artifact(mv.run_id, str(path), artifact_path or None)
        else:
            log.warning("%s v%s: no run artifacts to put the model card beside; description only", name, mv.version)
        return self.get_version(name, mv.version)

    def log_run_metrics(
        self, run_id: str, metrics: Mapping[str, Any] | Any, step: int = 0, prefix: str = ""
    ) -> dict[str, float]:
        """Log numbers on a run that may already have ended (e.g. the held-out evaluation of a training run):
        every finite number of `metrics` (a mapping or a dataclass) as `<prefix><name>` at `step`."""
        from mlflow.entities import Metric

        if dataclasses.is_dataclass(metrics) and not isinstance(metrics, type):
            metrics = dataclasses.asdict(metrics)
        values = _finite_metrics(metrics, prefix)
        now = int(time.time() * 1000)
        _log_metric_entries(self.client, run_id, [Metric(k, v, now, int(step)) for k, v in sorted(values.items())])
        return values

    def set_run_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        """Set tags on a run (e.g. `run_tags(...)` or a link to the evaluation) after it started or ended."""
        for key, value in tags.items():
            self.client.set_tag(run_id, key, str(value))

    def record_evaluation_history(
        self,
        name: str,
        version: int | str,
        metrics: Mapping[str, Any] | Any,
        suite: str = "nightly",
        when: datetime | None = None,
        source: str = "",
    ) -> dict[str, float]:
        """Record one evaluation of a version by an evaluation suite, keeping every earlier one.

        * latest values: version tags `eval.<suite>.<metric>` (read back with `RegisteredVersion.evaluation(suite)`),
          plus `evaluated.<suite>.at` (ISO time), `evaluated.<suite>.source` and `evaluated.<suite>.count`;
        * history: metric `<suite>/<metric>` of the version's training run, one point per evaluation (step =
          its number 0, 1, 2, ...; timestamp = `when`), which the MLflow UI plots over time;
        * NaN values (e.g. a Pareto rate without agreements) are left out and named in `evaluated.<suite>.undefined`.

        The promotion values (`eval.<metric>`, what `promote_if_better` compares) are left alone: a suite
        with other scenarios (the nightly one draws fresh scenarios each day) is not paired with them.
        Returns the values recorded."""
        from mlflow.entities import Metric

        if not _SUITE.match(suite):
            raise ValueError(f"suite {suite!r} must be lower-case letters, digits, '-' or '_'")
        mv = self._version(name, version)
        if not mv.run_id:
            raise RegistryError(f"{name} v{mv.version} has no training run to keep the evaluation history on")
        if dataclasses.is_dataclass(metrics) and not isinstance(metrics, type):
            metrics = dataclasses.asdict(metrics)
        values = _finite_metrics(metrics)
        undefined = sorted(
            k for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v) and not isinstance(v, bool)
        )
        if not values:
            raise ValueError(f"{name} v{mv.version}: no finite evaluation values in {sorted(metrics)}")
        when = when or datetime.now(UTC)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:  # evaluations so far (the step of this one), kept on the version
            count = int((mv.tags or {}).get(f"{EVALUATED_TAG_PREFIX}{suite}.count", "0"))
        except ValueError:
            count = 0
        stamp = int(when.timestamp() * 1000)
        entries = [Metric(f"{suite}/{k}", v, stamp, count) for k, v in sorted(values.items())]
        _log_metric_entries(self.client, mv.run_id, entries)
        tags = {f"{EVAL_TAG_PREFIX}{suite}.{k}": repr(v) for k, v in values.items()}
        tags |= {
            f"{EVALUATED_TAG_PREFIX}{suite}.at": when.isoformat(timespec="seconds"),
            f"{EVALUATED_TAG_PREFIX}{suite}.count": str(count + 1),
            f"{EVALUATED_TAG_PREFIX}{suite}.undefined": ", ".join(undefined) or "-",
        }
        if source:
            tags[f"{EVALUATED_TAG_PREFIX}{suite}.source"] = source
        for key, value in tags.items():
            self.client.set_model_version_tag(name, str(mv.version), key, value)
        return values

    def evaluation_history(
        self, name: str, version: int | str, metric: str = "mean_reward", suite: str = "nightly"
    ) -> list[tuple[datetime, float]]:
        """Every value `record_evaluation_history` recorded for one metric of a version, oldest first."""
        mv = self._version(name, version)
        if not mv.run_id:
            return []
        points = self.client.get_metric_history(mv.run_id, f"{suite}/{metric}")
        return [
            (datetime.fromtimestamp(p.timestamp / 1000, UTC), float(p.value))
            for p in sorted(points, key=lambda p: p.step)
        ]

    def log_artifact_file(self, run_id: str, name: str, content: bytes | str, artifact_path: str = "") -> None:
        """`TrackedRun.log_file` for a run that has ended (plots and transcripts made after training)."""
        _log_file(self.client, run_id, name, content, artifact_path)

    def compare_with_champion(
        self, name: str, version: int | str, metric_name: str, value: float, higher_is_better: bool = True
    ) -> ChampionComparison:
        """The promotion rule, without changing anything (what the blocking asset check reports)."""
        champion = self._alias_version(name, CHAMPION)
        if champion is None:
            return ChampionComparison(True, float(value), None, None)
        stored = (champion.tags or {}).get(f"{EVAL_TAG_PREFIX}{metric_name}")
        best = float(stored) if stored is not None else None
        if int(champion.version) == int(version) or best is None:
            return ChampionComparison(True, float(value), int(champion.version), best)
        better = float(value) > best if higher_is_better else float(value) < best
        return ChampionComparison(better, float(value), int(champion.version), best)

    def promote_if_better(
        self, name: str, version: int | str, metric_name: str, value: float, higher_is_better: bool = True
    ) -> bool:
        """Store `value` as the version's `eval.<metric_name>` tag and move alias `champion` to the version
        when it strictly beats the champion's stored value (or there is no champion, or the champion has no
        stored value for this metric). Returns True when the version is the champion afterwards (promoted
        now, or already the champion: its stored value is then refreshed), False when it lost.

        Compare only values measured on the same evaluation suite. Two concurrent promotions of one model
        can race (read, then set); run them from one job."""
        self._version(name, version)  # raises RegistryError when it does not exist
        comparison = self.compare_with_champion(name, version, metric_name, value, higher_is_better)
        self.record_evaluation(name, version, {metric_name: value})
        if not comparison.wins:
            return False
        if comparison.champion_version == int(version):
            return True
        if comparison.champion_version is not None and comparison.champion_value is None:
            log.warning(
                "%s: champion v%s has no stored %s; v%s replaces it",
                name,
                comparison.champion_version,
                metric_name,
                version,
            )
        self.client.set_registered_model_alias(name, CHAMPION, str(version))
        if comparison.champion_version is not None:
            self.client.set_model_version_tag(
                name, str(version), "socialrl.promoted_over", str(comparison.champion_version)
            )
        return True

    def lookup(
        self,
        name: str,
        alias: str | None = CHAMPION,
        version: int | str | None = None,
        download_dir: str | Path | None = None,
    ) -> LocalModel:
        """The version behind `alias` (or the explicit `version`), with a local directory of its artifacts.

        A local (`file:`) artifact store is used in place, read-only by convention; anything else is
        downloaded once into `download_dir/<name>/v<version>` (default: the config's `download_dir`)."""
        if (alias is None) == (version is None):
            raise ValueError("give exactly one of alias and version")
        if version is not None:
            mv = self._version(name, version)
        else:
            mv = self._alias_version(name, alias)  # type: ignore[arg-type]
            if mv is None:
                raise RegistryError(f"model {name!r} has no alias {alias!r}; aliases: {self.aliases(name)}")
        info = self._info(mv)
        uri = self.client.get_model_version_download_uri(name, str(mv.version))
        path = self._local_copy(uri, name, info.version, download_dir)
        return LocalModel(**dataclasses.asdict(info), path=path)

    def aliases(self, name: str) -> dict[str, int]:
        from mlflow.exceptions import MlflowException

        try:
            model = self.client.get_registered_model(name)
        except MlflowException as exc:
            raise RegistryError(f"no registered model {name!r}") from exc
        return {alias: int(v) for alias, v in (model.aliases or {}).items()}

    def _local_copy(self, uri: str, name: str, version: int, download_dir: str | Path | None) -> Path:
        if _scheme(uri) == "file":
            path = Path(_file_uri_to_path(uri))
            if not path.is_dir():
                raise RegistryError(f"{name} v{version}: artifact directory {path} is missing")
            return path
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        fallback = self.config.download_dir or Path(tempfile.gettempdir()) / "socialrl-mlflow-downloads"
        root = Path(download_dir) if download_dir is not None else Path(fallback)
        final = root / name / f"v{version}"
        if final.is_dir():  # versions are immutable; a finished download is published atomically
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".v{version}-", dir=final.parent))
        try:
            repo = get_artifact_repository(
                uri, tracking_uri=self.config.tracking_uri, registry_uri=self.config.tracking_uri
            )
            repo.download_artifacts("", dst_path=str(staging))
            try:
                os.replace(staging, final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final

    def version_numbers(self, prefix: str = "") -> dict[str, list[int]]:
        """Every registered model whose name starts with `prefix`, with its version numbers (ascending)."""
        out: dict[str, list[int]] = {}
        token = None
        while True:
            page = self.client.search_registered_models(max_results=100, page_token=token)
            for model in page:
                if model.name.startswith(prefix):
                    versions = self.client.search_model_versions(f"name = '{model.name}'")
                    out[model.name] = sorted(int(v.version) for v in versions)
            token = page.token
            if not token:
                break
        return out

    def champion_versions(self, alias: str = CHAMPION, prefix: str = "") -> list[RegisteredVersion]:
        """Every registered model (whose name starts with `prefix`) that has `alias`, with that version."""
        out = []
        token = None
        while True:
            page = self.client.search_registered_models(max_results=100, page_token=token)
            for model in page:
                if model.name.startswith(prefix) and alias in (model.aliases or {}):
                    out.append(self._info(self._version(model.name, model.aliases[alias])))
            token = page.token
            if not token:
                break
        return sorted(out, key=lambda v: v.name)
