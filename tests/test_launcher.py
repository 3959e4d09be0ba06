"""pipelines/launcher.py on a real Dagster instance, with jobs that start no engine: a defined job runs with
its partition, asset selection and tags, its materialisation is found again by profile and tags, and its output
reads back through the instance."""

from __future__ import annotations

from pathlib import Path

from models.settings import DataPaths
from pipelines.launcher import LAUNCHED_BY_TAG, PROFILE_TAG, Launcher, profile_tag


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
