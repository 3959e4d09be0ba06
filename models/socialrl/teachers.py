"""Teacher traces from any source: the strategic code teacher, a local model, or any OpenAI-compatible endpoint.

| `TeacherConfig.source` | who plays | reasoning kept in the trace |
| --- | --- | --- |
| `code` (default) | the strategic code teacher (agents/socialrl/teacher), embedded, no model | its INFER -> ACT -> ANTICIPATE record per decision (`Trace.reasoning`); the chat holds the ACT text |
| `local` | a model reference (`smollm2-135m-instruct`, a checkpoint directory, `models:/name@alias`) served by the project's engine (vLLM, started for the collection and stopped after) | the model's whole reply per turn, INFER and ANTICIPATE included (with `tom=True`) |
| `endpoint` | any OpenAI-compatible URL (`base_url`, `model`, an API key) | as `local` |

LLM teachers play through `agents.llm_agent.LLMAgent` in the same seats, against the same counterparts,
with the same seeds and episode ids as the code teacher (`agents.traces.collect_traces`), so a trace is
the chat the teacher itself saw and wrote. With `tom=True` (the default) the teacher is prompted with the
ToM scaffold and its replies stay whole in `Trace.messages` (only ACT reached the environment).

API key: `TeacherConfig.api_key` holds the value, resolved at the edge (a Dagster `EnvVar` in the asset's
run config, or the command line); it is left out of `repr`, of `public_dict()` and of every log line, and
sent only as the bearer token.

Failures of a remote teacher: every call is retried on transport errors, timeouts, 408, 429 and 5xx with
exponential back-off (`request_retries`, LLMAgent's rule); a call that still fails ends that episode,
which is counted in `TraceCollection.failed` (with its reason) and left out of the traces. The
collection goes on; it raises `TeacherError` only when every episode failed.

SFT formats (`sft_traces(traces, fmt)`): `act` trains on what reached the environment (today's warm-start:
plain system prompt, ACT text as the assistant turn); `tom` trains on the full INFER -> ACT -> ANTICIPATE
turn with the scaffold's system prompt, exactly as `LLMAgent(tom=True)` renders it, so the student is
prompted at evaluation the way it was trained. Code-teacher traces are scaffolded from their reasoning
records; LLM-teacher traces are cut down to their ACT parts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agents.llm_agent import TOM_INSTRUCTIONS, LLMAgent, LLMAgentConfig, LLMAgentError, parse_tom
from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.teacher import make_teacher
from agents.traces import Trace, check_seats, collect_traces
from environments import make, seats
from environments.core.base import Scenario
from environments.core.runtime import Agent, EpisodeResult, run_episode
from models.evaluation.scenarios import training_scenarios
from models.profiles import Profile
from models.settings import DataPaths
from models.socialrl import stage1

log = logging.getLogger("socialrl.teachers")

TEACHER_SOURCES = ("code", "local", "endpoint")
"""Where a teacher's play comes from (module table)."""
TRACE_FORMATS = ("act", "tom")
"""What SFT trains on: the ACT text only, or the whole INFER -> ACT -> ANTICIPATE turn."""
TOM_SUFFIX = "\n\n" + TOM_INSTRUCTIONS
"""What the ToM scaffold adds at the end of the LLM agent's system prompt (agents/llm_agent.py)."""


class TeacherError(RuntimeError):
    """A teacher produced no usable episode (every episode failed), or was configured wrongly."""


@dataclass(frozen=True)
class TeacherConfig:
    """Where the teacher traces come from (see the module table)."""

    source: str = "code"
    """`code`, `local` or `endpoint`."""
    model: str = ""
    """local: a model reference (empty = the profile's base model); endpoint: the model name to request."""
    base_url: str = ""
    """endpoint: the OpenAI base URL, e.g. https://api.example.com/v1."""
    api_key: str = field(default="", repr=False, compare=False)
    """endpoint: the API key's value (resolved at the edge from an environment variable; never logged)."""
    tom: bool = True
    """LLM teachers: prompt with the INFER -> ACT -> ANTICIPATE scaffold (the reasoning is kept in the trace)."""
    temperature: float = 0.7
    """LLM teachers: sampling temperature."""
    max_tokens: int = 256
    """LLM teachers: most tokens per reply."""
    request_retries: int = 3
    """LLM teachers: retries of a call failing in transport, by timeout or with 408/429/5xx (exponential back-off)."""
    request_timeout_s: float = 60.0
    """LLM teachers: seconds one call may take."""
    concurrency: int = 8
    """Episodes in flight at once (LLM teachers: bounds the load on the endpoint)."""

    def __post_init__(self) -> None:
        if self.source not in TEACHER_SOURCES:
            raise ValueError(f"teacher source must be one of {TEACHER_SOURCES}, got {self.source!r}")
        if self.source == "endpoint":
            if not self.base_url.startswith(("http://", "https://")):
                raise ValueError(f"an endpoint teacher needs an http(s) base_url, got {self.base_url!r}")
            if not self.model:
                raise ValueError("an endpoint teacher needs the model name to request")
        elif self.base_url:
            raise ValueError(f"base_url is only for the endpoint source, not {self.source!r}")
        if self.source == "code" and (self.model or self.api_key):
            raise ValueError("the code teacher takes no model or api_key")
        if self.source == "local" and self.api_key:
            raise ValueError("a local teacher takes no api_key")
        if self.concurrency < 1 or self.max_tokens < 1 or self.request_retries < 0 or self.request_timeout_s <= 0:
            raise ValueError("concurrency and max_tokens must be >= 1, request_retries >= 0, request_timeout_s > 0")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must lie in [0, 2], got {self.temperature}")

    def describe(self) -> str:
        """A name for records and logs (never the key)."""
        if self.source == "code":
            return "teacher"
        where = "local" if self.source == "local" else self.base_url
        return f"llm{'-tom' if self.tom else ''}({self.model or 'base'} @ {where})"

    def public_dict(self) -> dict[str, Any]:
        """The settings without the key (for MLflow params, Dagster metadata and logs)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "api_key"}
        return {**values, "api_key_set": bool(self.api_key)}


@dataclass(frozen=True)
class TeacherSource:
    """A resolved teacher: how to make one agent per episode, and whether it is a language model."""

    name: str
    """Description used in the trace records."""
    make_agent: Callable[[int], Agent]
    """A fresh teacher for the episode seed."""
    llm: bool
    """True for an LLM agent (played directly, failures counted), False for the code teacher (traced)."""


@dataclass(frozen=True)
class TraceCollection:
    """The traces of one collection and what failed."""

    teacher: str
    """The teacher's description."""
    traces: tuple[Trace, ...]
    """Episodes that finished (failed ones left out)."""
    attempted: int
    """Episodes started."""
    failed: int
    """Episodes ended by a call that still failed after its retries (left out of `traces`)."""
    failures: tuple[str, ...] = ()
    """"<episode id>: <reason>" per failed episode."""
    calls: int = 0
    """HTTP calls made by LLM teachers (retries included)."""
    request_errors: int = 0
    """Calls that failed (each retried while retries were left)."""

    def summary(self) -> dict[str, Any]:
        return {
            "teacher": self.teacher,
            "attempted": self.attempted,
            "failed": self.failed,
            "kept": len(self.traces),
            "calls": self.calls,
            "request_errors": self.request_errors,
        }


# ------------------------------------------------------------------------------------------ resolution
def llm_teacher_config(
    config: TeacherConfig, base_url: str, model: str, seed: int, api_key: str | None = None
) -> LLMAgentConfig:
    """The LLM agent settings of an LLM teacher for one episode (`api_key`: the local serving stack's proxy token,
    else the teacher's own key)."""
    return LLMAgentConfig(
        base_url=base_url,
        model=model,
        api_key_env=None,
        api_key=api_key or config.api_key or None,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        seed=seed,
        request_retries=config.request_retries,
        request_timeout_s=config.request_timeout_s,
        fail_on_request_error=True,
        tom=config.tom,
        name=config.describe(),
    )


@contextmanager
def open_teacher(
    config: TeacherConfig,
    profile: Profile,
    paths: DataPaths | None = None,
    serve: Callable[[str], Any] | None = None,
) -> Iterator[TeacherSource]:
    """The teacher of `config`, ready for the length of the block. A local teacher is served by the project's
    engine (`serve(reference)`: a context manager yielding a `ServedModel`; default: start vLLM with the
    profile's engine settings, which needs `paths`)."""
    if config.source == "code":
        yield TeacherSource("teacher", make_teacher, llm=False)
        return
    if config.source == "endpoint":

        def make_remote(seed: int) -> Agent:
            return LLMAgent(llm_teacher_config(config, config.base_url, config.model, seed))

        yield TeacherSource(config.describe(), make_remote, llm=True)
        return
    reference = config.model or profile.base_model
    if serve is None:
        if paths is None:
            raise TeacherError("a local teacher needs the data paths to resolve and serve its model")
        serve = _default_server(profile, paths)
    with serve(reference) as served:
        log.info("local teacher %s served at %s as %r", reference, served.base_url, served.model)

        def make_local(seed: int) -> Agent:
            return LLMAgent(llm_teacher_config(config, served.base_url, served.model, seed, api_key=served.api_key))

        yield TeacherSource(config.describe(), make_local, llm=True)


def _default_server(profile: Profile, paths: DataPaths) -> Callable[[str], Any]:
    """Serve a local teacher on the profile's engine (every engine setting of the profile), looking `models:/`
    references up where every other entry point does (`TrackingConfig.from_env`)."""
    from models.serving.local import serve_local
    from models.tracking import TrackingConfig

    tracking = TrackingConfig.from_env(paths)
    return lambda reference: serve_local(
        reference, profile.base_model, paths, profile.engine, tracking, base_name="teacher", adapter_name="teacher"
    )


# ------------------------------------------------------------------------------------------ collection
def collect(
    env_id: str,
    scenarios: Sequence[Scenario],
    teacher: TeacherSource,
    counterparts: Sequence[str],
    seed: int = 0,
    run_tag: str = "traces",
    concurrency: int = 8,
    traced_seats: Sequence[str] | None = None,
) -> TraceCollection:
    """The teacher in every seat (or only `traced_seats`) of every scenario against the counterparts
    (cycled), as in `agents.traces.collect_traces`; LLM teachers play directly and their failed episodes
    are counted."""
    if not teacher.llm:
        traces = collect_traces(
            env_id, scenarios, teacher.make_agent, counterparts, seed=seed, run_tag=run_tag, traced_seats=traced_seats
        )
        return TraceCollection(teacher.name, tuple(traces), attempted=len(traces), failed=0)
    return asyncio.run(_collect_llm(env_id, scenarios, teacher, counterparts, seed, run_tag, concurrency, traced_seats))


async def _collect_llm(
    env_id: str,
    scenarios: Sequence[Scenario],
    teacher: TeacherSource,
    counterparts: Sequence[str],
    seed: int,
    run_tag: str,
    concurrency: int,
    traced_seats: Sequence[str] | None = None,
) -> TraceCollection:
    # Not `run_episodes`: it gathers without return_exceptions, so one failed call would end every episode.
    gate = asyncio.Semaphore(concurrency)
    seat_ids = seats(env_id, scenarios[0]) if scenarios else ()
    check_seats(env_id, seat_ids, traced_seats)
    jobs = []
    for index, scenario in enumerate(scenarios):
        for seat_index, seat in enumerate(seat_ids):
            if traced_seats is not None and seat not in traced_seats:
                continue
            counterpart = counterparts[(index + seat_index) % len(counterparts)]
            episode_seed = seed * 1_000_003 + index * 17 + seat_index  # as agents.traces.collect_traces
            jobs.append((scenario, seat, counterpart, episode_seed, f"{run_tag}:{env_id}:{index}:{seat}"))

    async def one(scenario: Scenario, seat: str, counterpart: str, episode_seed: int, episode_id: str):
        agent = teacher.make_agent(episode_seed)
        agents: dict[str, Agent] = {
            s: agent if s == seat else make_code_agent(counterpart, seed=episode_seed) for s in seats(env_id, scenario)
        }
        async with gate:
            try:
                result = await run_episode(
                    make(env_id), agents, scenario, episode_seed, turn_timeout=None, episode_id=episode_id
                )
            except LLMAgentError as exc:
                return agent, None, str(exc)
            finally:
                if isinstance(agent, LLMAgent):
                    await agent.aclose()
        return agent, result, ""

    finished = await asyncio.gather(*(one(*job) for job in jobs))
    traces, failures, calls, errors = [], [], 0, 0
    for (_, seat, counterpart, _, episode_id), (agent, result, reason) in zip(jobs, finished, strict=True):
        calls += int(getattr(agent, "metrics", {}).get("calls", 0))
        errors += int(getattr(agent, "metrics", {}).get("request_errors", 0))
        if result is None:
            failures.append(f"{episode_id}: {reason}")
            log.warning("teacher episode %s failed and is left out: %s", episode_id, reason[:300])
            continue
        traces.append(llm_trace(result, seat, counterpart, agent))
    collection = TraceCollection(
        teacher.name, tuple(traces), len(jobs), len(failures), tuple(failures), calls=calls, request_errors=errors
    )
    log.info(
        "%s %s: %d episodes, %d failed, %d calls, %d request errors",
        env_id, teacher.name, len(jobs), len(failures), calls, errors,
    )  # fmt: skip
    if jobs and not traces:
        raise TeacherError(f"{env_id}: every one of {len(jobs)} teacher episodes failed; first: {failures[0]}")
    return collection


def llm_trace(result: EpisodeResult, seat: str, counterpart: str, agent: LLMAgent) -> Trace:
    """An LLM teacher's episode as a trace: the chat it saw and its whole replies, and per reply its parts."""
    role = result.outcome.roles[seat]
    reasoning = [
        {"turn": r["turn_index"], "attempt": r["attempt"], "infer": r["infer"], "act": r["act"],
         "anticipate": r["anticipate"]}
        for r in agent.tom_records
    ]  # fmt: skip
    return Trace(
        episode_id=result.episode_id,
        env_id=result.env_id,
        seat=seat,
        agent=agent.describe(),
        counterpart=counterpart,
        scenario_id=result.outcome.scenario_id,
        messages=agent.transcript_messages(),
        reasoning=reasoning,
        reward=role.reward,
        agreement=result.outcome.agreement,
        leaked=role.leaked,
        outcome={"deal": result.outcome.deal, "rounds": result.outcome.rounds},
    )


def teacher_traces(
    env_id: str,
    profile: Profile,
    config: TeacherConfig,
    paths: DataPaths | None = None,
    seed: int = 0,
    run_tag: str = "traces",
    episodes: int | None = None,
    serve: Callable[[str], Any] | None = None,
    traced_seats: Sequence[str] | None = None,
) -> TraceCollection:
    """The configured teacher on `episodes` (default: the profile's `teacher_episodes`) training scenarios of
    the domain against the profile's evaluation counterparts, in `traced_seats` (default: the learning seat,
    the one PPO trains and evaluation plays: a warm-start learns the seat it will play)."""
    traced_seats = traced_seats or (stage1.specialist_seat(env_id, profile),)
    if config.source == "code" and episodes is None:
        # The lineage's own teacher step, unchanged (stage 1 decides its scenarios).
        traces = stage1.teacher_traces(env_id, profile, seed=seed, run_tag=run_tag, traced_seats=traced_seats)
        return TraceCollection("teacher", tuple(traces), attempted=len(traces), failed=0)
    scenarios = training_scenarios(env_id, episodes or profile.teacher_episodes, seed, profile.scenario_source)
    with open_teacher(config, profile, paths, serve) as teacher:
        return collect(
            env_id, scenarios, teacher, profile.eval_counterparts, seed=seed, run_tag=run_tag,
            concurrency=config.concurrency, traced_seats=traced_seats,
        )  # fmt: skip


# ----------------------------------------------------------------------------------------- SFT formats
def scaffold(infer: str | None, act: str, anticipate: str | None) -> str:
    """One reply in the ToM scaffold's three labelled parts (missing parts left out)."""
    parts = [f"INFER: {infer.strip()}"] if infer else []
    parts.append(f"ACT: {act.strip()}")
    if anticipate:
        parts.append(f"ANTICIPATE: {anticipate.strip()}")
    return "\n".join(parts)


def _is_scaffolded(messages: Sequence[dict[str, str]]) -> bool:
    return bool(messages) and messages[0]["role"] == "system" and messages[0]["content"].endswith(TOM_SUFFIX)


def sft_messages(trace: Trace, fmt: str) -> list[dict[str, str]]:
    """The trace's chat in the SFT format `fmt` (see the module docstring)."""
    if fmt not in TRACE_FORMATS:
        raise ValueError(f"trace format must be one of {TRACE_FORMATS}, got {fmt!r}")
    messages = [dict(m) for m in trace.messages]
    scaffolded = _is_scaffolded(messages)
    if fmt == "act":
        if not scaffolded:
            return messages
        messages[0]["content"] = messages[0]["content"].removesuffix(TOM_SUFFIX)
        for m in messages:
            if m["role"] == "assistant":
                m["content"] = parse_tom(m["content"]).act or m["content"]
        return messages
    if scaffolded:
        return messages
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] += TOM_SUFFIX
    # The code teacher records one reasoning entry per decision, whose `act` is the text it sent; replies
    # without one (its retries of a refused text with the bare command) keep only their ACT part.
    records = [r for r in trace.reasoning if isinstance(r, dict) and r.get("act")]
    position = 0
    for m in messages:
        if m["role"] != "assistant":
            continue
        match = next((k for k in range(position, len(records)) if records[k]["act"] == m["content"]), None)
        if match is None:
            m["content"] = scaffold(None, m["content"], None)
            continue
        record = records[match]
        m["content"] = scaffold(record.get("infer"), m["content"], record.get("anticipate"))
        position = match + 1
    return messages


def sft_traces(traces: Sequence[Trace], fmt: str) -> list[Trace]:
    """The traces with their chats in the SFT format `fmt`."""
    return [dataclasses.replace(t, messages=sft_messages(t, fmt)) for t in traces]


def traces_from_rows(rows: Sequence[Any]) -> list[Trace]:
    """Traces from rows of the `traces` table (e.g. `frame.itertuples()`)."""
    return [
        Trace(episode_id=r.episode_id, env_id=r.env_id, seat=r.seat, agent=r.agent, counterpart=r.counterpart, scenario_id=r.scenario_id, messages=json.loads(r.messages),
              reasoning=json.loads(r.reasoning), reward=float(r.reward), agreement=bool(r.agreement), leaked=tuple(json.loads(r.leaked)))
        for r in rows
    ]  # fmt: skip
