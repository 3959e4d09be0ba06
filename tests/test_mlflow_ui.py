"""The MLflow UI as a researcher sees it, in headless Chromium (Debian's, driven by playwright) against the
real `mlflow server` that `make ui` starts (`models.tracking.server_command`, `server_environment`): a version
description whose interval and n survive MLflow's markdown renderer; a light server (one worker, no job
execution, no access log)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from models.serving.process import free_port, log_tail, spawn_server, stop_server, wait_until_answers
from models.tracking import ModelCard, Tracker, TrackingConfig, server_command, server_environment

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, tiny_lora_adapter: Path) -> Tracker:
    """A sqlite registry with one documented version of socialrl-craigslist-specialist."""
    root = tmp_path_factory.mktemp("mlflow")
    tracker = Tracker(TrackingConfig(f"sqlite:///{root}/mlflow.db", str(root / "artifacts")))
    with tracker.start_run("ppo-craigslist-v0") as run:
        run.log_artifact_dir(tiny_lora_adapter, "adapter")
    version = tracker.register_adapter(run.run_id, "adapter", "socialrl-craigslist-specialist")
    card = ModelCard(
        name="socialrl-craigslist-specialist",
        base_model="tiny-random-llama",
        domain="craigslist-v0",
        profile="smoke",
        seat="buyer",
        training="PPO, 2 iterations x 4 episodes, from the SFT warm-start",
        training_data="4 teacher traces",
        evaluation={"n": 48, "mean_reward": 0.146, "ci_low": 0.096, "ci_high": 0.226},
        evaluation_suite="heldout(n=16, seed=0)",
        parent="SFT warm-start",
        versus_parent={"mean": 0.044, "ci_low": -0.025, "ci_high": 0.116, "n": 48},
    )
    tracker.document_version("socialrl-craigslist-specialist", version, card)
    return tracker


@dataclass(frozen=True)
class MlflowUi:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module")
def mlflow_server(registry: Tracker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowUi]:
    """`mlflow server` over the registry, started as `make ui` starts it (pipelines.ui.ui_servers)."""
    from models.settings import DataPaths
    from pipelines.ui import ui_servers

    port = free_port()
    (mlflow,) = [s for s in ui_servers(DataPaths(tmp_path_factory.mktemp("data")), 3999, port) if s.name == "mlflow"]
    argv = server_command(registry.config, port=port)  # the same command, over this test's registry
    assert argv[:4] == mlflow.argv[:4] and dict(mlflow.env).items() >= server_environment().items()
    log = tmp_path_factory.mktemp("mlflow-log") / "server.log"
    with log.open("wb") as out:
        process = spawn_server(argv, out, dict(mlflow.env))
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_answers(f"{url}/health", 120, process):
            pytest.fail(f"mlflow server did not start: {log_tail(log)}")
        yield MlflowUi(url, process, log)
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def mlflow_ui(mlflow_server: MlflowUi) -> str:
    return mlflow_server.url


@pytest.fixture(scope="module")
def page(mlflow_ui: str) -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (make browser installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


def test_the_version_description_keeps_its_interval_and_n(mlflow_ui: str, page) -> None:
    page.goto(f"{mlflow_ui}/#/models/socialrl-craigslist-specialist/versions/1")
    page.get_by_text("Trained on: 4 teacher traces").wait_for(timeout=60_000)
    description = page.get_by_text("Trained on: 4 teacher traces").locator("xpath=ancestor::div[1]")
    text = description.inner_text()
    # MLflow's renderer (showdown) reads "[a, b] (n=48)" as a link to "n=48": the interval and n vanished.
    assert "mean reward 0.146 [0.096, 0.226] (n=48)" in text
    assert "+0.044 [-0.025, +0.116] mean reward difference, n=48" in text
    assert description.locator("a").count() == 0


def test_the_server_is_light_and_quiet(mlflow_server: MlflowUi, page) -> None:
    """MLflow's defaults started 15 processes (4 uvicorn workers, a job runner, 7 huey consumers) holding
    3.2 GB here, and logged one line per request (benchmarks/results/ui_memory.json)."""
    import psutil

    page.goto(f"{mlflow_server.url}/#/models/socialrl-craigslist-specialist/versions/1")
    page.get_by_text("Trained on: 4 teacher traces").wait_for(timeout=60_000)
    tree = [psutil.Process(mlflow_server.process.pid), *psutil.Process(mlflow_server.process.pid).children(True)]
    commands = [" ".join(p.cmdline()) for p in tree]
    assert len(tree) <= 2, commands  # `mlflow server` and its single uvicorn worker
    assert not any("huey" in c or "_job_runner" in c for c in commands), commands
    access = re.compile(r'"(GET|POST) /\S* HTTP/1\.[01]" \d{3}')
    assert not [line for line in mlflow_server.log.read_text().splitlines() if access.search(line)]
