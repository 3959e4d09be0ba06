"""The Dagster code location: definitions, the smoke lineage materialised with the real resources, the
webserver's GraphQL API and the asset graph in the real UI (headless Chromium)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPECTED_ASSETS = {
    "code_agent_tournament",
    "environment_incentives",
    "scenarios",
    "teacher_traces",
    "sft_warmstart",
    "warmstart_imitation",
    "specialist",
    "specialist_eval",
    "specialist_champion",
    "champion_evaluations",
    "transfer_matrix",
    "cascade_order",
    "cascade_policy",
    "mopd_student",
    "unified_evaluation",
    "tom_traces",
    "tom_student",
    "tom_analysis",
    "behaviour_report",
    "privacy_red_team",
    "endpoint_leaderboard",
    "yoao_teacher_selection",
    "yoao_seed_traces",
    "yoao_seed_dataset",
    "yoao_format_warmup",
    "yoao_seed_agent",
    "yoao_warmstart_imitation",
    "propagation_by_seed_count",
    "propagation_mute",
    "propagation_persistence",
    "propagation_prompting_baseline",
    "sugarscape_zero_shot",
    "yoao_results",
    "paper_report",
}
EXPECTED_JOBS = {
    "tournament_job",
    "incentives_job",
    "traces_job",
    "sft_job",
    "specialist_job",
    "stage1_job",
    "stage2_job",
    "champion_evaluation_job",
    "model_version_evaluation_job",
    "tom_job",
    "behaviour_job",
    "leaderboard_job",
    "yoao_job",
    "report_job",
    "nightly_job",
}


def test_definitions_load_and_every_job_resolves() -> None:
    from pipelines.definitions import defs

    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert keys == EXPECTED_ASSETS
    for name in EXPECTED_JOBS:
        assert defs.resolve_job_def(name).name == name
    assert defs.resolve_schedule_def("nightly_champion_evaluation").cron_schedule == "0 2 * * *"
    assert defs.resolve_sensor_def("new_model_version_sensor").name == "new_model_version_sensor"
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {
        "incentives_hold",
        "traces_are_usable",
        "warmstart_imitates_teacher",
        "completions_have_token_ids",
        "beats_champion",
        "transfer_matrix_complete",
        "cascade_order_is_best",
        "cascade_kept_best_checkpoints",
        "mopd_teachers_scored_every_token",
        "unified_covers_every_policy",
        "seed_data_has_no_held_out_frames",
        "untrained_teammates_vote_validly",
        "warm_starts_learned_their_data",
    }


def test_the_version_sensor_requests_each_new_version_once(tmp_path: Path) -> None:
    from dagster import build_sensor_context

    from models.tracking import Tracker, TrackingConfig
    from pipelines.definitions import new_model_version_sensor
    from resources import MlflowResource

    # The sqlite file in RAM where there is one: MLflow's schema migrations are slow on a busy disk.
    db_dir = Path(tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    config = TrackingConfig(tracking_uri=f"sqlite:///{db_dir}/m.db", artifact_root=str(tmp_path / "a"))
    tracker = Tracker(config)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    from resources import SettingsResource

    resource = MlflowResource(
        settings=SettingsResource(profile="smoke", data_dir=str(tmp_path / "data")),
        tracking_uri=config.tracking_uri,
        artifact_root=config.artifact_root,
    )

    def register() -> int:
        with tracker.start_run("t") as run:
            run.log_artifact_dir(adapter, "adapter")
        return tracker.register_adapter(run.run_id, "adapter", "socialrl-dnd-specialist")

    def tick(cursor: str | None = None):
        # A resource holding another resource must be opened as a context manager.
        with build_sensor_context(cursor=cursor, resources={"mlflow": resource}) as context:
            return new_model_version_sensor(context), context.cursor

    register()
    # The first tick notes what is registered already and starts nothing (a calm `make ui`).
    first, cursor = tick()
    assert not isinstance(first, list) and "1 versions registered earlier" in first.skip_message
    register()
    second, cursor = tick(cursor)
    assert [r.run_key for r in second] == ["socialrl-dnd-specialist-v2"]
    again, _ = tick(cursor)
    assert not isinstance(again, list)  # a SkipReason: nothing new
    register()
    third, _ = tick(cursor)
    assert [r.run_config["ops"]["evaluate_model_version"]["config"]["version"] for r in third] == [3]


def test_make_ui_starts_no_heavy_work_unless_configured() -> None:
    from dagster import DefaultScheduleStatus, DefaultSensorStatus

    from pipelines import ui
    from pipelines.definitions import EVALUATE_NEW_VERSIONS_ENV, defs, new_version_sensor_status

    assert ui.EVALUATE_NEW_VERSIONS_ENV == EVALUATE_NEW_VERSIONS_ENV  # `make ui EVALUATE_NEW_VERSIONS=1` sets it

    # The test process has no $SOCIALRL_EVALUATE_NEW_VERSIONS: the sensor is off by default.
    assert defs.resolve_sensor_def("new_model_version_sensor").default_status == DefaultSensorStatus.STOPPED
    assert new_version_sensor_status("1") == new_version_sensor_status("TRUE") == DefaultSensorStatus.RUNNING
    assert new_version_sensor_status("") == new_version_sensor_status("0") == DefaultSensorStatus.STOPPED
    # The nightly re-evaluation stays on: it is what the nightly schedule is for (documented).
    schedule = defs.resolve_schedule_def("nightly_champion_evaluation")
    assert schedule.default_status == DefaultScheduleStatus.RUNNING


def test_make_ui_points_each_ui_at_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make ui` tells the code location where both UIs are: asset metadata links to its MLflow, MLflow runs
    link back to its Dagster (pipelines/ui.py -> $SOCIALRL_*_UI_URL -> MlflowResource)."""
    from models.settings import DataPaths
    from pipelines import definitions, ui

    servers = {s.name: s for s in ui.ui_servers(DataPaths(tmp_path), dagster_port=3100, mlflow_port=5100)}
    env = servers["dagster"].env
    assert (ui.MLFLOW_UI_URL_ENV, ui.DAGSTER_UI_URL_ENV) == (
        definitions.MLFLOW_UI_URL_ENV,
        definitions.DAGSTER_UI_URL_ENV,
    )
    assert (
        env[ui.MLFLOW_UI_URL_ENV] == "http://127.0.0.1:5100" and env[ui.DAGSTER_UI_URL_ENV] == "http://127.0.0.1:3100"
    )
    for key in (ui.MLFLOW_UI_URL_ENV, ui.DAGSTER_UI_URL_ENV):
        monkeypatch.setenv(key, env[key])
    links = definitions.build_resources("smoke", str(tmp_path))["mlflow"].links()
    assert links.mlflow_version("m", 1).startswith("http://127.0.0.1:5100/#/models/m/versions/1")
    assert links.dagster_run("abc") == "http://127.0.0.1:3100/runs/abc"
    assert servers["mlflow"].argv[-1] == "5100"


@pytest.mark.slow
def test_smoke_lineage_materialises_with_real_resources(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What `make run` does (pipelines/run_lineage.py), on the smoke profile and two domains."""
    from models.storage import TableStore
    from models.tracking import Tracker, TrackingConfig
    from pipelines.run_lineage import run_lineage

    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, data / "models" / "tiny-random-llama")  # the smoke profile's model

    def ours() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k.startswith(("SOCIALRL_", "DAGSTER_"))}

    environment_before = ours()
    start = time.perf_counter()
    with caplog.at_level("INFO", logger="socialrl.evaluation"):
        steps = run_lineage("smoke", ("craigslist-v0", "dnd-v0"), with_monitoring=True, data=data)
    print(f"smoke lineage (tournament + 2 domains + champion evaluations): {time.perf_counter() - start:.0f} s")
    # A second run skips what this instance already materialised with the profile.
    again = run_lineage("smoke", ("craigslist-v0", "dnd-v0"), with_monitoring=True, data=data)
    assert ours() == environment_before  # settings travel as arguments, not environment variables
    assert [s.name for s in steps] == [
        "tournament_job",
        "incentives_job",
        "stage1_job[craigslist-v0]",
        "stage1_job[dnd-v0]",
        "champion_evaluation_job",
    ]
    assert all(s.success for s in steps), [(s.name, s.error) for s in steps]
    # First specialists of an empty registry are promoted: the smoke profile (random weights) sets no promotion
    # bars (`champion_bars`; tests/test_assets.py shows them refusing a candidate below a rule).
    assert [s.promoted for s in steps] == [None, None, True, True, None]
    craigslist = steps[2].report
    assert craigslist["seat"] == "buyer"
    assert set(craigslist["policies"]) == {
        "base", "sft", "ppo", "teacher", "accept_first", "hold_target", "split_difference", "best_fixed_rule"
    }  # fmt: skip
    ppo = craigslist["policies"]["ppo"]
    # Opening below target counts an episode without an offer as 0: it is P(below | offer) x P(offer), over every
    # episode (report numbers are rounded to 3 digits).
    metrics = ppo["metrics"]
    below, given = metrics["opening_below_target"], metrics.get("opening_below_target_given_offer") or {}
    assert below["n"] == ppo["n"] == metrics["offer_rate"]["n"]
    assert below["mean"] == pytest.approx((given.get("mean") or 0.0) * metrics["offer_rate"]["mean"], abs=2e-3)
    assert set(craigslist["paired"]) == {
        "ppo_minus_sft", "sft_minus_base", "ppo_minus_base", "ppo_minus_best_baseline", "ppo_minus_teacher"
    }  # fmt: skip
    for name, difference in craigslist["paired"].items():
        # every evaluation episode is paired; the base plays its part of the plan (all of it in smoke)
        assert difference["n"] == ppo["n"], name
    assert set(craigslist["behaviour_paired"]["command_rate"]) == {"ppo_minus_sft", "sft_minus_base", "ppo_minus_base"}
    for behaviour in ("opening_below_target", "leak", "reject_with_counter", "commitment"):
        assert "ppo_minus_sft" in craigslist["behaviour_paired"][behaviour], behaviour
    rules = {"accept_first", "hold_target", "split_difference", "best_fixed_rule"}
    assert set(craigslist["baselines"]) == rules
    # The best rule is the best of all of them by its own mean, the fixed rule included.
    best_rule = craigslist["best_baseline"]
    assert best_rule in rules and craigslist["baselines"][best_rule]["mean"] == max(
        r["mean"] for r in craigslist["baselines"].values()
    )
    assert craigslist["policies"]["best_fixed_rule"]["model"].startswith("hold max(target, ")
    imitation = craigslist["warmstart_imitation"]
    assert imitation["n"] == ppo["n"] and imitation["teacher_command_rate"] == 1.0  # the teacher always commands
    share = imitation["reward_over_teacher"]
    assert imitation["passed"] == (imitation["command_rate"] >= 0.9 and share is not None and share >= 0.5)
    assert [it["iteration"] for it in craigslist["learning_curve"]] == [0, 1]
    # The held-out evaluation prints one line per policy as it finishes (it is the lineage's longest silence).
    # (Dagster rewrites a managed logger's record to "<job> - <run> - <step> - <line>"; the line as written:)
    from models.progress import original_message

    lines = [original_message(r) for r in caplog.records]
    evaluated = [m.split(":")[0] for m in lines if m.startswith("eval craigslist")]
    assert evaluated == [
        "eval craigslist-v0 sft",
        "eval craigslist-v0 teacher",
        "eval craigslist-v0 accept_first",
        "eval craigslist-v0 hold_target",
        "eval craigslist-v0 split_difference",
        "eval craigslist-v0 best_fixed_rule",
        "eval craigslist-v0 base",
        "eval craigslist-v0 ppo",
    ]
    # The report renders itself once; make run prints that markdown.
    assert "| ppo |" in steps[2].markdown and "ppo_minus_best_baseline" in steps[2].markdown
    assert "opening_below_target" in steps[2].markdown and "| PPO iteration |" in steps[2].markdown
    assert "opening_below_target" not in steps[3].report["policies"]["ppo"]["metrics"]  # Craigslist only
    # DnD has no warm-start in the smoke profile: no SFT, no imitation, the code policies still play.
    assert {"ppo_minus_base", "ppo_minus_best_baseline", "ppo_minus_teacher"} == set(steps[3].report["paired"])
    assert steps[3].report["warmstart_imitation"] == {}
    assert steps[2].step_seconds and all(v >= 0 for v in steps[2].step_seconds.values())
    assert [(s.skipped, s.run_id) for s in again] == [(True, s.run_id) for s in steps]
    assert again[2].report == steps[2].report  # read back from the asset's metadata
    # make run launches the code location's own jobs, with tags that say what they are.
    from dagster import DagsterInstance

    instance = DagsterInstance.from_config(str(data / "dagster_home"))
    runs = {r.run_id: r for r in instance.get_runs()}
    assert [runs[s.run_id].job_name for s in steps] == [s.job for s in steps]
    assert all(runs[s.run_id].tags["socialrl/profile"] == "smoke" for s in steps)
    # No silent stretch: in every step of the stage-1 and nightly runs the run's own event log, the
    # Events tab of a run launched from the UI, has an entry at least every progress interval of the profile
    # (the `socialrl` loggers are Dagster-managed on this instance; the settings resource's watch fills gaps),
    # and the phases' own lines are there: rollout episodes, update epochs, evaluation episodes, the nightly result.
    from dagster import DagsterEventType

    from models.profiles import get_profile

    interval = get_profile("smoke").progress_interval_s
    lines: dict[str, list[str]] = {}
    for step in steps[1:]:
        entries = instance.all_logs(step.run_id)
        starts = {e.step_key: e.timestamp for e in entries if e.dagster_event_type == DagsterEventType.STEP_START}
        for key, begun in starts.items():
            ended = max(e.timestamp for e in entries if e.step_key == key)
            stamps = sorted(e.timestamp for e in entries if e.step_key == key and begun <= e.timestamp <= ended)
            longest = max((b - a for a, b in itertools.pairwise(stamps)), default=0.0)
            assert longest <= interval + 10, f"{step.name} {key}: {longest:.0f} s without an event"
            lines[key] = lines.get(key, []) + [
                e.user_message for e in entries if e.step_key == key and not e.dagster_event
            ]
    assert any(m.startswith("PPO craigslist-specialist rollout 1/2: episode 1/") for m in lines["specialist"])
    assert any(m.startswith("PPO update epoch 1/") for m in lines["specialist"])
    assert any(m.startswith("evaluating ") and "episode 1/" in m for m in lines["specialist_eval"])
    assert any(
        m.startswith("nightly socialrl-craigslist-specialist@v1: mean reward") for m in lines["champion_evaluations"]
    )
    # The nightly result is in the report (and make run prints it); JSON metadata is rounded for reading.
    assert set(steps[4].report) == {"socialrl-craigslist-specialist@v1", "socialrl-dnd-specialist@v1"}
    assert {"mean_reward", "ci_low", "ci_high", "n"} <= set(steps[4].report["socialrl-dnd-specialist@v1"])
    import re

    assert not re.search(r"\d\.\d{7,}", json.dumps(steps[2].report)), "unrounded numbers in the report metadata"
    # The report file is strict JSON.
    from models.settings import DataPaths
    from pipelines.run_lineage import write_report

    written = write_report(DataPaths(data), "smoke", steps, 1.0)
    parsed = json.loads(written.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c} in the report"))
    assert set(parsed["domains"]["craigslist-v0"]["paired"]["ppo_minus_sft"]) == {"mean", "ci_low", "ci_high", "n"}
    assert parsed["nightly"] == steps[4].report
    from agents.env_version import env_version

    assert parsed["env_version"] == env_version()  # never compared with results of another environment
    # Beside it, what the agents said: best, median and worst episode of each policy, read back from the metadata.
    from pipelines.run_lineage import write_transcripts

    said = json.loads(write_transcripts(DataPaths(data), "smoke", steps).read_text())
    assert set(said["domains"]["craigslist-v0"]) == {"sft", "ppo", "teacher"}
    assert set(said["domains"]["dnd-v0"]) == {"ppo", "teacher"}  # no warm-start in the smoke profile's DnD
    best = said["domains"]["craigslist-v0"]["ppo"][0]
    assert "best" in best["labels"] and best["counterpart"] and r"buyer \(policy\)" in best["markdown"]
    assert again[2].transcripts == steps[2].transcripts
    # The runs are on the instance `make ui` opens.
    assert (data / "dagster_home").is_dir()

    store = TableStore(data / "tables")
    traces = store.query(
        "SELECT env_id, count(*) AS n, min(unclamped_reward) AS lo, max(unclamped_reward) AS hi FROM traces GROUP BY env_id"
    )
    assert set(traces.env_id) == {"craigslist-v0", "dnd-v0"}
    assert (traces.lo >= 0).all() and (traces.hi <= 1).all()
    calls = store.query(
        "SELECT count(*) AS n FROM recorded_calls WHERE starts_with(episode_id, 'craigslist-specialist:')"
    )
    assert int(calls.n[0]) > 0
    evaluations = store.query("SELECT DISTINCT policy_name FROM evaluations")
    assert {
        "craigslist-v0:base", "craigslist-v0:sft", "craigslist-v0:ppo", "craigslist-v0:teacher",
        "craigslist-v0:accept_first", "dnd-v0:base", "dnd-v0:ppo", "dnd-v0:hold_target",
    } <= set(evaluations.policy_name)  # fmt: skip
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{data}/mlflow/mlflow.db", artifact_root=str(data / "mlflow" / "artifacts")
        )
    )
    champions = {v.name: v.version for v in tracker.champion_versions(prefix="socialrl-")}
    assert champions == {"socialrl-craigslist-specialist": 1, "socialrl-dnd-specialist": 1}
    nightly = store.query("SELECT DISTINCT policy_name FROM evaluations WHERE starts_with(run_id, 'nightly-')")
    assert {"socialrl-craigslist-specialist@v1", "socialrl-dnd-specialist@v1"} <= set(nightly.policy_name)
    local = tracker.lookup("socialrl-craigslist-specialist", alias="champion")
    assert (local.path / "adapter_config.json").is_file()
    # The nightly evaluation is kept on the version, with its history (the second run skipped it).
    champion = tracker.get_version("socialrl-craigslist-specialist", 1)
    # The value on the version is the nightly evaluation's own: its row in `evaluations` and the run's report.
    [stored] = store.query(
        "SELECT mean_reward FROM evaluations WHERE starts_with(run_id, 'nightly-') AND counterpart = '*' "
        "AND policy_name = 'socialrl-craigslist-specialist@v1'"
    ).mean_reward
    assert champion.evaluation("nightly")["mean_reward"] == pytest.approx(stored)
    assert steps[4].report["socialrl-craigslist-specialist@v1"]["mean_reward"] == pytest.approx(stored, abs=1e-3)
    assert champion.tags["evaluated.nightly.count"] == "1" and champion.tags["evaluated.nightly.source"].startswith(
        "nightly-"
    )
    assert len(tracker.evaluation_history("socialrl-craigslist-specialist", 1, "mean_reward", "nightly")) == 1


@pytest.fixture(scope="module")
def dagster_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Dagster instance directory the test webserver reads."""
    return tmp_path_factory.mktemp("dagster_home")


@pytest.fixture(scope="module")
def dagster_webserver(dagster_home: Path) -> Iterator[str]:
    """`dagster-webserver` on the code location (workspace.yaml), on a free port."""
    from models.serving.engine import free_port
    from models.serving.process import wait_until_answers

    home = dagster_home
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "SOCIALRL_PROFILE": "smoke"}
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster-webserver"),
            "-w",
            "workspace.yaml",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_answers(f"{url}/server_info", 120, process):
            pytest.fail("dagster-webserver did not start within 120 s")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def _graphql(url: str, query: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        data = httpx.post(f"{url}/graphql", json={"query": query}, timeout=30).json()
        if "errors" not in data or time.monotonic() > deadline:
            return data
        time.sleep(2)  # the code location may still be loading


def test_webserver_graphql_lists_the_asset_graph_and_partitions(dagster_webserver: str) -> None:
    data = _graphql(
        dagster_webserver,
        "{ assetNodes { assetKey { path } partitionKeys dependencyKeys { path } } }",
    )
    nodes = {tuple(n["assetKey"]["path"])[-1]: n for n in data["data"]["assetNodes"]}
    assert set(nodes) == EXPECTED_ASSETS
    assert nodes["specialist"]["partitionKeys"] == [
        "dnd-v0", "casino-v0", "craigslist-v0", "marketplace-v0", "job-interview-v0", "calendar-v0"
    ]  # fmt: skip
    assert ["sft_warmstart"] in [d["path"] for d in nodes["specialist"]["dependencyKeys"]]


def test_the_ui_lists_the_assets_in_headless_chromium(dagster_webserver: str, tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed (make test installs Debian's chromium)")
    _graphql(dagster_webserver, "{ assetNodes { id } }")
    url = f"{dagster_webserver}/assets"  # the asset catalog (the lineage canvas draws lazily, off-DOM)
    proc = subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            # A tall window: the catalog renders only the rows in view, and the code location has ~50 assets.
            "--window-size=1400,6000",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000", "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    dom = proc.stdout
    for name in ("teacher_traces", "sft_warmstart", "specialist_eval"):
        assert name in dom, f"{name} not in the rendered asset graph"


def test_transcripts_and_rounded_numbers_render_in_the_webserver(dagster_webserver: str, dagster_home: Path) -> None:
    """Metadata the monitoring assets write (markdown transcripts with hostile text, rounded numbers, NaN as
    text) survives the instance and comes back unchanged through the webserver's GraphQL API."""
    import math

    from dagster import DagsterInstance, MetadataValue, Output, asset, materialize

    from models.display import display_metadata
    from models.evaluation.transcripts import SeatView, Transcript, TranscriptTurn, transcripts_markdown

    hostile = "<script>alert(1)</script> | x |\n# not a heading\x07" + "long " * 5000
    transcript = Transcript(
        episode_id="ep-1", env_id="craigslist-v0", scenario_id="s1", seed=0, seats=(SeatView(seat="buyer", agent="p", reward=0.5, utility=1.0, invalid_actions=0, leaked=(), private_text=("target $90",)),),
        turns=(TranscriptTurn(0, "buyer", "offer", hostile, {"price": 90.0}),), agreement=True, deal={"price": 90.0}, policy_seat="buyer", labels=("best",),
    )  # fmt: skip
    markdown = transcripts_markdown([transcript], title="probe@v1")

    @asset(name="metadata_probe")
    def probe():
        numbers = display_metadata({"mean_reward": 0.08333333333333333, "pareto_optimal_rate": math.nan})
        return Output(None, metadata={**numbers, "transcripts": MetadataValue.md(markdown)})

    instance = DagsterInstance.from_config(str(dagster_home))
    assert materialize([probe], instance=instance).success
    data = _graphql(
        dagster_webserver,
        """{ assetOrError(assetKey: {path: ["metadata_probe"]}) { ... on Asset { assetMaterializations(limit: 1) {
             metadataEntries { label ... on MarkdownMetadataEntry { mdStr } ... on FloatMetadataEntry { floatValue }
                               ... on TextMetadataEntry { text } } } } } }""",
    )
    entries = {e["label"]: e for e in data["data"]["assetOrError"]["assetMaterializations"][0]["metadataEntries"]}
    assert entries["transcripts"]["mdStr"] == markdown
    assert "\\<script\\>" in markdown and "more characters" in markdown and len(markdown) < 10_000
    assert entries["mean_reward"]["floatValue"] == 0.0833
    assert entries["pareto_optimal_rate"]["text"] == "n/a"
