"""Running the proxy: as a subprocess (`ProxyServer`, `python -m models.serving.proxy`) or in a thread of this
process (`ProxyThread`, for tests and notebooks). Subprocesses are spawned, registered and stopped by the
shared server registry of models/serving/process.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from models.serving.process import ServerThread, free_port, kill_server, log_tail, spawn_server, stop_server
from models.serving.proxy.app import FLUSH_WAIT_S, RolloutProxy, create_app
from models.serving.proxy.config import API_KEY_ENV, INSTANCE_ENV, UPSTREAM_API_KEY_ENV, ProxyConfig
from models.settings import REPO_ROOT


def _health_instance(url: str) -> str | None:
    """The `instance` a healthy server at `url` reports ("" when it names none), or None when none answers."""
    try:
        response = httpx.get(f"{url}/health", timeout=2.0)
        return str(response.json().get("instance", "")) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


FLUSH_WRITE_S = 60.0
"""What `flush_recorded_calls` allows, beyond the wait for calls in flight, for the proxy to write its buffer."""


def flush_recorded_calls(url: str, api_key: str | None = None, wait_s: float = FLUSH_WAIT_S) -> dict[str, int]:
    """Make a running proxy write every call it has received so far, and return once it has: the one way to
    wait for the recorder before reading `recorded_calls` (a trainer before building its batch, a test before
    checking its rows). `url` is the proxy's root or base URL (`.../v1`); `api_key` its token, when it has one.
    The proxy waits up to `wait_s` for calls still in flight (a client that gave up on a call does not end it:
    its row comes when the upstream answers or times out). Returns the proxy's answer: `flushed` (rows this
    wrote), `rows_written` (in all) and `in_flight` (calls received before the flush still unanswered after
    `wait_s`, whose rows are not written yet; 0 when every call received is on disk). Raises on an HTTP error."""
    root = url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    response = httpx.post(
        f"{root}/admin/flush", params={"wait_s": wait_s}, headers=headers, timeout=wait_s + FLUSH_WRITE_S
    )
    response.raise_for_status()
    return response.json()


class _ProxyAddress:
    """Where a running proxy listens (`config.host`, `port`)."""

    config: ProxyConfig
    port: int

    def flush(self, wait_s: float = FLUSH_WAIT_S) -> dict[str, int]:
        """`flush_recorded_calls` on this proxy (with its token): every call it has received is written when this
        returns, unless the answer's `in_flight` counts calls still unanswered after `wait_s`."""
        return flush_recorded_calls(self.url, self.config.api_key, wait_s)

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"


class ProxyServer(_ProxyAddress):
    """The proxy as a subprocess (`python -m models.serving.proxy`); a context manager that always stops it.

    `stop()` sends SIGTERM (uvicorn shuts down gracefully, the lifespan flushes the buffer) and SIGKILLs
    after `grace_s`; `kill()` is an immediate SIGKILL (used to test the crash-loss bound).
    """

    START_ATTEMPTS = 3
    """Ports tried when the proxy picks its own and another server takes one first (a free port is only free
    until someone binds it)."""

    def __init__(
        self,
        config: ProxyConfig,
        log_path: Path | None = None,
        python: str | Path | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.config = config
        self.port = config.port or free_port()
        self.instance = ""
        """This start's identifier, which the process's `/health` must echo."""
        self.python = str(python or sys.executable)
        self.log_path = log_path or Path(tempfile.gettempdir()) / "socialrl-logs" / f"proxy-{self.port}.log"
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        c = self.config
        cmd = [self.python, "-m", "models.serving.proxy", "--host", c.host, "--port", str(self.port)]
        for upstream in c.upstreams:
            cmd += ["--upstream", upstream]
        for model, upstream in c.routes.items():
            cmd += ["--route", f"{model}={upstream}"]
        for model in c.base_models:
            cmd += ["--base-model", model]
        cmd += [
            "--table-root", str(c.table_root),
            "--flush-every", str(c.flush_every),
            "--flush-interval", repr(c.flush_interval_s),
            "--max-body-bytes", str(c.max_body_bytes),
            "--upstream-kind", c.upstream_kind,
            "--upstream-timeout", repr(c.upstream_timeout_s),
            "--upstream-retries", str(c.upstream_retries),
            "--health-interval", repr(c.health_interval_s),
            "--keepalive-expiry", repr(c.keepalive_expiry_s),
            "--max-connections", str(c.max_connections),
            "--upstream-pools", str(c.upstream_pools),
            "--max-json-depth", str(c.max_json_depth),
            "--log-level", c.log_level,
        ]  # fmt: skip
        return cmd

    def environment(self) -> dict[str, str]:
        """The subprocess's environment: this process's, with the tokens (if any) in their variables, never on
        the command line."""
        env = dict(os.environ)
        env.pop(API_KEY_ENV, None)
        env.pop(UPSTREAM_API_KEY_ENV, None)
        env[INSTANCE_ENV] = self.instance
        if self.config.api_key:
            env[API_KEY_ENV] = self.config.api_key
        if self.config.upstream_api_key:
            env[UPSTREAM_API_KEY_ENV] = self.config.upstream_api_key
        return env

    def start(self) -> ProxyServer:
        """Start the process and return once it, not another server on the port, answers `/health`. When the
        proxy picked its port and another server took it first, it tries another (`START_ATTEMPTS`)."""
        for attempt in range(1, self.START_ATTEMPTS + 1):
            taken = self._start_once()
            if not taken:
                return self
            if self.config.port or attempt == self.START_ATTEMPTS:
                raise RuntimeError(
                    f"port {self.port} is taken by another server: the proxy could not bind it; log:\n{self.log_tail()}"
                )
            self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self) -> bool:
        """One start on `self.port`: False once this process is healthy, True when another server holds the port
        (this process then stopped); raises on any other failure."""
        self.instance = uuid.uuid4().hex
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = self.log_path.open("wb")
        self.process = spawn_server(self.command(), log_file, self.environment(), cwd=REPO_ROOT)
        log_file.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            exited = self.process.poll() is not None
            answer = _health_instance(self.url)
            if answer == self.instance and not exited:
                return False
            if answer is not None and answer != self.instance:
                self.stop()  # someone else answers on our port: this process failed to bind it
                return True
            if exited:
                if "address already in use" in self.log_tail():
                    return True  # another server (not a proxy) holds the port
                code = self.process.returncode
                raise RuntimeError(f"the proxy exited with code {code} during start-up; log:\n{self.log_tail()}")
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the proxy was not healthy within {self.startup_timeout_s:.0f} s; log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (graceful: in-flight calls finish, the buffer is flushed), SIGKILL after `grace_s`."""
        if self.process is not None:
            stop_server(self.process, grace_s)

    def kill(self) -> None:
        """SIGKILL, no flush: what a crash does."""
        if self.process is not None:
            kill_server(self.process)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ProxyThread(_ProxyAddress):
    """The proxy in this process: a `ServerThread` (for tests and notebooks)."""

    def __init__(self, config: ProxyConfig, startup_timeout_s: float = 30.0) -> None:
        self.config = config
        self.app = create_app(config)
        self.served = ServerThread(
            self.app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            name="proxy",
            startup_timeout_s=startup_timeout_s,
        )
        self.port = self.served.port

    @property
    def proxy(self) -> RolloutProxy:
        return self.app.state.proxy

    def start(self) -> ProxyThread:
        self.served.start()
        return self

    def stop(self) -> None:
        self.served.stop()

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
