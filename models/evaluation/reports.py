"""Summary tables computed with DuckDB over the stored episode tables."""

from __future__ import annotations

import pandas as pd

from models.storage import TableStore

ENVIRONMENT_SUMMARY_SQL = """
WITH roles AS (
    SELECT episode_id, env_id,
           string_agg(agent_id || '=' || printf('%.2f', reward), ', ' ORDER BY agent_id) AS rewards_txt,
           sum(invalid_actions) AS invalid_actions,
           max(CASE WHEN leaked <> '[]' THEN 1 ELSE 0 END) AS leaked
    FROM episode_roles WHERE run_id = $run_id GROUP BY episode_id, env_id
),
per_seat AS (
    SELECT env_id, agent_id, avg(reward) AS mean_reward
    FROM episode_roles WHERE run_id = $run_id GROUP BY env_id, agent_id
)
SELECT e.env_id,
       count(*) AS episodes,
       avg(CASE WHEN e.agreement THEN 1.0 ELSE 0.0 END) AS agreement_rate,
       (SELECT string_agg(agent_id || '=' || printf('%.3f', mean_reward), ', ' ORDER BY agent_id)
          FROM per_seat p WHERE p.env_id = e.env_id) AS mean_reward_per_role,
       avg(CASE WHEN e.pareto_optimal THEN 1.0 ELSE 0.0 END) AS pareto_optimal_rate,
       sum(r.invalid_actions) AS invalid_actions,
       avg(r.leaked) AS leak_rate,
       avg(e.rounds) AS mean_rounds
FROM episodes e JOIN roles r USING (episode_id)
WHERE e.run_id = $run_id
GROUP BY e.env_id
ORDER BY e.env_id
"""

AGENT_SUMMARY_SQL = """
SELECT env_id, split_part(agent_name, '(', 1) AS agent, count(*) AS seats,
       avg(reward) AS mean_reward, avg(CASE WHEN leaked <> '[]' THEN 1.0 ELSE 0.0 END) AS leak_rate
FROM episode_roles WHERE run_id = $run_id
GROUP BY env_id, agent ORDER BY env_id, mean_reward DESC
"""


def environment_summary(store: TableStore, run_id: str) -> pd.DataFrame:
    """Per environment: episodes, agreement rate, mean normalised reward per role, Pareto-optimal rate,
    invalid actions, share of episodes with a leak, mean rounds."""
    with store.connect() as con:
        return con.execute(ENVIRONMENT_SUMMARY_SQL, {"run_id": run_id}).df()


def agent_summary(store: TableStore, run_id: str) -> pd.DataFrame:
    """Per environment and code agent: mean reward over all seats it played, and its leak rate."""
    with store.connect() as con:
        return con.execute(AGENT_SUMMARY_SQL, {"run_id": run_id}).df()
