"""Teacher sources (code, local engine, any endpoint), failure counting, the SFT trace formats, and the
`teacher_traces` asset configured with an endpoint whose key comes from an environment variable."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agents.llm_agent import (
    HEADER_ATTEMPT,
    HEADER_EPISODE,
    HEADER_TURN,
    TOM_INSTRUCTIONS,
    LLMAgent,
    LLMAgentConfig,
    parse_tom,
)
from agents.socialrl.teacher.agent import StrategicTeacher
from environments import SOCIALRL_ENV_IDS, make, seats
from models.evaluation.scenarios import training_scenarios
from models.profiles import get_profile
from models.serving.local import ServedModel
from models.serving.process import ServerThread
from models.socialrl import teachers
from models.socialrl.teachers import TeacherConfig, TeacherError, open_teacher, sft_messages

SMOKE = get_profile("smoke")
SECRET = "sk-teacher-secret-123"
SCAFFOLDED = (
    "INFER: they want to pay little.\nACT: I could do a little less.\nOFFER $150\nANTICIPATE: they will counter."
)


class StubTeacherEndpoint:
    """OpenAI-compatible chat endpoint for a teacher: episodes whose id ends in ':1:buyer' always get a 500;
    every other call is first answered with a 429 or a 503 (to be retried), then with a scaffolded reply."""

    def __init__(self) -> None:
        self.calls = itertools.count()
        self.seen = 0
        self.with_key = 0
        self.tries: dict[tuple[str, ...], int] = {}
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> Any:
            n = next(self.calls)
            self.seen += 1
            self.with_key += request.headers.get("authorization") == f"Bearer {SECRET}"
            if request.headers.get(HEADER_EPISODE, "").endswith(":1:buyer"):
                return JSONResponse({"error": "internal"}, status_code=500)
            key = tuple(request.headers.get(h, "") for h in (HEADER_EPISODE, HEADER_TURN, HEADER_ATTEMPT))
            self.tries[key] = self.tries.get(key, 0) + 1
            if self.tries[key] == 1:
                return JSONResponse({"error": "slow down"}, status_code=429 if n % 2 else 503)
            return {"choices": [{"message": {"role": "assistant", "content": SCAFFOLDED}, "finish_reason": "stop"}]}

        self.served = ServerThread(app, name="stub teacher", startup_timeout_s=20)

    @property
    def base_url(self) -> str:
        return f"{self.served.url}/v1"

    def __enter__(self) -> StubTeacherEndpoint:
        self.served.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.served.stop(join_s=10)


@pytest.fixture
def stub() -> Iterator[StubTeacherEndpoint]:
    with StubTeacherEndpoint() as server:
        yield server


# ------------------------------------------------------------------------------------------- sources
def test_the_code_source_is_the_embedded_strategic_teacher() -> None:
    with open_teacher(TeacherConfig(), SMOKE) as teacher:
        assert not teacher.llm and teacher.name == "teacher"
        assert isinstance(teacher.make_agent(3), StrategicTeacher)


def test_an_endpoint_source_is_an_llm_agent_with_the_key_as_bearer_token_and_never_in_its_repr() -> None:
    config = TeacherConfig(source="endpoint", base_url="https://api.example.com/v1", model="gpt-x", api_key=SECRET)
    assert SECRET not in repr(config) and SECRET not in str(config.public_dict())
    assert config.public_dict()["api_key_set"] is True
    with open_teacher(config, SMOKE) as teacher:
        agent = teacher.make_agent(7)
    assert teacher.llm and isinstance(agent, LLMAgent)
    assert (agent.config.base_url, agent.config.model, agent.config.seed, agent.config.tom) == (
        "https://api.example.com/v1", "gpt-x", 7, True
    )  # fmt: skip
    assert agent._headers()["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(agent.config)
    assert "gpt-x" in teacher.name and SECRET not in teacher.name


def test_a_local_source_is_served_by_the_engine_under_the_resolved_reference(tmp_path: Path) -> None:
    asked: list[str] = []

    def serve(reference: str):
        asked.append(reference)
        return nullcontext(ServedModel("http://127.0.0.1:9/v1", "teacher", tmp_path, False))

    with open_teacher(TeacherConfig(source="local", model="models:/x@champion"), SMOKE, serve=serve) as teacher:
        agent = teacher.make_agent(1)
    with open_teacher(TeacherConfig(source="local"), SMOKE, serve=serve):
        pass
    assert asked == ["models:/x@champion", SMOKE.base_model]  # empty model = the profile's base model
    assert isinstance(agent, LLMAgent) and (agent.config.base_url, agent.config.model) == (
        "http://127.0.0.1:9/v1", "teacher"
    )  # fmt: skip
    with pytest.raises(TeacherError, match="data paths"), open_teacher(TeacherConfig(source="local"), SMOKE):
        pass


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"source": "gpt"}, "source"),
        ({"source": "endpoint", "model": "m"}, "base_url"),
        ({"source": "endpoint", "base_url": "https://x/v1"}, "model name"),
        ({"source": "code", "model": "m"}, "code teacher"),
        ({"source": "local", "base_url": "http://x/v1"}, "only for the endpoint"),
        ({"source": "endpoint", "base_url": "https://x/v1", "model": "m", "concurrency": 0}, "concurrency"),
    ],
)
def test_teacher_configs_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TeacherConfig(**kwargs)


# ------------------------------------------------------------------------------------------ failures
def test_a_remote_teachers_failures_are_retried_and_the_failed_episode_counted_and_left_out(
    stub: StubTeacherEndpoint,
) -> None:
    config = TeacherConfig(
        source="endpoint", base_url=stub.base_url, model="stub", api_key=SECRET, request_retries=2,
        request_timeout_s=5.0, max_tokens=32,
    )  # fmt: skip
    collection = teachers.teacher_traces("craigslist-v0", SMOKE, config, episodes=3, run_tag="t")
    # 3 scenarios in the learning seat (the buyer); the buyer of scenario 1 never gets an answer (3 tries of a 500).
    assert (collection.attempted, collection.failed, len(collection.traces)) == (3, 1, 2)
    assert collection.failures[0].startswith("t:craigslist-v0:1:buyer: ") and "500" in collection.failures[0]
    assert "t:craigslist-v0:1:buyer" not in {t.episode_id for t in collection.traces}
    # Every call was refused once (429/503) and retried: twice as many calls as answers, all with the key.
    assert collection.calls == stub.seen == stub.with_key
    answered = sum(n - 1 for key, n in stub.tries.items() if not key[0].endswith(":1:buyer"))
    assert collection.request_errors == collection.calls - answered
    assert answered == sum(len(t.reasoning) for t in collection.traces)
    assert SECRET not in str(collection.summary()) and SECRET not in "".join(collection.failures)
    # The trace keeps the teacher's whole turn; the ACT format keeps what reached the environment.
    trace = next(t for t in collection.traces if t.seat == "buyer")
    replies = [m["content"] for m in trace.messages if m["role"] == "assistant"]
    assert replies and all(r == SCAFFOLDED for r in replies)
    assert trace.messages[0]["content"].endswith(TOM_INSTRUCTIONS)
    assert trace.reasoning[0]["infer"] == "they want to pay little." and trace.reasoning[0]["anticipate"]
    act = sft_messages(trace, "act")
    assert next(m["content"] for m in act if m["role"] == "assistant") == "I could do a little less.\nOFFER $150"
    assert not act[0]["content"].endswith(TOM_INSTRUCTIONS)
    assert sft_messages(trace, "tom") == trace.messages


def test_a_teacher_whose_every_episode_fails_raises_with_the_first_reason() -> None:
    config = TeacherConfig(source="endpoint", base_url="http://127.0.0.1:9/v1", model="m", request_retries=0)
    with pytest.raises(TeacherError, match="every one of 2 teacher episodes failed"):
        teachers.teacher_traces("dnd-v0", SMOKE, config, episodes=1, traced_seats=("alice", "bob"))
    with pytest.raises(TeacherError, match="every one of 1 teacher episodes failed"):
        teachers.teacher_traces("dnd-v0", SMOKE, config, episodes=1)  # the learning seat only, by default


# ---------------------------------------------------------------------------------------- SFT formats
def _tom_render(env_id: str, seat: str, scenario: Any) -> str:
    env = make(env_id)
    events = env.reset(scenario, 0)
    agent = LLMAgent(LLMAgentConfig(base_url="http://x.invalid/v1", model="m", api_key_env=None, tom=True))

    async def play() -> None:
        await agent.reset(seat, env_id, env.action_spec(seat), "e")
        for event in events:
            if event.to == seat:
                await agent.observe(event)

    asyncio.run(play())
    return agent.system_prompt()


@pytest.mark.parametrize("env_id", SOCIALRL_ENV_IDS)
def test_the_tom_format_is_what_the_scaffolded_agent_sees_and_writes(env_id: str) -> None:
    collection = teachers.teacher_traces(env_id, SMOKE, TeacherConfig(), episodes=2)
    scenario = training_scenarios(env_id, 2, 0)[0]
    for trace in collection.traces:
        tom = sft_messages(trace, "tom")
        if trace.scenario_id == scenario.scenario_id and trace.episode_id.endswith(f":0:{trace.seat}"):
            assert tom[0]["content"] == _tom_render(env_id, trace.seat, scenario)
        assert [m["role"] for m in tom] == [m["role"] for m in trace.messages]
        decisions = iter(trace.reasoning)  # one per decision, in order; retries of a refused text have none
        for plain, scaffolded in zip(trace.messages, tom, strict=True):
            if plain["role"] != "assistant":
                assert plain == scaffolded or plain["role"] == "system"
                continue
            parts = parse_tom(scaffolded["content"])
            assert parts.act == plain["content"].strip()  # ACT is exactly the text that was sent
            if parts.infer is not None:
                decision = next(d for d in decisions if d["act"] == plain["content"])
                assert (parts.infer, parts.anticipate) == (decision["infer"], decision["anticipate"])
        assert sum(parse_tom(m["content"]).infer is not None for m in tom[1:] if m["role"] == "assistant") >= 1
        # Back to ACT-only gives today's warm-start data.
        back = sft_messages(type(trace)(**{**trace.__dict__, "messages": tom}), "act")
        assert back == trace.messages
    assert seats(env_id, scenario)


# ------------------------------------------------------------------------------------------- the asset
def test_the_teacher_traces_asset_takes_an_endpoint_and_its_key_from_an_env_var(
    stub: StubTeacherEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import DagsterInstance, EnvVar, RunConfig, materialize

    from assets.configs import TeacherSourceConfig
    from assets.socialrl import scenarios, teacher_traces
    from models.storage import TableStore
    from resources import SettingsResource, StoreResource

    monkeypatch.setenv("TEST_TEACHER_KEY", SECRET)
    settings = SettingsResource(profile="smoke", data_dir=str(tmp_path / "data"))
    config = TeacherSourceConfig(
        source="endpoint", base_url=stub.base_url, model="stub", api_key=EnvVar("TEST_TEACHER_KEY"),
        request_timeout_s=5.0, max_tokens=32,
    )  # fmt: skip
    instance = DagsterInstance.ephemeral()
    result = materialize(
        [scenarios, teacher_traces],
        partition_key="craigslist-v0",
        resources={"settings": settings, "store": StoreResource(settings=settings)},
        run_config=RunConfig({"teacher_traces": config}),
        instance=instance,
    )
    assert result.success
    output = result.output_for_node("teacher_traces")
    # SMOKE has 4 teacher episodes per domain in the learning seat (the buyer); the buyer of scenario 1 fails.
    assert output.failed == 1 and output.episodes == 3 and "stub" in output.teacher
    stored = TableStore(tmp_path / "data" / "tables").query("SELECT agent, count(*) AS n FROM traces GROUP BY agent")
    assert stored.n.tolist() == [3] and "stub" in stored.agent[0]
    assert stub.with_key == stub.seen > 0
    # Only the variable's name is stored with the run, never the key.
    assert SECRET not in str(result.dagster_run.run_config)
    assert "TEST_TEACHER_KEY" in str(result.dagster_run.run_config)
    events = instance.all_logs(result.run_id)
    assert not any(SECRET in str(e) for e in events)
