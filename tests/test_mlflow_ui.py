"""The MLflow UI as a researcher sees it, in headless Chromium (Debian's, driven by playwright) against the
real `mlflow server` that `make ui` starts (`models.tracking.server_command`): a version description whose
interval and n survive MLflow's markdown renderer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from models.serving.process import free_port, log_tail, spawn_server, stop_server, wait_until_answers
from models.tracking import ModelCard, Tracker, TrackingConfig, quiet_environment, server_command

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


@pytest.fixture(scope="module")
def mlflow_ui(registry: Tracker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mlflow server` over the registry, started as `make ui` starts it."""
    port = free_port()
    log = tmp_path_factory.mktemp("mlflow-log") / "server.log"
    with log.open("wb") as out:
        process = spawn_server(server_command(registry.config, port=port), out, quiet_environment())
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_answers(f"{url}/health", 120, process):
            pytest.fail(f"mlflow server did not start: {log_tail(log)}")
        yield url
    finally:
        stop_server(process)


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
