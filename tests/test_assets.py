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
from models.socialrl.stage1.evaluation import best_baseline
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
    check = socialrl.traces_are_usable(None, teacher_traces=traces, settings=settings, store=store)
    assert check.passed and check.metadata["traces"].value == traces.episodes
    # The code teacher's replies all carry a command the environment accepts, and every trace is kept.
    assert check.metadata["refused_replies"].value == 0 and check.metadata["replies"].value > traces.episodes
    assert check.metadata["kept_by_sft_filter"].value == traces.episodes


class _ScriptedTeacher:
    """A teacher that answers every turn with one text (RAW_TEXT, parsed by the environment like a model's)."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def reset(self, agent_id, env_id, spec, episode_id) -> None:
        self.agent_id = agent_id

    async def observe(self, event) -> None:
        pass

    async def act(self, request):
        from environments.core.events import RAW_TEXT, Action

        return Action(self.agent_id, RAW_TEXT, self.text)

    def describe(self) -> str:
        return f"scripted {self.text!r}"


def test_the_traces_check_refuses_traces_a_warm_start_cannot_learn_from() -> None:
    """A reply in every trace is not enough: teachers played for real against the code counterparts, one whose
    every command the environment refuses and one that only chats (no deal, reward 0), fail `traces_are_usable`,
    as do the code teacher's own traces marked as leaking (the warm-start's filter drops them all) or stripped
    of their replies; the code teacher's traces pass."""
    import dataclasses

    from agents.traces import collect_traces
    from models.evaluation.scenarios import training_scenarios
    from models.profiles import get_profile

    profile = get_profile("cpu")
    scenarios = training_scenarios("craigslist-v0", 4, 0, "generated")

    def traced(text: str) -> list:
        return collect_traces(
            "craigslist-v0", scenarios, lambda seed: _ScriptedTeacher(text), ("boulware",), traced_seats=("buyer",)
        )

    good = stage1.teacher_traces("craigslist-v0", dataclasses.replace(profile, teacher_episodes=4))
    assert socialrl.traces_usable(good, profile).passed
    refused = socialrl.traces_usable(traced("I can pay this much.\nOFFER $-5"), profile)
    assert not refused.passed and refused.metadata["refused_share"].value > 0.5
    assert any("refused" in p for p in refused.metadata["problems"].value)
    chatty = stage1.trace_usability(traced("Hello! Tell me more about the item."), profile.trace_min_reward)
    assert chatty.refused == 0 and chatty.kept == 4  # accepted as plain talk, and kept by the filter ...
    assert not chatty.passed and chatty.kept_mean_reward == 0  # ... but no deal: nothing to imitate
    leaking = [dataclasses.replace(t, leaked=("target",)) for t in good]
    verdict = stage1.trace_usability(leaking, profile.trace_min_reward)
    assert not verdict.passed and verdict.kept == 0 and verdict.problems()[0].startswith("the warm-start's filter")
    silent = [dataclasses.replace(t, messages=[m for m in t.messages if m["role"] != "assistant"]) for t in good]
    assert stage1.trace_usability(silent, profile.trace_min_reward).problems()[0] == "4 of 4 traces have no reply"


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


def _policy(label: str, rewards: list[float]) -> stage1.PolicyResult:
    """A policy's held-out episodes on the plan (the same four pair keys for every policy, one scenario each)."""
    mean = sum(rewards) / len(rewards)
    summary = EvaluationSummary(
        n=len(rewards),
        mean_reward=mean,
        ci_low=mean - 0.1,
        ci_high=mean + 0.1,
        ci_method="bootstrap",
        confidence=0.95,
        agreement_rate=0.5,
        pareto_optimal_rate=1.0,
        invalid_action_rate=0.0,
        leakage_rate=0.0,
        mean_rounds=6.0,
    )
    records = tuple(EpisodeRecord((i, f"s{i}", "boulware", "buyer", i), i, "boulware", {"reward": r})
                    for i, r in enumerate(rewards))  # fmt: skip
    return stage1.PolicyResult(label, "run-v2" if label == "ppo" else label, "model", summary, {}, records)


def _evaluation(
    version: int,
    reward: float,
    plan: PlanIdentity | None = PLAN,
    trained_by: str = stage1.STAGE1,
    *,
    sft: list[float] | None = None,
    rules: dict[str, list[float]] | None = None,
    ppo: list[float] | None = None,
) -> stage1.SpecialistEvaluation:
    """A specialist's held-out evaluation on `plan`: four episodes of `reward` (or the episodes `ppo`), beside the
    warm-start's (`sft`, 0.1 each by default; None of them with `sft=[]`) and the trivial rules' on the same
    episodes (by default every rule 0.1 below the specialist on each), paired by the evaluation's own `compare`."""
    specialist = stage1.Specialist(
        env_id="craigslist-v0", seat="buyer", adapter_dir="/a", run_name="run", served_name="run-v2", init_adapter_dir=None, curve=(), mlflow_run_id="mlflow", model_name="socialrl-craigslist-specialist", model_version=version,
        trained_by=trained_by,
    )  # fmt: skip
    mine = ppo if ppo is not None else [reward] * 4
    policies = {"ppo": _policy("ppo", mine)}
    if sft != []:
        policies["sft"] = _policy("sft", sft if sft is not None else [0.1] * 4)
    below = [r - 0.1 for r in mine]
    for name, rewards in (rules or dict.fromkeys(("accept_first", "hold_target", "split_difference"), below)).items():
        policies[name] = _policy(name, rewards)
    if "sft" not in policies:  # a domain without a warm-start: its specialist started from the base model
        policies["base"] = _policy("base", [0.0] * 4)
    paired, behaviour = stage1.compare(policies)
    return stage1.SpecialistEvaluation(
        env_id="craigslist-v0", seat="buyer", run_id="r", scenario_source="generated", policies=policies, paired=paired, behaviour_paired=behaviour,
        best_baseline=best_baseline(policies), imitation={}, specialist=specialist, plan_identity=plan,
    )  # fmt: skip


def test_the_champion_check_and_promotion_apply_one_rule(settings: SettingsResource) -> None:
    mlflow = StandInMlflow(settings=settings)
    registry = mlflow.tracker()
    first = _evaluation(1, 0.40)
    assert socialrl.champion_check(registry, first).passed  # no champion yet
    promoted = socialrl.specialist_champion(
        build_asset_context(partition_key="craigslist-v0"), specialist_eval=first, settings=settings, mlflow=mlflow
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
    cpu = SettingsResource(profile="cpu", data_dir=settings.data_dir)  # the promotion bars required
    small = PlanIdentity("plan-12", "craigslist-v0 seat buyer: 4 dataset scenarios x 3 = 12 episodes, seed 0")
    stage2_first = _evaluation(1, 0.90, small, stage1.STAGE2)
    check = socialrl.champion_check(registry, stage2_first)
    assert not check.passed and check.metadata["basis"].value == "trained by stage 2"
    assert not socialrl.specialist_champion(
        context, specialist_eval=stage2_first, settings=cpu, mlflow=mlflow
    ).value.champion
    assert registry.champion is None
    assert socialrl.specialist_champion(
        context, specialist_eval=_evaluation(2, 0.40), settings=cpu, mlflow=mlflow
    ).value.champion
    higher_elsewhere = _evaluation(3, 0.80, small)
    check = socialrl.champion_check(registry, higher_elsewhere)
    assert not check.passed and check.metadata["basis"].value == "different plans"
    assert check.metadata["reason"].value.startswith(
        f"different evaluation plans: {small.text} [plan-12] vs {PLAN.text}"
    )
    assert not socialrl.specialist_champion(
        context, specialist_eval=higher_elsewhere, settings=cpu, mlflow=mlflow
    ).value.champion
    assert registry.champion == (2, 0.40)
    # A candidate that recorded no plan is refused too: nothing shows it played the champion's episodes.
    assert socialrl.champion_check(registry, _evaluation(4, 0.80, None)).metadata["basis"].value == "plan unknown"


def test_on_a_fresh_registry_a_candidate_below_its_warm_start_or_the_best_rule_is_not_promoted(
    settings: SettingsResource,
) -> None:
    """With no champion to beat, a candidate over its warm-start (+0.105) but 0.12 below `hold_target` on the same
    episodes is not promoted: the bars, paired on its own plan, refuse it, the check fails and the alias stays
    where it was. Below its warm-start it is refused too; over both it is promoted."""
    mlflow = StandInMlflow(settings=settings)
    registry = mlflow.tracker()
    context = build_asset_context(partition_key="craigslist-v0")
    cpu = SettingsResource(profile="cpu", data_dir=settings.data_dir)
    assert cpu.get_profile().champion_bars and not settings.get_profile().champion_bars
    ppo = [0.45, 0.40, 0.35, 0.42]
    rules = {
        "accept_first": [0.20, 0.25, 0.15, 0.20],
        "hold_target": [0.55, 0.50, 0.50, 0.55],  # 0.12 above the specialist on every episode
        "split_difference": [0.30, 0.30, 0.35, 0.30],
    }
    losing = _evaluation(1, 0.0, ppo=ppo, sft=[0.30, 0.30, 0.25, 0.35], rules=rules)
    assert losing.paired["ppo_minus_sft"].mean > 0 and losing.best_baseline == "hold_target"
    check = socialrl.beats_champion(None, specialist_eval=losing, settings=cpu, mlflow=mlflow)
    assert not check.passed and check.metadata["basis"].value == "below a bar"
    assert "best rule hold_target: ppo - hold_target = -0.120" in check.metadata["reason"].value
    assert "NOT beaten: best rule hold_target" in check.metadata["bars"].value
    assert "beaten: warm-start sft: ppo - sft = +0.105" in check.metadata["bars"].value
    assert not socialrl.specialist_champion(context, specialist_eval=losing, settings=cpu, mlflow=mlflow).value.champion
    assert registry.champion is None
    # Above every rule but below the warm-start it started from: refused too.
    below_sft = _evaluation(2, 0.0, ppo=ppo, sft=[0.50, 0.45, 0.40, 0.45])
    check = socialrl.beats_champion(None, specialist_eval=below_sft, settings=cpu, mlflow=mlflow)
    assert not check.passed and "warm-start sft: ppo - sft = -0.045" in check.metadata["reason"].value
    # A domain without a warm-start measures the candidate against the base model it started from.
    no_warm = _evaluation(3, 0.0, ppo=[0.0] * 4, sft=[], rules={"hold_target": [0.0] * 4})
    [start, rule] = stage1.promotion_bars(no_warm)
    assert (start.policy, start.beaten, rule.policy, rule.beaten) == ("base", False, "hold_target", False)
    assert not socialrl.champion_check(registry, no_warm).passed  # a tie is not a win
    # The smoke profile (random weights) shows the bars without requiring them.
    check = socialrl.beats_champion(None, specialist_eval=losing, settings=settings, mlflow=mlflow)
    assert check.passed and check.metadata["basis"].value == "no champion"
    assert "not required in this profile" in check.metadata["bars"].value
    # Over both bars, the first candidate is promoted.
    winning = _evaluation(4, 0.0, ppo=[0.60, 0.55, 0.60, 0.65], sft=[0.30] * 4, rules=rules)
    assert socialrl.specialist_champion(context, specialist_eval=winning, settings=cpu, mlflow=mlflow).value.champion
    assert registry.champion == (4, pytest.approx(0.60))


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
    teacher's reward on the same episodes fail it (a format-only pass is not imitation). The report is computed
    from per-episode records as `imitation_report` computes it, and the asset check itself gives the verdict."""
    from models.socialrl.episode_metrics import paired_metric, summary
    from models.socialrl.imitation import MIN_REWARD_SHARE, ImitationReport

    def records(rewards: list[float], commands: float) -> tuple[EpisodeRecord, ...]:
        return tuple(
            EpisodeRecord((i, f"s{i}", "boulware", "buyer", i), i, "boulware", {"reward": r, "command_rate": commands})
            for i, r in enumerate(rewards)
        )

    teacher_rewards = [0.80, 0.60, 0.70, 0.70]  # mean 0.70

    def check(share: float, command_rate: float = 0.95) -> tuple[bool, ImitationReport]:
        student, teacher = records([r * share for r in teacher_rewards], command_rate), records(teacher_rewards, 1.0)
        report = ImitationReport(
            env_id="craigslist-v0",
            seat="buyer",
            n=len(student),
            student=summary(student),
            teacher=summary(teacher),
            reward_minus_teacher=paired_metric(student, teacher, "reward"),
        )
        imitation = stage1.WarmStartImitation(
            env_id="craigslist-v0",
            seat="buyer",
            run_id="r",
            plan="plan",
            sft=_policy("sft", [0.0] * 4),
            teacher=_policy("teacher", [0.0] * 4),
            baselines={},
            report=report,
        )
        result = socialrl.warmstart_imitates_teacher(None, warmstart_imitation=imitation)
        assert result.metadata["reward_over_teacher"].value == pytest.approx(share, abs=1e-3)
        return result.passed, report

    assert check(0.57)[0]  # 57% of the teacher's reward, 95% commands
    passed, report = check(0.41)  # 41%: the format alone does not pass
    assert not passed and report.command_rate >= 0.9 and report.reward_minus_teacher.ci_high < 0
    assert not check(MIN_REWARD_SHARE - 0.01)[0] and check(MIN_REWARD_SHARE + 0.01)[0]
    assert not check(0.86, command_rate=0.85)[0]  # the format still counts
    assert report.as_json()["min_reward_share"] == MIN_REWARD_SHARE == 0.5 and not report.as_json()["passed"]
    assert "FAILED" in report.markdown() and "reward share" in report.markdown()
    # A teacher that scores 0 leaves nothing to compare with: not passed.
    zero = ImitationReport(
        env_id="craigslist-v0",
        seat="buyer",
        n=4,
        student=summary(records([0.0] * 4, 1.0)),
        teacher=summary(records([0.0] * 4, 1.0)),
        reward_minus_teacher=paired_metric(records([0.0] * 4, 1.0), records([0.0] * 4, 1.0), "reward"),
    )
    assert not zero.passed()


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
