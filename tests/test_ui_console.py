"""What `make ui` shows before anyone clicks (pipelines/ui.py, pipelines/definitions.py, models/settings.py): a
console without the libraries' own notices (each filtered by its message, nothing else), no first-visit
e-mail prompt in Dagster, and an MLflow store that exists before the MLflow server starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from models.settings import DataPaths
from pipelines import ui

ROOT = Path(__file__).resolve().parent.parent

DAGSTER_DEV_NOTICE = (
    "from dagster_shared.utils.warnings import supersession_warning\n"
    "supersession_warning('Function `dev_command`', \"Use 'dg dev' instead.\")\n"  # as dagster/_cli/dev.py does
)
STARLETTE_NOTICE = "import starlette.middleware.wsgi\n"  # what mlflow/server/fastapi_app.py imports
OTHER_WARNINGS = "import warnings\nwarnings.warn('another future', FutureWarning)\nwarnings.warn('another user')\n"


def python_stderr(code: str, env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stderr


def test_make_ui_filters_the_two_library_notices_and_nothing_else(tmp_path: Path) -> None:
    servers = {s.name: s for s in ui.ui_servers(DataPaths(tmp_path), dagster_port=3100, mlflow_port=5100)}
    dagster, mlflow = dict(servers["dagster"].env), dict(servers["mlflow"].env)
    bare = {k: v for k, v in dagster.items() if k != "PYTHONWARNINGS"}
    # Without the filters the libraries print their notices (so the filters still match what they say).
    assert "Use 'dg dev' instead" in python_stderr(DAGSTER_DEV_NOTICE, bare)
    assert "starlette.middleware.wsgi is deprecated" in python_stderr(STARLETTE_NOTICE, bare)
    # With them: silent; any other warning still shows.
    assert python_stderr(DAGSTER_DEV_NOTICE, dagster) == ""
    assert python_stderr(STARLETTE_NOTICE, mlflow) == ""
    for env in (dagster, mlflow):
        other = python_stderr(OTHER_WARNINGS, env)
        assert "FutureWarning: another future" in other and "UserWarning: another user" in other
    # A user's own $PYTHONWARNINGS is kept.
    assert ui.with_warning_filters({"PYTHONWARNINGS": "error::ResourceWarning"}, ("ignore:x",)) == {
        "PYTHONWARNINGS": "error::ResourceWarning,ignore:x"
    }


def test_the_code_location_loads_without_library_notices() -> None:
    """Loading the definitions as the code server does prints none of Dagster's preview or beta notices."""
    code = "import pipelines.definitions as d\nd.defs.get_repository_def()\n"
    stderr = subprocess.run(
        [sys.executable, "-W", "default", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    ).stderr
    assert "PreviewWarning" not in stderr and "BetaWarning" not in stderr, stderr


def test_a_new_instance_asks_for_no_e_mail_on_the_first_visit(tmp_path: Path) -> None:
    from dagster import DagsterInstance

    instance = DagsterInstance.from_config(str(DataPaths(tmp_path / "data").dagster_home))
    assert instance.nux_enabled is False  # Dagster's "Join the community" prompt
    deployed = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    assert deployed["nux"] == {"enabled": False}


def test_make_ui_creates_the_mlflow_store_before_the_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both the launcher (reading the experiment id for the link it prints) and `mlflow server` migrate a new
    sqlite store; at the same time the server fails ("Online migration expected to match one row")."""
    for name in ("SOCIALRL_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI", "SOCIALRL_MLFLOW_ARTIFACT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SOCIALRL_DATA_DIR", str(tmp_path))
    store = tmp_path / "mlflow" / "mlflow.db"
    seen: dict[str, bool] = {}

    class Exited:
        pid = -1

        def poll(self) -> int:
            return 0

        def wait(self, timeout: float | None = None) -> int:
            return 0

    def start(server: ui.UiServer) -> Exited:
        seen[server.name] = store.is_file() and store.stat().st_size > 0
        return Exited()

    monkeypatch.setattr(ui, "start", start)
    monkeypatch.setattr(ui.signal, "signal", lambda *args: None)
    assert ui.main([]) == 0
    assert seen == {"dagster": True, "mlflow": True}
