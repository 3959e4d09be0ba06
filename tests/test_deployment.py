"""The production deployment on a real PostgreSQL (Debian's package; `make postgres` installs it): a throwaway
cluster on a free port, the Dagster instance of deploy/dagster.yaml on it running the tournament job, MLflow's
backend store on it registering a model, and both read back (through their APIs and straight from Postgres)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Postgres:
    port: int
    user: str

    def url(self, database: str) -> str:
        """libpq's URL (psycopg2.connect)."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def sqlalchemy_url(self, database: str) -> str:
        """What Dagster and MLflow take: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3, so the
        driver installed (psycopg2) is named."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def query(self, database: str, sql: str) -> list[tuple]:
        import psycopg2

        with contextlib.closing(psycopg2.connect(self.url(database))) as connection, connection.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())


def _server_binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = Path(found[-1]) if found else (Path(shutil.which("initdb")) if shutil.which("initdb") else None)
    if initdb is None:
        pytest.fail("PostgreSQL's server binaries are missing: run `make postgres` (Debian's postgresql package)")
    return initdb.parent


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    """A throwaway cluster (trust authentication on 127.0.0.1 only) in a temporary directory. Postgres refuses
    to run as root, so as root it runs as Debian's `postgres` user."""
    from models.serving.engine import free_port

    bin_dir = _server_binaries()
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="socialrl-pg-"))
    data, log = root / "data", root / "server.log"
    if as_user:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    user = "socialrl"

    def run(*cmd: str) -> None:
        subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120)

    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", user, "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=32MB"
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start")
        server = Postgres(port, user)
        for database in ("dagster", "mlflow"):
            server.query("postgres", "SELECT 1")  # reachable over TCP
            run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", user, database)
        yield server
    finally:
        with contextlib.suppress(Exception):
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def test_dagster_runs_the_tournament_on_a_postgres_instance(
    postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import AssetKey, DagsterInstance, DagsterRunStatus

    from pipelines.definitions import build_definitions

    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")  # the documented file, unchanged
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", postgres.sqlalchemy_url("dagster"))
    monkeypatch.setenv("DAGSTER_SHARED_DIR", str(tmp_path / "shared"))
    instance = DagsterInstance.from_config(str(home))
    defs = build_definitions("smoke", str(tmp_path / "data"))
    result = defs.resolve_job_def("tournament_job").execute_in_process(instance=instance, tags={"deploy": "postgres"})
    assert result.success
    instance.dispose()

    again = DagsterInstance.from_config(str(home))  # a second process's view: the webserver, the daemon
    (run,) = again.get_runs()
    assert run.run_id == result.run_id and run.status == DagsterRunStatus.SUCCESS and run.tags["deploy"] == "postgres"
    assert again.get_latest_materialization_event(AssetKey("code_agent_tournament")) is not None
    again.dispose()
    # It lives in Postgres, not in sqlite files under DAGSTER_HOME.
    assert postgres.query("dagster", "SELECT run_id, status FROM runs") == [(result.run_id, "SUCCESS")]
    assert postgres.query("dagster", f"SELECT count(*) FROM event_logs WHERE run_id = '{result.run_id}'")[0][0] > 0
    assert not list(home.rglob("*.db"))


def test_mlflow_registers_a_model_against_postgres(postgres: Postgres, tmp_path: Path) -> None:
    from models.tracking import Tracker, TrackingConfig

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    config = TrackingConfig(
        tracking_uri=postgres.sqlalchemy_url("mlflow"), artifact_root=str(tmp_path / "shared" / "artifacts")
    )
    tracker = Tracker(config)
    with tracker.start_run("deploy-check", params={"profile": "smoke"}) as run:
        run.log_metrics(0, reward=0.5)
        run.log_artifact_dir(adapter, "adapter")
    version = tracker.register_adapter(run.run_id, "adapter", "deploy-check-specialist", tags={"env_id": "keyword-v0"})
    assert version == 1

    fresh = Tracker(config)  # another client (a run worker, the UI) reads the same registry
    registered = fresh.get_version("deploy-check-specialist", 1)
    assert registered.run_id == run.run_id and registered.tags["env_id"] == "keyword-v0"
    assert fresh.run_status(run.run_id) == "FINISHED"
    assert postgres.query("mlflow", "SELECT name, version FROM model_versions") == [("deploy-check-specialist", 1)]
    assert postgres.query("mlflow", "SELECT status FROM runs") == [("FINISHED",)]
    # The adapter is on the shared artifact store the registry points at.
    local = Path(registered.source.removeprefix("file://"))
    assert (local / "adapter_config.json").read_text() == '{"r": 8}'
