"""Episode records: written as Parquet shards, read back through DuckDB, summarised per environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.socialrl.tournament import TournamentConfig, run_tournament
from models.evaluation.reports import agent_summary, environment_summary
from models.records import TABLES, rows_for
from models.storage import TableStore


@pytest.fixture(scope="module")
def tournament_results() -> list:
    config = TournamentConfig(
        env_ids=("craigslist-v0",), agents=("boulware", "conceder"), scenarios_per_pairing=3, seed=2
    )
    return run_tournament(config)


def test_tournament_plays_every_ordered_pair_on_the_same_scenarios(tournament_results: list) -> None:
    assert len(tournament_results) == 2 * 2 * 3
    pairs = {tuple(r.agent_names[s].split("(")[0] for s in ("buyer", "seller")) for r in tournament_results}
    assert pairs == {
        ("boulware", "boulware"),
        ("boulware", "conceder"),
        ("conceder", "boulware"),
        ("conceder", "conceder"),
    }
    scenario_ids = {r.scenario.scenario_id for r in tournament_results}
    assert len(scenario_ids) == 3


def test_rows_round_trip_through_parquet_and_duckdb(tmp_path: Path, tournament_results: list) -> None:
    store = TableStore(tmp_path)
    rows = rows_for(tournament_results, run_id="r1")
    store.append_all(rows)
    episodes = store.query("SELECT * FROM episodes ORDER BY episode_id")
    assert len(episodes) == len(tournament_results)
    assert list(episodes.columns) == list(TABLES["episodes"])
    first = sorted(tournament_results, key=lambda r: r.episode_id)[0]
    row = episodes.iloc[0]
    assert row.episode_id == first.episode_id
    assert bool(row.agreement) == first.outcome.agreement
    assert json.loads(row.deal) == first.outcome.deal
    roles = store.query("SELECT * FROM episode_roles WHERE episode_id = ? ORDER BY agent_id", [first.episode_id])
    assert roles.reward.tolist() == pytest.approx([first.outcome.roles[a].reward for a in sorted(first.outcome.roles)])
    turns = store.query("SELECT count(*) AS n FROM episode_turns WHERE episode_id = ?", [first.episode_id])
    assert int(turns.n[0]) == len(first.transcript)


def test_summary_matches_a_direct_computation(tmp_path: Path, tournament_results: list) -> None:
    store = TableStore(tmp_path)
    store.append_all(rows_for(tournament_results, run_id="r1"))
    store.append_all(rows_for(tournament_results[:2], run_id="other"))  # another run must not leak in
    summary = environment_summary(store, "r1")
    assert summary.env_id.tolist() == ["craigslist-v0"]
    assert int(summary.episodes[0]) == len(tournament_results)
    expected_agreement = sum(r.outcome.agreement for r in tournament_results) / len(tournament_results)
    assert summary.agreement_rate[0] == pytest.approx(expected_agreement)
    buyer_mean = sum(r.outcome.roles["buyer"].reward for r in tournament_results) / len(tournament_results)
    assert f"buyer={buyer_mean:.3f}" in summary.mean_reward_per_role[0]
    agents = agent_summary(store, "r1")
    assert set(agents.agent) == {"boulware", "conceder"}


def test_empty_store_gives_empty_views_and_bad_rows_are_rejected(tmp_path: Path) -> None:
    store = TableStore(tmp_path)
    assert store.query("SELECT count(*) AS n FROM episodes").n[0] == 0
    with pytest.raises(ValueError, match="not in the schema"):
        store.append("episodes", [{"episode_id": "x", "bogus": 1}])
    with pytest.raises(KeyError, match="unknown table"):
        store.append("nope", [{"a": 1}])
    assert store.append("episodes", []) is None


def test_a_stray_temporary_file_from_a_crashed_writer_is_ignored(tmp_path: Path, tournament_results: list) -> None:
    store = TableStore(tmp_path)
    store.append_all(rows_for(tournament_results[:1], run_id="r"))
    (tmp_path / "episodes" / ".dead.parquet.tmp").write_bytes(b"half a file")
    assert store.query("SELECT count(*) AS n FROM episodes").n[0] == 1


# ---------------------------------------------------------------------------------------------- bad rows
def test_a_lone_surrogate_is_stored_escaped_and_loses_nothing(tmp_path: Path) -> None:
    store = TableStore(tmp_path)
    rows = [{"episode_id": f"e{i}", "env_id": "dnd-v0", "agents": "{}", "seed": i} for i in range(300)]
    rows[150]["agents"] = '{"alice": "a\ud800b"}'  # a JSON "\ud800" escape decodes to a lone surrogate
    result = store.append_rows("episodes", rows)
    assert result.written == 300 and result.rejected == ()
    stored = store.query("SELECT agents FROM episodes WHERE episode_id = 'e150'").agents[0]
    assert stored == '{"alice": "a\\ud800b"}'  # the bad code point written as its escape


def test_one_row_that_does_not_fit_the_schema_never_loses_the_others(tmp_path: Path) -> None:
    store = TableStore(tmp_path)
    rows = [{"episode_id": f"e{i}", "env_id": "dnd-v0", "seed": i, "rounds": 3} for i in range(300)]
    rows[7]["rounds"] = 2**31  # an INTEGER column
    rows[200]["seed"] = "not a number"
    result = store.append_rows("episodes", rows)
    assert result.written == 298 and [r.index for r in result.rejected] == [7, 200]
    assert int(store.query("SELECT count(*) AS n FROM episodes").n[0]) == 298
    dead = store.dead_letters("episodes")
    assert [d["row"]["episode_id"] for d in dead] == ["e7", "e200"]
    assert "out of range" in dead[0]["reason"] and dead[1]["reason"]
    assert store.append("episodes", [{"episode_id": "later", "env_id": "dnd-v0"}]) is not None  # still writable


def test_columns_outside_the_schema_are_still_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not in the schema"):
        TableStore(tmp_path).append("episodes", [{"episode_id": "e"}, {"episode_id": "f", "colour": "red"}])
