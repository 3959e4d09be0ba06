"""The papers' report on real result files (models/report/files.py, models/socialrl/paper_files.py,
models/yoao/paper_files.py): the committed files of benchmarks/results/ (real outputs of `make run`, run_stage2,
run_tom, `make yoao` and the audits), copies of them with one thing changed (a sign, the environment version),
and a make-run file written by the stage-1 report's own code. A wrong result changes a verdict here: a flipped
sign turns reproduced into opposite, an older environment version turns a verdict stale. No engine, no
training, no Dagster."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from models.profiles import PROFILES
from models.provenance import provenance
from models.report import (
    NOT_MEASURED,
    NOT_RECORDED,
    NOT_SHOWN,
    OPPOSITE,
    PROVENANCE_FIELDS,
    REPRODUCED,
    ROW_KEYS,
    STALE,
    VERDICTS,
    Measurement,
    PaperReport,
    Provenance,
    ResultSources,
    Snapshot,
    StageRead,
    build_report,
    choose,
    publish_report,
    result_sources,
)
from models.socialrl import paper_claims as socialrl_claims
from models.socialrl.paper_files import MAKE_RUN_FILES, plan_clusters
from models.yoao import paper_claims as yoao_claims

PAPERS = (socialrl_claims.SPEC, yoao_claims.SPEC)
RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
CURRENT = env_version()
BEFORE_AUDIT = "make_run_cpu_before_audit.json"
MAKE_RUN_NAME = next(name for name in (*MAKE_RUN_FILES, BEFORE_AUDIT) if (RESULTS / name).exists())
"""The make-run file the report reads: the current run's where one is committed."""


def report_of(folder: Path, snapshot: Snapshot | None = None) -> PaperReport:
    return build_report(PAPERS, snapshot, PROFILES, current_env_version=CURRENT, files=result_sources(PAPERS, folder))


def rows_of(report: PaperReport, claim_id: str) -> list[Any]:
    return [r for r in report.rows if r.claim.claim_id == claim_id]


def one(report: PaperReport, claim_id: str) -> Any:
    (row,) = rows_of(report, claim_id)
    return row


def on_base(report: PaperReport) -> Any:
    """The ToM prompt's row on the base model (the claim has one on the warm-start too)."""
    (row,) = [r for r in rows_of(report, "tom_prompt") if r.scope.endswith("on the base")]
    return row


def copy_results(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "results"
    folder.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(RESULTS / name, folder / name)
    return folder


VOTE_FOLLOWING = "yoao_cpu_vote_following.json"
"""The YOAO cpu run with the vote-following tutors: a real result file that records no environment version."""


def copy_vote_following_yoao(folder: Path) -> Path:
    """The vote-following run's result file as the folder's yoao_cpu.json (the name the report reads)."""
    shutil.copy(RESULTS / VOTE_FOLLOWING, folder / "yoao_cpu.json")
    return folder / "yoao_cpu.json"


def rewrite(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def mirror(entry: dict[str, Any]) -> None:
    """An estimate's sign swapped: the mean negated, the interval's ends negated and swapped."""
    entry["mean"], entry["ci_low"], entry["ci_high"] = -entry["mean"], -entry["ci_high"], -entry["ci_low"]


# -------------------------------------------------------------------------------------- the committed files
def test_the_committed_result_files_give_every_claim_a_row_with_its_provenance() -> None:
    report = report_of(RESULTS)
    claims = {(c.paper, c.claim_id) for spec in PAPERS for c in spec.claims}
    assert len(claims) >= 28 and {(r.claim.paper, r.claim.claim_id) for r in report.rows} == claims
    assert all(r.verdict.kind in VERDICTS and r.verdict.reason for r in report.rows)
    # the stage-1 rows read the make-run file's keys (the current run's file where one is committed), with the
    # clusters its plan names
    name = MAKE_RUN_NAME
    data = json.loads((RESULTS / name).read_text())
    domain = data["domains"]["craigslist-v0"]
    warm = one(report, "warm_start")
    assert warm.source == f"{name}: domains.craigslist-v0.paired.sft_minus_base"
    entry = domain["paired"]["sft_minus_base"]
    assert (warm.estimate.mean, warm.estimate.low, warm.estimate.high, warm.n) == (
        entry["mean"], entry["ci_low"], entry["ci_high"], entry["n"],
    )  # fmt: skip
    assert warm.estimate.clusters == plan_clusters(domain["plan"], "sft_minus_base") == 16
    assert one(report, "ppo_over_warmstart").estimate.clusters == 32  # no base: every scenario of the plan
    # a file of the current environment gives verdicts; one of another is stale, the rule's verdict kept
    assert warm.env_version == data["env_version"]
    if data["env_version"] == CURRENT:
        assert warm.verdict.kind == REPRODUCED and warm.verdict.reason == _rule_reason(REPRODUCED)
    else:
        assert warm.verdict.kind == STALE
        assert warm.verdict.reason.endswith(f"by the rule alone: {REPRODUCED} ({_rule_reason(REPRODUCED)})")
    # the YOAO row: the largest seed count that leaves untrained players (k = 5 leaves none), its games the
    # clusters, the file's own environment version
    yoao = json.loads((RESULTS / "yoao_cpu.json").read_text())
    more = one(report, "more_seeds")
    assert more.source == "yoao_cpu.json: untrained_cooperation_paired.3"
    # games with counted untrained votes in both arms (at most the 16 played: an arm whose untrained seats
    # all abstained in a game has no rate there)
    assert more.estimate.clusters == yoao["untrained_cooperation_paired"]["3"]["games"] <= 16
    assert more.env_version == yoao["env_version"]
    assert (more.verdict.kind == STALE) == (yoao["env_version"] != CURRENT)
    # every file read, with its provenance ("not recorded" where the file lacks a key)
    read = {f.name: f for f in report.files}
    assert read[name].provenance.as_json()["commit"] == data.get("commit", NOT_RECORDED)
    assert read["incentives_cpu.json"].env_version == CURRENT
    assert read["tom_cpu_details.json"].provenance.profile == "cpu"  # from its run record
    # structural gaps are not measured, with the reason, in every route
    structural = ("cross_architecture", "broadcast_vs_pairwise", "unified_vs_frontier")
    for claim_id in structural:
        assert one(report, claim_id).verdict.kind == NOT_MEASURED, claim_id
    if "over_conceded" not in domain.get("behaviour_paired", {}):  # a make-run file from before the metric
        assert one(report, "concession").verdict.kind == NOT_MEASURED


def _rule_reason(kind: str) -> str:
    return {REPRODUCED: "the 95% interval lies above the null (0), as the paper claims"}[kind]


def test_a_row_says_why_the_data_cannot_test_the_claim() -> None:
    """Reasons read from the data: the ToM base scores 0 on every episode, so a prompt cannot lower it; the
    transfer matrix's cross-domain cells are all 0; Sugarscape was left out, with the file's own reason."""
    report = report_of(RESULTS)
    prompt = on_base(report)
    assert "the base scores 0 on every episode" in prompt.verdict.reason
    # the intervals rest on the scenarios tom_cpu.json records for the domain
    tom = json.loads((RESULTS / "tom_cpu.json").read_text())
    assert prompt.estimate.clusters == tom["craigslist-v0"]["clusters"] == 12
    survival = one(report, "survival")
    skipped = json.loads((RESULTS / "yoao_cpu.json").read_text())["sugarscape"]["skipped"]
    assert survival.verdict.kind == NOT_MEASURED and skipped in survival.verdict.reason


def test_the_transfer_reason_follows_the_matrix(tmp_path: Path) -> None:
    """The before-audit stage-2 file (Craigslist and Marketplace), whose cross-domain cells are all 0, gives the
    cascade order no matrix to read from; one cell above 0 takes that reason away."""
    folder = copy_results(tmp_path)
    shutil.copy(RESULTS / "stage2_cpu_before_audit.json", folder / "stage2_cpu.json")
    zero = "every cross-domain cell of the transfer matrix is 0"
    assert zero in one(report_of(folder), "cascade_order").verdict.reason

    def lift(data: dict[str, Any]) -> None:
        data["transfer_matrix"]["marketplace-v0"]["craigslist-v0"].update(mean=0.1, ci_low=0.0, ci_high=0.2)

    rewrite(folder / "stage2_cpu.json", lift)
    assert zero not in one(report_of(folder), "cascade_order").verdict.reason


def test_a_stopped_stage2_run_says_what_it_did_not_make(tmp_path: Path) -> None:
    """A stage-2 file written by a run stopped before the unified evaluation keeps its transfer rows and names,
    on the rows it cannot give, the key it lacks and the assets the run did not make (not 'no file')."""
    folder = copy_results(tmp_path, "stage2_cpu.json")

    def stopped(data: dict[str, Any]) -> None:
        for key in ("unified", "unified_vs_best_baseline", "mopd_recovered_share", "mopd_steps"):
            data.pop(key, None)
        data.update(complete=False, missing=["mopd_student", "unified_evaluation"])

    rewrite(folder / "stage2_cpu.json", stopped)
    report = report_of(folder)
    assert one(report, "transfer_asymmetry").verdict.kind != NOT_MEASURED
    for claim, key in (("mopd_recovered_share", "mopd_recovered_share"), ("cascade_best_unifier", "unified")):
        row = one(report, claim)
        assert row.verdict.kind == NOT_MEASURED
        assert (
            f"stage2_cpu.json has no `{key}` (the run that wrote it stopped before mopd_student, unified_evaluation)"
            in (row.verdict.reason)
        )


def test_the_tom_reason_follows_the_base_arm(tmp_path: Path) -> None:
    """With a base arm that scores above 0 the ToM prompt row no longer says it cannot be lowered."""
    folder = copy_results(tmp_path, "tom_cpu.json", "tom_cpu_details.json")
    assert "the base scores 0" in on_base(report_of(folder)).verdict.reason

    def lift(data: dict[str, Any]) -> None:
        data["craigslist-v0"]["base"].update(mean=0.2, ci_low=0.1, ci_high=0.3)

    rewrite(folder / "tom_cpu.json", lift)
    assert "the base scores 0" not in on_base(report_of(folder)).verdict.reason


# ------------------------------------------------------------------------------- a wrong result, a changed verdict
def _current(data: dict[str, Any]) -> None:
    data["env_version"] = CURRENT


def test_a_sign_swapped_in_a_real_file_flips_its_verdict(tmp_path: Path) -> None:
    """The committed before-audit make-run and vote-following YOAO results, as if measured on the current
    environment version: the warm-start's gain and more seeds' cooperation come out reproduced, the leak rate's
    rise opposite; with the sign of those entries swapped in the file, each verdict turns the other way."""
    folder = copy_results(tmp_path, BEFORE_AUDIT)
    copy_vote_following_yoao(folder)
    make_run = folder / MAKE_RUN_FILES[0]  # the current make-run name, read before the older one
    (folder / BEFORE_AUDIT).rename(make_run)
    rewrite(make_run, _current)
    rewrite(folder / "yoao_cpu.json", _current)
    before = report_of(folder)
    kinds = {c: one(before, c).verdict.kind for c in ("warm_start", "leakage", "more_seeds", "anchoring")}
    assert kinds == {"warm_start": REPRODUCED, "leakage": OPPOSITE, "more_seeds": REPRODUCED, "anchoring": NOT_SHOWN}
    assert one(before, "warm_start").env_version == CURRENT

    def flip_make_run(data: dict[str, Any]) -> None:
        domain = data["domains"]["craigslist-v0"]
        mirror(domain["paired"]["sft_minus_base"])
        mirror(domain["behaviour_paired"]["leak"]["ppo_minus_base"])

    rewrite(make_run, flip_make_run)
    rewrite(folder / "yoao_cpu.json", lambda data: mirror(data["untrained_cooperation_paired"]["3"]))
    after = report_of(folder)
    flipped = {c: one(after, c).verdict.kind for c in ("warm_start", "leakage", "more_seeds", "anchoring")}
    assert flipped == {"warm_start": OPPOSITE, "leakage": REPRODUCED, "more_seeds": OPPOSITE, "anchoring": NOT_SHOWN}
    assert one(after, "warm_start").value == "-0.327 [-0.502, -0.162]"


def test_the_concession_row_reads_deals_over_target_paired_and_falls_back_to_the_warm_start(tmp_path: Path) -> None:
    """The committed make-run file with `behaviour_paired.over_conceded` as the stage-1 report writes it: PPO -
    base where the base made deals, else PPO - the warm-start (named in the source); fewer deals over target is
    the paper's direction, so a swapped sign turns the verdict."""
    folder = copy_results(tmp_path, MAKE_RUN_NAME, "incentives_cpu.json")
    make_run = folder / MAKE_RUN_NAME

    def add(pairs: dict[str, dict[str, float]]) -> Any:
        def change(data: dict[str, Any]) -> None:
            data["env_version"] = CURRENT
            data["domains"]["craigslist-v0"].setdefault("behaviour_paired", {})["over_conceded"] = pairs

        return change

    lower = {"mean": -0.2, "ci_low": -0.35, "ci_high": -0.05, "n": 60}
    rewrite(make_run, add({"ppo_minus_sft": dict(lower)}))
    row = one(report_of(folder), "concession")
    assert row.source == f"{MAKE_RUN_NAME}: domains.craigslist-v0.behaviour_paired.over_conceded.ppo_minus_sft"
    assert row.verdict.kind == REPRODUCED
    rewrite(make_run, add({"ppo_minus_base": {**lower, "mean": 0.2, "ci_low": 0.05, "ci_high": 0.35},
                           "ppo_minus_sft": dict(lower)}))  # fmt: skip
    row = one(report_of(folder), "concession")
    assert row.source.endswith("over_conceded.ppo_minus_base") and row.verdict.kind == OPPOSITE


def test_the_mute_test_and_the_prompting_baseline_read_the_paired_key_where_the_file_has_it(tmp_path: Path) -> None:
    """The committed YOAO result as the report reads it, then with the paired between-arm entries a run writes
    (models/yoao/report.py `between_arm_differences`): the two-arm text gives way to the paired interval, whose
    sign decides the verdict (muting must lower cooperation, the seed must beat the prompted model)."""
    folder = copy_results(tmp_path, "yoao_cpu.json", "yoao_cpu_details.json", "yoao_incentives_cpu.json")
    rewrite(folder / "yoao_cpu.json", _current)
    rewrite(folder / "yoao_cpu.json", lambda data: data.pop("untrained_cooperation_between_arms", None))
    two_arms = report_of(folder)
    assert one(two_arms, "mute").source == "yoao_cpu.json: untrained_cooperation.1_muted, untrained_cooperation.1"
    assert one(two_arms, "mute").verdict.kind == NOT_SHOWN

    def add_paired(data: dict[str, Any]) -> None:
        data["untrained_cooperation_between_arms"] = {
            "1_muted_minus_1": {"mean": -0.2, "ci_low": -0.35, "ci_high": -0.05, "games": 16},
            "1_minus_1_prompted": {"mean": 0.3, "ci_low": 0.1, "ci_high": 0.5, "games": 16},
        }

    rewrite(folder / "yoao_cpu.json", add_paired)
    paired = report_of(folder)
    assert one(paired, "mute").source == "yoao_cpu.json: untrained_cooperation_between_arms.1_muted_minus_1"
    assert {c: one(paired, c).verdict.kind for c in ("mute", "prompting_baseline")} == {
        "mute": REPRODUCED,
        "prompting_baseline": REPRODUCED,
    }
    assert one(paired, "mute").estimate.clusters == 16

    def flip(data: dict[str, Any]) -> None:
        for entry in data["untrained_cooperation_between_arms"].values():
            mirror(entry)

    rewrite(folder / "yoao_cpu.json", flip)
    flipped = report_of(folder)
    assert {c: one(flipped, c).verdict.kind for c in ("mute", "prompting_baseline")} == {
        "mute": OPPOSITE,
        "prompting_baseline": OPPOSITE,
    }


def test_an_older_environment_version_makes_the_row_stale(tmp_path: Path) -> None:
    folder = copy_results(tmp_path)
    copy_vote_following_yoao(folder)
    rewrite(folder / "yoao_cpu.json", _current)
    assert one(report_of(folder), "more_seeds").verdict.kind == REPRODUCED
    rewrite(folder / "yoao_cpu.json", lambda data: data.update(env_version="env-older"))
    more = one(report_of(folder), "more_seeds")
    assert more.verdict.kind == STALE and more.env_version == "env-older"
    assert f"env-older, not the current {CURRENT}; by the rule alone: {REPRODUCED}" in more.verdict.reason


def test_a_make_run_file_written_by_the_runners_code_is_read(tmp_path: Path) -> None:
    """A make-run file as `make run` writes it (models/provenance.py `provenance`, the stage-1 result's own
    `report()`), from the stage-1 stand-in of tests/test_paper_report.py: its rows carry the file's provenance
    and are not stale; a behaviour metric the file records gets its row, with what the environment pays."""
    from tests.test_paper_report import stand_in_evaluation

    evaluation = stand_in_evaluation()
    plan = "32 held-out dataset scenarios x boulware, conceder, reciprocal (base: the first 16), seat buyer, seed 0"
    domain = dataclasses.replace(evaluation, plan=plan).report()
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(RESULTS / "incentives_cpu.json", folder / "incentives_cpu.json")
    written = {**provenance(profile="cpu"), "wall_s": 60.0, "domains": {"craigslist-v0": domain}}
    (folder / MAKE_RUN_FILES[0]).write_text(json.dumps(written))
    report = report_of(folder)
    warm = one(report, "warm_start")
    assert warm.verdict.kind == REPRODUCED and warm.env_version == CURRENT and warm.estimate.clusters == 16
    assert warm.scale == "smollm2-135m-instruct, n = 48, profile cpu"
    anchoring = one(report, "anchoring")  # 4 clusters in the stand-in's Estimate, 16 by the plan in the file
    assert anchoring.estimate.clusters == 16 and anchoring.verdict.kind == REPRODUCED
    assert anchoring.baseline.startswith("what the environment pays for it (incentives_cpu.json")
    assert one(report, "commitment_language").verdict.kind == NOT_MEASURED  # the stand-in has no such metric
    (file,) = [f for f in report.files if f.name == MAKE_RUN_FILES[0]]
    assert file.provenance.timestamp() is not None and file.provenance.commit == written["commit"]


# ----------------------------------------------------------------------------------- files beside an instance
def test_the_newer_source_or_the_current_environment_wins(tmp_path: Path) -> None:
    """A claim both a result file and a materialisation measure is read from the one on the current environment
    version, then the newer: a make-run file of the current version wins over a materialisation that records
    none; the committed file (another version, no time) loses to it."""
    from tests.test_paper_report import stand_in_evaluation

    read = StageRead(
        asset="specialist_eval", partition="craigslist-v0", run_id="r1", timestamp=1.7e9, profile="cpu",
        value=stand_in_evaluation(),
    )  # fmt: skip
    snapshot = Snapshot((read,))
    older = one(report_of(copy_results(tmp_path, BEFORE_AUDIT), snapshot), "warm_start")
    assert older.source.startswith("specialist_eval[craigslist-v0]: ") and older.verdict.kind == REPRODUCED
    folder = tmp_path / "current"
    folder.mkdir()
    shutil.copy(RESULTS / BEFORE_AUDIT, folder / MAKE_RUN_FILES[0])
    rewrite(folder / MAKE_RUN_FILES[0], _current)
    current = one(report_of(folder, snapshot), "warm_start")
    assert current.source.startswith(f"{MAKE_RUN_FILES[0]}: ") and current.env_version == CURRENT
    # the rule on its own: neither measured gives the files' reason; one measured wins
    missing = [Measurement(None, "k", missing="absent from the file")]
    assert choose([Measurement(read, "k", missing="absent")], missing, CURRENT) == missing
    assert choose(None, missing, CURRENT) == missing


def test_a_details_file_takes_the_provenance_its_main_file_records(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "x.json").write_text(json.dumps({"env_version": "env-a", "measured_at": "2026-12-01T10:00:00Z"}))
    (folder / "x_details.json").write_text(json.dumps({"_run": {"profile": "cpu", "wall_s": 12.0}}))
    (folder / "broken.json").write_text("{")
    files = ResultSources.load(folder, ["x.json", "x_details.json", "broken.json", "absent.json"])
    details = files.get("x_details.json").provenance
    assert (details.env_version, details.profile, details.wall_s) == ("env-a", "cpu", 12.0)
    assert details.as_json()["commit"] == NOT_RECORDED and "broken.json" in files.why_absent("broken.json")
    assert {f.name for f in dataclasses.fields(Provenance)} == set(PROVENANCE_FIELDS)


# -------------------------------------------------------------------------------------------------- published
def test_the_published_json_and_the_readme_block_carry_every_row(tmp_path: Path) -> None:
    from benchmarks import readme_results

    report = report_of(RESULTS)
    publish_report(report, tmp_path)
    data = json.loads((tmp_path / "paper_report.json").read_text())
    assert all(tuple(row) == ROW_KEYS for row in data["claims"]) and len(data["claims"]) == len(report.rows)
    assert data["counts"] == report.counts() and data["current_env_version"] == CURRENT
    assert {f["file"] for f in data["generated_from"]} == {f.name for f in report.files}
    assert all(set(PROVENANCE_FIELDS) <= set(f) for f in data["generated_from"])
    audit = next(f for f in data["generated_from"] if f["file"] == "incentives_cpu.json")
    assert "anchoring" in audit["context_for"] and audit["claims"] == []
    leak = next(r for r in data["claims"] if r["claim"] == "leakage")
    made = json.loads((RESULTS / MAKE_RUN_NAME).read_text())
    entry = made["domains"]["craigslist-v0"]["behaviour_paired"]["leak"]["ppo_minus_base"]
    assert (leak["value"], leak["clusters"], leak["env_version"]) == (entry["mean"], 16, made["env_version"])

    block = readme_results.PAPER_REPORT.render(data)
    lines = [line for line in block.splitlines() if line.startswith(("| SocialRL |", "| YOAO |"))]
    assert len(lines) == len(report.rows) and "benchmarks/results/paper_report.md" in block
    leak_line = next(line for line in lines if line.startswith("| SocialRL | leakage |"))
    assert f"| {entry['n']} | 16 | {leak['verdict']} |" in leak_line
    markdown = (tmp_path / "paper_report.md").read_text()
    assert f"### Result file: {MAKE_RUN_NAME}" in markdown and f"environment version {made['env_version']}" in markdown
