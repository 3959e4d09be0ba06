"""Server subprocesses (the vLLM engine, the rollout proxy): one spawner, one registry of live servers; and
`ServerThread`, the one way an ASGI app is served inside this process (the in-process proxy, test stubs).

Every server is started by `spawn_server` in its own session, so that it is the leader of a process group
that holds its workers too; it is registered as live until `stop_server` stops the whole group (SIGTERM,
then SIGKILL after a grace period). Two safety nets keep a run from leaving servers behind: an atexit hook
stops every server still registered when the interpreter exits, and a server spawned from the main thread
gets SIGTERM from the kernel when its parent dies without running exit handlers (SIGKILL, an unhandled
SIGTERM; PR_SET_PDEATHSIG on Linux).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

_LIVE: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()


def terminate_with_parent(parent_pid: int) -> Callable[[], None]:
    """A Popen preexec_fn: on Linux, deliver SIGTERM to the child when its parent dies (PR_SET_PDEATHSIG). The
    child gets SIGTERM's default action and an unblocked mask first: an ignored disposition and a blocked mask
    survive exec, so a parent that ignored or blocked SIGTERM would otherwise leave a server that never hears it."""

    def bind() -> None:
        if sys.platform != "linux":
            return
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent_pid:  # the parent died before the binding took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return bind


def spawn_server(
    command: list[str], log: IO[bytes] | Any, env: dict[str, str], cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a server subprocess in its own session (so its whole process group can be stopped), output to
    `log`, environment exactly `env`, and register it as live. From the main thread it also gets SIGTERM
    when this process dies without running its exit handlers: a killed run leaves no server behind."""
    bound = threading.current_thread() is threading.main_thread()
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=terminate_with_parent(os.getpid()) if bound else None,
    )
    with _LOCK:
        _LIVE.add(process)
    return process


def live_servers() -> list[subprocess.Popen[bytes]]:
    """The servers spawned here and not stopped yet."""
    with _LOCK:
        return list(_LIVE)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, read from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def stop_server(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM the server's whole process group (its workers too), SIGKILL what is left after `grace_s`, and
    unregister it. A graceful server (uvicorn) finishes in-flight requests and runs its shutdown hooks."""
    pgid = process.pid  # start_new_session=True makes the server its group's leader
    if process.poll() is None or group_members(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            process.poll()
            if not group_members(pgid):
                break
            time.sleep(0.1)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    with _LOCK:
        _LIVE.discard(process)


def kill_server(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the server's process group at once (no shutdown hooks: what a crash does); it stays registered
    until `stop_server` reaps it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@atexit.register
def _stop_all() -> None:
    """Stop the servers still registered when the interpreter exits."""
    for process in live_servers():
        stop_server(process, grace_s=5.0)


def wait_until_answers(url: str, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> bool:
    """Poll `url` until it answers with a status below 500 (True), `timeout_s` passes or `process` exits
    (False): for servers whose readiness is an HTTP answer (MLflow's /health, Dagster's /server_info)."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return True
        time.sleep(0.5)
    return False


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a server's log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ServerThread:
    """An ASGI app served by uvicorn on the loopback in a daemon thread of this process (uvicorn's own event
    loop): the in-process proxy and the tests' stub endpoints. `start` returns once uvicorn reports started
    and raises RuntimeError if the thread dies first or `startup_timeout_s` passes; `stop` asks uvicorn to
    exit and joins the thread."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        lifespan: str = "on",
        name: str = "server",
        startup_timeout_s: float = 30.0,
    ) -> None:
        import uvicorn

        self.app = app
        self.host = host
        self.port = port or free_port()
        self.name = name
        self.startup_timeout_s = startup_timeout_s
        self.server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=self.port, log_level=log_level, access_log=False, lifespan=lifespan)
        )
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """http://host:port, no path."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> ServerThread:
        self.thread = threading.Thread(target=self.server.run, name=f"{self.name}-{self.port}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the in-process {self.name} on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def stop(self, join_s: float = 30.0) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(join_s)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
