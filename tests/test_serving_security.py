"""Authenticated local servers and a recorder that one bad call cannot stop.

* vLLM (the session engine has a random token like the pipeline's): /health is the only open route, runtime
  LoRA loading needs the token; the server's environment is explicit and minimal (a secret of the parent
  never reaches it); a non-loopback host without a key is refused;
* the rollout proxy: every route but /health needs its token; tags and the model name are checked on arrival
  (a bad one is a 400 naming it, before any upstream call); JSON nested 1,000 deep is a 400; a row that still
  cannot be written goes to the dead-letter file and the recording goes on;
* the LLM agent sends an explicit token and never shows it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.llm_agent import HEADER_TURN, LLMAgent, LLMAgentConfig
from models.serving.engine import PARENT_ENV_PASSED, EngineConfig, VLLMEngine, new_token
from models.serving.process import free_port, live_servers
from models.serving.proxy import CallRecorder, ProxyConfig, ProxyThread
from models.storage import TableStore

ROOT = Path(__file__).resolve().parent.parent
CHAT = [{"role": "user", "content": "Say something about bicycles."}]


# ---------------------------------------------------------------------------------------- the engine
ENV_DUMPING_SERVER = textwrap.dedent(
    """\
    #!{python}
    # Stand-in for the engine interpreter: writes its environment and command line, then serves /health.
    import http.server, json, os, sys
    with open(os.environ["DUMP_TO"], "w") as out:
        json.dump({{"env": dict(os.environ), "argv": sys.argv}}, out)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


def test_the_engine_gets_a_minimal_environment_and_no_secret_of_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = tmp_path / "python"
    python.write_text(ENV_DUMPING_SERVER.format(python=sys.executable))
    python.chmod(0o755)
    for name in ("SOCIALRL_TEST_SECRET", "OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "VLLM_API_KEY"):
        monkeypatch.setenv(name, "do-not-leak-" + name)
    token = new_token()
    dump = tmp_path / "env.json"
    config = EngineConfig(model_path=tmp_path, api_key=token, startup_timeout_s=20, env={"DUMP_TO": str(dump)})
    with VLLMEngine(config, log_path=tmp_path / "engine.log", python=python) as engine:
        assert engine.process in live_servers()  # the shared registry tracks it
    assert engine.process not in live_servers()
    seen = json.loads(dump.read_text())
    env, argv = seen["env"], seen["argv"]
    assert not any("do-not-leak" in v for k, v in env.items() if k != "VLLM_API_KEY")
    assert env["VLLM_API_KEY"] == token  # the engine's own token, not the parent's
    assert set(env) <= set(PARENT_ENV_PASSED) | {
        "HF_HUB_OFFLINE",
        "VLLM_CPU_KVCACHE_SPACE",
        "VLLM_CPU_OMP_THREADS_BIND",  # the cores it computes on (EngineConfig.compute_cores)
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING",
        "VLLM_NO_USAGE_STATS",
        "DO_NOT_TRACK",
        "VLLM_HOST_IP",  # one node, no address probe through 8.8.8.8
        "VLLM_API_KEY",
        "PYTHONPATH",
        "DUMP_TO",
    }
    assert env["PATH"] == os.environ["PATH"] and env["HF_HUB_OFFLINE"] == "1"
    assert token not in " ".join(argv)  # never on the command line, where `ps` shows it
    assert argv[argv.index("--middleware") + 1] == "socialrl_vllm_guard.GuardMiddleware"


def test_a_server_on_a_public_address_needs_a_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"refusing to serve on '0\.0\.0\.0' without an api_key"):
        EngineConfig(model_path=tmp_path, host="0.0.0.0")
    assert EngineConfig(model_path=tmp_path, host="0.0.0.0", api_key="k").host == "0.0.0.0"
    assert "secret-token" not in repr(EngineConfig(model_path=tmp_path, api_key="secret-token"))
    proxy = ProxyConfig(upstreams=("http://127.0.0.1:9/v1",), table_root=tmp_path, api_key="secret-token")
    assert "secret-token" not in repr(proxy)
    with pytest.raises(ValueError, match=r"refusing to listen on '0\.0\.0\.0' without an api_key"):
        ProxyConfig(upstreams=("http://127.0.0.1:9/v1",), table_root=tmp_path, host="0.0.0.0")
    run = subprocess.run(
        [
            *(sys.executable, "-m", "models.serving.proxy", "--upstream", "http://127.0.0.1:9/v1"),
            *("--table-root", str(tmp_path), "--host", "0.0.0.0", "--port", str(free_port())),
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "SOCIALRL_PROXY_API_KEY"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and "without an api_key" in run.stderr


def test_only_health_answers_without_the_engines_token(vllm_engine: Any, tmp_path: Path) -> None:
    root = vllm_engine.base_url.removesuffix("/v1")
    token = {"Authorization": f"Bearer {vllm_engine.config.api_key}"}
    assert httpx.get(f"{root}/health", timeout=10).status_code == 200
    for method, path in (
        ("GET", "/v1/models"),
        ("POST", "/v1/load_lora_adapter"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/tokenize"),
        ("GET", "/metrics"),
        ("GET", "/version"),
    ):
        assert httpx.request(method, f"{root}{path}", json={}, timeout=10).status_code == 401, path
        wrong = {"Authorization": "Bearer wrong"}
        assert httpx.request(method, f"{root}{path}", json={}, headers=wrong, timeout=10).status_code == 401, path
    assert httpx.get(f"{root}/v1/models", headers=token, timeout=10).status_code == 200
    assert httpx.post(f"{root}/tokenize", json={"model": "tiny", "prompt": "hi"}, headers=token).status_code == 200
    assert "tiny" in vllm_engine.client.models()  # the project's client holds the token


# ----------------------------------------------------------------------------------------- the proxy
@pytest.fixture()
def keyed_proxy(vllm_engine: Any, tmp_path: Path) -> Iterator[ProxyThread]:
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        upstream_api_key=vllm_engine.config.api_key,
        table_root=tmp_path,
        flush_every=1,
        api_key="proxy-token",
        port=0,
    )
    with ProxyThread(config) as server:
        yield server


def _rows(proxy: ProxyThread) -> list[dict[str, Any]]:
    """The running proxy's rows once it has written every call it received (its flush, never a wait)."""
    assert proxy.flush()["in_flight"] == 0
    return (
        TableStore(proxy.config.table_root).query("SELECT * FROM recorded_calls ORDER BY created_at").to_dict("records")
    )


def test_every_proxy_route_but_health_needs_the_token(keyed_proxy: ProxyThread) -> None:
    url = keyed_proxy.url
    assert httpx.get(f"{url}/health").status_code == 200
    for method, path in (
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/completions"),
        ("POST", "/admin/flush"),
        ("GET", "/docs"),
        ("GET", "/no-such-route"),
    ):
        response = httpx.request(method, f"{url}{path}", json={})
        assert response.status_code == 401, path
        assert response.json()["error"]["type"] == "authentication_error"
    ok = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer proxy-token"})
    assert ok.status_code == 200 and "tiny" in {m["id"] for m in ok.json()["data"]}


def test_bad_tags_and_model_names_are_400s_before_the_upstream_and_the_recording_goes_on(
    keyed_proxy: ProxyThread,
) -> None:
    root = keyed_proxy.config.table_root
    auth = {"Authorization": "Bearer proxy-token"}
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 2}
    with httpx.Client(base_url=keyed_proxy.base_url, headers=auth, timeout=60) as c:
        big = c.post("/chat/completions", json=body, headers={HEADER_TURN: "2147483648"})
        assert big.status_code == 400 and HEADER_TURN in big.json()["error"]["message"]
        assert c.post("/chat/completions", json=body, headers={"X-Attempt": "-1"}).status_code == 400
        assert c.post("/chat/completions", json=body, headers={"X-Agent-Id": "a" * 300}).status_code == 400
        surrogate = json.dumps({"model": "tiny\ud800", "messages": CHAT}).encode()  # "\ud800" escape in JSON
        bad_model = c.post("/chat/completions", content=surrogate, headers={"content-type": "application/json"})
        assert bad_model.status_code == 400 and "model name" in bad_model.json()["error"]["message"]
        deep = ('{"model": "tiny", "messages": ' + "[" * 1000 + "]" * 1000 + "}").encode()
        nested = c.post("/chat/completions", content=deep, headers={"content-type": "application/json"})
        assert nested.status_code == 400 and "nest" in nested.json()["error"]["message"]
        good = [c.post("/chat/completions", json=body, headers={HEADER_TURN: str(t)}) for t in range(7)]
        assert [r.status_code for r in good] == [200] * 7
    rows = _rows(keyed_proxy)
    assert sorted(r["turn_index"] for r in rows if r["status_code"] == 200) == list(range(7))  # all 7 written
    refused = (
        TableStore(root)
        .query(
            "SELECT count(*) AS n, count(upstream) AS forwarded, count(turn_index) AS tagged, count(model) AS named "
            "FROM recorded_calls WHERE status_code = 400"
        )
        .iloc[0]
    )
    # Five refusals recorded, none forwarded to the engine, none carrying the bad tag or model name.
    assert (refused.n, refused.forwarded, refused.tagged, refused.named) == (5, 0, 0, 0)
    assert keyed_proxy.proxy.recorder.rows_dead_lettered == 0 and TableStore(root).dead_letters("recorded_calls") == []
    health = httpx.get(f"{keyed_proxy.url}/health").json()
    assert health["rows_written"] == len(rows) and health["rows_lost"] == 0


def test_a_row_that_cannot_be_written_goes_to_the_dead_letter_file_not_back_into_the_buffer(tmp_path: Path) -> None:
    store = TableStore(tmp_path)

    async def record() -> CallRecorder:
        recorder = CallRecorder(store, flush_every=3, flush_interval_s=3600)
        recorder.start()
        good = [{"request_id": f"g{i}", "turn_index": i, "model": "tiny"} for i in range(7)]
        await recorder.add([good[0], {"request_id": "bad", "turn_index": 2**31, "model": "tiny"}, good[1]])
        for row in good[2:]:  # the later good rows: every one must be written
            await recorder.add([row])
        await recorder.close()
        return recorder

    recorder = asyncio.run(record())
    assert recorder.buffer == [] and recorder.rows_written == 7 and recorder.rows_dead_lettered == 1
    assert sorted(store.query("SELECT request_id FROM recorded_calls").request_id) == [f"g{i}" for i in range(7)]
    (dead,) = store.dead_letters("recorded_calls")
    assert dead["row"]["request_id"] == "bad" and "out of range" in dead["reason"]


# --------------------------------------------------------------------------------------- the agent
def test_the_agent_sends_an_explicit_token_and_never_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")
    config = LLMAgentConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key="run-token-123")
    assert "run-token-123" not in repr(config) and "run-token-123" not in str(config)
    agent = LLMAgent(config)
    assert agent._headers()["Authorization"] == "Bearer run-token-123"
    assert "run-token-123" not in agent.describe()
    from_env = LLMAgent(LLMAgentConfig(base_url="http://127.0.0.1:9/v1", model="m"))
    assert from_env._headers()["Authorization"] == "Bearer from-the-environment"
    with pytest.raises(ValueError, match="api_key"):
        LLMAgentConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key="")
