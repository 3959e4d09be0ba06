"""MLflow tracking and model registry: a thin client over `mlflow.tracking.MlflowClient`.

Seven modules behind one `Tracker`: config.py (`TrackingConfig`, URIs, the `mlflow server` command, the quiet
environment), runs.py (`TrackedRun`, run tags, parameter flattening), attempts.py (`attempt_run`: one run per
training step across its attempts), cards.py (`ModelCard`), registry.py (`Tracker`, registered versions),
champion.py (the promotion rule: the same evaluation plan, paired, or refused) and links.py (`UiLinks`: URLs
between the Dagster and MLflow UIs). Callers import from `models.tracking`.

One `Tracker` is built from plain settings (`TrackingConfig`: tracking URI, artifact root, experiment
name), so that a Dagster ConfigurableResource can wrap it later; it never touches MLflow's global state
(`mlflow.set_tracking_uri`, the active-run stack). MLflow's file store is disabled, so the backend is a
sqlite database by default (`<data>/mlflow/mlflow.db`) with a local artifact root
(`<data>/mlflow/artifacts`); any SQLAlchemy URI or an `http(s)://` tracking server works too.

| task | call |
| --- | --- |
| one run per training job | `with tracker.start_run(name, params, tags=run_tags(domain=..., profile=..., git_commit=git_commit(), dagster_run_id=..., parent_run_id=...)) as run:` then `run.log_metrics(step, loss=...)`, `run.log_artifact_dir(adapter_dir, "adapter")`; the run ends FINISHED, or FAILED when the body raises (KILLED when it is interrupted: Ctrl-C, SystemExit, Dagster's termination) |
| one run per resumable training step | `with attempt_run(tracker, work_dir / "mlflow_run.json", name, params, tags, resume_at=checkpoint_step) as run:` (attempts.py): an attempt that resumes from a checkpoint continues the recorded run of the killed attempt (`run.resumed`), so the run's step history goes on in one run; an attempt that starts over starts a new run and ends the killed attempt's run, if still RUNNING, as KILLED |
| per-step metrics | `run.log_history(trainer_log_history)` (one dict per step, e.g. transformers' `state.log_history`) |
| evaluation on the run | `run.log_evaluation(summary)` inside the run, `tracker.log_run_metrics(run_id, summary, prefix="eval/")` after it |
| register a trained adapter | `tracker.register_adapter(run_id, "adapter", "socialrl-craigslist-specialist") -> version`; alias `candidate` moves to it |
| describe a version | `tracker.document_version(name, version, ModelCard(...))`: description, tags, README.md model card and a base-model *name* in adapter_config.json beside the adapter |
| promote on evaluation | `tracker.promote_if_better(name, version, "mean_reward", 0.61, measured=Measurement(plan.key, plan.text, episodes))`: stores tag `eval.mean_reward` (and the plan, `socialrl.eval_plan`, with the per-episode rewards) on the version, moves alias `champion` when `champion.compare_versions` says it wins: on the champion's plan by the paired difference (point means when an episode set is missing), refused on another plan |
| re-evaluations with history | `tracker.record_evaluation_history(name, version, summary, suite="nightly")`: latest values as tags `eval.nightly.<metric>`, every evaluation as metric `trend/nightly/<metric>` of the version's run (after its training curves on the run page) |
| serve a registered adapter | `local = tracker.lookup(name, "champion")`, then `EngineClient.load_adapter(local.adapter_name, local.path)` |
| nightly re-evaluation | `tracker.champion_versions()` lists every registered model's champion |
| the UI (`make ui`) | `server_command(config, port=5000)` is the argv of `mlflow server` over the same store, run with `server_environment()` (one worker, no job execution, no access log) |

Offline and quiet: importing this module sets (unless already set) MLFLOW_DISABLE_TELEMETRY=true,
MLFLOW_ENABLE_ASYNC_LOGGING=false, MLFLOW_LOGGING_LEVEL=WARNING and MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false; MLflow itself is imported lazily, on
first use, so these take effect as long as nothing imported mlflow earlier in the process.

Registry caveat: MLflow resolves `models:/name@alias` URIs (`mlflow.artifacts.download_artifacts`)
against the *global* registry URI (MLFLOW_TRACKING_URI, else `sqlite:///mlflow.db` in the current
directory, which it silently creates). `lookup` therefore resolves the alias with this tracker's own
client and fetches the version's source URI directly; registered sources are the run's concrete
artifact URI (e.g. `file:///.../artifacts/adapter`), not `runs:/`, for the same reason.
"""

from models.provenance import git_commit  # the commit tag's value: one reading of git for every result
from models.tracking.attempts import attempt_run
from models.tracking.cards import ModelCard, write_model_card
from models.tracking.champion import (
    EPISODES_TAG,
    EVAL_TAG_PREFIX,
    PLAN_TAG,
    PLAN_TEXT_TAG,
    ChampionComparison,
    EpisodeRewards,
    EvaluatedVersion,
    Measurement,
    compare_versions,
)
from models.tracking.config import (
    QUIET_ENVIRONMENT,
    SERVER_ENVIRONMENT,
    TrackingConfig,
    default_artifact_root,
    default_tracking_uri,
    quiet_environment,
    server_command,
    server_environment,
)
from models.tracking.links import UiLinks
from models.tracking.registry import (
    ARTIFACT_PATH_TAG,
    CANDIDATE,
    CHAMPION,
    EVALUATED_TAG_PREFIX,
    LocalModel,
    RegisteredVersion,
    RegistryError,
    Tracker,
)
from models.tracking.runs import (
    DAGSTER_RUN_TAG,
    DAGSTER_RUN_URL_TAG,
    DOMAIN_TAG,
    DOMAINS_TAG,
    GIT_COMMIT_TAG,
    HISTORY_PREFIX,
    PARENT_RUN_TAG,
    PROFILE_TAG,
    SEAT_TAG,
    STAGE_TAG,
    SUMMARY_PREFIX,
    WARM_START_RUN_TAG,
    TrackedRun,
    flatten_params,
    run_tags,
)

__all__ = [
    "ARTIFACT_PATH_TAG",
    "CANDIDATE",
    "CHAMPION",
    "DAGSTER_RUN_TAG",
    "DAGSTER_RUN_URL_TAG",
    "DOMAINS_TAG",
    "DOMAIN_TAG",
    "EPISODES_TAG",
    "EVALUATED_TAG_PREFIX",
    "EVAL_TAG_PREFIX",
    "GIT_COMMIT_TAG",
    "HISTORY_PREFIX",
    "PARENT_RUN_TAG",
    "PLAN_TAG",
    "PLAN_TEXT_TAG",
    "PROFILE_TAG",
    "QUIET_ENVIRONMENT",
    "SEAT_TAG",
    "SERVER_ENVIRONMENT",
    "STAGE_TAG",
    "SUMMARY_PREFIX",
    "WARM_START_RUN_TAG",
    "ChampionComparison",
    "EpisodeRewards",
    "EvaluatedVersion",
    "LocalModel",
    "Measurement",
    "ModelCard",
    "RegisteredVersion",
    "RegistryError",
    "TrackedRun",
    "Tracker",
    "TrackingConfig",
    "UiLinks",
    "attempt_run",
    "compare_versions",
    "default_artifact_root",
    "default_tracking_uri",
    "flatten_params",
    "git_commit",
    "quiet_environment",
    "run_tags",
    "server_command",
    "server_environment",
    "write_model_card",
]
