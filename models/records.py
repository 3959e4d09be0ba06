"""The one data schema of every table: recorded episodes, recorded LLM calls, evaluations, scenarios, traces.

Tables and their columns are declared here once, as plain DuckDB column types, and every writer and
reader uses these declarations: the tournament, the trainers, the evaluation and the Dagster assets.
Rows are plain dicts (this module needs no pandas/pyarrow); the call tags come from the request headers
that agents/llm_agent.py sets (HEADER_*).

| table | one row per | key |
| --- | --- | --- |
| episodes | finished episode | episode_id |
| episode_roles | seat of an episode | (episode_id, agent_id) |
| episode_turns | accepted action of an episode | (episode_id, turn_index) |
| episode_attempts | answer of a seat, accepted or refused with the reason | (episode_id, attempt_index) |
| recorded_calls | LLM call made through the rollout proxy | request_id |
| evaluations | evaluation run x counterpart (plus a pooled row) | (run_id, counterpart) |
| scenarios | generated scenario of a domain and split | (run_id, env_id, scenario_id) |
| traces | teacher episode of one seat, as chat messages | (run_id, episode_id) |
| transfer_matrix | stage-2 transfer cell: donor policy minus base on a recipient's held-out plan | (run_id, donor, donor_kind, recipient) |
| unified_evaluation | stage-2 policy on a domain (or "mean"), with its paired difference to the base | (run_id, policy, env_id) |
| yoao_games | Red-Black game of a YOAO experiment arm (team A's view) | (run_id, arm, game_key) |
| yoao_seed_turns | assistant turn of a seed trace with the filter's decision | (run_id, episode_id, turn) |

Views (`VIEWS`, created by `models.storage.TableStore.connect` when their tables are in its schemas):

| view | one row per | what |
| --- | --- | --- |
| transcripts | accepted action | the turn (speaker, kind, text, payload) with its episode (environment, scenario, agreement, deal), the speaker's role (agent, reward, leaked facts) and the refused attempts before it; see docs/researcher_view.md |
| attempts | answer of a seat, accepted or refused | the attempt (speaker, text, parsed kind, accepted, reason) with its episode and the speaker's role |

Episodes recorded before `episode_attempts` existed stay readable: their views show no attempts (the view
`attempts` has no rows for them, `transcripts.refused` is 0).

Recorded calls carry the engine's own token ids and log-probs (never re-tokenised text); trainers join
them with `episode_roles` on (episode_id, agent_id) to build PPO batches.
"""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from typing import Any

from environments.core.runtime import EpisodeResult

EPISODES_COLUMNS: dict[str, str] = {
    "episode_id": "VARCHAR",
    "run_id": "VARCHAR",
    "env_id": "VARCHAR",
    "scenario_id": "VARCHAR",
    "seed": "BIGINT",
    "agents": "VARCHAR",  # JSON: seat -> agent description
    "agreement": "BOOLEAN",
    "rounds": "INTEGER",
    "deal": "VARCHAR",  # JSON or NULL
    "pareto_optimal": "BOOLEAN",
    "envy_free": "BOOLEAN",
    "metrics": "VARCHAR",  # JSON
    "scenario": "VARCHAR",  # JSON of the scenario dataclass
    "wall_seconds": "DOUBLE",
    "created_at": "TIMESTAMP",
}

EPISODE_ROLES_COLUMNS: dict[str, str] = {
    "episode_id": "VARCHAR",
    "run_id": "VARCHAR",
    "env_id": "VARCHAR",
    "agent_id": "VARCHAR",
    "agent_name": "VARCHAR",
    "reward": "DOUBLE",
    "utility": "DOUBLE",
    "invalid_actions": "INTEGER",
    "timeouts": "INTEGER",
    "leaked": "VARCHAR",  # JSON list of private-fact names
}

EPISODE_TURNS_COLUMNS: dict[str, str] = {
    "episode_id": "VARCHAR",
    "run_id": "VARCHAR",
    "turn_index": "INTEGER",
    "agent_id": "VARCHAR",
    "kind": "VARCHAR",
    "text": "VARCHAR",
    "payload": "VARCHAR",  # JSON
}

EPISODE_ATTEMPTS_COLUMNS: dict[str, str] = {
    "episode_id": "VARCHAR",
    "run_id": "VARCHAR",
    "attempt_index": "INTEGER",  # order of the episode's attempts, all seats (environments.core.base.Attempt)
    "agent_id": "VARCHAR",
    "text": "VARCHAR",  # what the seat sent (the raw model text)
    "kind": "VARCHAR",  # the parsed action kind; "" when the text did not parse (or a timeout)
    "payload": "VARCHAR",  # JSON of the parsed payload
    "accepted": "BOOLEAN",
    "reason": "VARCHAR",  # why it was refused; "" when accepted
    "turn_index": "INTEGER",  # the episode_turns row an accepted attempt became; NULL when refused
    "request": "INTEGER",  # the turn request it answered (retries share it); NULL out of turn
}
"""One row per answer of a seat: every accepted action (also in `episode_turns`) and every refused one."""

RECORDED_CALLS_COLUMNS: dict[str, str] = {
    "request_id": "VARCHAR",  # the proxy's id for the call (also returned to the client as x-request-id)
    "created_at": "TIMESTAMP",
    "endpoint": "VARCHAR",  # "chat.completions" or "completions"
    "upstream": "VARCHAR",  # base URL of the engine that served it
    "episode_id": "VARCHAR",  # from the X-Episode-Id request header
    "agent_id": "VARCHAR",  # from X-Agent-Id
    "turn_index": "INTEGER",  # from X-Turn-Index
    "attempt": "INTEGER",  # from X-Attempt (retries of a malformed reply within one turn)
    "model": "VARCHAR",  # model name requested (base model or adapter name)
    "adapter_version": "VARCHAR",  # the adapter name when the model is a LoRA adapter, else NULL
    "sampling_params": "VARCHAR",  # JSON: temperature, top_p, max_tokens, seed, stop, ...
    "request_messages": "VARCHAR",  # JSON: the chat messages or the prompt as sent
    "prompt_token_ids": "INTEGER[]",  # from the engine
    "completion_token_ids": "INTEGER[]",  # from the engine
    "completion_logprobs": "DOUBLE[]",  # per completion token, from the engine
    "completion_text": "VARCHAR",
    "finish_reason": "VARCHAR",
    "prompt_tokens": "INTEGER",
    "completion_tokens": "INTEGER",
    "latency_s": "DOUBLE",
    "status_code": "INTEGER",  # HTTP status returned to the client
    "error": "VARCHAR",  # upstream or proxy error message, NULL on success
}

EVALUATIONS_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",  # the evaluation run (or the MLflow run id of the evaluated model)
    "policy_name": "VARCHAR",  # e.g. "socialrl-craigslist-specialist@champion" or "boulware"
    "policy": "VARCHAR",  # the agent's own description (class and parameters)
    "env_id": "VARCHAR",
    "seat": "VARCHAR",  # the policy's seat, or "alternating"
    "counterpart": "VARCHAR",  # a counterpart name, or "*" for all counterparts pooled
    "scenarios": "VARCHAR",  # where the scenarios came from, e.g. "heldout(n=32, seed=0)"
    "seed": "BIGINT",
    "n": "INTEGER",  # episodes
    "mean_reward": "DOUBLE",
    "ci_low": "DOUBLE",
    "ci_high": "DOUBLE",
    "ci_method": "VARCHAR",
    "confidence": "DOUBLE",
    "agreement_rate": "DOUBLE",
    "pareto_optimal_rate": "DOUBLE",
    "invalid_action_rate": "DOUBLE",
    "leakage_rate": "DOUBLE",
    "mean_rounds": "DOUBLE",  # accepted actions per episode, both seats
    "created_at": "TIMESTAMP",
}
"""One row per (evaluation run, counterpart), plus one pooled row with counterpart "*"."""

SCENARIOS_COLUMNS: dict[str, str] = {
    "env_id": "VARCHAR",
    "scenario_id": "VARCHAR",
    "split": "VARCHAR",  # train | heldout
    "scenario": "VARCHAR",  # JSON of the scenario dataclass
    "run_id": "VARCHAR",
}

TRACES_COLUMNS: dict[str, str] = {
    "episode_id": "VARCHAR",
    "run_id": "VARCHAR",
    "env_id": "VARCHAR",
    "seat": "VARCHAR",
    "agent": "VARCHAR",
    "counterpart": "VARCHAR",
    "scenario_id": "VARCHAR",
    "messages": "VARCHAR",  # JSON chat messages, as an LLM agent in the seat would see them
    "reasoning": "VARCHAR",  # JSON list of INFER / ACT / ANTICIPATE dicts per turn
    "reward": "DOUBLE",
    "unclamped_reward": "DOUBLE",  # the environment's reward before the clamp to [0, 1] (RoleOutcome)
    "agreement": "BOOLEAN",
    "leaked": "VARCHAR",
    "assistant_turns": "INTEGER",
}

TRANSFER_MATRIX_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "donor": "VARCHAR",  # the donor domain
    "donor_kind": "VARCHAR",  # "specialist" or "sft" (the donor's SFT warm-start)
    "recipient": "VARCHAR",  # the domain evaluated
    "mean": "DOUBLE",  # mean per-episode reward difference donor - base (paired)
    "ci_low": "DOUBLE",  # 95% bootstrap interval, resampling scenarios
    "ci_high": "DOUBLE",
    "n": "INTEGER",  # paired episodes
    "clusters": "INTEGER",  # scenarios resampled
    "donor_mean": "DOUBLE",  # the donor's own mean reward there
    "base_mean": "DOUBLE",  # the base model's mean reward there
    "created_at": "TIMESTAMP",
}
"""Stage 2 (models/socialrl/stage2/): one row per (donor, kind, recipient) cell of a transfer matrix."""

UNIFIED_EVALUATION_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "policy": "VARCHAR",  # base | sft | specialist | cascade | mopd | baseline:<rule>
    "env_id": "VARCHAR",  # a domain, or "mean" (the policy's domains pooled)
    "models": "VARCHAR",  # served adapter name(s)
    "mean": "DOUBLE",  # mean reward
    "ci_low": "DOUBLE",  # 95% bootstrap interval, resampling scenarios, clipped to [0, 1]
    "ci_high": "DOUBLE",
    "n": "INTEGER",  # episodes
    "diff_mean": "DOUBLE",  # paired difference to the base model on the same episodes
    "diff_ci_low": "DOUBLE",
    "diff_ci_high": "DOUBLE",
    "best_baseline": "VARCHAR",  # trained policies: the best trivial rule on the same episodes (else NULL)
    "vs_best_baseline_mean": "DOUBLE",  # paired difference to that rule
    "vs_best_baseline_ci_low": "DOUBLE",
    "vs_best_baseline_ci_high": "DOUBLE",
    "created_at": "TIMESTAMP",
}
"""Stage 2: one row per (policy, domain) of the unified evaluation."""
YOAO_GAMES_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "experiment": "VARCHAR",  # propagation_by_seed_count, propagation_mute, ...
    "arm": "VARCHAR",  # e.g. "k=3", "k=1 muted", "teacher"
    "game_key": "VARCHAR",  # "<frame>:<index>": the same key in every arm (paired)
    "episode_id": "VARCHAR",
    "frame": "VARCHAR",
    "opponent": "VARCHAR",
    "seed": "BIGINT",
    "roles": "VARCHAR",  # JSON: team A seat -> role (seed, untrained, muted, teacher, prompted, swap)
    "cooperation_rate": "DOUBLE",  # share of rounds team A chose BLACK
    "decided_cooperation_rate": "DOUBLE",  # share of rounds BLACK won a strict majority of team A's counted votes
    "welfare": "DOUBLE",  # both teams' scores
    "score_a": "DOUBLE",
    "ties": "INTEGER",  # rounds team A's vote tied
    "abstentions": "INTEGER",  # team A votes that ended as abstentions
    "invalid_votes": "INTEGER",  # rejected vote answers (team B is scripted and never errs)
    "team_choices": "VARCHAR",  # JSON list: team A's choice per round
    "influence_moved_to": "INTEGER",
    "influence_opportunities": "INTEGER",
    "llm_calls": "INTEGER",
    "metrics": "VARCHAR",  # JSON: per-role votes, abstentions and invalid answers
}

YOAO_SEED_TURNS_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "episode_id": "VARCHAR",
    "frame": "VARCHAR",
    "split": "VARCHAR",  # the frame's split (always "train" in seed data)
    "turn": "INTEGER",  # index of the assistant message in the conversation
    "round": "INTEGER",
    "kind": "VARCHAR",  # opinion | vote
    "text": "VARCHAR",
    "choice": "VARCHAR",  # BLACK | RED | NULL, read as the game reads it
    "kept": "BOOLEAN",
    "reason": "VARCHAR",  # why kept or dropped (models/yoao/seed/dataset.py)
    "judge": "VARCHAR",  # the LLM judge's answer (KEEP/DROP/unparsed) or NULL
}


TABLES: dict[str, dict[str, str]] = {
    "episodes": EPISODES_COLUMNS,
    "episode_roles": EPISODE_ROLES_COLUMNS,
    "episode_turns": EPISODE_TURNS_COLUMNS,
    "episode_attempts": EPISODE_ATTEMPTS_COLUMNS,
    "recorded_calls": RECORDED_CALLS_COLUMNS,
    "evaluations": EVALUATIONS_COLUMNS,
    "scenarios": SCENARIOS_COLUMNS,
    "traces": TRACES_COLUMNS,
    "transfer_matrix": TRANSFER_MATRIX_COLUMNS,
    "unified_evaluation": UNIFIED_EVALUATION_COLUMNS,
    "yoao_games": YOAO_GAMES_COLUMNS,
    "yoao_seed_turns": YOAO_SEED_TURNS_COLUMNS,
}


TRANSCRIPTS_VIEW_SQL = """
SELECT t.run_id, t.episode_id, e.env_id, e.scenario_id, e.seed, t.turn_index,
       t.agent_id AS speaker, r.agent_name AS speaker_agent, t.kind, t.text, t.payload,
       coalesce(f.refused, 0) AS refused, coalesce(f.refusals, '[]') AS refusals,
       r.reward AS speaker_reward, r.leaked AS speaker_leaked,
       e.agreement, e.deal, e.rounds, e.agents, e.created_at
FROM episode_turns t
JOIN episodes e ON e.episode_id = t.episode_id AND e.run_id = t.run_id
LEFT JOIN episode_roles r ON r.episode_id = t.episode_id AND r.run_id = t.run_id AND r.agent_id = t.agent_id
LEFT JOIN (
    SELECT ok.run_id, ok.episode_id, ok.turn_index, count(*) AS refused,
           to_json(list({'text': no.text, 'reason': no.reason} ORDER BY no.attempt_index))::VARCHAR AS refusals
    FROM episode_attempts ok
    JOIN episode_attempts no ON no.run_id = ok.run_id AND no.episode_id = ok.episode_id
         AND no.agent_id = ok.agent_id AND no.request = ok.request AND NOT no.accepted
    WHERE ok.accepted
    GROUP BY ok.run_id, ok.episode_id, ok.turn_index
) f ON f.run_id = t.run_id AND f.episode_id = t.episode_id AND f.turn_index = t.turn_index
"""
"""Every accepted action with its episode, its speaker's role and the refused attempts of the same turn request
before it (`refused`: how many, `refusals`: JSON list of {text, reason}). Rows are unordered: add
`ORDER BY run_id, episode_id, turn_index`. Joined on (episode_id, run_id), so an episode id reused by two
runs stays two episodes."""

ATTEMPTS_VIEW_SQL = """
SELECT a.run_id, a.episode_id, e.env_id, e.scenario_id, e.seed, a.attempt_index, a.request,
       a.agent_id AS speaker, r.agent_name AS speaker_agent, a.accepted, a.reason, a.kind, a.text, a.payload,
       a.turn_index, r.reward AS speaker_reward, r.invalid_actions AS speaker_invalid_actions,
       e.agreement, e.rounds, e.created_at
FROM episode_attempts a
JOIN episodes e ON e.episode_id = a.episode_id AND e.run_id = a.run_id
LEFT JOIN episode_roles r ON r.episode_id = a.episode_id AND r.run_id = a.run_id AND r.agent_id = a.agent_id
"""
"""Every answer of a seat, accepted or refused (with the reason), with its episode and the speaker's role.
Rows are unordered: add `ORDER BY run_id, episode_id, attempt_index`."""

VIEWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "transcripts": (TRANSCRIPTS_VIEW_SQL, ("episodes", "episode_roles", "episode_turns", "episode_attempts")),
    "attempts": (ATTEMPTS_VIEW_SQL, ("episodes", "episode_roles", "episode_attempts")),
}
"""View name -> (SELECT statement, the tables it reads)."""


def _json(value: Any) -> str:
    if is_dataclass(value) and not isinstance(value, type):
        value = asdict(value)
    return json.dumps(value, sort_keys=True, default=str)


def episode_rows(result: EpisodeResult, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of every table for one finished episode."""
    outcome = result.outcome
    now = datetime.now(UTC).replace(tzinfo=None)
    episode = {
        "episode_id": result.episode_id,
        "run_id": run_id,
        "env_id": result.env_id,
        "scenario_id": outcome.scenario_id,
        "seed": result.seed,
        "agents": _json(result.agent_names),
        "agreement": outcome.agreement,
        "rounds": outcome.rounds,
        "deal": _json(outcome.deal) if outcome.deal is not None else None,
        "pareto_optimal": outcome.pareto_optimal,
        "envy_free": outcome.envy_free,
        "metrics": _json(outcome.metrics),
        "scenario": _json(result.scenario),
        "wall_seconds": result.wall_seconds,
        "created_at": now,
    }
    roles = [
        {
            "episode_id": result.episode_id,
            "run_id": run_id,
            "env_id": result.env_id,
            "agent_id": agent_id,
            "agent_name": result.agent_names.get(agent_id, ""),
            "reward": r.reward,
            "utility": r.utility,
            "invalid_actions": r.invalid_actions,
            "timeouts": result.timeouts.get(agent_id, 0),
            "leaked": _json(list(r.leaked)),
        }
        for agent_id, r in outcome.roles.items()
    ]
    turns = [
        {
            "episode_id": result.episode_id,
            "run_id": run_id,
            "turn_index": t.index,
            "agent_id": t.agent_id,
            "kind": t.kind,
            "text": t.text,
            "payload": _json(t.payload),
        }
        for t in result.transcript
    ]
    attempts = [
        {
            "episode_id": result.episode_id,
            "run_id": run_id,
            "attempt_index": a.index,
            "agent_id": a.agent_id,
            "text": a.text,
            "kind": a.kind,
            "payload": _json(a.payload),
            "accepted": a.accepted,
            "reason": a.reason,
            "turn_index": a.turn_index,
            "request": a.request,
        }
        for a in result.attempts
    ]
    return {"episodes": [episode], "episode_roles": roles, "episode_turns": turns, "episode_attempts": attempts}


def rows_for(results: list[EpisodeResult], run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Rows of every table for many episodes."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    for result in results:
        for name, rows in episode_rows(result, run_id).items():
            tables[name].extend(rows)
    return tables
