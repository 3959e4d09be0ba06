"""The endpoint leaderboard: a stub OpenAI endpoint that answers with malformed text, errors and timeouts,
and the real vLLM engine; the command line; merging rows into the leaderboard file."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agents.llm_agent import MAX_BACKOFF_S
from environments import SOCIALRL_ENV_IDS
from models.cli.leaderboard import Endpoint, evaluate_endpoint, markdown_table, merge_rows
from models.profiles import get_profile
from models.serving.process import ServerThread

REPLIES = ("OFFER $100", "ACCEPT", "I am not sure what to do here.", "PROPOSE book=1 hat=1 ball=1", "VOTE: BLACK")


class StubEndpoint:
    """An OpenAI-compatible /v1/chat/completions that cycles through: a 500, a 429, a reply that takes longer
    than the client's timeout, a body that is not a completion, then a text from REPLIES (often malformed for
    the domain). It counts requests and checks the bearer token."""

    def __init__(self, slow_s: float, token: str | None = None) -> None:
        self.calls = itertools.count()
        self.seen = 0
        self.authorised = 0
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Any:
            n = next(self.calls)
            self.seen = n + 1
            if token is not None and request.headers.get("authorization") == f"Bearer {token}":
                self.authorised += 1
            body = await request.json()
            assert body["messages"][0]["role"] == "system"
            mode = n % 5
            if mode == 0:
                return JSONResponse({"error": "upstream exploded"}, status_code=500)
            if mode == 1:
                return JSONResponse({"error": "rate limited"}, status_code=429)
            if mode == 2:
                await asyncio.sleep(slow_s)
            if mode == 3:
                return JSONResponse({"unexpected": "shape"})
            text = REPLIES[(n // 5) % len(REPLIES)]
            return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

        self.served = ServerThread(app, name="stub endpoint", startup_timeout_s=20)

    @property
    def base_url(self) -> str:
        return f"{self.served.url}/v1"

    def __enter__(self) -> StubEndpoint:
        self.served.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.served.stop(join_s=10)


@pytest.fixture
def stub() -> Iterator[StubEndpoint]:
    with StubEndpoint(slow_s=1.0, token="sk-test-secret") as server:
        yield server


def fast_profile():
    """Smoke, with calls that time out fast and are retried at once (the back-off's wait is not under test)."""
    smoke = get_profile("smoke")
    fast = dataclasses.replace(smoke.leaderboard, request_timeout_s=0.3, request_retries=1, retry_backoff_s=0.01)
    return dataclasses.replace(smoke, leaderboard=fast)


@pytest.mark.slow
def test_the_leaderboard_survives_an_endpoint_of_errors_timeouts_and_malformed_text(
    stub: StubEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="socialrl.leaderboard")
    profile = fast_profile()
    endpoint = Endpoint("stub", "stub-model", stub.base_url, api_key="sk-test-secret")
    assert "sk-test-secret" not in repr(endpoint)
    start = time.perf_counter()
    evaluation = evaluate_endpoint(endpoint, profile)
    row = evaluation.row.as_dict()
    print(f"stub leaderboard: {time.perf_counter() - start:.1f} s, {row['calls']} calls")
    # Every domain and Red-Black were played to the end despite the failures.
    assert set(row["domains"]) == set(SOCIALRL_ENV_IDS)
    per_domain = profile.leaderboard.heldout_scenarios * len(profile.eval_counterparts)
    assert all(d["n"] == per_domain for d in row["domains"].values())
    games = len(profile.leaderboard.red_black_opponents) * profile.leaderboard.red_black_games
    assert row["red_black"]["games"] == games and row["red_black"]["welfare"]["n"] == games
    # Abstention and decided cooperation per game (the stub's malformed votes abstain).
    assert row["red_black"]["abstention"]["n"] == games and row["red_black"]["abstention"]["mean"] > 0
    assert row["red_black"]["decided_cooperation"]["n"] == games
    # 4 of the stub's 5 answers fail and are retried; every call it saw carried the key (a call that timed out
    # before the stub read it is counted by the agents only).
    assert stub.seen == stub.authorised and 0.9 * row["calls"] <= stub.seen <= row["calls"]
    assert 0.7 * row["calls"] <= row["failed_calls"] <= 0.95 * row["calls"]
    # Malformed replies and exhausted retries are invalid actions, not crashes.
    assert row["invalid_action_rate"] > 0.3
    # Each domain's mean is its episodes' (every episode counted, a failed call's episode included), and the row's
    # the mean of the domains'.
    for env_id, d in row["domains"].items():
        rewards = [e.reward for e in evaluation.domains[env_id].policy_episodes]
        assert len(rewards) == d["n"] and d["mean"] == pytest.approx(sum(rewards) / len(rewards))
    assert row["mean_reward"] == pytest.approx(sum(d["mean"] for d in row["domains"].values()) / len(row["domains"]))
    text = json.dumps(row)
    assert "sk-test-secret" not in text
    assert "| stub |" in markdown_table([row])
    # One progress line per episode and game as it ends, numbered within its domain.
    ended = [
        r.getMessage() for r in caplog.records if r.name == "socialrl.leaderboard" and " ended (" in r.getMessage()
    ]
    for env_id in SOCIALRL_ENV_IDS:
        lines = [m for m in ended if m.startswith(f"leaderboard:stub:{env_id}: episode ")]
        assert sorted(int(m.split("episode ")[1].split("/")[0]) for m in lines) == list(range(1, per_domain + 1))
    assert sum(": game " in m for m in ended) == games


def test_rows_merge_by_endpoint_and_profile_best_first() -> None:
    old = [
        {"endpoint": "a", "profile": "cpu", "mean_reward": 0.2},
        {"endpoint": "b", "profile": "cpu", "mean_reward": 0.5},
    ]
    new = [
        {"endpoint": "a", "profile": "cpu", "mean_reward": 0.7},
        {"endpoint": "a", "profile": "smoke", "mean_reward": None},
    ]
    rows = merge_rows(old, new)
    assert [(r["endpoint"], r["profile"], r["mean_reward"]) for r in rows] == [
        ("a", "cpu", 0.7), ("b", "cpu", 0.5), ("a", "smoke", None)
    ]  # fmt: skip


@pytest.mark.parametrize("wait_s", [-0.1, MAX_BACKOFF_S + 1])
def test_the_leaderboard_refuses_a_back_off_its_agents_would_refuse(wait_s: float) -> None:
    """One rule for both configs: a wait the agent config refuses fails when the profile is built, not mid-run."""
    smoke = get_profile("smoke")
    with pytest.raises(ValueError, match="retry_backoff_s"):
        dataclasses.replace(smoke.leaderboard, retry_backoff_s=wait_s)


def test_an_endpoint_needs_a_name_a_model_and_an_http_url() -> None:
    with pytest.raises(ValueError, match="http"):
        Endpoint("x", "m", "ftp://host/v1")
    with pytest.raises(ValueError, match="name and a model"):
        Endpoint("x", "")
    assert Endpoint("x", "models:/m@champion").local


@pytest.mark.slow
def test_the_command_line_plays_the_local_engine_and_merges_its_row(
    vllm_engine: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from models.cli.evaluate_endpoint import main

    output = tmp_path / "leaderboard.json"
    output.write_text(json.dumps([{"endpoint": "other", "profile": "smoke", "mean_reward": 0.1, "domains": {}}]))
    monkeypatch.setenv("TEST_ENGINE_KEY", vllm_engine.config.api_key)  # the test engine is keyed like the pipeline's
    code = main([
        "--base-url", vllm_engine.base_url, "--model", "tiny", "--name", "tiny-local", "--profile", "smoke",
        "--domains", "craigslist-v0,calendar-v0", "--output", str(output), "--data-dir", str(tmp_path / "data"),
        "--api-key-env", "TEST_ENGINE_KEY",
    ])  # fmt: skip
    assert code == 0
    rows = json.loads(output.read_text())
    assert {r["endpoint"] for r in rows} == {"other", "tiny-local"}
    row = next(r for r in rows if r["endpoint"] == "tiny-local")
    assert set(row["domains"]) == {"craigslist-v0", "calendar-v0"}
    # Failed calls here are prompts beyond the test engine's 1024-token context: the agent shortens them and asks again.
    assert row["calls"] > 0 and row["failed_calls"] < row["calls"] / 2
    assert row["red_black"]["games"] == 1
    assert "| tiny-local |" in capsys.readouterr().out
