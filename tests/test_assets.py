"""Fast tests of the stage-1 assets themselves, invoked directly with light stand-in resources (Dagster's
`build_asset_context` + direct invocation): what each thin asset stores, returns and reports. The real
resources (vLLM, the proxy, MLflow) are exercised by the smoke lineage in tests/test_pipelines.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dagster import build_asset_context

from assets import socialrl
from models.evaluation.policy import EvaluationSummary, PlanIdentity
from models.socialrl import stage1
from models.socialrl.episode_metrics import EpisodeRecord
from models.tracking import ChampionComparison, EvaluatedVersion, Measurement, compare_versions
from resources import MlflowResource, SettingsResource, StoreResource


@dataclass
class StandInRegistry:
    """The registry's promotion rule (models/tracking/champion.py `compare_versions`) over an in-memory dict (what
    Tracker does over MLflow): each version's value and where it was measured."""

    champion: tuple[int, float] | None = None
    recorded: dict[int, float] = field(default_factory=dict)
    measured: dict[int, Measurement | None] = field(default_factory=dict)

    def compare_with_champion(
        self, name, version, metric, value, higher_is_better=True, measured=None
    ) -> ChampionComparison:
        candidate = EvaluatedVersion.of(version, value, measured)
        if self.champion is None:
            return compare_versions(candidate, None, higher_is_better)
        held = EvaluatedVersion.of(self.champion[0], self.champion[1], self.measured.get(self.champion[0]))
        return compare_versions(candidate, held, higher_is_better)

    def promote_if_better(self, name, version, metric, value, higher_is_better=True, measured=None) -> bool:
        wins = self.compare_with_champion(name, version, metric, value, higher_is_better, measured).wins
        self.recorded[version], self.measured[version] = value, measured
        if wins:
            self.champion = (version, value)
        return wins


REGISTRY: dict[str, StandInRegistry] = {}
"""The stand-in registry of the current test (Dagster copies resources on direct invocation)."""


class StandInMlflow(MlflowResource):
    def tracker(self) -> StandInRegistry:  # type: ignore[override]
        return REGISTRY.setdefault("current", StandInRegistry())


@pytest.fixture()
def settings(tmp_path: Path) -> SettingsResource:
    REGISTRY.clear()
    return SettingsResource(profile="smoke", data_dir=str(tmp_path / "data"))


def test_scenarios_and_traces_assets_store_their_rows(settings: SettingsResource) -> None:
    store = StoreResource(settings=settings)
    context = build_asset_context(partition_key="craigslist-v0")
    split = socialrl.scenarios(context, settings=settings, store=store).value
    profile = settings.get_profile()
    assert (len(split.train_ids), len(split.heldout_ids)) == (profile.train_scenarios, profile.heldout_scenarios)
    stored = store.store().query("SELECT split, count(*) AS n FROM scenarios GROUP BY split ORDER BY split")
    assert dict(zip(stored.split, stored.n, strict=True)) == {"heldout": 4, "train": 8}

    output = socialrl.teacher_traces(
        build_asset_context(partition_key="craigslist-v0"), scenarios=split, settings=settings, store=store
    )
    traces = output.value
    assert traces.episodes == profile.teacher_episodes  # the learning seat only: the seat the warm-start plays
    rows = store.store().query("SELECT count(*) AS n FROM traces WHERE run_id = ?", [traces.run_id])
    assert int(rows.n[0]) == traces.episodes
    assert "sample_negotiation" in output.metadata
    check = socialrl.traces_usable(store.store(), "craigslist-v0", traces.run_id)
    assert check.passed and check.metadata["traces"].value == traces.episodes


def test_a_domain_without_a_warm_start_skips_sft(settings: SettingsResource) -> None:
    """Smoke warm-starts Craigslist and Marketplace only: DnD's sft_warmstart trains nothing."""
    store = StoreResource(settings=settings)
    traces = socialrl.TeacherTraceSet("dnd-v0", "none", 0)
    output = socialrl.sft_warmstart(
        build_asset_context(partition_key="dnd-v0"),
        teacher_traces=traces,
        settings=settings,
        store=store,
        mlflow=StandInMlflow(settings=settings),
    )
    assert output.value.adapter_dir is None and "not warm-started" in output.value.skipped


PLAN = PlanIdentity("plan-96", "craigslist-v0 seat buyer: 32 dataset scenarios x 3 = 96 episodes, seed 0")


def _evaluation(
    version: int,
    reward: float,
    plan: PlanIdentity | None = PLAN,
    trained_by: str = stage1.STAGE1,
) -> stage1.SpecialistEvaluation:
    """A specialist's held-out evaluation on `plan`: four episodes of `reward`."""
    summary = EvaluationSummary(12, reward, reward - 0.1, reward + 0.1, "bootstrap", 0.95, 0.5, 1.0, 0.0, 0.0, 6.0)
    specialist = stage1.Specialist(
        "craigslist-v0", "buyer", "/a", "run", "run-v2", None, (), "mlflow", "socialrl-craigslist-specialist", version,
        trained_by=trained_by,
    )  # fmt: skip
    records = tuple(EpisodeRecord((i, f"s{i}", "boulware", "buyer", i), i, "boulware", {"reward": r})
                    for i, r in enumerate([reward] * 4))  # fmt: skip
    policies = {"ppo": stage1.PolicyResult("ppo", "run-v2", "model", summary, {}, records)}
    return stage1.SpecialistEvaluation(
        "craigslist-v0", "buyer", "r", "generated", policies, {}, {}, None, {}, specialist, plan_identity=plan
    )


def test_the_champion_check_and_promotion_apply_one_rule(settings: SettingsResource) -> None:
    mlflow = StandInMlflow(settings=settings)
    registry = mlflow.tracker()
    first = _evaluation(1, 0.40)
    assert socialrl.champion_check(registry, first).passed  # no champion yet
    promoted = socialrl.specialist_champion(
        build_asset_context(partition_key="craigslist-v0"), specialist_eval=first, mlflow=mlflow
    )
    assert promoted.value.champion and mlflow.tracker().champion == (1, 0.40)
    worse = _evaluation(2, 0.30)
    check = socialrl.champion_check(registry, worse)
    assert not check.passed and check.metadata["champion"].value == 0.4
    better = _evaluation(3, 0.55)
    assert socialrl.champion_check(registry, better).passed
    # Same plan, both episode sets kept: the paired difference decides, and the check says so.
    assert check.metadata["basis"].value == "paired" and check.metadata["paired_difference"].value == pytest.approx(
        -0.1
    )


def test_the_champion_rule_refuses_another_plan_and_never_crowns_a_stage2_specialist(settings) -> None:
    """The cpu profile's stage-2 specialists are evaluated on 12 episodes, `make run`'s on 96: a higher mean on the
    smaller plan must not take the alias (a 12-episode Craigslist specialist over `make run`'s), and a stage-2
    specialist never does, even with no champion to beat (it would then refuse every later `make run` candidate)."""
    mlflow = StandInMlflow(settings=settings)
    registry = mlflow.tracker()
    context = build_asset_context(partition_key="craigslist-v0")
    small = PlanIdentity("plan-12", "craigslist-v0 seat buyer: 4 dataset scenarios x 3 = 12 episodes, seed 0")
    stage2_first = _evaluation(1, 0.90, small, stage1.STAGE2)
    check = socialrl.champion_check(registry, stage2_first)
    assert not check.passed and check.metadata["basis"].value == "trained by stage 2"
    assert not socialrl.specialist_champion(context, specialist_eval=stage2_first, mlflow=mlflow).value.champion
    assert registry.champion is None
    assert socialrl.specialist_champion(context, specialist_eval=_evaluation(2, 0.40), mlflow=mlflow).value.champion
    higher_elsewhere = _evaluation(3, 0.80, small)
    check = socialrl.champion_check(registry, higher_elsewhere)
    assert not check.passed and check.metadata["basis"].value == "different plans"
    assert check.metadata["reason"].value.startswith(
        f"different evaluation plans: {small.text} [plan-12] vs {PLAN.text}"
    )
    assert not socialrl.specialist_champion(context, specialist_eval=higher_elsewhere, mlflow=mlflow).value.champion
    assert registry.champion == (2, 0.40)
    # A candidate that recorded no plan is refused too: nothing shows it played the champion's episodes.
    assert socialrl.champion_check(registry, _evaluation(4, 0.80, None)).metadata["basis"].value == "plan unknown"


def test_the_tournament_asset_reports_every_environment(settings: SettingsResource) -> None:
    output = socialrl.code_agent_tournament(
        build_asset_context(), settings=settings, store=StoreResource(settings=settings)
    )
    assert output.value.episodes == 6 * 5 * 5 * 2  # environments x ordered agent pairs x scenarios
    for env_id in ("craigslist-v0", "dnd-v0", "calendar-v0"):
        assert env_id in output.metadata["summary"].value


def test_metadata_links_the_mlflow_run_and_version_and_the_run_links_back(tmp_path: Path, settings) -> None:
    """Dagster shows an asset's MLflow run and registry version as links (MetadataValue.url); the MLflow run's
    description links back to the Dagster run (assets.common.mlflow_links, used by every asset with a run)."""
    from dagster import MetadataValue, Output, asset, materialize

    from assets.common import mlflow_links
    from models.tracking import Tracker

    mlflow = MlflowResource(
        settings=settings,
        tracking_uri=f"sqlite:///{tmp_path}/m.db",
        artifact_root=str(tmp_path / "artifacts"),
        ui_url="http://mlflow.test:5001",
        dagster_ui_url="http://dagster.test:3001/",
    )
    tracker: Tracker = mlflow.tracker()
    with tracker.start_run("ppo-craigslist-v0") as run:
        run.log_metrics(0, loss=1.0)

    @asset
    def probe(context, mlflow: MlflowResource):
        return Output(None, metadata=mlflow_links(context, mlflow, run.run_id, "socialrl-craigslist-specialist", 3))

    result = materialize([probe], resources={"mlflow": mlflow})
    metadata = result.asset_materializations_for_node("probe")[0].metadata
    experiment = tracker.experiment_id
    assert metadata["mlflow_run"] == MetadataValue.url(
        f"http://mlflow.test:5001/#/experiments/{experiment}/runs/{run.run_id}?workflowType=machine_learning"
    )
    assert metadata["model_version"] == MetadataValue.url(
        "http://mlflow.test:5001/#/models/socialrl-craigslist-specialist/versions/3?workflowType=machine_learning"
    )
    tags = tracker.client.get_run(run.run_id).data.tags
    back = f"http://dagster.test:3001/runs/{result.run_id}"
    assert tags["dagster.run_url"] == back
    assert tags["mlflow.note.content"] == f"Launched by Dagster run [{result.run_id[:8]}]({back}) (probe)"
    # A later Dagster run (say, the evaluation) adds its own line; the same run twice adds nothing.
    again = materialize([probe], resources={"mlflow": mlflow})
    tracker.link_dagster_run(run.run_id, again.run_id, f"http://dagster.test:3001/runs/{again.run_id}", "probe")
    note = tracker.client.get_run(run.run_id).data.tags["mlflow.note.content"]
    assert note.count("Dagster run [") == 2
    assert note.endswith(f"probe: Dagster run [{again.run_id[:8]}](http://dagster.test:3001/runs/{again.run_id})")
    assert tracker.client.get_run(run.run_id).data.tags["dagster.run_url"] == back


def test_champion_evaluations_has_an_edge_to_what_it_evaluates() -> None:
    from dagster import AssetKey

    from pipelines.definitions import defs

    parents = defs.resolve_asset_graph().get(AssetKey("champion_evaluations")).parent_keys
    assert {AssetKey("specialist_champion"), AssetKey("unified_evaluation")} <= parents


def test_the_warm_start_check_refuses_a_format_only_imitation() -> None:
    """`warmstart_imitates_teacher` needs the reward too: replies that all end in a command but earn 41% of the
    teacher's reward on the same episodes fail it (a format-only pass is not imitation)."""
    from models.evaluation.stats import Estimate
    from models.socialrl.imitation import ImitationReport

    def report(student_reward: float, teacher_reward: float, command_rate: float = 0.95) -> ImitationReport:
        def metrics(reward: float, commands: float) -> dict[str, Estimate]:
            return {
                "reward": Estimate(reward, reward, reward, 48),
                "command_rate": Estimate(commands, commands, commands, 48),
            }

        return ImitationReport(
            env_id="craigslist-v0",
            seat="buyer",
            n=48,
            student=metrics(student_reward, command_rate),
            teacher=metrics(teacher_reward, 1.0),
            reward_minus_teacher=Estimate(student_reward - teacher_reward, -1.0, 1.0, 48),
        )

    def check(r: ImitationReport) -> bool:
        return r.passed()  # what `warmstart_imitates_teacher` returns as `passed`

    assert check(report(0.40, 0.70))  # 57% of the teacher's reward, 95% commands
    assert not check(report(0.29, 0.70))  # 41%: the format alone does not pass
    assert not check(report(0.60, 0.70, command_rate=0.85))  # the format still counts
    assert not check(report(0.0, 0.0))  # nothing to compare with
    assert report(0.40, 0.70).as_json()["min_reward_share"] == 0.5


def test_loading_the_code_location_prints_no_preview_notice() -> None:
    """The domain-partitioned asset checks printed Dagster's preview notice five times on every load of the code
    location (`make ui`'s console); with every warning shown, loading it now prints none of them."""
    import subprocess
    import sys

    from models.settings import REPO_ROOT

    loaded = subprocess.run(
        [sys.executable, "-W", "always", "-c", "import pipelines.definitions"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert "PreviewWarning" not in loaded.stderr
