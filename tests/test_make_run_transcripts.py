"""What the agents say: the held-out evaluation keeps the best, median and worst episode of the base, the warm-start,
the specialist and the teacher (`SpecialistEvaluation.transcripts`, the warm-start's and the teacher's carried from
the imitation measurement), the asset metadata holds them as JSON (`transcripts_json`), and `make run` writes them
beside its report (pipelines/run_lineage.py `write_transcripts`).

The served models are played by code agents here (`evaluate_model` stood in for), so the whole path runs without
an engine on the smoke profile's plan."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from agents.socialrl.code_agents import make_code_agent
from models.display import display_json, strict_json
from models.evaluation.policy import evaluate_policy
from models.evaluation.safe_text import escape_markdown
from models.profiles import get_profile
from models.socialrl import stage1
from models.socialrl.stage1 import evaluation as stage1_evaluation

# The code agent standing in for each served model.
PLAYED_BY = {"base": "conceder", "sft-model": "reciprocal", "ppo-model": "boulware"}
ENV = "craigslist-v0"


@pytest.fixture
def served_by_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def evaluate_model(env_id, profile, base_url, model, seed=0, scenarios=None, seat=None, api_key=None, plan=None):
        return evaluate_policy(plan, lambda s: make_code_agent(PLAYED_BY[model], s))

    monkeypatch.setattr(stage1_evaluation, "evaluate_model", evaluate_model)


def _specialist() -> stage1.Specialist:
    return stage1.Specialist(
        env_id=ENV, seat="buyer", adapter_dir="/a", run_name="run", served_name="run-v1", init_adapter_dir=None,
        curve=(), model_name="socialrl-craigslist-specialist", model_version=1,
    )  # fmt: skip


def _imitation() -> stage1.WarmStartImitation:
    return stage1.measure_imitation(ENV, get_profile("smoke"), "http://unused", "sft-model", "run")


def _evaluate(imitation: stage1.WarmStartImitation | None) -> stage1.SpecialistEvaluation:
    served = {"base": "base", "ppo": "ppo-model"}
    return stage1.evaluate_specialist(
        ENV, get_profile("smoke"), "http://unused", served, _specialist(), "run", imitation
    )


def test_the_evaluation_keeps_each_policys_best_median_and_worst_episode(served_by_code) -> None:
    imitation = _imitation()
    evaluation = _evaluate(imitation)
    # Every policy's kept, in the report's order (the base's for the asset page; it follows no format).
    assert list(dict.fromkeys(t.policy for t in evaluation.transcripts)) == ["base", "sft", "ppo", "teacher"]
    said = evaluation.representative_episodes()
    assert list(said) == ["sft", "ppo", "teacher"]  # the warm-start's and teacher's carried from the imitation
    counterparts = set(get_profile("smoke").eval_counterparts)
    for policy, entries in said.items():
        labels = [label for entry in entries for label in entry["labels"]]
        assert {"best", "median", "worst"} <= set(labels), policy
        rewards = [r.metrics["reward"] for r in evaluation.policies[policy].records]
        by_label = {label: entry for entry in entries for label in entry["labels"]}
        assert by_label["best"]["reward"] == pytest.approx(max(rewards)), policy
        assert by_label["worst"]["reward"] == pytest.approx(min(rewards)), policy
        for entry in entries:
            assert set(entry) == {
                "labels", "episode_id", "scenario_id", "counterpart", "reward", "agreement", "markdown"
            }  # fmt: skip
            # The counterpart is the one the episode id names ("<prefix>:<counterpart>:<index>:<seat>").
            assert entry["counterpart"] in counterparts and entry["episode_id"].split(":")[-3] == entry["counterpart"]
            assert isinstance(entry["agreement"], bool) and entry["scenario_id"]
    # The markdown is the asset page's: the buyer's private target, whole, and the policy seat marked.
    sft = evaluation.transcripts[[t.policy for t in evaluation.transcripts].index("sft")]
    entry = said["sft"][0]
    assert escape_markdown(sft.seat("buyer").private_values[0]) in entry["markdown"]
    assert (
        escape_markdown("buyer (policy)") in entry["markdown"]
        and f"episode {escape_markdown(entry['episode_id'])}" in entry["markdown"]
    )
    # The warm-start's and the teacher's are the ones the imitation measurement chose (not played again).
    assert [t for t in evaluation.transcripts if t.policy in ("sft", "teacher")] == list(imitation.transcripts)
    # The Dagster metadata entry stays small and strict; the stored output pickles with its transcripts.
    metadata = strict_json(display_json(said))
    assert len(metadata) < 200_000
    assert pickle.loads(pickle.dumps(evaluation)).transcripts == evaluation.transcripts


def test_without_a_warm_start_the_teacher_is_shown_beside_the_specialist(served_by_code) -> None:
    said = _evaluate(None).representative_episodes()
    assert list(said) == ["ppo", "teacher"]
    assert all({"best", "median", "worst"} <= {x for e in entries for x in e["labels"]} for entries in said.values())


def test_outputs_stored_before_the_transcripts_were_kept_still_load(served_by_code) -> None:
    """A pickle of an evaluation (or imitation) from before the field has no `transcripts` in its state: it loads,
    with none."""
    imitation = _imitation()
    assert {t.policy for t in imitation.transcripts} == {"sft", "teacher"}
    for stored in (imitation, _evaluate(None)):
        state = dict(stored.__dict__)
        del state["transcripts"]
        old = object.__new__(type(stored))
        old.__dict__.update(state)
        assert pickle.loads(pickle.dumps(old)).transcripts == ()


def test_make_run_writes_what_the_agents_said_beside_its_report(tmp_path: Path) -> None:
    from models.settings import DataPaths
    from pipelines.launcher import Materialisation
    from pipelines.run_lineage import StepResult, _transcripts, write_report, write_transcripts

    episode = {
        "labels": ["best", "median"], "episode_id": "e:boulware:0:buyer", "scenario_id": "s0",
        "counterpart": "boulware", "reward": 0.5, "agreement": True, "markdown": "#### best · reward 0.500",
    }  # fmt: skip
    said = {"sft": [episode], "ppo": [episode], "teacher": [episode]}
    marker = Materialisation("specialist_eval", ENV, "r", 0.0, {"report": {}, "representative_episodes": said})
    assert _transcripts(marker) == said
    assert _transcripts(Materialisation("specialist_eval", "dnd-v0", "r", 0.0, {})) is None  # stored before
    assert _transcripts(None) is None

    def step(partition: str | None, transcripts: dict | None) -> StepResult:
        name = f"stage1_job[{partition}]" if partition else "tournament_job"
        job = "stage1_job" if partition else "tournament_job"
        return StepResult(
            name=name, job=job, partition=partition, success=True, seconds=1.0, run_id="r", report={"paired": {}},
            transcripts=transcripts,
        )  # fmt: skip

    steps = [step(None, None), step(ENV, said), step("dnd-v0", None)]
    paths = DataPaths(tmp_path / "data")
    report = write_report(paths, "cpu", steps, 2.0)
    written = write_transcripts(paths, "cpu", steps)
    assert written.parent == report.parent and written.name.startswith("make-run-transcripts-")
    parsed = json.loads(written.read_text(), parse_constant=lambda c: pytest.fail(f"bare {c}"))
    from agents.env_version import env_version
    from models.provenance import PROVENANCE_KEYS, code_state

    assert set(parsed) == {*PROVENANCE_KEYS, "domains"}
    assert parsed["env_version"] == env_version() and parsed["commit"] == code_state().commit
    assert parsed["profile"] == "cpu" and parsed["domains"] == {ENV: said}  # a domain without any is left out
    # The report stays the numbers: no transcripts in its steps.
    assert all("transcripts" not in s for s in json.loads(report.read_text())["steps"])
