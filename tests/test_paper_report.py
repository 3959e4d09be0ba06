"""The papers' report (models/report/, assets/report.py, `make report`): the verdict rule on every branch, the
report built from stand-in materialisations (a stage-1 result whose leak rate goes against the paper, an
interval on too few clusters, every other stage absent), the asset materialised on Dagster instances, empty and
with a stand-in stage read through its IO manager beside the committed result files, and `make report` without
an instance. The report on real result files: tests/test_paper_report_files.py. No engine, no training."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agents.env_version import env_version
from models.evaluation.policy import EvaluationSummary
from models.evaluation.stats import Estimate
from models.profiles import PROFILES
from models.report import (
    HIGHER,
    LOWER,
    MIN_CLUSTERS,
    NOT_MEASURED,
    NOT_SHOWN,
    OPPOSITE,
    REPRODUCED,
    STALE,
    VERDICTS,
    Interval,
    Snapshot,
    StageRead,
    build_report,
    decide,
    document,
    stale,
    to_markdown,
    write_report,
)
from models.socialrl import paper_claims as socialrl_claims
from models.socialrl import stage1
from models.yoao import paper_claims as yoao_claims
from resources import MlflowResource, SettingsResource

PAPERS = (socialrl_claims.SPEC, yoao_claims.SPEC)
ALL_CLAIMS = {(c.paper, c.claim_id) for spec in PAPERS for c in spec.claims}
CURRENT = env_version()


# ------------------------------------------------------------------------------------------- the verdict rule
def _interval(mean: float, low: float, high: float, clusters: int | None = 12) -> Interval:
    return Interval(mean, low, high, 48, clusters)


def test_the_verdict_rule_on_every_branch() -> None:
    assert decide(HIGHER, 0.0, None, missing="`x` is not materialised").kind == NOT_MEASURED
    # no interval: undefined, or a rate reported without one
    rate = decide(HIGHER, 0.0, None, no_interval="a rate without a CI")
    assert rate.kind == NOT_SHOWN and rate.reason == "a rate without a CI"
    assert decide(HIGHER, 0.0, _interval(math.nan, math.nan, math.nan)).kind == NOT_SHOWN
    no_ci = decide(HIGHER, 0.0, _interval(0.2, math.nan, math.nan))
    assert no_ci.kind == NOT_SHOWN and "no interval" in no_ci.reason
    # the interval includes the null
    assert decide(HIGHER, 0.0, _interval(0.04, -0.02, 0.11)).kind == NOT_SHOWN
    # excludes it on the paper's side, on enough clusters: reproduced (both directions)
    assert decide(HIGHER, 0.0, _interval(0.2, 0.1, 0.3)).kind == REPRODUCED
    assert decide(LOWER, 0.0, _interval(-0.2, -0.3, -0.1)).kind == REPRODUCED
    # excludes it on the other side: opposite
    opposite = decide(LOWER, 0.0, _interval(0.13, 0.05, 0.21))
    assert opposite.kind == OPPOSITE and "above" in opposite.reason
    # a non-zero null (e.g. a share) is the reference, not 0
    assert decide(HIGHER, 0.5, _interval(0.45, 0.4, 0.49)).kind == OPPOSITE
    # fewer than MIN_CLUSTERS clusters: not shown whatever the interval says, and the reason says both
    few = decide(HIGHER, 0.0, _interval(0.2, 0.1, 0.3, clusters=MIN_CLUSTERS - 1))
    assert few.kind == NOT_SHOWN and f"{MIN_CLUSTERS - 1} clusters" in few.reason and "paper's side" in few.reason
    assert decide(LOWER, 0.0, _interval(0.2, 0.1, 0.3, clusters=4)).kind == NOT_SHOWN  # not "opposite" either
    assert decide(HIGHER, 0.0, _interval(0.2, 0.1, 0.3, clusters=MIN_CLUSTERS)).kind == REPRODUCED
    unknown = decide(HIGHER, 0.0, _interval(0.2, 0.1, 0.3, clusters=None))
    assert unknown.kind == NOT_SHOWN and "unrecorded" in unknown.reason


def test_a_verdict_of_another_environment_version_is_stale_and_keeps_what_the_rule_said() -> None:
    reproduced = decide(HIGHER, 0.0, _interval(0.2, 0.1, 0.3))
    assert stale(reproduced, "env-now", "env-now") == reproduced
    older = stale(reproduced, "env-older", "env-now")
    assert older.kind == STALE and "env-older, not the current env-now" in older.reason
    assert older.reason.endswith(f"by the rule alone: {REPRODUCED} ({reproduced.reason})")
    unrecorded = stale(reproduced, None, "env-now")
    assert unrecorded.kind == STALE and "records no environment version" in unrecorded.reason
    missing = decide(HIGHER, 0.0, None, missing="absent")
    assert stale(missing, "env-older", "env-now") == missing  # nothing measured: nothing stale


def test_an_estimate_keeps_its_clusters_and_says_when_they_are_too_few() -> None:
    interval = Interval.of(Estimate(0.1, 0.02, 0.2, 24, 6))
    assert interval.clusters == 6 and interval.n == 24
    assert interval.cluster_text() == f"6 clusters (< {MIN_CLUSTERS} clusters)"
    assert Interval.of(Estimate(0.1, 0.02, 0.2, 24, 12)).cluster_text() == "12 clusters"
    assert Interval.of({"mean": 0.1, "ci_low": 0.0, "ci_high": 0.2, "n": 4}).clusters is None  # a dict has none


# ------------------------------------------------------------------------------ stand-in materialisations
def _estimate(mean: float, low: float, high: float, n: int = 48, clusters: int = 16) -> Estimate:
    return Estimate(mean, low, high, n, clusters)


def _policy(label: str, reward: float, leak: float) -> stage1.PolicyResult:
    summary = EvaluationSummary(
        n=48,
        mean_reward=reward,
        ci_low=reward - 0.05,
        ci_high=reward + 0.05,
        ci_method="bootstrap",
        confidence=0.95,
        agreement_rate=0.4,
        pareto_optimal_rate=1.0,
        invalid_action_rate=0.1,
        leakage_rate=leak,
        mean_rounds=6.0,
    )
    metrics = {"reward": _estimate(reward, reward - 0.05, reward + 0.05), "leak": _estimate(leak, 0.0, leak + 0.05)}
    return stage1.PolicyResult(
        label, f"{label}-model", "model" if label != "accept_first" else "code", summary, metrics
    )


def stand_in_evaluation() -> stage1.SpecialistEvaluation:
    """Craigslist's stage-1 result as docs/stage1.md reports it: PPO - SFT not shown, the leak rate higher under
    PPO (against the paper), the anchoring difference on only 4 scenario clusters."""
    specialist = stage1.Specialist(
        env_id="craigslist-v0",
        seat="buyer",
        adapter_dir="/a",
        run_name="run",
        served_name="run-v2",
        init_adapter_dir="/sft",
        curve=(),
        mlflow_run_id="mlflow-run-1",
        model_name="socialrl-craigslist-specialist",
        model_version=2,
    )
    policies = {
        "base": _policy("base", 0.012, 0.02),
        "sft": _policy("sft", 0.102, 0.15),
        "ppo": _policy("ppo", 0.146, 0.15),
        "accept_first": _policy("accept_first", 0.232, 0.0),
    }
    paired = {
        "ppo_minus_sft": _estimate(0.044, -0.025, 0.116),
        "sft_minus_base": _estimate(0.09, 0.03, 0.15),
        "ppo_minus_base": _estimate(0.134, 0.06, 0.21),
        "ppo_minus_best_baseline": _estimate(-0.086, -0.15, -0.02),
    }
    behaviour = {
        "leak": {"ppo_minus_base": _estimate(0.13, 0.05, 0.21), "ppo_minus_sft": _estimate(0.0, -0.06, 0.06)},
        "opening_below_target": {"ppo_minus_base": _estimate(0.19, 0.08, 0.3, n=12, clusters=4)},
        "invalid_per_turn": {"ppo_minus_sft": _estimate(0.14, 0.08, 0.2)},
    }
    return stage1.SpecialistEvaluation(
        env_id="craigslist-v0", seat="buyer", run_id="r", scenario_source="cocoa", policies=policies, paired=paired, behaviour_paired=behaviour, best_baseline="accept_first", imitation={}, specialist=specialist,
        plan="32 held-out cocoa scenarios x 3 counterparts",
    )  # fmt: skip


def _read(value: object) -> StageRead:
    return StageRead(
        asset="specialist_eval",
        partition="craigslist-v0",
        run_id="abcdef1234",
        timestamp=1.7e9,
        profile="cpu",
        metadata={},
        value=value,
    )


def _row(report, claim_id: str, scope: str = "craigslist-v0"):
    return next(r for r in report.rows if r.claim.claim_id == claim_id and r.scope == scope)


def test_the_report_from_stand_in_materialisations(tmp_path: Path) -> None:
    snapshot = Snapshot((_read(stand_in_evaluation()),))
    report = build_report(PAPERS, snapshot, PROFILES, current_env_version=CURRENT, experiment_id="7")
    # every claim of both papers has a row, and every row a verdict of the rule
    assert {(r.claim.paper, r.claim.claim_id) for r in report.rows} == ALL_CLAIMS
    assert all(r.verdict.kind in VERDICTS and r.verdict.reason for r in report.rows)
    # the stage-1 claims, each with its interval, baseline, scale and source
    warm = _row(report, "warm_start")
    assert warm.verdict.kind == REPRODUCED and warm.value == "0.090 [0.030, 0.150]" and warm.n == 48
    assert warm.baseline.startswith("accept_first: mean reward 0.232") and "PPO - accept_first -0.086" in warm.baseline
    assert warm.scale == "smollm2-135m-instruct, n = 48, profile cpu"
    assert warm.source.startswith("specialist_eval[craigslist-v0]: paired.sft_minus_base (run abcdef12")
    assert warm.dagster_url.endswith("/runs/abcdef1234") and "/experiments/7/runs/mlflow-run-1" in warm.mlflow_url
    assert _row(report, "ppo_over_warmstart").verdict.kind == NOT_SHOWN  # the interval includes 0
    # the metric that goes against the paper is shown, with its verdict
    leak = _row(report, "leakage")
    assert leak.verdict.kind == OPPOSITE and leak.value.startswith("0.130 [0.050, 0.210]")
    # an interval on fewer than 8 clusters: flagged next to it, and not shown
    anchoring = _row(report, "anchoring")
    assert anchoring.clusters == f"4 clusters (< {MIN_CLUSTERS} clusters)" and anchoring.verdict.kind == NOT_SHOWN
    # a missing stage reads "not measured", with the reason
    for claim_id in ("transfer_asymmetry", "tom_prompt", "concession", "one_seed", "sugarscape_trades"):
        row = next(r for r in report.rows if r.claim.claim_id == claim_id)
        assert row.verdict.kind == NOT_MEASURED and "not materialised" in row.verdict.reason, claim_id

    markdown = to_markdown(document(report))
    # every number of the stage is listed, those against the paper too, with its clusters
    assert "| behaviour_paired.leak.ppo_minus_base | 0.1300 [0.0500, 0.2100] | 48 | 16 clusters |" in markdown
    assert (
        "| behaviour_paired.invalid_per_turn.ppo_minus_sft | 0.1400 [0.0800, 0.2000] | 48 | 16 clusters |" in markdown
    )
    assert f"| behaviour_paired.opening_below_target.ppo_minus_base | 0.1900 [0.0800, 0.3000] | 12 | 4 clusters (< {MIN_CLUSTERS} clusters) |" in markdown  # fmt: skip
    assert "| policies.ppo.summary.leakage_rate | 0.15 |" in markdown
    assert "not measured: `transfer_matrix` is not materialised on this instance" in markdown
    assert "PPO learning curve: figure not available" in markdown  # a stand-in without a learning curve

    files = write_report(report, tmp_path)
    assert "![held-out rewards](paper_report_figures/" in files.markdown.read_text()
    assert len(list(files.figures.glob("*.png"))) == 1  # the held-out rewards plot, drawn from the stored result
    page = files.html.read_text()
    assert page.count("data:image/png;base64,") == 1 and "opposite" in page


def test_a_stored_output_of_another_shape_is_named_not_fatal() -> None:
    broken = StageRead(
        asset="tom_analysis",
        partition="craigslist-v0",
        run_id="r1",
        timestamp=1.7e9,
        profile="cpu",
        metadata={},
        value=object(),
    )
    unreadable = StageRead(
        asset="transfer_matrix",
        partition=None,
        run_id="r2",
        timestamp=1.7e9,
        profile="cpu",
        metadata={},
        value=None,
        error="AttributeError: gone",
    )
    report = build_report(PAPERS, Snapshot((broken, unreadable)), PROFILES, current_env_version=CURRENT)
    prompt = next(r for r in report.rows if r.claim.claim_id == "tom_prompt")
    assert prompt.verdict.kind == NOT_MEASURED and "could not be read" in prompt.verdict.reason
    asymmetry = next(r for r in report.rows if r.claim.claim_id == "transfer_asymmetry")
    assert asymmetry.verdict.kind == NOT_MEASURED and "AttributeError: gone" in asymmetry.verdict.reason


# ----------------------------------------------------------------------------------------- the asset, Dagster
@dataclass
class StandInRun:
    run_id: str = "mlflow-report-run"
    files: dict[str, str] = field(default_factory=dict)

    def log_file(self, name: str, content: str, artifact_path: str = "") -> str:
        self.files[f"{artifact_path}/{name}"] = content
        return name


LOGGED: dict[str, StandInRun] = {}


class StandInTracker:
    experiment_id = "3"

    @contextlib.contextmanager
    def start_run(self, name: str, params=None, tags=None):
        LOGGED[name] = StandInRun()
        yield LOGGED[name]

    def link_dagster_run(self, *args, **kwargs) -> None:
        pass


class StandInMlflow(MlflowResource):
    def tracker(self) -> StandInTracker:  # type: ignore[override]
        return StandInTracker()


def _resources(tmp_path: Path) -> dict[str, object]:
    settings = SettingsResource(profile="smoke", data_dir=str(tmp_path / "data"))
    return {"settings": settings, "mlflow": StandInMlflow(settings=settings)}


def test_the_asset_on_an_instance_where_nothing_is_materialised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import DagsterInstance, materialize

    from assets import report as report_asset
    from assets.report import paper_report

    monkeypatch.setattr(report_asset, "RESULTS", tmp_path / "no-results")  # and no result file either
    LOGGED.clear()
    with DagsterInstance.ephemeral(tempdir=tempfile.mkdtemp(dir=tmp_path)) as instance:
        result = materialize([paper_report], instance=instance, resources=_resources(tmp_path))
    assert result.success
    report = result.output_for_node("paper_report")
    assert {(r.claim.paper, r.claim.claim_id) for r in report.rows} == ALL_CLAIMS
    assert {r.verdict.kind for r in report.rows} == {NOT_MEASURED}
    metadata = result.asset_materializations_for_node("paper_report")[0].metadata
    assert metadata["not_measured"].value == len(report.rows) and metadata["reproduced"].value == 0
    assert metadata["current_env_version"].value == CURRENT and metadata["result_files_read"].value == []
    html = Path(metadata["html"].value)
    assert html == tmp_path / "data" / "reports" / "paper_report.html" and html.is_file()
    assert set(LOGGED["paper-report"].files) == {"report/paper_report.md", "report/paper_report.html"}


def test_the_asset_reads_a_stage_through_its_io_manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in `specialist_eval` materialised on the instance is read back by the report (latest
    materialisation, stored output through the asset's IO manager), without being an input of it; beside it the
    asset reads the committed YOAO result files: the materialisation gives the stage-1 rows, and the YOAO rows
    come from its file."""
    from dagster import DagsterInstance, asset, materialize

    from assets import report as report_asset
    from assets.report import paper_report
    from assets.socialrl import DOMAINS

    # The committed YOAO result files beside the instance, and no make-run file: the stage-1 rows can only come
    # from the materialisation.
    results = tmp_path / "results"
    results.mkdir()
    for name in ("yoao_cpu.json", "yoao_cpu_details.json"):  # the vote-following run's: it records no env version
        shutil.copy(report_asset.RESULTS / name.replace("yoao_cpu", "yoao_cpu_vote_following"), results / name)
    monkeypatch.setattr(report_asset, "RESULTS", results)

    @asset(name="specialist_eval", partitions_def=DOMAINS)
    def stand_in() -> stage1.SpecialistEvaluation:
        return stand_in_evaluation()

    with DagsterInstance.ephemeral(tempdir=tempfile.mkdtemp(dir=tmp_path)) as instance:
        first = materialize(
            [stand_in], instance=instance, partition_key="craigslist-v0", tags={"socialrl/profile": "cpu"}
        )
        result = materialize(
            [stand_in, paper_report], instance=instance, resources=_resources(tmp_path), selection=[paper_report]
        )
    assert first.success and result.success
    report = result.output_for_node("paper_report")
    warm = _row(report, "warm_start")
    assert warm.verdict.kind == REPRODUCED and warm.dagster_url.endswith(f"/runs/{first.run_id}")
    assert warm.scale.endswith("profile cpu") and _row(report, "leakage").verdict.kind == OPPOSITE
    assert warm.env_version == "not recorded"  # the materialisation records none, and is not judged stale
    one_seed = next(r for r in report.rows if r.claim.claim_id == "one_seed")
    assert one_seed.source.startswith("yoao_cpu.json: ") and one_seed.verdict.kind == STALE


def test_the_nightly_schedule_regenerates_the_report_after_the_re_evaluation() -> None:
    from dagster import AssetKey

    from pipelines.definitions import defs

    schedule = defs.resolve_schedule_def("nightly_champion_evaluation")
    nightly = {node.name for node in defs.resolve_job_def(schedule.job_name).graph.nodes}
    assert nightly == {"champion_evaluations", "paper_report"}
    # its one edge orders it after the re-evaluation; no stage is an input it waits for
    assert defs.resolve_asset_graph().get(AssetKey("paper_report")).parent_keys == {AssetKey("champion_evaluations")}
    report_job = defs.resolve_job_def("report_job")
    assert [n.name for n in report_job.graph.nodes] == ["paper_report"]
    assert not {"engine", "yoao_engine", "store"} & report_job.required_resource_keys  # `make report`: nothing heavy


@pytest.mark.parametrize("spec", PAPERS, ids=lambda s: s.name)
def test_every_claim_and_stage_names_an_asset_of_the_code_location(spec) -> None:
    from pipelines.definitions import defs

    defined = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert set(spec.assets()) <= defined, set(spec.assets()) - defined
    assert all(claim.key and claim.paper == spec.name for claim in spec.claims)
    documented = (Path(__file__).resolve().parent.parent / "docs" / "report.md").read_text()
    assert [c.claim_id for c in spec.claims if f"`{c.claim_id}`" not in documented] == []


def test_make_report_without_an_instance_reads_the_result_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make report` (pipelines/run_report.py) on a data directory with no Dagster instance: the report is built
    from the committed result files alone (no instance is created), the console gets every row's verdict and the
    report's paths, and `--publish` writes the claim rows as JSON."""
    from pipelines import run_report

    monkeypatch.setattr(run_report, "configure_logging", lambda log_file: None)  # keep the test's root logger
    published = tmp_path / "published"
    data = tmp_path / "data"
    assert run_report.main(["--profile", "smoke", "--data-dir", str(data), "--publish", str(published)]) == 0
    out = capsys.readouterr().out
    assert "[report] from the result files in " in out and not (data / "dagster_home").exists()
    leakage = next(
        r for r in json.loads((published / "paper_report.json").read_text())["claims"] if r["claim"] == "leakage"
    )
    # The committed make-run file's version decides: a verdict on the current environment, stale on another.
    assert (leakage["verdict"] == "stale") == (leakage["env_version"] != env_version())
    assert (
        f"| SocialRL | leakage | craigslist-v0 | {leakage['verdict']} |" in out
        and "| YOAO | broadcast_vs_pairwise | - | not measured |" in out
    )
    html = data / "reports" / "paper_report.html"
    assert f"Report: {html}" in out and html.is_file()
    rows = json.loads((published / "paper_report.json").read_text())["claims"]
    assert (published / "paper_report.md").is_file() and {(r["paper"], r["claim"]) for r in rows} == ALL_CLAIMS


def test_make_report_launches_the_asset_where_the_instance_holds_a_stage(tmp_path: Path) -> None:
    """The instance path: `instance_holds_runs` is true once a stage the report reads is materialised on the data
    directory's instance, false on a directory without one (which it does not create)."""
    from dagster import DagsterInstance, asset, materialize

    from assets.socialrl import DOMAINS
    from models.settings import DataPaths
    from pipelines.run_report import instance_holds_runs

    paths = DataPaths(tmp_path / "data")
    assets = [a for spec in PAPERS for a in spec.assets()]
    assert not instance_holds_runs(paths, assets) and not (paths.root / "dagster_home").exists()

    @asset(name="specialist_eval", partitions_def=DOMAINS)
    def stand_in() -> stage1.SpecialistEvaluation:
        return stand_in_evaluation()

    with DagsterInstance.from_config(str(paths.dagster_home)) as instance:
        assert not instance_holds_runs(paths, assets)  # an instance, nothing materialised
        assert materialize([stand_in], instance=instance, partition_key="craigslist-v0").success
    assert instance_holds_runs(paths, assets) and not instance_holds_runs(paths, ["transfer_matrix"])
