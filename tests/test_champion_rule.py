"""The registry's champion rule (models/tracking/champion.py) and which registered specialist stage 2 builds on
(models/socialrl/stage1/registry.py): plain functions first, then the same rule through a sqlite MLflow store."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from models.socialrl import stage1
from models.tracking import (
    CHAMPION,
    PLAN_TAG,
    EpisodeRewards,
    EvaluatedVersion,
    Measurement,
    RegisteredVersion,
    compare_versions,
)

BIG = ("plan-96", "craigslist-v0 seat buyer: 32 dataset scenarios x 3 = 96 episodes, seed 0")
SMALL = ("plan-12", "craigslist-v0 seat buyer: 4 dataset scenarios x 3 = 12 episodes, seed 0")


def episodes(rewards: dict[str, float]) -> EpisodeRewards:
    """Per-episode rewards, each episode its own scenario."""
    return EpisodeRewards(rewards, {k: k for k in rewards})


def version(number: int, rewards: dict[str, float] | None, plan: tuple[str, str] | None = BIG) -> EvaluatedVersion:
    """A version evaluated on `plan` (None: no plan recorded), its value the mean of `rewards`."""
    value = sum(rewards.values()) / len(rewards) if rewards else None
    if plan is None:
        return EvaluatedVersion(number, value)
    return EvaluatedVersion(number, value, plan[0], plan[1], episodes(rewards) if rewards else None)


def test_without_a_champion_the_candidate_wins() -> None:
    comparison = compare_versions(version(1, {"a": 0.1}), None)
    assert comparison.wins and comparison.basis == "no champion" and comparison.champion_version is None


def test_on_the_same_plan_the_paired_difference_decides_not_the_means() -> None:
    """The candidate's mean (0.60 over the three episodes it finished) is above the champion's (0.55 over four),
    but on the three episodes both played it is 0.10 worse on each: the paired difference decides."""
    champion = version(1, {"a": 0.7, "b": 0.7, "c": 0.7, "d": 0.1})
    candidate = version(2, {"a": 0.6, "b": 0.6, "c": 0.6})
    assert candidate.value > champion.value
    comparison = compare_versions(candidate, champion)
    assert not comparison.wins and comparison.basis == "paired"
    assert comparison.paired.mean == pytest.approx(-0.1) and comparison.paired.n == 3
    assert "over 3 paired episodes" in comparison.reason
    better = compare_versions(version(3, {"a": 0.8, "b": 0.7, "c": 0.7}), champion)
    assert better.wins and better.paired.mean == pytest.approx(0.1 / 3)
    # Lower is better (e.g. an invalid-action rate): the same paired difference, the other way round.
    assert compare_versions(candidate, champion, higher_is_better=False).wins


def test_on_the_same_plan_without_both_episode_sets_the_means_decide_and_say_so() -> None:
    champion = EvaluatedVersion(1, 0.50, *BIG)  # its episodes were not kept
    comparison = compare_versions(version(2, {"a": 0.6, "b": 0.6}), champion)
    assert comparison.wins and comparison.basis == "means, same plan" and comparison.paired is None
    assert "point means on the same plan" in comparison.reason and "not kept" in comparison.reason
    assert not compare_versions(version(3, {"a": 0.4}), champion).wins


def test_different_plans_are_refused_whatever_the_means() -> None:
    """A stage-2-sized evaluation (12 episodes) scoring higher than `make run`'s champion (96) is not promoted."""
    champion = version(1, {"a": 0.2, "b": 0.2})
    candidate = version(2, {"a": 0.9}, SMALL)
    comparison = compare_versions(candidate, champion)
    assert not comparison.wins and comparison.basis == "different plans"
    assert comparison.reason.startswith(f"different evaluation plans: {SMALL[1]} [plan-12] vs {BIG[1]} [plan-96]")
    assert (comparison.champion_version, comparison.champion_value) == (1, pytest.approx(0.2))
    # Refused in both directions, and when either side recorded no plan at all.
    assert not compare_versions(version(3, {"a": 0.9}), version(1, {"a": 0.2}, SMALL)).wins
    unknown = compare_versions(version(2, {"a": 0.9}), version(1, {"a": 0.2}, None))
    assert not unknown.wins and unknown.basis == "plan unknown" and "champion v1 has no recorded" in unknown.reason
    assert compare_versions(version(2, {"a": 0.9}, None), champion).basis == "plan unknown"


def test_versions_that_record_no_plan_keep_the_point_rule_and_the_champion_stays_itself() -> None:
    """The YOAO seed model, the cascade and the MOPD student record no plan: their old rule is unchanged."""
    champion = version(1, {"a": 0.5}, None)
    assert compare_versions(version(2, {"a": 0.6}, None), champion).basis == "means, plans not recorded"
    assert not compare_versions(version(2, {"a": 0.4}, None), champion).wins
    assert compare_versions(version(1, {"a": 0.1}), version(1, {"a": 0.5})).basis == "already champion"
    empty = compare_versions(version(2, {"a": 0.1}), EvaluatedVersion(1, None, *BIG))
    assert empty.wins and empty.basis == "champion without value"


def test_episode_rewards_survive_their_json() -> None:
    kept = EpisodeRewards({"0|s|boulware|buyer|0": 0.25, "1|t|conceder|buyer|1": 1.0}, {"0|s|boulware|buyer|0": "0"})
    back = EpisodeRewards.from_json(kept.to_json("plan-x"))
    assert back.rewards == kept.rewards and back.clusters["0|s|boulware|buyer|0"] == "0"
    assert back.clusters["1|t|conceder|buyer|1"] == "1|t|conceder|buyer|1"  # no cluster given: its own


# ------------------------------------------------------------------------- which specialist stage 2 uses
def registered(number: int, plan: str | None, trained_by: str | None, *aliases: str) -> RegisteredVersion:
    tags = {k: v for k, v in ((PLAN_TAG, plan), (stage1.TRAINED_BY_TAG, trained_by)) if v is not None}
    return RegisteredVersion("socialrl-craigslist-specialist", number, f"run{number}", "src", tags, aliases)


def test_stage2_uses_make_runs_champion_on_the_plan_else_its_newest_else_its_own() -> None:
    s1, s2 = stage1.STAGE1, stage1.STAGE2
    versions = [
        registered(1, "plan-96", s1, CHAMPION),
        registered(2, "plan-96", s1),  # lost to v1 on the same plan
        registered(3, "plan-12", s2, "candidate"),
        registered(4, None, s1),  # registered, never evaluated
    ]
    chosen, source = stage1.choose_version(versions, "plan-96", "plan-12")
    assert (chosen.version, source) == (1, stage1.FROM_STAGE1)
    no_alias = [registered(1, "plan-96", s1), registered(2, "plan-96", s1), versions[2]]
    assert stage1.choose_version(no_alias, "plan-96", "plan-12")[0].version == 2
    # make run's versions on another plan (the profile's plan changed) do not count; run_stage2's own does.
    moved = stage1.choose_version(versions, "plan-48", "plan-12")
    assert (moved[0].version, moved[1]) == (3, stage1.FROM_STAGE2)
    # A stage-2 version on make run's plan (a profile whose stage-2 sizes are make run's) is still stage 2's own.
    assert stage1.choose_version([registered(5, "plan-96", s2)], "plan-96", "plan-96")[1] == stage1.FROM_STAGE2
    assert stage1.choose_version(versions, "plan-48", "plan-4") is None
    assert stage1.choose_version([versions[3]], "plan-96", "plan-12") is None


# --------------------------------------------------------------------------------- through the MLflow store
def test_the_rule_pairs_through_the_registry_and_stage2_finds_make_runs_specialist(tmp_path: Path) -> None:
    """Every evaluated version keeps its plan and its episodes in the store; the champion's are read back to pair
    with a candidate's, a candidate on another plan is refused, and stage 2 picks the version `make run`
    evaluated on the profile's plan."""
    from models.profiles import get_profile
    from models.tracking import Tracker, TrackingConfig

    tracker = Tracker(TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/m.db", artifact_root=str(tmp_path / "a")))
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    env_id, smoke = "craigslist-v0", get_profile("smoke")
    name = stage1.registered_name(env_id)

    def register(trained_by: str) -> int:
        with tracker.start_run(f"ppo-{env_id}") as run:
            run.log_artifact_dir(adapter, "adapter")
        return tracker.register_adapter(run.run_id, "adapter", name, tags={stage1.TRAINED_BY_TAG: trained_by})

    assert stage1.select_specialist(tracker, env_id, smoke) is None  # nothing registered
    plan = stage1.heldout_plan_identity(env_id, smoke)
    first = register(stage1.STAGE1)
    champion_episodes = episodes({"a": 0.7, "b": 0.7, "c": 0.7, "d": 0.1})
    assert tracker.promote_if_better(
        name, first, "mean_reward", 0.55, measured=Measurement(plan.key, plan.text, champion_episodes)
    )
    stored = tracker.get_version(name, first).tags
    assert stored[PLAN_TAG] == plan.key and stored["socialrl.eval_plan_text"] == plan.text
    # The champion's episodes come back from the store: paired on the three both played, 0.1 worse each.
    second = register(stage1.STAGE1)
    candidate = Measurement(plan.key, plan.text, episodes({"a": 0.6, "b": 0.6, "c": 0.6}))
    comparison = tracker.compare_with_champion(name, second, "mean_reward", 0.60, measured=candidate)
    assert comparison.basis == "paired" and comparison.paired.mean == pytest.approx(-0.1)
    assert not tracker.promote_if_better(name, second, "mean_reward", 0.60, measured=candidate)
    # Another plan: refused, the alias stays.
    other = register(stage1.STAGE1)
    elsewhere = Measurement("plan-other", "another plan", episodes({"a": 1.0}))
    assert not tracker.promote_if_better(name, other, "mean_reward", 1.0, measured=elsewhere)
    assert tracker.aliases(name)[CHAMPION] == first
    # Stage 2: make run's champion on the profile's plan, over the newer candidate that lost to it.
    source = stage1.select_specialist(tracker, env_id, smoke)
    assert (source.version, source.source, source.plan) == (first, stage1.FROM_STAGE1, plan.text)
    assert source.as_json() == {"model": name, "version": first, "source": "stage1 registry", "plan": plan.text}
    assert [v.version for v in tracker.versions(name)] == [first, second, other]
    assert math.isclose(tracker.get_version(name, second).evaluation()["mean_reward"], 0.60)


def test_run_stage2_trains_only_the_domains_without_a_registered_specialist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `make run` (Craigslist registered on its plan) stage 2 trains Marketplace only, and reuses what it
    trained before (DnD); --force retrains its own, never `make run`'s."""
    from models.settings import DataPaths
    from pipelines import run_stage2 as command

    def source(env_id: str, origin: str) -> stage1.SpecialistSource:
        return stage1.SpecialistSource(env_id, stage1.registered_name(env_id), 3, origin, "a plan")

    found = {
        "craigslist-v0": source("craigslist-v0", stage1.FROM_STAGE1),
        "marketplace-v0": None,
        "dnd-v0": source("dnd-v0", stage1.FROM_STAGE2),
    }
    launched: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(command, "registry_specialists", lambda profile, domains, paths: found)
    monkeypatch.setattr(command, "run_lineage", lambda *args, **kwargs: launched.append((args, kwargs)) or [])
    command._stage1("cpu", tuple(found), DataPaths(tmp_path), False, None)
    (args, kwargs), *_ = launched
    assert args[1] == ("marketplace-v0",) and kwargs == {"stage2_specialists": True, "redo": ("marketplace-v0",)}
    command._stage1("cpu", tuple(found), DataPaths(tmp_path), True, None)
    assert launched[1][0][1] == ("marketplace-v0", "dnd-v0")  # force: not craigslist-v0
    launched.clear()
    assert command._stage1("cpu", ("craigslist-v0",), DataPaths(tmp_path), True, None) == [] and not launched
