"""Stage 2 of SocialRL: the transfer matrix and cascade order from hand-made evaluations, the ordering rule, the
cascade's checkpoint rule, the MOPD loss and curriculum, and the unified table. Engine-backed tests (teacher
log-probs, distillation on a toy task, the smoke lineage) are in tests/test_stage2_engine.py."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch

from models.socialrl import stage2
from models.socialrl.stage2 import (
    BASE,
    PolicyScores,
    best_checkpoint,
    build_transfer_matrix,
    choose_cascade_order,
    order_score,
    score_candidates,
    sft_policy,
    specialist_policy,
)
from models.training.mopd import curriculum_gaps, curriculum_probabilities, sample_domains, topk_reverse_kl

DNND, CRAIG, MARKET = "dnd-v0", "craigslist-v0", "marketplace-v0"
CASINO = "casino-v0"


def scores(policy: str, env_id: str, rewards: list[float]) -> PolicyScores:
    """Hand-made evaluation rows: one episode per scenario, against one counterpart."""
    keys = tuple(f"{i}|s{i}|boulware|seat|{i}" for i in range(len(rewards)))
    return PolicyScores(
        policy, env_id, policy, keys, tuple(f"{env_id}|{i}" for i in range(len(rewards))), tuple(rewards)
    )


BASE_REWARDS = [0.30, 0.50, 0.40, 0.60]
NOISE = [0.05, -0.05, 0.05, -0.05]  # mean 0: a donor's cell mean is exactly its offset


def shifted(offset: float) -> list[float]:
    return [b + offset + n for b, n in zip(BASE_REWARDS, NOISE, strict=True)]


# DnD's specialist hurts the other two domains; Craigslist and Marketplace help each other, Marketplace -> Craigslist
# more than the reverse.
OFFSETS = {
    (DNND, DNND): 0.20,
    (DNND, CRAIG): -0.20,
    (DNND, MARKET): -0.20,
    (CRAIG, DNND): 0.0,
    (CRAIG, CRAIG): 0.25,
    (CRAIG, MARKET): 0.10,
    (MARKET, DNND): 0.0,
    (MARKET, CRAIG): 0.15,
    (MARKET, MARKET): 0.30,
}


def hand_made() -> list[PolicyScores]:
    rows = [scores(BASE, d, BASE_REWARDS) for d in (DNND, CRAIG, MARKET)]
    rows += [scores(specialist_policy(d), r, shifted(o)) for (d, r), o in OFFSETS.items()]
    rows += [scores(sft_policy(CRAIG), r, shifted(0.05)) for r in (DNND, CRAIG, MARKET)]
    return rows


def test_the_matrix_from_hand_made_evaluations_gives_the_expected_cells_and_order() -> None:
    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    for (donor, recipient), offset in OFFSETS.items():
        cell = matrix.cell(donor, recipient)
        assert cell.difference.mean == pytest.approx(offset)
        assert cell.difference.n == 4 and cell.difference.clusters == 4
        # Paired: the base's spread across scenarios cancels; only the +-0.05 noise is left in the interval.
        assert cell.difference.ci_low >= offset - 0.05 - 1e-9 and cell.difference.ci_high <= offset + 0.05 + 1e-9
        assert cell.base_mean == pytest.approx(sum(BASE_REWARDS) / 4)
    assert matrix.kinds() == ("specialist", "sft") and matrix.donors("sft") == (CRAIG,)
    assert matrix.cell(CRAIG, DNND, "sft").difference.mean == pytest.approx(0.05)
    effects = matrix.donor_effects()
    assert effects[DNND] == pytest.approx(-0.20) and effects[MARKET] == pytest.approx(0.075)
    text = matrix.describe_donors()
    assert "Negative donors (< 0): dnd (-0.200)" in text and "marketplace (+0.075)" in text
    assert {r["donor_kind"] for r in matrix.rows("r")} == {"specialist", "sft"} and len(matrix.rows("r")) == 12
    json_cells = matrix.as_json()
    assert set(json_cells) == {DNND, CRAIG, MARKET} and set(json_cells[DNND][CRAIG]) == {
        "mean",
        "ci_low",
        "ci_high",
        "n",
    }

    order = choose_cascade_order(matrix.means(), matrix.domains)
    # The destructive donor first; then Craigslist before Marketplace, so that the larger transfer
    # (Marketplace -> Craigslist) lands on the domain trained earlier.
    assert order.order == (DNND, CRAIG, MARKET)
    assert order.orders_scored == 6
    assert order.chosen.backward == pytest.approx(0.15) and order.chosen.adjacency == pytest.approx(0.10)
    assert order.paper.order == (DNND, CRAIG, MARKET) and order.reverse.order == (MARKET, CRAIG, DNND)
    assert order.reverse.score == pytest.approx(0.10 - 0.20 - 0.20 + 0.10)


def test_the_transfer_matrix_renders_itself_once_for_the_asset_and_the_command_line() -> None:
    """One table (rows donors with the SFT warm-starts marked, every cell with its interval and episode count);
    `transfer_matrix`'s metadata and run_stage2's report print exactly that."""
    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    table = matrix.markdown().splitlines()
    assert table[0] == f"| donor | {DNND} | {CRAIG} | {MARKET} |" and table[1] == "|---|---|---|---|"
    assert [line.split(" | ")[0] for line in table[2:]] == [
        f"| {DNND}",
        f"| {CRAIG}",
        f"| {MARKET}",
        f"| {CRAIG} (SFT)",
    ]
    e = matrix.cell(DNND, CRAIG).difference
    assert f"{e.mean:+.3f} [{e.ci_low:+.3f}, {e.ci_high:+.3f}] n=4" in table[2]
    assert all(line.count(" n=4") == 3 for line in table[2:])

    from types import SimpleNamespace

    from pipelines.run_stage2 import report

    order = choose_cascade_order(matrix.means(), matrix.domains)
    outputs = {
        "transfer_matrix": SimpleNamespace(matrix=matrix),
        "cascade_order": order,
        "cascade_policy": SimpleNamespace(markdown=lambda: "<the cascade's own table>"),
        "unified_evaluation": SimpleNamespace(markdown=lambda: "<the unified evaluation's own table>"),
        "mopd_student": SimpleNamespace(summary=lambda: "<MOPD's own line>"),
    }
    printed = report(outputs)
    assert matrix.markdown() in printed and matrix.describe_donors() in printed and order.summary() in printed
    assert all(f"<{what}>" in printed for what in ("the cascade's own table", "the unified evaluation's own table"))


def test_every_specialist_is_also_paired_with_the_recipients_own_warm_start() -> None:
    """Where the base scores 0, a cell against it repeats the donor's mean; against the recipient's warm-start (on
    the same episodes) a donor that plays the domain worse than its warm-start shows negative. Only Craigslist's
    warm-start is evaluated here, so only its column exists."""
    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    cells = matrix.versus_warmstart()
    assert {d: set(row) for d, row in cells.items()} == {DNND: {CRAIG}, CRAIG: {CRAIG}, MARKET: {CRAIG}}
    for donor, row in cells.items():
        # specialist (base + offset + noise) - warm-start (base + 0.05 + the same noise): the offset less 0.05
        expected = OFFSETS[(donor, CRAIG)] - 0.05
        e = row[CRAIG]
        assert (e.mean, e.ci_low, e.ci_high, e.n) == (pytest.approx(expected),) * 3 + (4,)
    assert matrix.versus_warmstart_json()[DNND][CRAIG]["mean"] == pytest.approx(-0.25)
    table = matrix.markdown_vs_warmstart().splitlines()
    assert table[2].startswith(f"| {DNND} | - | -0.250 [-0.250, -0.250] n=4 | - |"), table
    assert len(table) == 5


def test_an_unfinished_stage2_writes_what_it_materialised_and_names_what_it_lacks() -> None:
    """A run stopped after its transfer matrix: the result file has the matrix's keys, `complete` false and the
    four assets it lacks; nothing read from a missing asset is written (not even as null)."""
    from types import SimpleNamespace

    from pipelines.run_stage2 import RESULT_PARTS, STAGE2_ASSETS, report, result_json

    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    outputs = {"transfer_matrix": SimpleNamespace(matrix=matrix, sources_json=lambda: {CRAIG: {"version": 3}})}
    partial = result_json(outputs, (DNND, CRAIG, MARKET), 12.0)
    assert partial["complete"] is False and partial["missing"] == list(STAGE2_ASSETS[1:])
    matrix_keys = [key for key, assets, _ in RESULT_PARTS if assets == ("transfer_matrix",)]
    assert list(partial) == ["env_version", "domains", "complete", "missing", *matrix_keys, "steps", "wall_s"]
    assert partial["transfer_matrix_vs_warmstart"] == matrix.versus_warmstart_json()
    assert partial["specialists_source"] == {CRAIG: {"version": 3}} and partial["clusters_per_cell"] == 4
    printed = report(outputs)
    assert matrix.markdown_vs_warmstart() in printed and "Unified evaluation" not in printed


def test_a_missing_specialist_evaluation_or_base_is_an_error_naming_it() -> None:
    rows = [r for r in hand_made() if not (r.policy == specialist_policy(MARKET) and r.env_id == DNND)]
    with pytest.raises(ValueError, match="specialist of marketplace-v0 not evaluated on \\['dnd-v0'\\]"):
        build_transfer_matrix(rows, (DNND, CRAIG, MARKET))
    with pytest.raises(ValueError, match="no base-model evaluation on \\['craigslist-v0'\\]"):
        build_transfer_matrix([r for r in hand_made() if r.policy != BASE or r.env_id != CRAIG], (DNND, CRAIG, MARKET))


def test_a_domain_without_a_registered_specialist_fails_naming_it(tmp_path: Path) -> None:
    """Stage 2 finds a specialist by domain and held-out plan: a version registered but never evaluated on the
    profile's plan is not one."""
    from models.profiles import get_profile
    from models.socialrl import stage1
    from models.tracking import Measurement, Tracker, TrackingConfig

    tracker = Tracker(TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/m.db", artifact_root=str(tmp_path / "a")))
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with tracker.start_run("ppo-dnd-v0") as run:
        run.log_artifact_dir(adapter, "adapter")
    name = "socialrl-dnd-specialist"
    tracker.register_adapter(run.run_id, "adapter", name, tags={stage1.TRAINED_BY_TAG: stage1.STAGE1})
    with pytest.raises(stage2.MissingSpecialistError, match="dnd-v0 \\(socialrl-dnd-specialist\\)"):
        stage2.registered_adapters(tracker, (DNND,), "smoke")  # registered, not yet evaluated
    plan = stage1.heldout_plan_identity(DNND, get_profile("smoke"))
    tracker.record_evaluation(name, 1, {"mean_reward": 0.3}, Measurement(plan.key, plan.text))
    with pytest.raises(stage2.MissingSpecialistError, match="craigslist-v0 \\(socialrl-craigslist-specialist\\)"):
        stage2.registered_adapters(tracker, (DNND, CRAIG), "smoke")
    found = stage2.registered_adapters(tracker, (DNND,), "smoke")
    assert found[DNND].specialist.startswith("socialrl-dnd-specialist v1") and found[DNND].sft_path is None
    assert found[DNND].source.source == stage1.FROM_STAGE1 and found[DNND].specialist.endswith("stage1 registry)")
    # An SFT warm-start run of the same profile is found; one of another profile is not.
    for profile in ("cpu", "smoke"):
        with tracker.start_run(f"sft-{DNND}", params={"profile": profile, "env_id": DNND}) as run:
            run.log_artifact_dir(adapter, "adapter")
        if profile == "cpu":
            assert stage2.registered_adapters(tracker, (DNND,), "smoke")[DNND].sft_path is None
    assert (stage2.registered_adapters(tracker, (DNND,), "smoke")[DNND].sft_path / "adapter_config.json").is_file()


def test_the_ordering_rule_finds_a_known_best_order_of_six_domains() -> None:
    hidden = ("job-interview-v0", "dnd-v0", "calendar-v0", "marketplace-v0", "casino-v0", "craigslist-v0")
    position = {d: i for i, d in enumerate(hidden)}
    # Training a later domain helps every earlier one, training an earlier one hurts every later one: only the
    # hidden order collects every positive backward term.
    transfer = {a: {b: (0.1 if position[a] > position[b] else -0.1) for b in hidden} for a in hidden}
    order = choose_cascade_order(transfer, stage2.PAPER_ORDER)
    assert order.order == hidden and order.orders_scored == 720
    assert order.chosen.score == pytest.approx(1.5)  # 15 pairs x 0.1, no mutual benefit
    assert order.paper.order == stage2.PAPER_ORDER
    assert order.paper.score < order.chosen.score and order.reverse.order == stage2.PAPER_ORDER[::-1]
    assert order.top[0].order == hidden and len(order.top) == 5

    # A destructive donor goes first and a mutually beneficial pair ends up adjacent.
    domains = stage2.PAPER_ORDER[:4]
    flat = {a: {b: 0.0 for b in domains} for a in domains}
    flat["casino-v0"] = {b: -0.3 for b in domains}  # destructive
    flat["calendar-v0"]["craigslist-v0"] = flat["craigslist-v0"]["calendar-v0"] = 0.2  # mutual
    chosen = choose_cascade_order(flat, domains).order
    assert chosen[0] == "casino-v0"
    assert abs(chosen.index("calendar-v0") - chosen.index("craigslist-v0")) == 1
    apart = ("casino-v0", "calendar-v0", "dnd-v0", "craigslist-v0")
    assert order_score(apart, flat, 1.0).score < order_score(chosen, flat, 1.0).score


def test_the_cascade_keeps_the_checkpoint_best_over_the_domains_seen_so_far() -> None:
    checkpoints = [("it00001", Path("a")), ("it00002", Path("b")), ("it00003", Path("c"))]
    probes = {
        # it00003 is best on the newest domain but forgot the first one.
        "it00001": {DNND: 0.50, CRAIG: 0.20, MARKET: 0.9},
        "it00002": {DNND: 0.45, CRAIG: 0.40, MARKET: 0.0},
        "it00003": {DNND: 0.05, CRAIG: 0.60, MARKET: 0.0},
    }
    candidates = score_candidates(checkpoints, probes, [DNND, CRAIG])
    assert [round(c.mean_seen, 3) for c in candidates] == [0.35, 0.425, 0.325]
    assert set(candidates[0].probe) == {DNND, CRAIG}  # an unseen domain does not count
    assert best_checkpoint(candidates).checkpoint == "it00002"
    # With only the newest domain seen, the last checkpoint wins; on a tie the later one.
    assert best_checkpoint(score_candidates(checkpoints, probes, [CRAIG])).checkpoint == "it00003"
    tie = score_candidates(checkpoints[:2], {"it00001": {DNND: 0.3}, "it00002": {DNND: 0.3}}, [DNND])
    assert best_checkpoint(tie).checkpoint == "it00002"


def test_the_order_check_rescores_every_order_from_the_matrix_and_can_fail() -> None:
    """`cascade_order_is_best` re-scores all orders by brute force from the matrix's cells, not from the
    CascadeOrder's own scores: a chosen order that is not the best, or a recorded score the cells do not give,
    fails."""
    from dataclasses import replace

    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    brute = stage2.brute_force_order_scores(matrix, 1.0)
    assert len(brute) == 6
    # By hand: DnD -> Craigslist -> Marketplace collects 0 + 0 + 0.15 backward and min(0.10, 0.15) adjacent;
    # the reverse 0.10 - 0.20 - 0.20 backward and 0.10 adjacent; Craigslist -> Marketplace -> DnD
    # 0.15 - 0.20 - 0.20 backward and 0.10 adjacent (Marketplace, DnD: max(0, min(0, -0.20)) = 0).
    assert brute[(DNND, CRAIG, MARKET)] == pytest.approx(0.25)
    assert brute[(MARKET, CRAIG, DNND)] == pytest.approx(-0.20)
    assert brute[(CRAIG, MARKET, DNND)] == pytest.approx(0.15 - 0.20 - 0.20 + 0.10)
    for o, value in brute.items():  # the two implementations of the rule agree on every order
        assert order_score(o, matrix.means(), 1.0).score == pytest.approx(value)

    order = choose_cascade_order(matrix.means(), matrix.domains)
    ok = stage2.check_cascade_order(order, matrix)
    assert ok.passed and ok.problems == () and ok.metadata["best_orders"] == [[DNND, CRAIG, MARKET]]
    reverse = replace(order, order=order.reverse.order, chosen=order.reverse)
    wrong = stage2.check_cascade_order(reverse, matrix)
    assert not wrong.passed and "scores -0.200000 from the matrix" in wrong.problems[0]
    misrecorded = replace(order, chosen=replace(order.chosen, score=0.5))
    assert "recorded score +0.500000" in stage2.check_cascade_order(misrecorded, matrix).problems[0]
    assert not stage2.check_cascade_order(replace(order, order=(DNND, CRAIG)), matrix).passed
    assert not stage2.check_cascade_order(replace(order, orders_scored=5), matrix).passed
    # With no transfer at all (every cell equal) every order scores the same: the matrix cannot tell orders apart,
    # and the check says so instead of passing whichever order the asset happened to choose.
    flat = build_transfer_matrix(
        [r for r in hand_made() if not r.policy.startswith("specialist")]
        + [scores(specialist_policy(d), r, shifted(0.0)) for d, r in OFFSETS],
        matrix.domains,
    )
    for chosen in ((DNND, CRAIG, MARKET), (MARKET, CRAIG, DNND)):
        arbitrary = replace(order, order=chosen, chosen=replace(order.chosen, order=chosen, score=0.0))
        tied = stage2.check_cascade_order(arbitrary, flat)
        assert not tied.passed and tied.problems[0].startswith("not decidable: all 6 orders score ")
        assert tied.metadata["decidable"] is False and len(tied.metadata["best_orders"]) == 6
    assert ok.metadata["decidable"] is True
    # Ties among the best are allowed when the matrix still separates orders: DnD hurting Craigslist alone puts
    # the three orders with DnD before Craigslist at 0 and the other three at -0.20.
    one_cell = build_transfer_matrix(
        [r for r in hand_made() if not r.policy.startswith("specialist")]
        + [scores(specialist_policy(d), r, shifted(-0.2 if (d, r) == (DNND, CRAIG) else 0.0)) for d, r in OFFSETS],
        matrix.domains,
    )
    partial = choose_cascade_order(one_cell.means(), one_cell.domains)
    split = stage2.check_cascade_order(partial, one_cell)
    assert (
        split.passed
        and len(split.metadata["best_orders"]) == 3
        and split.metadata["worst_score"] == pytest.approx(-0.2)
    )
    # The check re-scores with the weight the asset recorded, whatever the profile says now: without the
    # neighbours' term DnD -> Craigslist -> Marketplace scores its backward transfer alone, 0.15.
    unweighted = choose_cascade_order(matrix.means(), matrix.domains, adjacency_weight=0.0)
    assert unweighted.adjacency_weight == 0.0 and unweighted.chosen.score == pytest.approx(0.15)
    assert stage2.check_cascade_order(unweighted, matrix).passed
    assert not stage2.check_cascade_order(replace(unweighted, adjacency_weight=1.0), matrix).passed


def test_the_matrix_check_recomputes_every_cell_from_its_episodes_and_can_fail() -> None:
    """`transfer_matrix_complete` recomputes every cell from the per-episode rewards the matrix keeps (a cell's
    mean inside its own bootstrap interval holds whatever the cell is): a swapped cell, a cell taken against
    another domain's base, a donor that played other episodes than the base, cells over different numbers of
    episodes and a missing cell fail it."""
    from dataclasses import replace

    domains = (DNND, CRAIG, MARKET)
    matrix = build_transfer_matrix(hand_made(), domains)
    ok = stage2.check_transfer_matrix(matrix)
    assert ok.passed and ok.problems == () and ok.metadata["episodes_per_cell"] == [4]

    def with_cell(donor: str, recipient: str, **changes: object) -> stage2.TransferMatrix:
        cells = tuple(
            replace(c, **changes) if (c.donor, c.recipient, c.kind) == (donor, recipient, "specialist") else c
            for c in matrix.cells
        )
        return replace(matrix, cells=cells)

    # Marketplace -> Craigslist given Craigslist -> Marketplace's difference (its interval still holds its mean).
    swapped = with_cell(MARKET, CRAIG, difference=matrix.cell(CRAIG, MARKET).difference)
    wrong = stage2.check_transfer_matrix(swapped)
    assert not wrong.passed and wrong.metadata["cells_not_recomputed"] == 1
    assert wrong.problems == (
        "specialist marketplace-v0 -> craigslist-v0: mean +0.100000, its episodes give +0.150000",
    )
    # A base mean from another domain's base.
    other_base = with_cell(DNND, CRAIG, base_mean=matrix.cell(DNND, CRAIG).base_mean + 0.1)
    assert "base mean" in stage2.check_transfer_matrix(other_base).problems[0]
    # A donor that played other episodes than the base on its recipient's plan.
    moved = [
        replace(r, keys=tuple(f"other|{k}" for k in r.keys))
        if (r.policy, r.env_id) == (specialist_policy(DNND), MARKET)
        else r
        for r in hand_made()
    ]
    unpaired = stage2.check_transfer_matrix(replace(matrix, scores=tuple(moved)))
    assert not unpaired.passed and unpaired.metadata["unpaired_cells"] == 1
    # Cells over different numbers of episodes (DnD's plan has three scenarios, the others four).
    short_rows = [scores(r.policy, r.env_id, list(r.rewards[:3])) if r.env_id == DNND else r for r in hand_made()]
    sizes = stage2.check_transfer_matrix(build_transfer_matrix(short_rows, domains))
    assert not sizes.passed and sizes.metadata["episodes_per_cell"] == [3, 4]
    # A missing specialist cell.
    gap = replace(matrix, cells=tuple(c for c in matrix.cells if (c.donor, c.recipient) != (CRAIG, MARKET)))
    assert stage2.check_transfer_matrix(gap).metadata["missing_cells"] == 1


def _cascade(stages: list[tuple[str, str, dict[str, dict[str, float]]]]) -> stage2.CascadeResult:
    """A hand-made cascade: per stage (domain, kept checkpoint, checkpoint -> per-domain probe rewards), every
    candidate's mean_seen the mean of its probe rewards."""
    order = tuple(d for d, _, _ in stages)
    built = []
    for index, (domain, chosen, probes) in enumerate(stages):
        candidates = tuple(
            stage2.CandidateScore(name, Path(name), dict(probe), sum(probe.values()) / len(probe))
            for name, probe in probes.items()
        )
        heldout = tuple(scores(f"cascade@stage{index}", d, BASE_REWARDS) for d in order)
        built.append(
            stage2.CascadeStage(
                index=index,
                domain=domain,
                init_adapter=None,
                sft_adapter=None,
                ppo_rewards=(0.1,),
                candidates=candidates,
                chosen=chosen,
                adapter=Path(chosen),
                heldout=heldout,
                wall_s=1.0,
            )
        )
    return stage2.CascadeResult(
        order=order,
        stages=tuple(built),
        adapter_dir=Path("a"),
        scores=built[-1].heldout,
        model_name=None,
        model_version=None,
        mlflow_run_id=None,
        curve_png=b"",
        resumed_stages=0,
        wall_s=1.0,
    )


def test_the_checkpoint_check_fails_when_a_stage_did_not_keep_its_best() -> None:
    """`cascade_kept_best_checkpoints` recomputes each candidate's mean over the domains seen so far from its
    recorded per-domain probe rewards; a kept checkpoint below the best fails, also when the stage's own
    recorded means (what `best_checkpoint` reads) were wrong in its favour."""
    from dataclasses import replace

    second = {
        "it00001": {DNND: 0.50, CRAIG: 0.20},
        "it00002": {DNND: 0.45, CRAIG: 0.40},  # the best mean over both seen domains, 0.425
        "it00003": {DNND: 0.05, CRAIG: 0.60},
    }
    first = {"it00001": {DNND: 0.3}, "it00002": {DNND: 0.5}}
    good = _cascade([(DNND, "it00002", first), (CRAIG, "it00002", second)])
    passed = stage2.check_kept_checkpoints(good)
    assert passed.passed and passed.problems == ()

    bad = _cascade([(DNND, "it00002", first), (CRAIG, "it00003", second)])
    failed = stage2.check_kept_checkpoints(bad)
    assert not failed.passed and failed.metadata["stages_not_best"] == [1]
    assert failed.problems == ("stage 1: kept it00003 (mean 0.3250 over 2 seen domains), it00002 has 0.4250",)
    # The stage's recorded mean says it00003 is best (so the old check, `best_checkpoint` over the recorded
    # means, passed); its probe rewards say otherwise.
    stage = bad.stages[1]
    inflated = tuple(replace(c, mean_seen=0.9) if c.checkpoint == "it00003" else c for c in stage.candidates)
    assert stage2.best_checkpoint(inflated).checkpoint == "it00003"
    lying = replace(bad, stages=(bad.stages[0], replace(stage, candidates=inflated)))
    problems = stage2.check_kept_checkpoints(lying).problems
    assert any("it00003 records mean 0.900000, its probe 0.325000" in p for p in problems)
    assert any("kept it00003" in p for p in problems)

    # A tie is not a failure (the asset keeps the later one; either is best).
    tie = _cascade([(DNND, "it00001", {"it00001": {DNND: 0.4}, "it00002": {DNND: 0.4}})])
    assert stage2.check_kept_checkpoints(tie).passed
    # A candidate probed on a domain not yet seen, a kept name that is no candidate, a missing held-out domain.
    unseen = _cascade([(DNND, "it00001", {"it00001": {DNND: 0.4, CRAIG: 0.9}})])
    assert (
        "probed on ['craigslist-v0', 'dnd-v0'], seen so far ['dnd-v0']"
        in stage2.check_kept_checkpoints(unseen).problems[0]
    )
    assert not stage2.check_kept_checkpoints(_cascade([(DNND, "it00009", first)])).passed
    short_heldout = replace(good, stages=(replace(good.stages[0], heldout=good.stages[0].heldout[:1]), good.stages[1]))
    assert stage2.check_kept_checkpoints(short_heldout).metadata["stages_incomplete"] == [0]


def test_the_topk_reverse_kl_matches_a_hand_computed_example() -> None:
    student = torch.log(torch.tensor([[0.5, 0.25, 0.125, 0.125]]))
    teacher = torch.tensor([0.4, 0.3, 0.2, 0.1])
    # The teacher's full distribution: the exact reverse KL sum_v p_s log(p_s / p_t).
    full = 0.5 * math.log(0.5 / 0.4) + 0.25 * math.log(0.25 / 0.3) + 0.125 * math.log(0.125 / 0.2)
    full += 0.125 * math.log(0.125 / 0.1)
    ids = torch.tensor([[0, 1, 2, 3]])
    kl = topk_reverse_kl(student, ids, torch.log(teacher)[ids], torch.ones_like(ids, dtype=torch.bool))
    assert float(kl[0]) == pytest.approx(full, abs=1e-6)
    assert full == pytest.approx(0.03513, abs=1e-5)
    # Top-2 of the teacher (tokens 0, 1) plus the tail {2, 3}: p_s(tail) = 0.25, p_t(tail) = 0.3.
    top2 = 0.5 * math.log(0.5 / 0.4) + 0.25 * math.log(0.25 / 0.3) + 0.25 * math.log(0.25 / 0.3)
    ids2 = torch.tensor([[0, 1, 0]])  # padded: the third entry is not real
    valid = torch.tensor([[True, True, False]])
    kl2 = topk_reverse_kl(student, ids2, torch.log(teacher)[ids2], valid)
    assert float(kl2[0]) == pytest.approx(top2, abs=1e-6)
    assert 0 < float(kl2[0]) < full  # the coarsened KL never exceeds the full one
    # Equal distributions: zero; and the gradient moves the student towards the teacher.
    everything = torch.ones(1, 4, dtype=torch.bool)
    same = topk_reverse_kl(torch.log(teacher)[None], ids, torch.log(teacher)[ids], everything)
    assert float(same[0]) == pytest.approx(0.0, abs=1e-7)
    logits = torch.zeros(1, 4, requires_grad=True)
    optimizer = torch.optim.SGD([logits], lr=1.0)
    first = None
    for _ in range(50):
        optimizer.zero_grad()
        loss = topk_reverse_kl(torch.log_softmax(logits, -1), ids, torch.log(teacher)[ids], everything)
        first = first if first is not None else float(loss.detach())
        loss.sum().backward()
        optimizer.step()
    assert float(loss) < first / 20
    assert torch.softmax(logits, -1)[0].tolist() == pytest.approx(teacher.tolist(), abs=0.02)


def test_the_curriculum_samples_a_closed_domain_less() -> None:
    teacher = {DNND: 0.6, CRAIG: 0.6, MARKET: 0.3}
    base = {DNND: 0.2, CRAIG: 0.2, MARKET: 0.3}
    student = {DNND: 0.6, CRAIG: 0.3, MARKET: 0.1}  # DnD closed, Craigslist open, Marketplace: no advantage
    gaps = curriculum_gaps(teacher, base, student, min_advantage=0.0)
    assert gaps[DNND] == pytest.approx(0.0) and gaps[CRAIG] == pytest.approx(0.75) and gaps[MARKET] is None
    probabilities = curriculum_probabilities(gaps, eps=0.05)
    assert probabilities[DNND] == pytest.approx(0.05 / 0.85) and probabilities[CRAIG] == pytest.approx(0.75 / 0.85)
    draws = sample_domains(probabilities, 2000, random.Random(0))
    assert draws.count(DNND) < draws.count(CRAIG) / 5
    assert draws.count(DNND) > 0 and draws.count(MARKET) > 0  # closed domains are still sampled now and then
    # A student that falls below the base re-opens more than the whole gap.
    assert curriculum_gaps(teacher, base, {**student, DNND: 0.1})[DNND] == pytest.approx(1.25)


def test_recovered_share_and_the_unified_table_from_hand_made_scores() -> None:
    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    # The specialists' own-domain advantages are 0.20, 0.25, 0.30; MOPD recovers all of DnD's, none of
    # Craigslist's and half of Marketplace's. The cascade equals the base.
    recovered = {DNND: 0.20, CRAIG: 0.0, MARKET: 0.15}
    mopd = [scores(stage2.MOPD, d, shifted(recovered[d])) for d in (DNND, CRAIG, MARKET)]
    cascade = [scores(stage2.CASCADE, d, BASE_REWARDS) for d in (DNND, CRAIG, MARKET)]
    shares = {
        d: stage2.domain_share(
            next(s for s in mopd if s.env_id == d),
            matrix.scores_of(BASE, d),
            matrix.scores_of(specialist_policy(d), d),
            0.0,
        )
        for d in (DNND, CRAIG, MARKET)
    }
    assert shares == pytest.approx({DNND: 1.0, CRAIG: 0.0, MARKET: 0.5})  # their mean would be 0.5
    assert stage2.domain_share(mopd[0], matrix.scores_of(BASE, DNND), matrix.scores_of(BASE, DNND), 0.0) is None
    # The recovered share is the ratio of the sums over the 12 paired episodes (the +-0.05 noise sums to 0):
    # 4 x (0.20 + 0 + 0.15) / 4 x (0.20 + 0.25 + 0.30) = 0.35 / 0.75, not the mean of the ratios.
    share = stage2.recovered_share(mopd, matrix)
    assert share.mean == pytest.approx(0.35 / 0.75) and share.reason is None
    assert share.advantage == pytest.approx(4 * 0.75) and share.per_domain == pytest.approx(shares)
    # Every resampled ratio weights the scenarios' own ratios, from (0 - 0.05) / (0.25 - 0.05) to 1.
    e = share.estimate
    assert (e.n, e.clusters) == (12, 12) and -0.25 - 1e-9 <= e.ci_low < e.mean < e.ci_high <= 1.0 + 1e-9
    assert share.as_dict() == {
        "mean": pytest.approx(0.35 / 0.75),
        "ci_low": e.ci_low,
        "ci_high": e.ci_high,
        "n": 12,
        "clusters": 12,
        "reason": None,
    }
    # A specialist below the base on its own domain: its ratio is undefined, the share still is not (the
    # summed advantage is 4 x (-0.10 + 0.25) > 0): 4 x (0.0 + 0.1) / 4 x 0.15.
    worse = [r for r in hand_made() if r.policy != specialist_policy(DNND) or r.env_id != DNND]
    worse_matrix = build_transfer_matrix(
        [*worse, scores(specialist_policy(DNND), DNND, shifted(-0.10))], matrix.domains
    )
    two = [scores(stage2.MOPD, DNND, shifted(0.0)), scores(stage2.MOPD, CRAIG, shifted(0.10))]
    mixed = stage2.recovered_share(two, worse_matrix)
    assert mixed.mean == pytest.approx(0.10 / 0.15) and mixed.per_domain[DNND] is None
    assert mixed.per_domain[CRAIG] == pytest.approx(0.4) and mixed.estimate.clusters == 8
    # No summed advantage to recover: undefined, saying why.
    none = stage2.recovered_share(two[:1], worse_matrix)
    assert none.mean is None and none.as_dict()["mean"] is None and "-0.4000" in str(none.reason)
    with pytest.raises(ValueError, match="same episodes"):
        stage2.recovered_share([scores(stage2.MOPD, DNND, [0.5, 0.5])], matrix)

    # Two trivial baselines on the same episodes: hold_target is best on DnD and Craigslist, accept_first on
    # Marketplace and pooled over the three domains ((0.10 + 0 + 0.30) / 3 against (0.15 + 0.05 + 0) / 3).
    rules = {"accept_first": (0.10, 0.0, 0.30), "hold_target": (0.15, 0.05, 0.0)}
    baselines = [
        scores(stage2.baseline_policy(name), d, shifted(o))
        for name, offsets in rules.items()
        for d, o in zip((DNND, CRAIG, MARKET), offsets, strict=True)
    ]
    unified = stage2.unified_evaluation(matrix, cascade, mopd, baselines, {}, None, None, "r")
    assert unified.row("specialist", CRAIG).estimate.mean == pytest.approx(0.45 + 0.25)
    hold, accept = stage2.baseline_policy("hold_target"), stage2.baseline_policy("accept_first")
    # Each trained row against the best rule on its own episodes: the specialists (+0.20, +0.25, +0.30 over
    # the base) beat it by 0.05 and 0.20 and tie it on Marketplace; pooled, they beat accept_first by 0.25 - 0.4/3.
    for domain, best, diff in ((DNND, hold, 0.05), (CRAIG, hold, 0.20), (MARKET, accept, 0.0)):
        row = unified.row("specialist", domain)
        assert row.best_baseline == best and row.vs_best_baseline.mean == pytest.approx(diff, abs=1e-9)
    mean_row = unified.row("specialist", stage2.MEAN)
    assert mean_row.best_baseline == accept and mean_row.vs_best_baseline.mean == pytest.approx(0.25 - 0.4 / 3)
    assert unified.row(stage2.CASCADE, stage2.MEAN).vs_best_baseline.mean == pytest.approx(-0.4 / 3)
    # The SFT warm-start exists on Craigslist only: its mean row is compared with the rule best there.
    assert unified.row("sft", stage2.MEAN).best_baseline == hold
    assert unified.row("sft", stage2.MEAN).vs_best_baseline.mean == pytest.approx(0.0, abs=1e-9)
    # The base and the rules themselves are not compared with a rule; the rules have their own rows.
    assert unified.row("base", DNND).vs_best_baseline is None and unified.row(hold, DNND).vs_best_baseline is None
    assert unified.row(accept, MARKET).vs_base.mean == pytest.approx(0.30)
    assert unified.baselines() == [accept, hold]
    versus = unified.vs_best_baseline_json()
    assert set(versus) == {"sft", "specialist", "cascade", "mopd"} and versus["sft"].keys() == {CRAIG, "mean"}
    assert versus["specialist"][CRAIG]["baseline"] == hold and versus["specialist"]["mean"]["n"] == 12
    assert "Δ hold_target +0.200" in unified.markdown() and f"| {accept} |" in unified.markdown()
    assert unified.row("specialist", stage2.MEAN).vs_base.mean == pytest.approx((0.20 + 0.25 + 0.30) / 3)
    assert unified.row(stage2.CASCADE, stage2.MEAN).vs_base.mean == pytest.approx(0.0)
    assert unified.row("sft", CRAIG).vs_base.mean == pytest.approx(0.05)
    with pytest.raises(KeyError):
        unified.row("sft", DNND)  # only Craigslist has a warm-start: the SFT row is on its own domain only
    data = unified.as_json()
    assert set(data) == {"base", "sft", "specialist", "cascade", "mopd", accept, hold} and set(data["mopd"]) == {
        DNND,
        CRAIG,
        MARKET,
        "mean",
    }
    assert data["base"][DNND]["n"] == 4 and data["mopd"]["mean"]["n"] == 12
    assert "| mopd |" in unified.markdown() and unified.bars_png.startswith(b"\x89PNG")
    assert {r["policy"] for r in unified.table_rows("r")} == set(data)
    from models.records import UNIFIED_EVALUATION_COLUMNS

    assert all(set(row) == set(UNIFIED_EVALUATION_COLUMNS) for row in unified.table_rows("r"))  # what the store takes
    with pytest.raises(ValueError, match="cascade: evaluated on"):
        stage2.unified_evaluation(matrix, cascade[:2], mopd, baselines, {}, None, None, "r")
    with pytest.raises(ValueError, match="baseline:hold_target: evaluated on"):
        stage2.unified_evaluation(matrix, cascade, mopd, baselines[:-1], {}, None, None, "r")
    # Without baselines the table still builds; no trained row claims a comparison it did not make.
    bare = stage2.unified_evaluation(matrix, cascade, mopd, (), {}, None, None, "r")
    assert all(r.vs_best_baseline is None for r in bare.rows) and bare.vs_best_baseline_json() == {}


def test_the_baselines_play_the_stage2_heldout_plan_of_every_domain() -> None:
    """Code only (no engine): each rule on each domain's held-out plan, the same episodes for every rule."""
    from dataclasses import replace

    from models.profiles import get_profile

    cpu = get_profile("cpu")  # its stage-2 counterparts (boulware, conceder), 4 of its 16 held-out scenarios
    profile = replace(cpu, stage2=replace(cpu.stage2, heldout_scenarios=4))
    played = stage2.evaluate_baselines(profile, (CRAIG, CASINO))
    plan = {d: stage2.heldout_plan(profile, d) for d in (CRAIG, CASINO)}
    assert sorted({s.policy for s in played}) == [
        "baseline:accept_first", "baseline:hold_target", "baseline:split_difference"
    ]  # fmt: skip
    for domain in (CRAIG, CASINO):
        mine = [s for s in played if s.env_id == domain]
        assert len(mine) == 3 and len({s.keys for s in mine}) == 1  # the same episodes for every rule
        assert len(mine[0].keys) == len(plan[domain].scenario_list()) * len(plan[domain].counterparts) == 8
        assert all(0.0 <= r <= 1.0 for s in mine for r in s.rewards)
    # The rules differ (hold_target and accept_first do not score alike on Craigslist's buyer seat).
    craig = {s.policy: s.rewards for s in played if s.env_id == CRAIG}
    assert craig["baseline:hold_target"] != craig["baseline:accept_first"]


def test_run_stage2_writes_the_recovered_share_with_its_interval_and_the_clusters_per_cell() -> None:
    from types import SimpleNamespace

    from pipelines.run_stage2 import result_json

    matrix = build_transfer_matrix(hand_made(), (DNND, CRAIG, MARKET))
    mopd = tuple(scores(stage2.MOPD, d, shifted(o)) for d, o in ((DNND, 0.20), (CRAIG, 0.0), (MARKET, 0.15)))
    share = stage2.recovered_share(mopd, matrix)
    student = stage2.MOPDStudentResult(
        domains=matrix.domains,
        adapter_dir=Path("a"),
        steps=4,
        history=(),
        targets={},
        gap_curve=(),
        scores=mopd,
        recovered=share.per_domain,
        model_name=None,
        model_version=None,
        mlflow_run_id=None,
        gap_png=b"",
        resumed_from=None,
        wall_s=1.0,
        share=share,
    )
    used = {
        d: {"model": f"socialrl-{d}", "version": 1, "source": "stage1 registry", "plan": "p"} for d in matrix.domains
    }
    outputs = {
        "transfer_matrix": SimpleNamespace(matrix=matrix, sources_json=lambda: used),
        "cascade_order": choose_cascade_order(matrix.means(), matrix.domains),
        "unified_evaluation": SimpleNamespace(as_json=lambda: {}, vs_best_baseline_json=lambda: {}),
        "mopd_student": student,
        "cascade_policy": SimpleNamespace(
            curve=lambda: {CRAIG: [0.17, 0.04], DNND: [0.0, 0.46]},
            stages=(
                SimpleNamespace(index=0, domain=CRAIG, chosen="checkpoint-2", wall_s=519.04),
                SimpleNamespace(index=1, domain=DNND, chosen="checkpoint-1", wall_s=569.26),
            ),
        ),
    }
    from pipelines.run_lineage import StepResult

    steps = [
        StepResult(
            name="stage1_job[dnd-v0]",
            job="stage1_job",
            partition=DNND,
            success=True,
            seconds=692.04,
            run_id="r1",
            step_seconds={"specialist": 401.26},
        ),
        StepResult(
            name="stage2_job",
            job="stage2_job",
            partition=None,
            success=True,
            seconds=1980.0,
            run_id="r2",
            step_seconds={"transfer_matrix": 270.44},
        ),
    ]
    result = result_json(outputs, matrix.domains, 1.0, steps)
    assert list(result) == [
        "env_version", "domains", "specialists_source", "transfer_matrix", "transfer_matrix_vs_warmstart",
        "clusters_per_cell", "cascade_order", "unified",
        "unified_vs_best_baseline", "mopd_recovered_share", "mopd_recovered_share_over_warmstart", "mopd_steps",
        "mopd_student_init", "mopd_curriculum", "cascade_curve", "cascade_stages", "steps", "wall_s",
    ]  # fmt: skip
    # Over the warm-start: only Craigslist has one (base + 0.05 there); its specialist is +0.25 over the base and
    # the student +0.0, so the student recovers (0 - 0.05) / (0.25 - 0.05) of it, on Craigslist's 4 episodes.
    over_warm = result["mopd_recovered_share_over_warmstart"]
    assert over_warm["mean"] == pytest.approx(-0.05 / 0.20) and (over_warm["n"], over_warm["clusters"]) == (4, 4)
    # The run's own records: the cascade's forgetting curve and stage times, each Dagster run's step times.
    assert result["cascade_curve"] == {CRAIG: [0.17, 0.04], DNND: [0.0, 0.46]}
    assert result["cascade_stages"] == [
        {"stage": 1, "domain": CRAIG, "kept": "checkpoint-2", "wall_s": 519.0},
        {"stage": 2, "domain": DNND, "kept": "checkpoint-1", "wall_s": 569.3},
    ]
    assert result["steps"] == [
        {"name": "stage1_job[dnd-v0]", "run_id": "r1", "seconds": 692.0, "skipped": False,
         "step_seconds": {"specialist": 401.3}},
        {"name": "stage2_job", "run_id": "r2", "seconds": 1980.0, "skipped": False,
         "step_seconds": {"transfer_matrix": 270.4}},
    ]  # fmt: skip
    assert result["specialists_source"] == used
    # No start recorded (results stored before it was all started fresh) and no curriculum decision.
    assert (result["mopd_student_init"], result["mopd_curriculum"]) == ("fresh LoRA (no warm-start)", [])
    assert result["clusters_per_cell"] == 4  # four scenarios per hand-made plan
    written = result["mopd_recovered_share"]
    assert written["mean"] == pytest.approx(0.35 / 0.75) and (written["n"], written["clusters"]) == (12, 12)
    assert written["ci_low"] < written["mean"] < written["ci_high"]
    json.dumps(result)
    assert f"recovered share {0.35 / 0.75:.1%} [" in student.summary() and "per-domain ratios: dnd-v0 100.0%" in (
        student.summary()
    )
    # A result stored before the share existed: recomputed from its held-out scores.
    older = stage2.MOPDStudentResult(
        domains=matrix.domains,
        adapter_dir=Path("a"),
        steps=4,
        history=(),
        targets={},
        gap_curve=(),
        scores=mopd,
        recovered=share.per_domain,
        model_name=None,
        model_version=None,
        mlflow_run_id=None,
        gap_png=b"",
        resumed_from=None,
        wall_s=1.0,
    )
    assert result_json({**outputs, "mopd_student": older}, matrix.domains, 1.0, steps) == result


def test_the_share_over_the_warm_start_is_undefined_where_the_specialists_do_not_beat_it() -> None:
    """A specialist below its own warm-start leaves nothing to recover over it (as the cpu run's Craigslist
    specialist after PPO); without any evaluated warm-start there is no floor at all."""
    rows = [r for r in hand_made() if r.policy != sft_policy(CRAIG)]
    rows += [scores(sft_policy(CRAIG), r, shifted(0.30)) for r in (DNND, CRAIG, MARKET)]  # above the specialist
    matrix = build_transfer_matrix(rows, (DNND, CRAIG, MARKET))
    mopd = tuple(scores(stage2.MOPD, d, shifted(0.10)) for d in (DNND, CRAIG, MARKET))
    share = stage2.recovered_share(mopd, matrix, floor="warmstart")
    assert share.mean is None and "over their warm-starts is -0.2000" in share.reason and share.estimate.n == 4
    assert stage2.recovered_share(mopd, matrix).mean == pytest.approx((0.1 * 3) / (0.20 + 0.25 + 0.30))
    bare = build_transfer_matrix([r for r in rows if r.policy != sft_policy(CRAIG)], (DNND, CRAIG, MARKET))
    assert stage2.recovered_share(mopd, bare, floor="warmstart").reason == (
        "no domain's warm-start was evaluated on its own plan"
    )
    with pytest.raises(ValueError, match="floor must be one of"):
        stage2.recovered_share(mopd, matrix, floor="sft")


def test_policy_scores_refuse_unpaired_comparisons() -> None:
    a = scores(BASE, DNND, BASE_REWARDS)
    b = PolicyScores(BASE, DNND, "m", ("x", "y"), ("c", "c"), (0.1, 0.2))
    with pytest.raises(ValueError, match="not paired"):
        a.minus(b)
    assert PolicyScores.from_dict(a.as_dict()) == a


def test_the_nightly_evaluation_covers_stage2_champions_on_each_domain(tmp_path: Path) -> None:
    from assets.monitoring import _domains_of, _summary
    from models.evaluation.policy import EvaluationResult, PolicyEpisode, summarise
    from resources import SettingsResource

    settings = SettingsResource(profile="cpu", data_dir=str(tmp_path))
    assert _domains_of("socialrl-dnd-specialist", {}, settings) == [DNND]
    tagged = {stage2.DOMAINS_TAG: f"{CRAIG},{MARKET}"}
    assert _domains_of(stage2.CASCADE_MODEL, tagged, settings) == [CRAIG, MARKET]
    assert _domains_of(stage2.MOPD_MODEL, {}, settings) == list(settings.get_profile().stage2.domains)
    with pytest.raises(ValueError, match="neither a SocialRL specialist nor a stage-2 policy"):
        _domains_of("yoao-seed", {}, settings)

    def result(env_id: str, rewards: list[float]) -> EvaluationResult:
        episodes = [
            PolicyEpisode(
                episode_id=f"{env_id}:{i}",
                counterpart="boulware",
                seat="buyer",
                scenario_id=f"s{i}",
                seed=i,
                reward=r,
                utility=r,
                agreement=True,
                pareto_optimal=None,
                invalid_actions=0,
                policy_turns=1,
                leaked=(),
                timeouts=0,
                rounds=2,
                scenario_index=i,
            )
            for i, r in enumerate(rewards)
        ]
        summary = summarise(episodes)
        return EvaluationResult(
            env_id=env_id,
            policy="p",
            seat="buyer",
            counterparts=("boulware",),
            scenario_source="given",
            seed=0,
            episodes=[],
            policy_episodes=episodes,
            summary=summary,
            by_counterpart=None,
        )

    one = result(CRAIG, [0.2, 0.4])
    assert _summary([one]) is one.summary
    both = _summary([one, result(MARKET, [0.6, 0.8, 1.0, 0.0])])
    # Pooled over both domains' episodes, each scenario its own cluster (scenario indexes repeat across domains).
    assert both.n == 6 and both.mean_reward == pytest.approx(3.0 / 6)
    assert both.ci_low < both.mean_reward < both.ci_high


def test_a_reexecuted_cascade_keeps_the_stages_an_earlier_attempt_finished(tmp_path: Path) -> None:
    """A stage with its stage.json is not trained again: with every stage finished, re-executing the cascade
    only assembles the result (no engine, no training), from the kept adapters and held-out scores."""
    from models.profiles import get_profile

    order = (DNND, CRAIG)
    output = tmp_path / "cascade"
    for index, domain in enumerate(order):
        stage_dir = output / f"stage{index}-{stage2.short(domain)}"
        (stage_dir / "chosen").mkdir(parents=True)
        (stage_dir / "chosen" / "adapter_config.json").write_text(f'{{"stage": {index}}}')
        candidates = (stage2.CandidateScore("it00001", stage_dir / "ppo", {domain: 0.1}, 0.1),)
        heldout = tuple(scores(f"cascade@stage{index}", d, shifted(0.05 * index)) for d in order)
        stage = stage2.CascadeStage(
            index=index,
            domain=domain,
            init_adapter=None,
            sft_adapter=None,
            ppo_rewards=(0.1,),
            candidates=candidates,
            chosen="it00001",
            adapter=stage_dir / "chosen",
            heldout=heldout,
            wall_s=1.0,
        )
        (stage_dir / "stage.json").write_text(json.dumps(stage.to_json()))
    result = stage2.train_cascade(order, get_profile("smoke"), tmp_path, tmp_path, None, output, None)  # type: ignore[arg-type]
    assert result.resumed_stages == 2 and [s.domain for s in result.stages] == list(order)
    assert (result.adapter_dir / "adapter_config.json").read_text() == '{"stage": 1}'  # the last stage's adapter
    assert [s.policy for s in result.scores] == ["cascade", "cascade"]
    assert result.curve()[CRAIG] == pytest.approx([sum(BASE_REWARDS) / 4, sum(BASE_REWARDS) / 4 + 0.05])
    assert result.curve_png.startswith(b"\x89PNG") and result.model_version is None


def test_student_log_distributions_equal_the_full_log_softmax_at_the_agent_positions(tiny_model_dir: Path) -> None:
    """Only the agent positions go through the LM head (logits_to_keep); the result is the full forward's."""
    from models.training.config import LoraSettings
    from models.training.mopd import student_log_distributions
    from models.training.segments import Segment
    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    model, tokenizer = load_lora_model(tiny_model_dir, LoraSettings(r=8, alpha=16))
    model.eval()
    long = Segment(list(range(100, 140)), [30, 31, 32, 38, 39], [0.0] * 5)
    short = Segment(list(range(200, 220)), [5, 6, 19], [0.0] * 3)  # padded in the batch
    with torch.no_grad():
        got = student_log_distributions(
            model, [long, short], [long.agent_positions, short.agent_positions], tokenizer.pad_token_id
        )
        for segment, result in zip((long, short), got, strict=True):
            full = torch.log_softmax(model(input_ids=torch.tensor([segment.input_ids])).logits[0].float(), -1)
            expected = full[torch.tensor(segment.agent_positions) - 1]
            assert result.shape == expected.shape
            assert torch.allclose(result, expected, atol=1e-4)


def test_run_stage2_sizes_its_specialists_apart_from_make_run() -> None:
    """The cpu profile trains stage 2's specialists smaller than `make run` (its stage-2 domains must fit the
    stage-2 budget): the resource built for them sees the smaller PPO and evaluation, and their runs carry their own
    profile tag, so `make run` on the same instance neither skips its own run nor reports theirs."""
    from models.profiles import get_profile
    from pipelines.definitions import build_resources
    from pipelines.launcher import profile_tag

    cpu = get_profile("cpu")
    sized = build_resources("cpu", stage2_specialists=True)["settings"].get_profile()
    plain = build_resources("cpu")["settings"].get_profile()
    assert plain == cpu
    assert (sized.ppo.iterations, sized.ppo.episodes_per_iteration, sized.heldout_scenarios) == (2, 8, 4)
    assert (cpu.ppo.iterations, cpu.ppo.episodes_per_iteration, cpu.heldout_scenarios) == (3, 16, 32)
    assert sized.sft == cpu.sft and sized.ppo.hyper == cpu.ppo.hyper  # only the sizes change
    assert profile_tag("cpu", stage2_specialists=True) != profile_tag("cpu") == "cpu"
    # A profile that sets no specialist sizes trains stage 2's specialists as `make run` does.
    smoke = get_profile("smoke")
    assert smoke.for_stage2_specialists() == smoke


def test_the_gap_plot_names_a_domain_whose_gap_is_never_defined() -> None:
    """The cpu run's specialists did not beat the base on the probe, and the gap plot was an empty frame; a
    domain without a defined gap now says why in its legend, a defined one keeps its values."""
    curve = [(0, {"craigslist-v0": 1.0, "marketplace-v0": None}), (2, {"craigslist-v0": 0.4, "marketplace-v0": None})]
    closing, undefined = stage2.gap_series(curve, ["craigslist-v0", "marketplace-v0"])
    assert (closing.label, list(closing.x), list(closing.y)) == ("craigslist", [0, 2], [1.0, 0.4])
    assert undefined.label.startswith("marketplace (undefined") and all(math.isnan(y) for y in undefined.y)
    assert stage2.gap_curve_png(curve, ["craigslist-v0", "marketplace-v0"]).startswith(b"\x89PNG")
