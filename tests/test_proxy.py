"""The rollout proxy against the real vLLM session engine: forwarding, recording, errors, auth, crash bound."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from models.records import RECORDED_CALLS_COLUMNS
from models.serving.engine import free_port
from models.serving.proxy import ProxyConfig, ProxyServer, ProxyThread
from models.storage import TableStore

CHAT = [{"role": "user", "content": "Say something about bicycles."}]


def stored_rows(root: Path, where: str = "true", params: list[Any] | None = None) -> list[dict[str, Any]]:
    """The rows on disk as they are: for a stopped proxy (it wrote everything) or to see what is still buffered."""
    frame = TableStore(root).query(f"SELECT * FROM recorded_calls WHERE {where} ORDER BY created_at", params)
    return frame.to_dict("records")


def rows(
    proxy: ProxyServer | ProxyThread, where: str = "true", params: list[Any] | None = None
) -> list[dict[str, Any]]:
    """The rows of a running proxy once it has written every call it received (its flush, never a wait)."""
    assert proxy.flush()["in_flight"] == 0
    return stored_rows(proxy.config.table_root, where, params)


def row_for(proxy: ProxyServer | ProxyThread, request_id: str) -> dict[str, Any]:
    found = rows(proxy, "request_id = ?", [request_id])
    assert len(found) == 1, f"expected one row for {request_id}, got {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def proxy(vllm_engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyServer]:
    """The proxy as a real subprocess (python -m models.serving.proxy) in front of the session engine; every row
    is written before its call is answered (flush_every=1)."""
    root = tmp_path_factory.mktemp("proxy-tables")
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=root,
        flush_every=1,
        base_models=("tiny",),
    )
    with ProxyServer(config, log_path=root / "proxy.log") as server:
        yield server


@pytest.fixture(scope="module")
def client(proxy: ProxyServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.base_url, timeout=60) as c:
        yield c


def tags(episode: str, agent: str = "buyer", turn: int = 0, attempt: int = 0) -> dict[str, str]:
    return {"X-Episode-Id": episode, "X-Agent-Id": agent, "X-Turn-Index": str(turn), "X-Attempt": str(attempt)}


# ------------------------------------------------------------------------------------------ forwarding
def test_chat_is_forwarded_and_recorded_with_the_engines_tokens(
    proxy: ProxyServer, client: httpx.Client, tokenizer: Any
) -> None:
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 12, "temperature": 1.0, "seed": 3}
    response = client.post("/chat/completions", json=body, headers=tags("ep-chat", "seller", 4, 1))
    assert response.status_code == 200, response.text
    request_id = response.headers["x-request-id"]
    data = response.json()
    text = data["choices"][0]["message"]["content"]
    # The client asked for neither log-probs nor token ids, so it gets what vLLM returns without them.
    assert data["choices"][0]["logprobs"] is None
    assert data["choices"][0]["token_ids"] is None
    assert data["prompt_token_ids"] is None

    row = row_for(proxy, request_id)
    assert set(row) == set(RECORDED_CALLS_COLUMNS)
    assert (row["episode_id"], row["agent_id"], row["turn_index"], row["attempt"]) == ("ep-chat", "seller", 4, 1)
    assert row["endpoint"] == "chat.completions"
    assert row["upstream"] == proxy.config.upstreams[0]
    assert row["model"] == "tiny" and row["adapter_version"] is None
    assert row["status_code"] == 200 and row["error"] is None
    assert json.loads(row["request_messages"]) == CHAT
    params = json.loads(row["sampling_params"])
    assert params["max_tokens"] == 12 and params["seed"] == 3 and "messages" not in params
    completion = list(row["completion_token_ids"])
    prompt = list(row["prompt_token_ids"])
    assert len(completion) == row["completion_tokens"] == data["usage"]["completion_tokens"]
    assert len(prompt) == row["prompt_tokens"] == data["usage"]["prompt_tokens"]
    assert len(row["completion_logprobs"]) == len(completion)
    assert all(lp <= 0.0 for lp in row["completion_logprobs"])
    assert row["completion_text"] == text
    assert row["finish_reason"] == data["choices"][0]["finish_reason"]
    assert row["latency_s"] > 0
    # Token ids are the engine's: they decode to the returned text, and the prompt ids are the chat template's.
    assert tokenizer.decode(completion, skip_special_tokens=True) == text
    assert prompt == tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=True, return_dict=False)


def test_completions_are_forwarded_and_the_client_gets_what_it_asked(
    proxy: ProxyServer, client: httpx.Client, tokenizer: Any
) -> None:
    body = {"model": "tiny", "prompt": "The price of the bike is", "max_tokens": 10, "temperature": 0.0}
    body |= {"logprobs": 1, "return_token_ids": True}
    response = client.post("/completions", json=body, headers=tags("ep-cmpl"))
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    row = row_for(proxy, response.headers["x-request-id"])
    assert row["endpoint"] == "completions"
    assert json.loads(row["request_messages"]) == body["prompt"]
    assert list(row["completion_token_ids"]) == choice["token_ids"]
    assert list(row["prompt_token_ids"]) == choice["prompt_token_ids"]
    assert list(row["completion_logprobs"]) == pytest.approx(choice["logprobs"]["token_logprobs"])
    assert tokenizer.decode(choice["token_ids"], skip_special_tokens=True) == choice["text"] == row["completion_text"]

    plain = client.post(
        "/completions", json={k: v for k, v in body.items() if k not in ("logprobs", "return_token_ids")}
    )
    assert plain.status_code == 200
    choice = plain.json()["choices"][0]
    assert choice["logprobs"] is None and choice["token_ids"] is None and choice["prompt_token_ids"] is None
    recorded = row_for(proxy, plain.headers["x-request-id"])
    assert len(recorded["completion_logprobs"]) == len(recorded["completion_token_ids"]) == 10


def test_chat_log_probs_and_token_ids_reach_the_client_only_when_asked(
    proxy: ProxyServer, client: httpx.Client
) -> None:
    base = {"model": "tiny", "messages": CHAT, "max_tokens": 6, "temperature": 0.0}
    asked = client.post("/chat/completions", json=base | {"logprobs": True, "return_token_ids": True}).json()
    content = asked["choices"][0]["logprobs"]["content"]
    assert len(content) == asked["usage"]["completion_tokens"] == len(asked["choices"][0]["token_ids"])
    assert asked["prompt_token_ids"]
    only_logprobs = client.post("/chat/completions", json=base | {"logprobs": True, "top_logprobs": 2}).json()
    assert all(len(c["top_logprobs"]) == 2 for c in only_logprobs["choices"][0]["logprobs"]["content"])
    assert only_logprobs["choices"][0]["token_ids"] is None and only_logprobs["prompt_token_ids"] is None
    plain = client.post("/chat/completions", json=base).json()
    assert plain["choices"][0]["logprobs"] is None
    # Same greedy completion either way: the proxy's extra fields do not change what is sampled.
    assert plain["choices"][0]["message"]["content"] == asked["choices"][0]["message"]["content"]


def test_every_call_is_one_row_also_when_concurrent(proxy: ProxyServer) -> None:
    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=proxy.base_url, timeout=60) as c:
            calls = [
                c.post(
                    "/chat/completions",
                    json={"model": "tiny", "messages": CHAT, "max_tokens": 4, "temperature": 1.0},
                    headers=tags("ep-many", "buyer", turn),
                )
                for turn in range(12)
            ]
            return [r.status_code for r in await asyncio.gather(*calls)]

    assert asyncio.run(run()) == [200] * 12
    found = rows(proxy, "episode_id = 'ep-many'")
    assert sorted(r["turn_index"] for r in found) == list(range(12))
    assert len({r["request_id"] for r in found}) == 12


def test_several_choices_are_one_row_each(proxy: ProxyServer, client: httpx.Client) -> None:
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 5, "temperature": 1.0, "n": 2}
    response = client.post("/chat/completions", json=body, headers=tags("ep-n"))
    assert response.status_code == 200, response.text
    request_id = response.headers["x-request-id"]
    found = rows(proxy, "episode_id = 'ep-n'")
    assert sorted(r["request_id"] for r in found) == [f"{request_id}/0", f"{request_id}/1"]
    for r in found:
        assert len(r["completion_token_ids"]) == len(r["completion_logprobs"]) == r["completion_tokens"]


def test_models_and_health(proxy: ProxyServer, client: httpx.Client) -> None:
    # The engine is shared by the session: other tests may have loaded adapters (models with a parent).
    models = client.get("/models").json()["data"]
    assert [m["id"] for m in models if not m.get("parent")] == ["tiny"]
    assert all(m["parent"] == "tiny" for m in models if m.get("parent"))
    health = httpx.get(f"{proxy.url}/health").json()
    assert health["status"] == "ok" and health["buffered_rows"] == 0 and health["write_errors"] == 0


# -------------------------------------------------------------------------------------------- errors
def test_an_upstream_4xx_is_passed_through_and_recorded(proxy: ProxyServer, client: httpx.Client) -> None:
    response = client.post("/chat/completions", json={"model": "no-such-model", "messages": CHAT}, headers=tags("e4"))
    assert response.status_code == 404
    error = response.json()["error"]
    assert "no-such-model" in error["message"] and error["code"] == 404
    row = row_for(proxy, response.headers["x-request-id"])
    assert row["status_code"] == 404 and "no-such-model" in row["error"]
    assert row["completion_token_ids"] is None or len(row["completion_token_ids"]) == 0
    # base_models is configured and the engine does not list the name, so it counts as an adapter name.
    assert row["adapter_version"] == "no-such-model"


def test_streaming_and_malformed_requests_get_openai_style_400s(proxy: ProxyServer, client: httpx.Client) -> None:
    stream = client.post("/chat/completions", json={"model": "tiny", "messages": CHAT, "stream": True})
    assert stream.status_code == 400
    assert "stream" in stream.json()["error"]["message"]
    assert stream.json()["error"]["type"] == "invalid_request_error"
    bad = client.post("/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "JSON" in bad.json()["error"]["message"]
    no_model = client.post("/chat/completions", json={"messages": CHAT})
    assert no_model.status_code == 400
    for response in (stream, bad, no_model):
        assert row_for(proxy, response.headers["x-request-id"])["status_code"] == 400


def test_a_dead_upstream_gives_502_and_the_proxy_keeps_serving(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    config = ProxyConfig(upstreams=(dead,), table_root=tmp_path, flush_every=100, port=0)
    with ProxyThread(config) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        for turn in range(2):
            response = c.post(
                "/chat/completions", json={"model": "tiny", "messages": CHAT}, headers=tags("dead", turn=turn)
            )
            assert response.status_code == 502
            error = response.json()["error"]
            assert set(error) == {"message", "type", "code"}
            assert error["code"] == 502 and dead in error["message"]
            assert httpx.get(f"{server.url}/health").status_code == 200
        assert server.proxy.recorder.rows_written == 0  # still buffered ...
        assert stored_rows(tmp_path) == []
    found = stored_rows(tmp_path)  # ... and flushed at shutdown
    assert [r["status_code"] for r in found] == [502, 502]
    assert all(dead in r["error"] for r in found)
    assert [r["turn_index"] for r in found] == [0, 1]


@pytest.fixture()
def silent_upstream() -> Iterator[str]:
    """A TCP server that accepts connections and never answers (an engine that hangs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        server.close()


def test_an_upstream_timeout_gives_504_and_is_recorded(tmp_path: Path, silent_upstream: str) -> None:
    config = ProxyConfig(
        upstreams=(silent_upstream,), table_root=tmp_path, flush_every=1, upstream_timeout_s=0.5, port=0
    )
    with ProxyThread(config) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        response = c.post("/completions", json={"model": "tiny", "prompt": "hi"})
        assert response.status_code == 504
        assert response.json()["error"]["type"] == "upstream_timeout"
        assert httpx.get(f"{server.url}/health").json()["status"] == "ok"
    (row,) = stored_rows(tmp_path)
    assert row["status_code"] == 504 and "timed out" in row["error"]


def test_routing_by_model_name_and_failing_over_from_a_dead_replica(vllm_engine: Any, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    live = vllm_engine.base_url
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 2}
    key = vllm_engine.config.api_key
    routed = ProxyConfig(
        upstreams=(dead, live), routes={"tiny": live}, table_root=tmp_path / "a", port=0, upstream_api_key=key
    )
    with ProxyThread(routed) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        assert [c.post("/chat/completions", json=body).status_code for _ in range(4)] == [200] * 4
    spread = ProxyConfig(upstreams=(dead, live), table_root=tmp_path / "b", port=0, upstream_api_key=key)
    with ProxyThread(spread) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        # The dead replica fails in transport once, leaves the rotation, and that call is retried on the live one.
        assert [c.post("/chat/completions", json=body).status_code for _ in range(4)] == [200] * 4
        replicas = httpx.get(f"{server.url}/health").json()["replicas"]
        assert replicas[dead]["healthy"] is False and replicas[live]["healthy"] is True
    assert [r["upstream"] for r in stored_rows(tmp_path / "b")] == [live] * 4  # one row per call, naming who answered


# ------------------------------------------------------------------------------------ auth and limits
def test_bearer_token_is_required_when_configured(vllm_engine: Any, tmp_path: Path) -> None:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path,
        api_key="s3cret",
        port=0,
    )
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 2}
    with ProxyThread(config) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        missing = c.post("/chat/completions", json=body)
        assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
        assert c.post("/chat/completions", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/models").status_code == 401
        ok = c.post("/chat/completions", json=body, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        assert httpx.get(f"{server.url}/health").status_code == 200  # liveness needs no token
    assert len(stored_rows(tmp_path)) == 1  # refused calls never reached an engine and are not recorded


def test_request_body_size_limit(vllm_engine: Any, tmp_path: Path) -> None:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path,
        max_body_bytes=2048,
        port=0,
    )
    big = {"model": "tiny", "messages": [{"role": "user", "content": "x" * 4000}], "max_tokens": 2}
    with ProxyThread(config) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        response = c.post("/chat/completions", json=big)
        assert response.status_code == 413 and "2048" in response.json()["error"]["message"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is enforced while reading
            data = json.dumps(big).encode()
            for i in range(0, len(data), 512):
                yield data[i : i + 512]

        assert c.post("/chat/completions", content=chunks()).status_code == 413
        small = {"model": "tiny", "messages": CHAT, "max_tokens": 2}
        assert c.post("/chat/completions", json=small).status_code == 200


# ------------------------------------------------------------------------------------------- adapters
def test_an_adapter_loaded_at_run_time_is_served_and_recorded_under_its_name(
    vllm_engine: Any, tiny_model_dir: Path, proxy: ProxyServer, client: httpx.Client, tmp_path: Path
) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(base, lora)  # init_lora_weights=False: random A and B, so outputs differ
    model.save_pretrained(tmp_path / "pol-v1")

    body = {"model": "tiny", "messages": CHAT, "max_tokens": 8, "temperature": 0.0}
    vllm_engine.client.load_adapter("pol-v1", tmp_path / "pol-v1")
    try:
        assert "pol-v1" in [m["id"] for m in client.get("/models").json()["data"]]
        adapted = client.post("/chat/completions", json=body | {"model": "pol-v1"}, headers=tags("ep-lora"))
        assert adapted.status_code == 200, adapted.text
        base_reply = client.post("/chat/completions", json=body, headers=tags("ep-lora", turn=1))
    finally:
        vllm_engine.client.unload_adapter("pol-v1")
    row = row_for(proxy, adapted.headers["x-request-id"])
    assert row["model"] == "pol-v1" and row["adapter_version"] == "pol-v1"
    assert len(row["completion_token_ids"]) == len(row["completion_logprobs"]) > 0
    base_row = row_for(proxy, base_reply.headers["x-request-id"])
    assert base_row["adapter_version"] is None
    assert list(base_row["completion_token_ids"]) != list(row["completion_token_ids"])


# ----------------------------------------------------------------------------------------- crash bound
@pytest.mark.parametrize(("calls", "flush_every"), [(10, 4), (5, 8)])
def test_sigkill_loses_at_most_the_unflushed_buffer(
    vllm_engine: Any, tmp_path: Path, calls: int, flush_every: int
) -> None:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path,
        flush_every=flush_every,
        flush_interval_s=3600,
        port=0,
    )
    server = ProxyServer(config, log_path=tmp_path / "proxy.log").start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as c:
            for turn in range(calls):
                body = {"model": "tiny", "messages": CHAT, "max_tokens": 3}
                assert c.post("/chat/completions", json=body, headers=tags("crash", turn=turn)).status_code == 200
        server.kill()  # SIGKILL: no shutdown, no flush
        assert not server.alive()
    finally:
        server.stop()
    shards = sorted((tmp_path / "recorded_calls").glob("*.parquet"))
    assert len(shards) == calls // flush_every
    found = stored_rows(tmp_path)  # DuckDB reads every shard: none is corrupt
    assert len(found) == calls - calls % flush_every
    assert sorted(r["turn_index"] for r in found) == list(range(calls - calls % flush_every))


def test_admin_flush_writes_the_buffer_now(vllm_engine: Any, tmp_path: Path) -> None:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path,
        flush_every=1000,
        api_key="k",
        port=0,
    )
    auth = {"Authorization": "Bearer k"}
    with ProxyThread(config) as server, httpx.Client(base_url=server.base_url, timeout=30, headers=auth) as c:
        for _ in range(3):
            body = {"model": "tiny", "messages": CHAT, "max_tokens": 2}
            assert c.post("/chat/completions", json=body).status_code == 200
        assert stored_rows(tmp_path) == []
        assert httpx.post(f"{server.url}/admin/flush").status_code == 401
        answer = httpx.post(f"{server.url}/admin/flush", headers=auth).json()
        assert answer == {"flushed": 3, "rows_written": 3, "in_flight": 0}
        assert len(stored_rows(tmp_path)) == 3
        assert server.flush() == {"flushed": 0, "rows_written": 3, "in_flight": 0}  # the client sends the token


def test_a_flush_waits_for_a_call_in_flight_whose_client_gave_up(tmp_path: Path, silent_upstream: str) -> None:
    """`flush_recorded_calls` returns once every call the proxy received is written: a call whose client gave up
    is still in flight (the proxy waits for the upstream), and the flush waits for its row; with no time to
    wait, the answer says the call is still in flight and nothing of it is on disk yet."""
    config = ProxyConfig(
        upstreams=(silent_upstream,),
        table_root=tmp_path,
        flush_every=1000,
        flush_interval_s=3600,
        upstream_timeout_s=1.0,
        port=0,
    )
    with ProxyThread(config) as server:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{server.base_url}/completions", json={"model": "tiny", "prompt": "hi"}, timeout=0.2)
        deadline = time.monotonic() + 30
        while server.proxy.calls < 1:  # the proxy has read the call (a precondition, not the rows)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert server.flush(wait_s=0) == {"flushed": 0, "rows_written": 0, "in_flight": 1}
        assert stored_rows(tmp_path) == []
        assert server.flush() == {"flushed": 1, "rows_written": 1, "in_flight": 0}
        (row,) = stored_rows(tmp_path)  # on disk while the proxy still runs
        assert row["status_code"] == 504


def test_drain_waits_for_a_write_started_while_it_waited(tmp_path: Path) -> None:
    """The recorder's drain (behind every flush) returns only once every row added before it is written, also a
    row that a flush by size took from the buffer while the drain waited for an earlier write."""
    from types import SimpleNamespace

    from models.serving.proxy import CallRecorder

    gates = {"r1": threading.Event(), "r3": threading.Event()}
    written: list[str] = []

    class GatedStore:
        def append_rows(self, table: str, batch: list[dict[str, Any]]) -> SimpleNamespace:
            ids = [row["request_id"] for row in batch]
            for key, gate in gates.items():
                if key in ids:
                    assert gate.wait(30)
            written.extend(ids)
            return SimpleNamespace(written=len(batch), path=tmp_path, rejected=())

    async def run() -> None:
        recorder = CallRecorder(GatedStore(), flush_every=2, flush_interval_s=3600)  # type: ignore[arg-type]
        first = asyncio.create_task(recorder.add([{"request_id": "r1"}, {"request_id": "r2"}]))  # a write, held
        await asyncio.sleep(0)
        await recorder.add([{"request_id": "r3"}])  # buffered
        drain = asyncio.create_task(recorder.drain())
        await asyncio.sleep(0)
        later = asyncio.create_task(recorder.add([{"request_id": "r4"}]))  # after the drain began
        gates["r1"].set()
        await first
        await asyncio.wait({drain}, timeout=0.5)
        assert not drain.done() or "r3" in written, "drain returned before r3, added before it, was written"
        gates["r3"].set()
        await drain
        assert "r3" in written
        await later
        await recorder.close()
        assert sorted(written) == ["r1", "r2", "r3", "r4"]

    asyncio.run(run())


def test_rows_are_flushed_by_age(vllm_engine: Any, tmp_path: Path) -> None:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path,
        flush_every=1000,
        flush_interval_s=0.3,
        port=0,
    )
    with ProxyThread(config) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        for _ in range(3):
            assert (
                c.post("/chat/completions", json={"model": "tiny", "messages": CHAT, "max_tokens": 2}).status_code
                == 200
            )
        deadline = time.monotonic() + 5
        while server.proxy.recorder.rows_written < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(stored_rows(tmp_path)) == 3  # on disk while the proxy still runs


# --------------------------------------------------------------------------------------------- config
def test_config_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="upstream"):
        ProxyConfig(table_root=tmp_path, upstreams=())
    with pytest.raises(ValueError, match="http"):
        ProxyConfig(table_root=tmp_path, upstreams=("localhost:8000",))
    with pytest.raises(ValueError, match="route"):
        ProxyConfig(table_root=tmp_path, upstreams=("http://a/v1",), routes={"m": "http://b/v1"})
    with pytest.raises(ValueError, match="flush_every"):
        ProxyConfig(table_root=tmp_path, upstreams=("http://a/v1",), flush_every=0)
    with pytest.raises(ValueError, match="flush_interval_s"):
        ProxyConfig(table_root=tmp_path, upstreams=("http://a/v1",), flush_interval_s=0)
    with pytest.raises(ValueError, match="upstream_kind"):
        ProxyConfig(table_root=tmp_path, upstreams=("http://a/v1",), upstream_kind="tgi")
    with pytest.raises(ValueError, match="health_interval_s"):
        ProxyConfig(table_root=tmp_path, upstreams=("http://a/v1",), health_interval_s=0)
    config = ProxyConfig(table_root=tmp_path, upstreams=("http://a/v1/",), routes={"m": "http://a/v1"})
    assert config.upstreams == ("http://a/v1",)


def test_a_proxy_does_not_outlive_a_killed_parent(tmp_path: Path) -> None:
    """The proxy subprocess goes with the process that started it, even one killed by SIGKILL."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from models.serving.proxy import ProxyConfig, ProxyServer
        config = ProxyConfig(upstreams=("http://127.0.0.1:9/v1",), table_root=Path({str(tmp_path)!r}), port=0)
        server = ProxyServer(config).start()
        print(server.process.pid, flush=True)
        import time
        time.sleep(300)
        """
    )
    root = Path(__file__).resolve().parent.parent
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=root)
    proxy_pid = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 15
    while Path(f"/proc/{proxy_pid}").exists() and time.monotonic() < deadline:
        if Path(f"/proc/{proxy_pid}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    stat = Path(f"/proc/{proxy_pid}/stat")
    assert not stat.exists() or stat.read_text().split()[2] == "Z"


def test_the_subprocess_command_carries_every_setting(tmp_path: Path) -> None:
    """ProxyServer's command line, read back by the proxy's own CLI, gives the same config (tokens travel in
    the environment, never on the command line)."""
    import dataclasses

    from models.serving.proxy.cli import parse_args
    from models.serving.proxy.server import ProxyServer

    config = ProxyConfig(
        upstreams=("http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"),
        routes={"m": "http://127.0.0.1:2/v1"},
        base_models=("base",),
        table_root=tmp_path,
        flush_every=7,
        flush_interval_s=0.25,
        max_body_bytes=12345,
        upstream_timeout_s=9.5,
        upstream_retries=3,
        health_interval_s=1.5,
        keepalive_expiry_s=2.5,
        max_connections=17,
        upstream_pools=3,
        max_json_depth=9,
        port=8123,
        log_level="debug",
    )
    server = ProxyServer(config)
    command = server.command()
    back = parse_args(command[command.index("models.serving.proxy") + 1 :])
    assert back == dataclasses.replace(config, port=server.port)


def test_a_proxy_never_takes_another_servers_port_for_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two test workers once started proxies on the same default port: one failed to bind, saw the other answer
    /health and recorded nothing while its calls went to the other. A proxy now picks a free port unless told
    one, checks that /health answers with its own instance, and tries another port when it picked one that
    another server took first."""
    import models.serving.proxy.server as server_module

    dead = ("http://127.0.0.1:9/v1",)
    assert ProxyConfig(upstreams=dead, table_root=tmp_path).port == 0
    with ProxyServer(ProxyConfig(upstreams=dead, table_root=tmp_path / "a"), log_path=tmp_path / "a.log") as first:
        assert first.port != 8100 and httpx.get(f"{first.url}/health").json()["instance"] == first.instance
        told = ProxyServer(
            ProxyConfig(upstreams=dead, table_root=tmp_path / "b", port=first.port), log_path=tmp_path / "b.log"
        )
        with pytest.raises(RuntimeError, match=f"port {first.port} is taken by another server"):
            told.start()
        assert not told.alive()
        # A proxy that picked the taken port by chance moves to another one.
        ports = iter([first.port, free_port()])
        monkeypatch.setattr(server_module, "free_port", lambda: next(ports))
        with ProxyServer(ProxyConfig(upstreams=dead, table_root=tmp_path / "c"), log_path=tmp_path / "c.log") as moved:
            assert moved.port != first.port and httpx.get(f"{moved.url}/health").json()["instance"] == moved.instance
