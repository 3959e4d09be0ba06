"""The LLM agent: prompt rendering, the ToM scaffold, and whole episodes through the proxy on the real engine."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from agents.llm_agent import (
    MAX_BACKOFF_S,
    TURN_MARGIN_S,
    LLMAgent,
    LLMAgentConfig,
    LLMAgentError,
    drop_oldest_exchange,
    parse_tom,
)
from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.price_counterpart import LISTENING_TYPES
from environments.core.base import ActionSpec, Environment, Outcome, ParseError, PrivateFact, RoleOutcome, Scenario
from environments.core.events import RAW_TEXT, Action, Event, Notification, NotificationKind, Observation
from environments.core.runtime import EpisodeSpec, run_episode, run_episodes
from environments.socialrl.craigslist import CraigslistEnv, CraigslistScenario
from models.serving.engine import free_port
from models.serving.proxy import ProxyConfig, ProxyServer
from models.storage import TableStore

SCENARIO = CraigslistScenario(
    scenario_id="test:bike",
    category="bike",
    title="Trek hybrid bike, 54 cm",
    description=("Shimano gears", "New tyres", "Small rust spot", "Lock included"),
    listing_price=320.0,
    buyer_target=224.0,
    max_turns=4,
)


def config(base_url: str = "http://127.0.0.1:9/v1", **overrides: Any) -> LLMAgentConfig:
    values: dict[str, Any] = {"base_url": base_url, "model": "tiny", "max_tokens": 16, "temperature": 1.0}
    return LLMAgentConfig(**(values | overrides))


async def deliver(agents: dict[str, LLMAgent], events: list[Event]) -> None:
    for event in events:
        await agents[event.to].observe(event)


# ------------------------------------------------------------------------------------------ rendering
def test_the_prompt_holds_the_private_facts_and_grammar_and_only_the_seats_own_events() -> None:
    env = CraigslistEnv()
    events = env.reset(SCENARIO, seed=0)
    agents = {seat: LLMAgent(config()) for seat in env.agent_ids}

    async def play() -> None:
        for seat, agent in agents.items():
            await agent.reset(seat, env.env_id, env.action_spec(seat), "ep-1")
        await deliver(agents, events)

    asyncio.run(play())
    buyer, seller = agents["buyer"], agents["seller"]
    system = buyer.system_prompt()
    assert "Your private target price is $224" in system
    assert env.action_spec("buyer").grammar in system
    assert "OFFER $<price>" in system  # the spec's examples
    assert '"buyer"' in system and "craigslist-v0" in system
    assert buyer.messages()[1:] == [{"role": "user", "content": "Your turn (1/4)."}]
    # The seller sees the full description but never the buyer's target; it has not been asked anything yet.
    assert "224" not in seller.system_prompt() and "Lock included" in seller.system_prompt()
    assert "Lock included" not in system  # the buyer sees only the first half of the description
    assert seller.messages() == [{"role": "system", "content": seller.system_prompt()}]

    # The buyer's reply becomes an assistant message; the seller gets the relay and its turn as ONE user message.
    buyer.record_reply("Would you take less?\nOFFER $200")
    asyncio.run(deliver(agents, env.step(Action("buyer", RAW_TEXT, "Would you take less?\nOFFER $200"))))
    assert [m["role"] for m in buyer.messages()] == ["system", "user", "assistant"]
    assert buyer.messages()[-1]["content"] == "Would you take less?\nOFFER $200"
    last = seller.messages()[-1]
    assert last["role"] == "user"
    assert "The buyer says: Would you take less?" in last["content"] and "Your turn (2/4)." in last["content"]
    assert "Standing offer from the buyer: $200" in last["content"]
    assert len(seller.messages()) == 2


def test_a_malformed_reply_brings_the_parser_error_into_the_next_prompt() -> None:
    env = CraigslistEnv()
    events = env.reset(SCENARIO, seed=0)
    buyer = LLMAgent(config())
    asyncio.run(buyer.reset("buyer", env.env_id, env.action_spec("buyer"), "ep-2"))
    asyncio.run(deliver({"buyer": buyer}, [e for e in events if e.to == "buyer"]))
    buyer.record_reply("OFFER $")
    asyncio.run(deliver({"buyer": buyer}, env.step(Action("buyer", RAW_TEXT, "OFFER $"))))
    retry = buyer.messages()[-1]["content"]
    assert "`OFFER` needs a price" in retry and "Your turn (1/4)." in retry
    assert buyer.metrics["invalid_actions"] == 1 and buyer._retry_pending


def test_a_first_turn_after_a_rejection_it_did_not_cause_is_turn_zero() -> None:
    # A seat taken over mid-game (agents/yoao SwapAgent) hears the rejection of its predecessor's reply first;
    # its first call must be turn 0, attempt 0: the cpu YOAO run sent X-Turn-Index -1 and the proxy refused it.
    agent = LLMAgent(config())
    asyncio.run(agent.reset("A1", "red_black-v0", ActionSpec({}, ""), "ep-swap"))
    rejection = Notification("A1", NotificationKind.INVALID_ACTION, "No VOTE line.", data={"retries_left": 1})
    asyncio.run(agent.observe(rejection))
    agent.begin_turn(Notification("A1", NotificationKind.TURN, "Vote now.", ("vote",)))
    assert (agent.turn_index, agent.attempt) == (0, 0)
    assert agent._headers()["X-Turn-Index"] == "0"
    # Once it has taken a turn, a rejection makes the next call a retry of that turn.
    asyncio.run(agent.observe(rejection))
    agent.begin_turn(Notification("A1", NotificationKind.TURN, "Vote now.", ("vote",)))
    assert (agent.turn_index, agent.attempt) == (0, 1)


def test_tom_mode_adds_the_three_part_instructions() -> None:
    agent = LLMAgent(config(tom=True))
    asyncio.run(agent.reset("buyer", "craigslist-v0", CraigslistEnv().action_spec("buyer"), "e"))
    prompt = agent.system_prompt()
    assert "INFER:" in prompt and "ACT:" in prompt and "ANTICIPATE:" in prompt
    assert "INFER:" not in LLMAgent(config()).system_prompt()
    assert agent.describe() == "llm-tom(tiny)"


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="placeholder"):
        config(system_prompt_template="You are {role}")
    with pytest.raises(ValueError, match="max_tokens"):
        config(max_tokens=0)
    with pytest.raises(ValueError, match="base_url"):
        config(base_url="localhost:8000")
    assert config(system_prompt_template="{private}\n{grammar}").max_retries == 1


# ------------------------------------------------------------------------------------------ ToM parsing
def test_tom_parsing_of_a_well_formed_reply() -> None:
    parts = parse_tom(
        "INFER: They want a low price.\nACT: It has a rust spot.\nOFFER $150\nANTICIPATE: A counter at 130."
    )
    assert parts.infer == "They want a low price."
    assert parts.act == "It has a rust spot.\nOFFER $150"
    assert parts.anticipate == "A counter at 130."


@pytest.mark.parametrize(
    ("text", "infer", "act", "anticipate"),
    [
        (
            "**Infer:** wants it cheap\n\n**Act:**\nDeal!\nACCEPT\n\n**Anticipate:** none",
            "wants it cheap",
            "Deal!\nACCEPT",
            "none",
        ),
        (
            "## INFER\nprice sensitive\n## ACT\nOFFER $120\n## ANTICIPATE\na counter",
            "price sensitive",
            "OFFER $120",
            "a counter",
        ),
        ("infer - a cheap buyer\nact: OFFER $99", "a cheap buyer", "OFFER $99", None),
        ("INFER: x ACT: OFFER $5 ANTICIPATE: y", "x", "OFFER $5", "y"),
        ("1. Inference: a\n2. Action: b\n3. Anticipation: c", "a", "b", "c"),
        ("ACT: QUIT", None, "QUIT", None),
        ("INFER:\nACT:   \nANTICIPATE: z", None, None, "z"),
        ("I think it is time to act: now.\nOFFER $3", None, None, None),
        ("", None, None, None),
    ],
)
def test_tom_parsing_is_tolerant(text: str, infer: str | None, act: str | None, anticipate: str | None) -> None:
    parts = parse_tom(text)
    assert (parts.infer, parts.act, parts.anticipate) == (infer, act, anticipate)


# ------------------------------------------------------------------------------------ engine episodes
@pytest.fixture(scope="module")
def recording_proxy(vllm_engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    root = tmp_path_factory.mktemp("agent-tables")
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,), table_root=root, flush_every=1, upstream_api_key=vllm_engine.config.api_key
    )
    with ProxyServer(config, log_path=root / "proxy.log") as server:
        yield server


def recorded(proxy: ProxyServer, episode_id: str) -> list[dict[str, Any]]:
    """The episode's recorded calls, read once the proxy has written every call it received (its flush): the
    rows are read after the recorder, never after a wait."""
    assert proxy.flush()["in_flight"] == 0
    frame = TableStore(proxy.config.table_root).query(
        "SELECT * FROM recorded_calls WHERE episode_id = ? ORDER BY created_at", [episode_id]
    )
    return frame.to_dict("records")


def check_prefix_consistency(rows: list[dict[str, Any]]) -> None:
    """Each call's prompt is the previous call's prompt + its reply + the new events: what the model said
    is replayed verbatim as assistant messages."""
    replies = [r["completion_text"] for r in rows]
    for i, row in enumerate(rows):
        messages = json.loads(row["request_messages"])
        assert messages[0]["role"] == "system"
        assistants = [m["content"] for m in messages if m["role"] == "assistant"]
        assert assistants == replies[:i]
        assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * i + ["user"]


def test_an_llm_buyer_plays_craigslist_against_a_code_seller(recording_proxy: ProxyServer) -> None:
    buyer = LLMAgent(config(recording_proxy.base_url))
    seller = make_code_agent("boulware")
    result = asyncio.run(
        run_episode(CraigslistEnv(), {"buyer": buyer, "seller": seller}, SCENARIO, seed=1, episode_id="ep-cl-1")
    )
    assert result.outcome.rounds <= SCENARIO.max_turns
    assert result.outcome.metrics["ending"] in {"deal", "quit", "max_turns"}
    rows = recorded(recording_proxy, "ep-cl-1")
    assert len(rows) == buyer.metrics["calls"] >= 1
    assert {r["agent_id"] for r in rows} == {"buyer"}
    assert all(
        r["status_code"] == 200 and len(r["completion_token_ids"]) == len(r["completion_logprobs"]) for r in rows
    )
    turns = sorted({r["turn_index"] for r in rows})
    assert turns == list(range(buyer.metrics["turns"]))
    for turn in turns:  # attempts within a turn count up from 0
        attempts = [r["attempt"] for r in rows if r["turn_index"] == turn]
        assert attempts == list(range(len(attempts)))
    check_prefix_consistency(rows)
    system = json.loads(rows[0]["request_messages"])[0]["content"]
    assert "Your private target price is $224" in system and "OFFER $<price>" in system
    assert buyer._own_client is None  # closed at the end of the episode


def test_drop_oldest_exchange_keeps_the_system_prompt_and_the_pending_turn() -> None:
    system, u1, a1, u2, a2, u3 = (
        {"role": r, "content": c}
        for r, c in [
            ("system", "s"),
            ("user", "u1"),
            ("assistant", "a1"),
            ("user", "u2"),
            ("assistant", "a2"),
            ("user", "u3"),
        ]
    )
    assert drop_oldest_exchange([system, u1, a1, u2, a2, u3]) == [system, u2, a2, u3]
    assert drop_oldest_exchange([system, u2, a2, u3]) == [system, u3]
    assert drop_oldest_exchange([system, u3]) == [system, u3]  # nothing left to drop
    assert drop_oldest_exchange([u1, a1, u3]) == [u3]


def test_a_negotiation_longer_than_the_context_goes_on_with_the_oldest_turns_dropped(
    recording_proxy: ProxyServer,
) -> None:
    # The test engine's context is 1024 tokens; 64-token replies over 40 turns outgrow it.
    long = CraigslistScenario(**{**SCENARIO.__dict__, "scenario_id": "test:long", "max_turns": 40})
    buyer = LLMAgent(config(recording_proxy.base_url, max_tokens=64, extra_body={"ignore_eos": True}))
    # A seller that never loses patience, so that a buyer who never moves still gets all 40 turns.
    patient = dataclasses.replace(LISTENING_TYPES["boulware"], patience_rate=0.0, insult_walk=0.0, bluff_walk=0.0)
    seller = make_code_agent("boulware", listening=patient)
    result = asyncio.run(run_episode(CraigslistEnv(), {"buyer": buyer, "seller": seller}, long, episode_id="ep-long"))
    assert result.outcome.rounds > 20  # the episode went on well past the point the context filled up
    assert buyer.metrics["context_trims"] > 0
    rows = recorded(recording_proxy, "ep-long")
    rejected = [r for r in rows if r["status_code"] == 400]
    assert len(rejected) == buyer.metrics["context_trims"]
    answered = [json.loads(r["request_messages"]) for r in rows if r["status_code"] == 200]
    assert answered[-1][0]["role"] == "system"
    assert len(answered[-1]) < 2 * buyer.metrics["turns"]  # the last prompt no longer holds the whole history
    assert len(buyer.history) >= 2 * (buyer.metrics["turns"] - 1)  # the agent's own history stays whole
    # After a trim, later prompts start from the same point: they extend each other (PPO packs them).
    assert buyer.metrics["context_trims"] < buyer.metrics["turns"] // 2
    breaks = sum(1 for a, b in itertools.pairwise(answered) if b[: len(a)] != a)
    assert 1 <= breaks <= buyer.metrics["context_trims"]


def test_an_llm_that_only_says_nothing_ends_craigslist_through_the_invalid_action_rules(
    recording_proxy: ProxyServer, tiny_model_dir: Path
) -> None:
    from transformers import AutoTokenizer

    eos = AutoTokenizer.from_pretrained(tiny_model_dir).eos_token_id
    # vLLM's allowed_token_ids: the model can only end its reply at once, so every reply is empty and
    # the environment rejects it ("empty reply"); no local retries, so all retries are the environment's.
    buyer = LLMAgent(config(recording_proxy.base_url, max_retries=0, extra_body={"allowed_token_ids": [eos]}))
    env = CraigslistEnv()  # max_invalid_retries=2: three attempts per turn, then the turn is forfeited
    result = asyncio.run(
        run_episode(env, {"buyer": buyer, "seller": make_code_agent("boulware")}, SCENARIO, episode_id="ep-cl-empty")
    )
    outcome = result.outcome
    assert not outcome.agreement and outcome.metrics["ending"] == "max_turns"
    assert outcome.rounds == SCENARIO.max_turns
    assert outcome.roles["buyer"].invalid_actions == buyer.metrics["invalid_actions"] == 6
    assert [e.agent_id for e in result.transcript] == ["seller", "seller"]  # the buyer forfeited both its turns
    rows = recorded(recording_proxy, "ep-cl-empty")
    assert [(r["turn_index"], r["attempt"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(r["completion_text"] == "" and list(r["completion_token_ids"]) == [eos] for r in rows)
    assert all(len(r["completion_logprobs"]) == 1 for r in rows)
    retry = json.loads(rows[1]["request_messages"])[-1]["content"]
    assert "Invalid action: empty reply" in retry and "Your turn (1/4)." in retry
    check_prefix_consistency(rows)


def test_llm_vs_llm_with_tom_keeps_each_seat_to_its_own_events(recording_proxy: ProxyServer) -> None:
    buyer = LLMAgent(config(recording_proxy.base_url, tom=True, max_retries=1))
    seller = LLMAgent(config(recording_proxy.base_url))
    asyncio.run(
        run_episode(CraigslistEnv(), {"buyer": buyer, "seller": seller}, SCENARIO, seed=2, episode_id="ep-cl-tom")
    )
    rows = recorded(recording_proxy, "ep-cl-tom")
    seller_rows = [r for r in rows if r["agent_id"] == "seller"]
    buyer_rows = [r for r in rows if r["agent_id"] == "buyer"]
    assert len(buyer_rows) == buyer.metrics["calls"] and len(seller_rows) == seller.metrics["calls"]
    assert all("private target price" not in r["request_messages"] for r in seller_rows)
    assert all("private target price" in r["request_messages"] for r in buyer_rows)
    assert "ANTICIPATE:" in json.loads(buyer_rows[0]["request_messages"])[0]["content"]
    check_prefix_consistency(buyer_rows)
    check_prefix_consistency(seller_rows)
    # Every buyer call is kept with its (probably missing) parts; gibberish has no ACT, so it is retried once.
    assert [(t["turn_index"], t["attempt"]) for t in buyer.tom_records] == [
        (r["turn_index"], r["attempt"]) for r in buyer_rows
    ]
    assert [t["raw"] for t in buyer.tom_records] == [r["completion_text"] for r in buyer_rows]
    missing_act = sum(t["act"] is None for t in buyer.tom_records)
    assert buyer.metrics["malformed_replies"] >= missing_act


@dataclass(frozen=True)
class PasswordScenario(Scenario):
    turns: int = 2


class PasswordEnv(Environment[PasswordScenario]):
    """One seat that must say `PASS <4 digits>`; anything else is invalid. Gibberish never passes, so each
    turn is tried 1 + max_invalid_retries times and then forfeited; the episode ends after `turns` turns."""

    env_id: ClassVar[str] = "password-v0"
    scenario_type: ClassVar[type[Scenario]] = PasswordScenario

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return ("player",)

    @classmethod
    def sample_scenario(cls, rng: random.Random) -> PasswordScenario:
        return PasswordScenario("gen")

    def action_spec(self, agent_id: str) -> ActionSpec:
        return ActionSpec({"pass": "say the password"}, "Reply with exactly `PASS <4 digits>`.")

    def parse(self, agent_id: str, text: str) -> Action | ParseError:
        words = text.split()
        if len(words) == 2 and words[0] == "PASS" and words[1].isdigit() and len(words[1]) == 4:
            return Action(agent_id, "pass", text)
        return ParseError("the reply must be exactly `PASS <4 digits>`")

    def private_facts(self, agent_id: str) -> tuple[PrivateFact, ...]:
        return ()

    def _reset(self, scenario: PasswordScenario) -> list[Event]:
        self.turn = 0
        return [Observation("player", "The vault wants a password.", private=True), self._ask()]

    def _ask(self) -> Notification:
        return self._request_turn("player", ["pass"], f"Password attempt {self.turn + 1}.")

    def _validate(self, action: Action) -> str | None:
        return None

    def _apply(self, action: Action) -> list[Event]:
        return self._next()

    def _next(self) -> list[Event]:
        self.turn += 1
        return self._finish() if self.turn >= self.scenario.turns else [self._ask()]

    def _on_retries_exhausted(self, agent_id: str) -> list[Event]:
        return self._next()

    def _compute_outcome(self) -> Outcome:
        return Outcome(self.env_id, self.scenario.scenario_id, False, self.turn, {"player": RoleOutcome(0.0, 0.0)})


def test_malformed_replies_are_retried_with_the_parser_error_and_tagged_by_attempt(
    recording_proxy: ProxyServer,
) -> None:
    agent = LLMAgent(config(recording_proxy.base_url, max_retries=0))
    result = asyncio.run(
        run_episode(PasswordEnv(max_invalid_retries=2), {"player": agent}, PasswordScenario("s"), episode_id="ep-pw")
    )
    assert result.outcome.roles["player"].invalid_actions == 6
    assert agent.metrics["invalid_actions"] == 6
    rows = recorded(recording_proxy, "ep-pw")
    assert [(r["turn_index"], r["attempt"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    retry_prompt = json.loads(rows[1]["request_messages"])[-1]["content"]
    assert "must be exactly `PASS <4 digits>`" in retry_prompt and "retries left" in retry_prompt
    check_prefix_consistency(rows)


def test_concurrent_episodes_share_one_client_and_are_tagged_apart(recording_proxy: ProxyServer) -> None:
    async def run() -> list[Any]:
        async with httpx.AsyncClient(timeout=60) as client:
            specs = [
                EpisodeSpec(
                    make_env=CraigslistEnv,
                    make_agents=lambda: {
                        "buyer": LLMAgent(config(recording_proxy.base_url), client=client),
                        "seller": make_code_agent("conceder"),
                    },
                    scenario=SCENARIO,
                    seed=i,
                    episode_id=f"ep-conc-{i}",
                )
                for i in range(4)
            ]
            return await run_episodes(specs, concurrency=4)

    results = asyncio.run(run())
    for result in results:
        rows = recorded(recording_proxy, result.episode_id)
        assert rows and {r["agent_id"] for r in rows} == {"buyer"}
        assert sorted({r["turn_index"] for r in rows}) == list(range(len({r["turn_index"] for r in rows})))


async def ask_one_turn(agent: LLMAgent) -> Action:
    """One Craigslist buyer turn from a fresh agent, closing its client afterwards."""
    request = Notification("buyer", NotificationKind.TURN, "Your turn.", ("message",))
    await agent.reset("buyer", "craigslist-v0", CraigslistEnv().action_spec("buyer"), "e")
    await agent.observe(request)
    try:
        return await agent.act(request)
    finally:
        await agent.aclose()


def test_an_unreachable_endpoint_raises_or_forfeits_as_configured() -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMAgentError, match="failed"):
        asyncio.run(ask_one_turn(LLMAgent(config(dead, request_retries=1))))
    quiet = LLMAgent(config(dead, request_retries=0, fail_on_request_error=False, max_retries=0))
    action = asyncio.run(ask_one_turn(quiet))
    assert action.kind == RAW_TEXT and action.text == ""
    assert quiet.metrics["request_errors"] == 1


def test_failed_calls_are_retried_after_a_doubling_back_off_capped_at_the_maximum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def recorded_wait(delay_s: float) -> None:
        waits.append(delay_s)

    dead = f"http://127.0.0.1:{free_port()}/v1"
    agent = LLMAgent(config(dead, request_retries=5, retry_backoff_s=1.5, max_retries=0, fail_on_request_error=False))
    monkeypatch.setattr(agent, "_backoff_wait", recorded_wait)
    assert asyncio.run(ask_one_turn(agent)).text == ""
    assert agent.metrics["calls"] == 6
    assert waits == [1.5, 3.0, 6.0, MAX_BACKOFF_S, MAX_BACKOFF_S]
    with pytest.raises(ValueError, match="retry_backoff_s"):
        config(retry_backoff_s=-0.1)


def test_the_turn_budget_covers_the_agents_worst_case_against_a_hanging_endpoint() -> None:
    """Evaluations give a turn `turn_budget_s`; the agent must be done by then, on its own, even when every
    call hangs until its timeout (every local try, every retry, every back-off)."""
    import socket
    import time

    hanging = socket.socket()
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(64)  # accepts connections into the backlog, never answers
    url = f"http://127.0.0.1:{hanging.getsockname()[1]}/v1"
    agent = LLMAgent(config(url, request_timeout_s=0.2, request_retries=2, max_retries=1, fail_on_request_error=False))
    start = time.perf_counter()
    try:
        action = asyncio.run(ask_one_turn(agent))
    finally:
        hanging.close()
    elapsed = time.perf_counter() - start
    assert action.text == "" and agent.metrics["request_errors"] >= 1  # it gave up by itself
    assert agent.metrics["calls"] == 2 * 3  # the worst case happened: 2 local tries x (1 call + 2 retries)
    assert elapsed <= agent.config.turn_budget_s - TURN_MARGIN_S + 0.5


def test_an_llm_counterpart_plays_the_seller_seat_of_a_rollout_told_its_minimum(recording_proxy: ProxyServer) -> None:
    """`llm` in a PPO config's counterparts: the engine's model plays the seller through the same proxy, from the
    seller's own observations (its private minimum in its prompt), and its calls are recorded under its seat,
    apart from the learning seat's (agents/socialrl/counterparts.py)."""
    from models.training.config import PPOConfig
    from models.training.rollouts import rollout_specs

    ppo = PPOConfig(
        env_id="craigslist-v0",
        counterparts=("llm",),
        counterpart_model="tiny",
        episodes_per_iteration=2,
        group_size=2,
        max_new_tokens=16,
        run_name="llm-counterpart",
    )
    specs = rollout_specs(ppo, 0, recording_proxy.base_url, "tiny", recording_proxy.config.api_key)
    spec = specs[0]
    agents = spec.make_agents()
    assert isinstance(agents["seller"], LLMAgent) and agents["seller"].config.model == "tiny"
    result = asyncio.run(run_episode(spec.make_env(), agents, spec.scenario, episode_id=spec.episode_id))
    rows = recorded(recording_proxy, spec.episode_id)
    by_seat = {seat: [r for r in rows if r["agent_id"] == seat] for seat in ("buyer", "seller")}
    assert by_seat["buyer"] and by_seat["seller"] and len(rows) == len(by_seat["buyer"]) + len(by_seat["seller"])
    minimum = f"Your private minimum is ${spec.scenario.reservation:g}"
    seller_prompt = json.loads(by_seat["seller"][0]["request_messages"])[0]["content"]
    assert minimum in seller_prompt
    assert all(minimum not in r["request_messages"] for r in by_seat["buyer"])  # the buyer is never told it
    assert result.agent_names["seller"] == "counterpart(tiny)"
    from agents.socialrl.counterparts import make_counterpart

    with pytest.raises(ValueError, match="needs an endpoint"):
        make_counterpart("llm", 0)
