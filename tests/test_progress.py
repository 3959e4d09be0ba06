"""No silent stretches (models/progress.py): the silence watch logs a line whenever the `socialrl` loggers were
quiet for its interval, and, in a Dagster run on the project's instance, every `socialrl` line (the watch's
included) lands in the run's event log, the Events tab of a run launched from the UI."""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path

import pytest

from models.progress import (
    PlainFormatter,
    ProgressMeter,
    WorkProgress,
    original_message,
    progress_text,
    watch_silence,
)
from resources import SettingsResource

log = logging.getLogger("socialrl.test")


@pytest.fixture
def info_level():
    logger = logging.getLogger("socialrl")
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.setLevel(before)


def test_the_watch_speaks_only_when_the_loggers_are_quiet(info_level, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="socialrl"):
        with watch_silence(0.4) as watch:
            for k in range(8):  # a line every 0.1 s: never quiet for 0.4 s
                log.info("step %d", k)
                time.sleep(0.1)
            assert watch.lines == 0
            time.sleep(1.5)  # quiet: a line about every 0.4 s, naming the last line
            with watch_silence(5.0) as inner:  # a nested user shares the running watch
                assert inner is watch
        stamps = [r.created for r in caplog.records if r.name == "socialrl.progress"]
    assert 2 <= len(stamps) <= 4 and watch.lines == len(stamps)
    first = next(r for r in caplog.records if r.name == "socialrl.progress").getMessage()
    assert first.startswith("still working") and "since the last line, step 7" in first
    # Every watch line names the last line of work (never its own previous line), with a silence that grows.
    said = [r.getMessage() for r in caplog.records if r.name == "socialrl.progress"]
    assert all(m.endswith("since the last line, step 7") and m.count("still working") == 1 for m in said)
    silences = [float(m.split(": ")[1].split(" s since")[0]) for m in said]
    # Each silence is measured from the last line of work (step 7), not from the watch's own previous line:
    # checked against the records' own times (the line prints whole seconds: +-0.5 s, and 0.1 s of slack), so a
    # busy machine that delays the watch cannot fail it; one that counted from its own line would say ~0 s.
    last_work = next(r.created for r in reversed(caplog.records) if r.getMessage() == "step 7")
    watched = [r.created for r in caplog.records if r.name == "socialrl.progress"]
    assert all(abs(said_s - (at - last_work)) <= 0.6 for said_s, at in zip(silences, watched, strict=True)), (
        silences,
        [at - last_work for at in watched],
    )
    assert silences == sorted(silences)
    quiet = [b - a for a, b in zip([r.created for r in caplog.records][7:], stamps, strict=False)]
    assert all(gap < 0.4 + 0.4 for gap in quiet)  # the interval plus at most one poll
    time.sleep(0.6)
    assert watch.lines == len(stamps)  # stopped with its last user
    with pytest.raises(ValueError, match="interval_s"), watch_silence(0):
        pass


def test_a_long_loop_says_how_far_it_is_at_most_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    """A meter over 10 units of 6 s and 100 tokens each, with a 15 s interval: a line after units 3, 6 and 9
    (never two within 15 s, none after the last), each with the units done, tokens/s and the time left."""
    now = [0.0]
    logger = logging.getLogger("socialrl.test.meter")
    meter = ProgressMeter("PPO update", 10, unit="micro-batch", interval_s=15.0, logger=logger, clock=lambda: now[0])
    with caplog.at_level("INFO", logger="socialrl.test.meter"):
        reported = []
        for _ in range(10):
            now[0] += 6.0
            reported.append(meter.advance(tokens=100))
    lines = [r.getMessage() for r in caplog.records if r.name == "socialrl.test.meter"]
    assert [p.done for p in reported if p is not None] == [3, 6, 9] and meter.lines == 3
    assert lines == [
        "PPO update: micro-batch 3/10 done, 17 tok/s, about 42 s left",
        "PPO update: micro-batch 6/10 done, 17 tok/s, about 24 s left",
        "PPO update: micro-batch 9/10 done, 17 tok/s, about 6 s left",
    ]
    last = reported[8]
    assert last.tokens == 900 and last.elapsed_s == 54.0 and last.remaining_s == 6.0
    # Minutes and hours read as such; an unknown rate or time left says so.
    slow = WorkProgress(done=1, total=100, tokens=0.0, elapsed_s=600.0)
    assert progress_text("x", "step", slow) == "x: step 1/100 done, 0 tok/s, about 16.5 h left"
    assert progress_text("x", "step", WorkProgress(done=0, total=5, tokens=0.0, elapsed_s=0.0)).endswith(
        "0/5 done, - tok/s, about ? left"
    )
    assert "about 20 min left" in progress_text("x", "step", WorkProgress(done=2, total=6, tokens=9.0, elapsed_s=600.0))
    with pytest.raises(ValueError, match="interval_s"):
        ProgressMeter("x", 3, interval_s=-1)


def test_a_line_rewritten_by_dagster_prints_as_written() -> None:
    record = logging.LogRecord("socialrl.ppo", logging.INFO, __file__, 1, "PPO it %d", (2,), None)
    assert original_message(record) == "PPO it 2"
    record.msg, record.args = "stage1_job - 1234 - specialist - PPO it 2", ()
    record.dagster_meta = {"orig_message": "PPO it 2"}
    assert original_message(record) == "PPO it 2"
    assert PlainFormatter("%(name)s %(message)s").format(record) == "socialrl.ppo PPO it 2"
    assert record.msg.startswith("stage1_job")  # the record itself is left as Dagster made it


def test_progress_lines_reach_the_run_event_log_and_no_stretch_is_silent(tmp_path: Path) -> None:
    """An asset that logs one line, then works 3.5 s in silence, on the instance DataPaths sets up (managed
    `socialrl` loggers) with the settings resource's watch at 1 s: the line and the watch's lines are in the
    run's event log, and no gap between the step's events is longer than the interval (plus a poll)."""
    from dagster import DagsterEventType, DagsterInstance, asset, materialize

    from models.settings import DataPaths

    home = DataPaths(tmp_path / "data").dagster_home
    assert "managed_python_loggers" in (home / "dagster.yaml").read_text()
    instance = DagsterInstance.from_config(str(home))
    assert not instance.telemetry_enabled  # an offline machine sends no usage statistics

    @asset
    def long_phase(settings: SettingsResource) -> int:
        logging.getLogger("socialrl.test").info("phase started")
        time.sleep(3.5)
        return 1

    settings = SettingsResource(profile="smoke", data_dir=str(tmp_path / "data"), progress_interval_s=1.0)
    result = materialize([long_phase], instance=instance, resources={"settings": settings})
    assert result.success
    entries = instance.all_logs(result.run_id)
    user = [e for e in entries if e.dagster_event is None and e.step_key == "long_phase"]
    messages = [e.user_message for e in user]
    assert "phase started" in messages
    assert sum(m.startswith("still working") for m in messages) >= 2
    start = next(
        e.timestamp for e in entries if e.is_dagster_event and e.dagster_event_type == DagsterEventType.STEP_START
    )
    end = next(
        e.timestamp for e in entries if e.is_dagster_event and e.dagster_event_type == DagsterEventType.STEP_SUCCESS
    )
    stamps = sorted(e.timestamp for e in entries if start <= e.timestamp <= end)
    assert max(b - a for a, b in itertools.pairwise(stamps)) < 1.0 + 1.0


def _step_events(instance, run_id: str) -> dict[str, tuple[list[float], list[str]]]:
    """step key -> (timestamps of the step's events from its start to its end, the messages logged in it)."""
    from dagster import DagsterEventType

    entries = instance.all_logs(run_id)
    steps: dict[str, tuple[list[float], list[str]]] = {}
    for start in (e for e in entries if e.dagster_event_type == DagsterEventType.STEP_START):
        own = [e for e in entries if e.step_key == start.step_key]
        end = max(e.timestamp for e in own)
        stamps = sorted(e.timestamp for e in own if start.timestamp <= e.timestamp <= end)
        steps[start.step_key] = (stamps, [e.user_message for e in own if e.dagster_event is None])
    return steps


@pytest.mark.slow
def test_no_phase_of_a_smoke_workload_is_silent_longer_than_its_interval(
    vllm_engine, rollout_proxy, tiny_model_dir: Path, yes_no_ids: list[int], tmp_path: Path
) -> None:
    """The phases of a run on the tiny model, each an asset of one Dagster run on the project's instance, with
    the settings resource's interval at 3 s: SFT (steps, held-out losses), a two-iteration PPO run (rollout
    episodes, rollouts ended, update epochs, iterations) and the smoke profile's held-out evaluation (episodes).
    Each phase's own lines are in the run's event log (the Events tab) under its step, and no step goes longer
    than the interval without an event (plus the watch's poll and a margin for a loaded machine)."""
    from dagster import DagsterInstance, asset, materialize

    from models.profiles import get_profile
    from models.settings import DataPaths
    from models.socialrl.stage1.evaluation import evaluate_model
    from models.storage import TableStore
    from models.training.config import LoraSettings, PPOConfig, PPOHyper, Services, SFTSettings
    from models.training.ppo import train_ppo
    from models.training.sft import run_sft

    interval = 3.0
    paths = DataPaths(tmp_path / "data")
    instance = DagsterInstance.from_config(str(paths.dagster_home))
    buyer = [
        {"role": "system", "content": "You are a buyer. End with OFFER $<price>."},
        {"role": "user", "content": "The seller asks $120."},
        {"role": "assistant", "content": "Too much for me.\nOFFER $60"},
    ]

    @asset
    def sft_phase(settings: SettingsResource) -> int:
        sft = SFTSettings(learning_rate=1e-3, max_steps=4, checkpoint_every=2, lora=LoraSettings(r=8, alpha=16))
        return run_sft(tiny_model_dir, [buyer] * 8, tmp_path / "sft", sft, eval_conversations=[buyer] * 2).steps

    @asset
    def ppo_phase(settings: SettingsResource) -> int:
        config = PPOConfig(
            env_id="keyword-v0", iterations=2, episodes_per_iteration=8, max_new_tokens=8, concurrency=8,
            run_name="probe", sampling_extra={"allowed_token_ids": yes_no_ids},
            hyper=PPOHyper(minibatch_episodes=4, ppo_epochs=2), lora=LoraSettings(r=8, alpha=16),
        )  # fmt: skip
        services = Services(
            vllm_engine.client,
            rollout_proxy.base_url,
            TableStore(rollout_proxy.config.table_root),
            proxy_api_key=rollout_proxy.config.api_key,
        )
        return len(train_ppo(config, tiny_model_dir, services, tmp_path / "ppo").history)

    @asset
    def evaluation_phase(settings: SettingsResource) -> int:
        profile = settings.get_profile()
        api_key = vllm_engine.config.api_key
        return evaluate_model("craigslist-v0", profile, vllm_engine.base_url, "tiny", api_key=api_key).summary.n

    settings = SettingsResource(profile="smoke", data_dir=str(paths.root), progress_interval_s=interval)
    assert get_profile("smoke").progress_interval_s > interval  # the setting overrides the profile's
    result = materialize([sft_phase, ppo_phase, evaluation_phase], instance=instance, resources={"settings": settings})
    assert result.success
    steps = _step_events(instance, result.run_id)
    assert set(steps) == {"sft_phase", "ppo_phase", "evaluation_phase"}
    for key, (stamps, _) in steps.items():
        longest = max(b - a for a, b in itertools.pairwise(stamps))
        assert longest <= interval + 3.0, f"{key}: {longest:.1f} s without an event"
    sft, ppo, evaluation = (steps[k][1] for k in ("sft_phase", "ppo_phase", "evaluation_phase"))
    assert sum(m.startswith("SFT step ") and " loss " in m and "tok/s" in m for m in sft) == 4
    assert any(m.startswith("SFT step 2/4  held-out loss ") for m in sft)
    for it in (1, 2):
        assert any(m.startswith(f"PPO probe rollout {it}/2: episode 1/8 ended") for m in ppo), ppo
        assert any(m.startswith(f"PPO probe it {it}/2 rollout: 8 episodes, reward ") for m in ppo)
    assert sum(m.startswith("PPO update epoch ") for m in ppo) == 2 * 2  # two epochs per iteration
    assert any(m.startswith("PPO update epoch 2/2") and "value loss" in m for m in ppo)
    plan = result.output_for_node("evaluation_phase")
    assert any(m.startswith(f"evaluating tiny on craigslist-v0: episode {plan}/{plan} ended") for m in evaluation)


def test_make_run_prints_and_reports_the_nightly_result(tmp_path: Path) -> None:
    """`champion_evaluations`' report (each champion's held-out summary, rounded for reading) reaches make run's
    console (`nightly_text`) and its report file (`nightly`); an interval that could not be computed reads n/a."""
    import json
    import math

    from models.display import display_json
    from models.evaluation.policy import EvaluationSummary
    from models.settings import DataPaths
    from pipelines.run_lineage import StepResult, nightly_text, write_report

    def summary(n: int, mean: float, low: float, high: float) -> dict:
        return EvaluationSummary(
            n=n,
            mean_reward=mean,
            ci_low=low,
            ci_high=high,
            ci_method="bootstrap",
            confidence=0.95,
            agreement_rate=0.5,
            pareto_optimal_rate=math.nan,
            invalid_action_rate=0.1,
            leakage_rate=0.0,
        ).as_dict()

    report = display_json(
        {
            "socialrl-craigslist-specialist@v1": {"run_id": "nightly-20260101", **summary(48, 0.22291, 0.1262, 0.3297)},
            "socialrl-dnd-specialist@v2": {"run_id": "nightly-20260101", **summary(1, 0.5, math.nan, math.nan)},
        }
    )
    text = nightly_text(report)
    assert "  socialrl-craigslist-specialist@v1: mean reward 0.223 [0.126, 0.33] (n=48)" in text.splitlines()
    assert "  socialrl-dnd-specialist@v2: mean reward 0.5 [n/a, n/a] (n=1)" in text.splitlines()
    steps = [
        StepResult(
            name="stage1_job[dnd-v0]",
            job="stage1_job",
            partition="dnd-v0",
            success=True,
            seconds=1.0,
            run_id="a",
            report={"paired": {}},
        ),
        StepResult(
            name="champion_evaluation_job",
            job="champion_evaluation_job",
            partition=None,
            success=True,
            seconds=1.0,
            run_id="b",
            report=report,
        ),
    ]
    written = json.loads(write_report(DataPaths(tmp_path / "data"), "smoke", steps, 2.0).read_text())
    assert written["nightly"] == report and written["domains"] == {"dnd-v0": {"paired": {}}}
    # Where the numbers came from: this work tree's commit, and the machine's speed only when measured.
    from models.provenance import code_state

    assert written["commit"] == code_state().commit and written["machine_update_tok_s"] is None
    again = write_report(DataPaths(tmp_path / "data"), "smoke", steps, 2.0, machine_update_tok_s=2634.0)
    assert json.loads(again.read_text())["machine_update_tok_s"] == 2634.0


def test_make_run_says_where_each_champion_stands() -> None:
    """Without the nightly job, make run names per domain whether its candidate became the champion."""
    from pipelines.run_lineage import StepResult, champion_text, plan

    assert ("champion_evaluation_job", None) not in plan(("dnd-v0",), with_monitoring=False)
    assert ("champion_evaluation_job", None) in plan(("dnd-v0",), with_monitoring=True)

    def step(partition: str, promoted: bool | None, success: bool = True, skipped: bool = False) -> StepResult:
        return StepResult(
            name=f"stage1_job[{partition}]",
            job="stage1_job",
            partition=partition,
            success=success,
            seconds=1.0,
            run_id="r",
            report={"model": f"socialrl-{partition}-specialist v2"} if success else None,
            promoted=promoted,
            skipped=skipped,
        )

    lines = champion_text(
        [step("craigslist-v0", True), step("dnd-v0", False), step("casino-v0", None, success=False)]
    ).splitlines()
    assert lines[1] == "  craigslist-v0: socialrl-craigslist-v0-specialist v2 promoted to champion"
    assert lines[2].startswith("  dnd-v0: socialrl-dnd-v0-specialist v2 not promoted") and "champion stays" in lines[2]
    assert lines[3] == "  casino-v0: no candidate: no promotion decision (failed)"


def test_a_candidate_that_is_not_promoted_is_one_line_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    """Not beating the champion is an outcome: one console line naming why the alias stays, no failure."""
    import dataclasses

    from pipelines.run_lineage import StepResult, _announce

    kept = StepResult(
        name="stage1_job[dnd-v0]", job="stage1_job", partition="dnd-v0", success=True, seconds=3.0, run_id="r" * 8,
        promoted=False,
    )  # fmt: skip
    with caplog.at_level("INFO", logger="socialrl"):
        _announce(kept)
        _announce(kept, stage2_specialists=True)
        _announce(dataclasses.replace(kept, success=False, error="boom", promoted=None))
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("stage1_job[dnd-v0]: ok, not promoted (the champion stays)")
    assert lines[1].startswith("stage1_job[dnd-v0]: ok, not promoted (run_stage2's specialists never become champions)")
    assert lines[2].startswith("stage1_job[dnd-v0]: FAILED: boom")
