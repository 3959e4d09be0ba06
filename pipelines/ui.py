"""`make ui`: the Dagster UI (webserver + daemon, so schedules and sensors run) and the MLflow UI over the
project's store; prints both URLs and what runs on its own, and stops both on Ctrl-C (or SIGTERM).

Calm by default: nothing heavy starts when the UI comes up. The nightly schedule stays on (every day at
02:00 UTC it re-evaluates the champions, starting one vLLM engine); the new-model-version sensor is off
unless --evaluate-new-versions (`make ui EVALUATE_NEW_VERSIONS=1`), and even then it evaluates only the
versions registered after its first tick (see pipelines/definitions.py). Light: MLflow runs one worker,
without its job execution and without an access log (`models.tracking.SERVER_ENVIRONMENT`;
benchmarks/bench_ui_memory.py measures both UIs). Quiet: two notices of the libraries themselves are filtered
by message in the servers' environments (`QUIET_WARNINGS`); Dagster's first-visit "Join the community"
prompt is off in the instance's dagster.yaml (`nux`, models/settings.py).

    python -m pipelines.ui [--dagster-port 3000] [--mlflow-port 5000] [--evaluate-new-versions]
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from models.settings import REPO_ROOT, DataPaths
from models.tracking import Tracker, TrackingConfig, UiLinks, server_command, server_environment

# Read by pipelines/definitions.py (the code location); not imported from there, so that this launcher does
# not load every asset module into its own process.
EVALUATE_NEW_VERSIONS_ENV = "SOCIALRL_EVALUATE_NEW_VERSIONS"
MLFLOW_UI_URL_ENV = "SOCIALRL_MLFLOW_UI_URL"
DAGSTER_UI_URL_ENV = "SOCIALRL_DAGSTER_UI_URL"

QUIET_WARNINGS = {
    # `dagster dev` says on every start that it is superseded by `dg dev` (the `dg` CLI of dagster-dg, which
    # this project does not install); `dagster dev` is what runs the webserver and daemon here.
    "dagster": ("ignore:Function `dev_command` is superseded:FutureWarning",),
    # MLflow's server imports Starlette's WSGI middleware, which Starlette has deprecated: MLflow's to change.
    "mlflow": ("ignore:starlette.middleware.wsgi is deprecated:UserWarning",),
}
"""Per server, the $PYTHONWARNINGS entries (action:message:category) that hide a library's own notice on the
console: each matches one message from its start, nothing else (a comma would split an entry)."""


def with_warning_filters(env: Mapping[str, str], filters: tuple[str, ...]) -> dict[str, str]:
    """`env` with `filters` added to its $PYTHONWARNINGS (after any the user set)."""
    entries = [e for e in env.get("PYTHONWARNINGS", "").split(",") if e]
    return {**env, "PYTHONWARNINGS": ",".join([*entries, *(f for f in filters if f not in entries)])}


@dataclass(frozen=True)
class UiServer:
    """One server `make ui` starts."""

    name: str
    """"dagster" or "mlflow"."""
    argv: list[str]
    env: Mapping[str, str]


def ui_servers(
    paths: DataPaths, dagster_port: int = 3000, mlflow_port: int = 5000, evaluate_new_versions: bool = False
) -> list[UiServer]:
    """The commands `make ui` runs: `dagster dev` on the code location (its data directory and Dagster
    instance under `paths`) and `mlflow server` over the project's store."""
    bin_dir = Path(sys.executable).parent
    # The code location's settings resource reads the same data directory ($SOCIALRL_DATA_DIR, the edge).
    dagster_env = with_warning_filters(os.environ, QUIET_WARNINGS["dagster"])
    dagster_env.update(DAGSTER_HOME=str(paths.dagster_home), SOCIALRL_DATA_DIR=str(paths.root))
    dagster_env[EVALUATE_NEW_VERSIONS_ENV] = "1" if evaluate_new_versions else "0"
    # Asset metadata links to this MLflow UI, and MLflow runs link back to this Dagster UI.
    dagster_env[MLFLOW_UI_URL_ENV] = f"http://127.0.0.1:{mlflow_port}"
    dagster_env[DAGSTER_UI_URL_ENV] = f"http://127.0.0.1:{dagster_port}"
    dagster = [str(bin_dir / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(dagster_port)]
    mlflow = server_command(TrackingConfig.from_env(paths), port=mlflow_port)
    mlflow_env = with_warning_filters(server_environment(), QUIET_WARNINGS["mlflow"])
    return [UiServer("dagster", dagster, dagster_env), UiServer("mlflow", mlflow, mlflow_env)]


def start(server: UiServer) -> subprocess.Popen[bytes]:
    """Start one server in its own session (its process group holds its workers)."""
    return subprocess.Popen(server.argv, cwd=REPO_ROOT, env=dict(server.env), start_new_session=True)


def stop(processes: Sequence[subprocess.Popen[bytes]], grace_s: float = 30.0) -> None:
    """SIGTERM each server's process group, SIGKILL what is left after `grace_s`."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the servers like Ctrl-C (they run in sessions of their own)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dagster-port", type=int, default=3000)
    parser.add_argument("--mlflow-port", type=int, default=5000)
    parser.add_argument(
        "--evaluate-new-versions",
        action="store_true",
        help="start the sensor that evaluates every newly registered model version (each run starts a vLLM engine)",
    )
    args = parser.parse_args(argv)
    paths = DataPaths.from_env()
    signal.signal(signal.SIGTERM, _interrupt)
    # The experiment's training runs: MLflow 3 opens an experiment on an empty GenAI "Traces" overview otherwise.
    # Read (on a fresh data directory: created) before the MLflow server starts, so that the two never migrate a
    # new database at the same time (the server then fails: "Online migration expected to match one row").
    experiment = Tracker(TrackingConfig.from_env(paths)).experiment_id
    processes = [start(s) for s in ui_servers(paths, args.dagster_port, args.mlflow_port, args.evaluate_new_versions)]
    links = UiLinks(f"http://127.0.0.1:{args.dagster_port}", f"http://127.0.0.1:{args.mlflow_port}")
    print(f"Dagster UI: {links.dagster_url}   MLflow UI: {links.mlflow_experiment(experiment)}")
    sensor = (
        "ON: evaluates each version registered from now on (one vLLM engine per run)"
        if args.evaluate_new_versions
        else "off (make ui EVALUATE_NEW_VERSIONS=1, or switch it on in the UI)"
    )
    print(
        "Runs on its own: schedule nightly_champion_evaluation, daily 02:00 UTC (re-evaluates the champions, then\n"
        "regenerates the papers' report);\n"
        f"sensor new_model_version_sensor: {sensor}. Nothing else starts until you launch it.",
    )
    print("Ctrl-C stops both.", flush=True)
    try:
        while all(p.poll() is None for p in processes):
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        stop(processes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
