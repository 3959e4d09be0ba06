"""The MLflow UI as a researcher sees it, in headless Chromium (Debian's, driven by playwright) against the
real `mlflow server` that `make ui` starts (`models.tracking.server_command`, `server_environment`): a version
description whose interval and n survive MLflow's markdown renderer; a light server (one worker, no job
execution, no access log)."""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from models.serving.process import free_port, log_tail, spawn_server, stop_server, wait_until_answers
from models.tracking import Tracker, TrackingConfig, UiLinks, run_tags, server_command, server_environment

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic"]


DAGSTER_RUN = "0123abcd-4567-89ef-0123-456789abcdef"
LINKS = UiLinks(dagster_url="http://127.0.0.1:3999")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, tiny_lora_adapter: Path) -> Tracker:
    """A sqlite registry as stage 1 leaves it: a PPO run launched by a Dagster run, with per-iteration curves,
    registered as socialrl-craigslist-specialist v1 and documented by stage1.document_specialist (description,
    model card, the held-out results on the run)."""
    from models.evaluation.policy import EvaluationSummary
    from models.evaluation.stats import Estimate
    from models.profiles import get_profile
    from models.socialrl import stage1

    root = tmp_path_factory.mktemp("mlflow")
    tracker = Tracker(TrackingConfig(f"sqlite:///{root}/mlflow.db", str(root / "artifacts")))
    tags = run_tags(domain="craigslist-v0", dagster_run_id=DAGSTER_RUN, dagster_run_url=LINKS.dagster_run(DAGSTER_RUN))
    with tracker.start_run("ppo-craigslist-v0", tags=tags) as run:
        for iteration in range(3):
            run.log_metrics(iteration, {"ppo/reward_mean": 0.1 * iteration, "ppo/kl": 0.01 * iteration})
        run.log_artifact_dir(tiny_lora_adapter, "adapter")
    version = tracker.register_adapter(run.run_id, "adapter", "socialrl-craigslist-specialist")

    def policy(label: str, mean: float, low: float, high: float) -> stage1.PolicyResult:
        summary = EvaluationSummary(
            n=48,
            mean_reward=mean,
            ci_low=low,
            ci_high=high,
            ci_method="bootstrap",
            confidence=0.95,
            agreement_rate=0.5,
            pareto_optimal_rate=math.nan,
            invalid_action_rate=0.1,
            leakage_rate=0.0,
            mean_rounds=6.0,
        )
        return stage1.PolicyResult(label, label, "model", summary, {})

    specialist = stage1.Specialist(
        env_id="craigslist-v0",
        seat="buyer",
        adapter_dir="/a",
        run_name="ppo",
        served_name="ppo-v2",
        init_adapter_dir=None,
        curve=(),
        mlflow_run_id=run.run_id,
        model_name="socialrl-craigslist-specialist",
        model_version=version,
    )
    evaluation = stage1.SpecialistEvaluation(
        env_id="craigslist-v0", seat="buyer", run_id="r", scenario_source="generated",
        policies={"sft": policy("sft", 0.102, 0.039, 0.182), "ppo": policy("ppo", 0.146, 0.096, 0.226)},
        paired={"ppo_minus_sft": Estimate(0.044, -0.025, 0.116, 48)}, behaviour_paired={}, best_baseline=None, imitation={}, specialist=specialist,
    )  # fmt: skip
    warm = stage1.WarmStart("craigslist-v0", "/sft", "sft-run", None, traces_used=4)
    stage1.document_specialist(tracker, evaluation, get_profile("smoke"), warm)
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


def test_mlflow_opens_on_the_training_runs(registry: Tracker, mlflow_ui: str, page) -> None:
    """The URL make ui prints (UiLinks.mlflow_experiment) lists the runs; MLflow 3's default for an experiment
    is an empty GenAI "Traces" overview."""
    links = UiLinks(mlflow_url=mlflow_ui)
    page.goto(links.mlflow_experiment(registry.experiment_id))
    page.get_by_text("ppo-craigslist-v0").first.wait_for(timeout=60_000)
    assert page.get_by_text("Traces", exact=True).count() == 0 or page.get_by_role("tab", name="Traces").count() == 0
    assert registry.client.get_experiment(registry.experiment_id).tags["mlflow.experimentKind"] == (
        "custom_model_development"
    )


def test_a_run_links_back_to_its_dagster_run_and_shows_its_curves_first(
    registry: Tracker, mlflow_ui: str, page
) -> None:
    links = UiLinks(mlflow_url=mlflow_ui)
    run = registry.client.search_runs([registry.experiment_id], "attributes.run_name = 'ppo-craigslist-v0'")[0]
    page.goto(links.mlflow_run(registry.experiment_id, run.info.run_id))
    back = page.locator(f'a[href="{LINKS.dagster_run(DAGSTER_RUN)}"]')
    back.first.wait_for(timeout=60_000)
    assert back.first.inner_text() == DAGSTER_RUN[:8]
    # The run's charts: the per-iteration curves (ppo/, line charts) before the single values (bar charts);
    # MLflow orders its chart sections by the metric prefix.
    page.goto(links.mlflow_run(registry.experiment_id, run.info.run_id).replace("?", "/model-metrics?"))
    charts = page.locator("h4[title]")
    charts.first.wait_for(timeout=60_000)
    assert charts.first.get_attribute("title").startswith("ppo/")
    sections = [t.split()[0] for t in page.locator(".du-bois-light-collapse-header").all_inner_texts()]
    assert sections.index("ppo") < sections.index("summary"), sections
