"""pipelines/launcher.py on a real Dagster instance, with jobs that start no engine: a defined job runs with
its partition, asset selection and tags, its materialisation is found again by profile and tags, and its output
reads back through the instance."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from models.settings import DataPaths
from pipelines.launcher import LAUNCHED_BY_TAG, PROFILE_TAG, Launcher, config_for, profile_tag
from resources.instance import PROCESS_TAG, RESUMES_TAG, STALE_AFTER_S, process_tag, unfinished_run

ROOT = Path(__file__).resolve().parent.parent

# A command killed mid-job: the teacher traces step kills its own process (SIGKILL, as the OOM killer or a
# session's end would), after `scenarios` was materialised.
KILLED_MID_JOB = """
import os, signal, sys
from pathlib import Path
import models.socialrl.teachers as teachers
teachers.teacher_traces = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
from models.settings import DataPaths
from pipelines.launcher import Launcher
Launcher("smoke", DataPaths(Path(sys.argv[1])), "a test").run("stage1_job", "dnd-v0", assets=("scenarios", "teacher_traces"))
"""


def test_a_defined_job_runs_and_its_results_read_back_through_the_instance(tmp_path: Path) -> None:
    paths = DataPaths(tmp_path / "data")
    log = paths.log_file("test")
    launcher = Launcher("smoke", paths, "a test", log_file=log)
    assert launcher.latest("scenarios", "dnd-v0") is None

    run = launcher.run("stage1_job", "dnd-v0", assets=("scenarios",), tags={"socialrl/purpose": "test"})
    assert run.success and run.name == "stage1_job[dnd-v0]" and run.error == "" and run.failed_steps == ()
    dagster_run = launcher.instance.get_run_by_id(run.run_id)
    assert dagster_run.job_name == "stage1_job" and dagster_run.tags["dagster/partition"] == "dnd-v0"
    assert dagster_run.tags[PROFILE_TAG] == "smoke" and dagster_run.tags[LAUNCHED_BY_TAG] == "a test"
    assert set(launcher.step_seconds(run.run_id)) == {"scenarios"}  # only the selected asset ran
    assert f"{run.run_id} - " in log.read_text() and "RUN_SUCCESS" in log.read_text()  # the run's events, in the file

    done = launcher.latest("scenarios", "dnd-v0", tags={"socialrl/purpose": "test"})
    assert done is not None and done.run_id == run.run_id and done.partition == "dnd-v0"
    assert len(done.day) == 10 and isinstance(done.metadata, dict)
    assert launcher.latest("scenarios", "dnd-v0", tags={"socialrl/purpose": "other"}) is None
    assert launcher.latest("scenarios", "craigslist-v0") is None  # another partition
    split = launcher.load("scenarios", "dnd-v0")
    assert (
        split.env_id == "dnd-v0"
        and len(split.heldout_ids) == launcher.definitions.resources["settings"].get_profile().heldout_scenarios
    )

    # Runs sized for stage 2 carry their own profile tag: the plain profile's launcher does not take them.
    sized = Launcher("smoke", paths, "a test", stage2_specialists=True)
    assert sized.tag == profile_tag("smoke", stage2_specialists=True) != "smoke"
    assert sized.latest("scenarios", "dnd-v0") is None


def test_a_job_that_cannot_run_is_reported_not_raised(tmp_path: Path) -> None:
    launcher = Launcher("smoke", DataPaths(tmp_path / "data"), "a test")
    run = launcher.run("no_such_job")
    assert not run.success and run.run_id == "" and "no_such_job" in run.error


def test_a_killed_command_s_job_resumes_after_the_steps_it_finished(tmp_path: Path) -> None:
    paths = DataPaths(tmp_path / "data")
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_JOB, str(paths.root)], cwd=ROOT, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    launcher = Launcher("smoke", paths, "a test")
    [run] = launcher.instance.get_runs(limit=1)
    assert run.status.value == "STARTED"  # what Dagster shows for a run whose process was killed

    # A run whose process cannot be checked (another host's) is taken as running until it has been silent for
    # STALE_AFTER_S; then it is dead.
    launcher.instance.add_run_tags(run.run_id, {PROCESS_TAG: "another-host:1"})
    last = launcher.instance.get_records_for_run(run.run_id, limit=1, ascending=False).records[0]
    soon = last.event_log_entry.timestamp + 60
    assert unfinished_run(launcher.instance, "stage1_job", "dnd-v0", {PROFILE_TAG: "smoke"}, now=soon) is None
    # On this host its process is gone: unfinished, reported failed, with what it materialised.
    launcher.instance.add_run_tags(run.run_id, {PROCESS_TAG: run.tags[PROCESS_TAG]})
    assert run.tags[PROCESS_TAG].startswith(process_tag().rpartition(":")[0] + ":")
    unfinished = launcher.unfinished("stage1_job", "dnd-v0")
    assert unfinished is not None and (unfinished.run_id, unfinished.status) == (run.run_id, "STARTED")
    assert unfinished.materialised == ("scenarios",)
    assert launcher.instance.get_run_by_id(run.run_id).status.value == "FAILURE"
    assert launcher.unfinished("stage1_job", "craigslist-v0") is None  # another partition: nothing to resume

    # The relaunch runs only what is missing, loading `scenarios` from the killed run; then nothing is unfinished.
    resumed = launcher.resume("stage1_job", "dnd-v0", assets=("scenarios", "teacher_traces"))
    steps = set(launcher.step_seconds(resumed.run_id))
    assert resumed.success and "teacher_traces" in steps and "scenarios" not in steps  # (and the traces' check)
    assert launcher.latest("scenarios", "dnd-v0").run_id == run.run_id
    # It carries the killed run as the chain it resumes: what the training steps key their checkpoints by.
    assert launcher.instance.get_run_by_id(resumed.run_id).tags[RESUMES_TAG] == run.run_id == unfinished.chain
    assert launcher.unfinished("stage1_job", "dnd-v0") is None
    assert STALE_AFTER_S >= 600  # far above the minute between a live step's "still working" lines


def test_a_resumed_run_keeps_only_the_config_of_the_steps_it_runs() -> None:
    config = {"ops": {"transfer_matrix": {"config": {"domains": ["a", "b"]}}}, "loggers": {"x": {}}}
    assert config_for(config, ["transfer_matrix", "cascade_order"]) == config
    assert config_for(config, ["cascade_order", "unified_evaluation"]) == {"loggers": {"x": {}}}
    assert config_for(None, ["cascade_order"]) == {}


def test_training_work_directories_follow_the_chain_a_run_resumes() -> None:
    from types import SimpleNamespace

    from assets.common import work_key

    def context(run_id: str, root: str | None, tags: dict[str, str]) -> SimpleNamespace:
        return SimpleNamespace(run=SimpleNamespace(run_id=run_id, root_run_id=root, tags=tags))

    assert work_key(context("aaaaaaaa-1", None, {})) == "aaaaaaaa"  # a first run: its own
    assert work_key(context("bbbbbbbb-1", "aaaaaaaa-1", {})) == "aaaaaaaa"  # Dagster's re-execution: the root
    assert work_key(context("cccccccc-1", None, {RESUMES_TAG: "aaaaaaaa-1"})) == "aaaaaaaa"  # a command's relaunch
