"""Transcripts from the episode tables (models/evaluation/transcripts.py defines them and renders them): any
episodes by id (`load_transcripts`), or the best, median, worst and most-refused episode of every policy of an
evaluation run (`representative_transcripts_from_store`). The scenario is rebuilt from its JSON (`episodes.scenario`);
when that fails, the transcript says so in `note` and shows no private facts. Refused attempts come from
`episode_attempts`; an episode recorded before that table existed shows its accepted turns only."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from environments.core.base import Scenario
from environments.core.registry import env_class
from models.evaluation.representatives import ScoredEpisode, pick_representatives
from models.evaluation.transcripts import (
    PrivateView,
    SeatView,
    Transcript,
    TranscriptAttempt,
    TranscriptTurn,
    private_views,
)
from models.storage import TableStore

if TYPE_CHECKING:  # pragma: no cover
    pass

log = logging.getLogger("socialrl.transcripts")


def scenario_from_json(env_id: str, text: str | None) -> Scenario | None:
    """The scenario dataclass rebuilt from `episodes.scenario` JSON, or None when it does not round-trip
    (then the caller shows no private facts)."""
    if not text:
        return None
    try:
        data = json.loads(text)
        return env_class(env_id).scenario_type(**data)
    except Exception as exc:
        log.info("%s: cannot rebuild the scenario from its JSON (%s: %s)", env_id, type(exc).__name__, exc)
        return None


def _loads(text: Any, default: Any) -> Any:
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def _optional_float(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def transcript_from_rows(
    episode: Mapping[str, Any],
    roles: Sequence[Mapping[str, Any]],
    turns: Sequence[Mapping[str, Any]],
    policy_seat: str | None = None,
    labels: Sequence[str] = (),
    policy: str = "",
    attempts: Sequence[Mapping[str, Any]] = (),
) -> Transcript:
    """A transcript from one row of `episodes` and its rows of `episode_roles`, `episode_turns` and
    `episode_attempts` (columns of models/records.py)."""
    env_id = str(episode["env_id"])
    seed = int(episode["seed"]) if episode.get("seed") is not None else 0
    scenario = scenario_from_json(env_id, episode.get("scenario"))
    views, note = private_views(env_id, scenario, seed, None)
    agents = _loads(episode.get("agents"), {})
    seat_order = list(agents) or [str(r["agent_id"]) for r in roles]
    role_by_seat = {str(r["agent_id"]): r for r in roles}
    seat_order += [s for s in role_by_seat if s not in seat_order]
    seats = []
    for seat in seat_order:
        role = role_by_seat.get(seat, {})
        invalid = role.get("invalid_actions")
        seats.append(
            SeatView(
                seat=seat,
                agent=str(role.get("agent_name") or agents.get(seat, "")),
                reward=_optional_float(role.get("reward")),
                utility=_optional_float(role.get("utility")),
                invalid_actions=None if invalid is None else int(invalid),
                leaked=tuple(_loads(role.get("leaked"), [])),
                private_text=views.get(seat, PrivateView()).texts,
                private_facts=views.get(seat, PrivateView()).facts,
                private_values=views.get(seat, PrivateView()).values,
            )
        )
    ordered = sorted(turns, key=lambda t: int(t["turn_index"]))
    agreement = episode.get("agreement")
    return Transcript(
        episode_id=str(episode["episode_id"]),
        env_id=env_id,
        scenario_id=str(episode.get("scenario_id") or ""),
        seed=seed,
        seats=tuple(seats),
        turns=tuple(
            TranscriptTurn(
                int(t["turn_index"]),
                str(t["agent_id"]),
                str(t["kind"]),
                str(t.get("text") or ""),
                _loads(t.get("payload"), {}),
            )
            for t in ordered
        ),
        agreement=None if agreement is None else bool(agreement),
        deal=_loads(episode.get("deal"), None),
        policy_seat=policy_seat,
        labels=tuple(labels),
        policy=policy,
        note=note,
        attempts=tuple(
            TranscriptAttempt(
                index=int(a["attempt_index"]),
                speaker=str(a["agent_id"]),
                text=str(a.get("text") or ""),
                accepted=bool(a["accepted"]),
                reason=str(a.get("reason") or ""),
                kind=str(a.get("kind") or ""),
                payload=_loads(a.get("payload"), {}),
                turn_index=None if a.get("turn_index") is None else int(a["turn_index"]),
            )
            for a in sorted(attempts, key=lambda a: int(a["attempt_index"]))
        ),
    )


def _records(store: TableStore, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    frame = store.query(sql, params)
    return [{k: (None if _is_missing(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists and arrays are values, not missing
        return False


def load_transcripts(
    store: TableStore,
    episode_ids: Sequence[str],
    run_id: str | None = None,
    policy_seats: Mapping[str, str] | None = None,
    labels: Mapping[str, Sequence[str]] | None = None,
    policy: str = "",
) -> list[Transcript]:
    """Transcripts of the given episodes from the tables, in the given order (`run_id` narrows the rows
    when one episode id was recorded by several runs). Unknown ids raise a KeyError naming them."""
    if not episode_ids:
        return []
    ids = list(dict.fromkeys(episode_ids))
    marks = ", ".join("?" for _ in ids)
    where = f"episode_id IN ({marks})" + (" AND run_id = ?" if run_id is not None else "")
    params = [*ids, *([run_id] if run_id is not None else [])]
    episodes = {r["episode_id"]: r for r in _records(store, f"SELECT * FROM episodes WHERE {where}", params)}
    missing = [i for i in ids if i not in episodes]
    if missing:
        raise KeyError(f"episodes not in the tables{f' for run {run_id}' if run_id else ''}: {missing[:5]}")
    roles: dict[str, list[dict[str, Any]]] = {}
    for row in _records(store, f"SELECT * FROM episode_roles WHERE {where}", params):
        roles.setdefault(row["episode_id"], []).append(row)
    turns: dict[str, list[dict[str, Any]]] = {}
    for row in _records(store, f"SELECT * FROM episode_turns WHERE {where}", params):
        turns.setdefault(row["episode_id"], []).append(row)
    attempts: dict[str, list[dict[str, Any]]] = {}
    if "episode_attempts" in store.schemas:  # a store of an older schema has none
        for row in _records(store, f"SELECT * FROM episode_attempts WHERE {where}", params):
            attempts.setdefault(row["episode_id"], []).append(row)
    return [
        transcript_from_rows(
            episodes[i],
            roles.get(i, []),
            turns.get(i, []),
            (policy_seats or {}).get(i),
            (labels or {}).get(i, ()),
            policy,
            attempts.get(i, []),
        )
        for i in ids
    ]


def _policy_seat(episode_id: str, roles: Sequence[Mapping[str, Any]], policy: str) -> str | None:
    """The seat the evaluated policy played: the one role whose agent is the policy; in self-play (both or
    neither match) the seat named by the evaluation's episode id "<prefix>:<counterpart>:<index>:<seat>"."""
    matching = [str(r["agent_id"]) for r in roles if r.get("agent_name") == policy]
    if len(matching) == 1:
        return matching[0]
    seats = {str(r["agent_id"]) for r in roles}
    last = episode_id.rsplit(":", 1)[-1]
    return last if last in seats else None


def representative_transcripts_from_store(store: TableStore, run_id: str) -> dict[str, list[Transcript]]:
    """Best, median and worst episode (and the one with the most refused attempts, where any has one) of every
    policy evaluated in run `run_id` (the rows
    `models.evaluation.policy.store_evaluation` wrote), as transcripts: policy name -> transcripts.
    The policy's seat is the role whose agent is the evaluation's `policy` description."""
    policies = _records(
        store,
        "SELECT DISTINCT policy_name, policy FROM evaluations WHERE run_id = ? AND counterpart = '*' ORDER BY policy_name",
        [run_id],
    )
    if not policies:
        raise KeyError(f"no evaluation rows for run {run_id!r} (table evaluations, counterpart '*')")
    roles: dict[str, list[dict[str, Any]]] = {}
    for row in _records(
        store,
        "SELECT episode_id, agent_id, agent_name, reward, invalid_actions FROM episode_roles WHERE run_id = ?",
        [run_id],
    ):
        roles.setdefault(row["episode_id"], []).append(row)
    out: dict[str, list[Transcript]] = {}
    for entry in policies:
        name, description = str(entry["policy_name"]), str(entry["policy"] or "")
        scored = []
        for episode_id, seat_rows in sorted(roles.items()):
            seat = _policy_seat(episode_id, seat_rows, description)
            row = next((r for r in seat_rows if r["agent_id"] == seat), None)
            if seat is None or row is None or row["reward"] is None:
                continue
            refused = int(row["invalid_actions"] or 0)
            scored.append(ScoredEpisode(episode_id, float(row["reward"]), seat, name, refused))
        chosen = pick_representatives(scored)
        out[name] = load_transcripts(
            store,
            [r.episode.episode_id for r in chosen],
            run_id=run_id,
            policy_seats={r.episode.episode_id: r.episode.seat for r in chosen},
            labels={r.episode.episode_id: r.labels for r in chosen},
            policy=name,
        )
    return out
