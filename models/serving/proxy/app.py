"""The proxy's web handler: forwarding, recording, the routes (FastAPI) and their authentication."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.util
import itertools
import json
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import httpx
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from models.serving.proxy.calls import (
    BadRequest,
    BodyTooLarge,
    UpstreamFailure,
    base_row,
    check_model_name,
    choice_rows,
    client_view,
    error_response,
    int_header,
    json_depth_exceeds,
    read_tags,
    upstream_body,
    upstream_error,
)
from models.serving.proxy.config import ProxyConfig
from models.serving.proxy.recorder import CallRecorder
from models.serving.proxy.replicas import Replicas
from models.storage import TableStore

log = logging.getLogger("socialrl.proxy")

FLUSH_WAIT_S = 60.0
"""How long `POST /admin/flush` waits, unless told (`?wait_s=`), for the calls in flight when it arrives."""

if importlib.util.find_spec("sniffio") is None:
    # httpcore 1.0 runs `import sniffio` on every lock and event it creates (several per request) and
    # falls back to asyncio when that fails; without sniffio installed, each failed import searches
    # sys.path again (measured: ~2.5 s of CPU per 500 proxied calls). A None entry makes the failure
    # immediate, which is the same outcome.
    sys.modules.setdefault("sniffio", None)  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------- the proxy
class RolloutProxy:
    """Forwarding, recording and the small amount of state (upstream models) the app needs."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.store = TableStore(config.table_root)
        self.recorder = CallRecorder(self.store, config.flush_every, config.flush_interval_s)
        self.replicas = Replicas(config.upstreams)
        self._health_task: asyncio.Task[None] | None = None
        self._models: dict[str, dict[str, str | None]] = {}  # upstream -> model id -> parent
        self._model_locks: dict[str, asyncio.Lock] = {}
        self.pools: list[httpx.AsyncClient] = []
        self._pool_cycle: Iterator[httpx.AsyncClient] = iter(())
        self._startup: list[asyncio.Task[bool]] = []
        self.calls = 0
        self._in_flight: dict[int, asyncio.Event] = {}  # calls received and not yet answered (their rows unadded)
        self._call_numbers = itertools.count()

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
        if len(self.config.upstreams) > 1:
            self._health_task = asyncio.create_task(self._probe_forever())

    async def stop(self) -> None:
        tasks = [*self._startup, *([self._health_task] if self._health_task else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.recorder.close()
        for pool in self.pools:
            await pool.aclose()

    # ------------------------------------------------------------------------------------ routing
    def route(self, model: str, tried: Sequence[str] = ()) -> str | None:
        """The upstream for the next try of a call for `model`: its pinned upstream (`routes`; only once), else
        the replica with the fewest calls in flight not yet tried (replicas.py); None when none is left."""
        pinned = self.config.routes.get(model)
        if pinned is not None:
            return None if tried else pinned
        return self.replicas.choose(exclude=tried)

    async def probe(self, upstream: str) -> bool:
        """GET the upstream's /health (its base URL without `/v1`); alive unless no answer or HTTP 5xx (an
        endpoint without a /health route answers 404 and counts as alive). Updates the rotation."""
        try:
            response = await self.pools[0].get(
                f"{upstream.removesuffix('/v1')}/health", timeout=min(5.0, self.config.upstream_timeout_s)
            )
            alive, reason = response.status_code < 500, f"/health answered HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            alive, reason = False, f"/health failed: {type(exc).__name__}: {exc}"
        if alive:
            was_down = not self.replicas.states[upstream].healthy
            self.replicas.mark_up(upstream)
            if was_down:  # perhaps a restarted engine: learn its models again
                await self.refresh_models(upstream)
        else:
            self.replicas.mark_down(upstream, reason)
        return alive

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.health_interval_s)
            try:
                await asyncio.gather(*(self.probe(u) for u in self.config.upstreams))
            except Exception:  # a probe must never end the loop that brings replicas back
                log.exception("health probe failed")

    async def _try(
        self, upstream: str, path: str, content: str, headers: Mapping[str, str]
    ) -> httpx.Response | UpstreamFailure:
        """One upstream's answer, retried `upstream_retries` times on the same upstream after a transport
        failure before any answer (connection refused, a kept-alive connection closed as it was reused).

        Any other exception raised while sending is a failed try too (502, not retried here; `forward` moves
        on): httpx maps only the failures httpcore names, and a replica killed mid-batch once let another
        exception through (CI of 9ba98f0), which escaped as the proxy's own 500 and lost the call."""
        with self.replicas.outstanding(upstream):
            for retry in range(self.config.upstream_retries + 1):
                try:
                    return await next(self._pool_cycle).post(f"{upstream}{path}", content=content, headers=headers)
                except httpx.TimeoutException as exc:
                    return UpstreamFailure(upstream, 504, "upstream_timeout", exc)
                except httpx.TransportError as exc:
                    if retry < self.config.upstream_retries:
                        log.info("upstream %s failed in transport (%r); trying again", upstream, exc)
                        continue
                    return UpstreamFailure(upstream, 502, "upstream_unavailable", exc)
                except Exception as exc:
                    log.warning("upstream %s failed with an unmapped %r", upstream, exc, exc_info=True)
                    return UpstreamFailure(upstream, 502, "upstream_unavailable", exc)
        raise AssertionError("unreachable")

    async def forward(
        self, model: str, path: str, content: str, headers: Mapping[str, str]
    ) -> tuple[str, httpx.Response | UpstreamFailure]:
        """Send the call to replicas until one answers, and say which one did.

        A transport failure takes the replica out of rotation; a timeout or an HTTP 5xx does when the replica's
        /health then fails too (a dead engine), and the call moves on to another replica not yet tried. A timeout
        or 5xx from a replica whose /health is fine is the call's answer (a slow generation, or a request the
        engine rejects: retrying it elsewhere could only repeat it). When no replica is left to try, the last
        failure is the answer."""
        tried: list[str] = []
        upstream = self.route(model) or self.config.upstreams[0]  # route() names one when nothing was tried
        while True:
            tried.append(upstream)
            result = await self._try(upstream, path, content, headers)
            if isinstance(result, httpx.Response) and result.status_code < 500:
                self.replicas.mark_up(upstream)
                return upstream, result
            if model in self.config.routes or len(tried) == len(self.config.upstreams):
                return upstream, result  # no other replica to try
            if isinstance(result, UpstreamFailure) and result.status == 502:
                self.replicas.mark_down(upstream, f"{type(result.cause).__name__}: {result.cause}")
            elif await self.probe(upstream):
                return upstream, result
            what = result.status_code if isinstance(result, httpx.Response) else repr(result.cause)
            log.warning("call to %s failed (%s); trying another replica", upstream, what)
            upstream = self.route(model, tried) or tried[0]

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
    async def read_body(self, request: Request) -> bytes:
        limit = self.config.max_body_bytes
        length = int_header(request.headers.get("content-length"))
        if length is not None and length > limit:
            raise BodyTooLarge
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
        return b"".join(chunks)

    async def handle(self, request: Request, endpoint: str, path: str) -> Response:
        """Answer one call; while it runs it is in flight (`flush` waits for it: its row is added before the
        answer, also when the client has gone)."""
        number, done = next(self._call_numbers), asyncio.Event()
        self._in_flight[number] = done
        try:
            return await self._handle(request, endpoint, path)
        finally:
            del self._in_flight[number]
            done.set()

    async def flush(self, wait_s: float) -> dict[str, int]:
        """Write every call received so far: wait up to `wait_s` for the calls in flight now to be answered
        (each adds its row first), then write the buffer and wait for every write in progress (the recorder's
        `drain`). Calls received meanwhile are not waited for. Answers how many rows this wrote, the rows
        written in all, and how many of the calls in flight were still unanswered after `wait_s` (their rows
        are not written yet; an upstream call ends within `upstream_timeout_s` per try)."""
        before = self.recorder.rows_written
        waiting = list(self._in_flight.values())
        if waiting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(done.wait() for done in waiting)), wait_s)
        await self.recorder.drain()
        return {
            "flushed": self.recorder.rows_written - before,
            "rows_written": self.recorder.rows_written,
            "in_flight": sum(not done.is_set() for done in waiting),
        }

    async def _handle(self, request: Request, endpoint: str, path: str) -> Response:
        request_id = uuid.uuid4().hex
        started = time.perf_counter()
        try:
            raw = await self.read_body(request)
        except ClientDisconnect:  # the client is gone before sending its request: nothing to answer or record
            return Response(status_code=400)
        except BodyTooLarge:
            return error_response(
                413, f"request body exceeds {self.config.max_body_bytes} bytes", "invalid_request_error", request_id
            )
        self.calls += 1
        tags: dict[str, Any] = {}

        async def reject(status: int, message: str, type_: str, body: dict[str, Any] | None = None) -> Response:
            await self.recorder.add([base_row(request_id, endpoint, None, tags, body, started, status, message)])
            return error_response(status, message, type_, request_id)

        try:
            tags = read_tags(request.headers)
        except BadRequest as exc:  # recorded without the tags: the bad value would not fit the table
            return await reject(400, exc.message, "invalid_request_error")
        try:
            body = json.loads(raw)
        except RecursionError:
            return await reject(400, "the request body nests JSON too deeply", "invalid_request_error")
        except ValueError as exc:
            return await reject(400, f"the request body is not valid JSON: {exc}", "invalid_request_error")
        if json_depth_exceeds(body, self.config.max_json_depth):
            message = f"the request body nests JSON deeper than {self.config.max_json_depth} levels"
            return await reject(400, message, "invalid_request_error")
        if not isinstance(body, dict):
            return await reject(400, "the request body must be a JSON object", "invalid_request_error")
        if body.get("stream"):
            return await reject(
                400,
                "stream=true is not supported by the recording proxy; send non-streaming requests",
                "invalid_request_error",
                body,
            )
        try:
            model = check_model_name(body.get("model"))
        except BadRequest as exc:
            return await reject(
                400, exc.message, "invalid_request_error", {k: v for k, v in body.items() if k != "model"}
            )

        forward_headers = {"content-type": "application/json", "x-request-id": request_id}
        content = json.dumps(upstream_body(endpoint, body, self.config.upstream_kind))
        upstream, response = await self.forward(model, path, content, forward_headers)
        if isinstance(response, UpstreamFailure):
            return await self._failed(
                request_id, endpoint, upstream, tags, body, started, response.status, response.type_, response.cause
            )

        status = response.status_code
        if status != 200:
            payload, message = upstream_error(response)
            row = base_row(request_id, endpoint, upstream, tags, body, started, status, message)
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
                request_id, endpoint, upstream, tags, body, started, 502, "upstream_error", message
            )

        base = base_row(request_id, endpoint, upstream, tags, body, started, 200, None)
        base["adapter_version"] = await self.adapter_version(upstream, model, succeeded=True)
        await self.recorder.add(choice_rows(endpoint, base, data))
        content = json.dumps(client_view(endpoint, body, data)).encode()
        return Response(content, media_type="application/json", headers={"x-request-id": request_id})

    async def _failed(
        self,
        request_id: str,
        endpoint: str,
        upstream: str,
        tags: Mapping[str, Any],
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
        row = base_row(request_id, endpoint, upstream, tags, body, started, status, message)
        await self.recorder.add([row])
        return error_response(status, message, type_, request_id)

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
            return error_response(502, "no upstream answered /v1/models: " + "; ".join(errors), "upstream_unavailable")
        return JSONResponse({"object": "list", "data": list(seen.values())})

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "instance": self.config.instance,
            "calls": self.calls,
            **self.recorder.counters(),
            "upstreams": list(self.config.upstreams),
            "replicas": self.replicas.snapshot(),
        }


class BearerAuth:
    """Pure ASGI middleware: every route but /health needs `Authorization: Bearer <token>` (401 otherwise).
    Pure ASGI rather than a FastAPI dependency or BaseHTTPMiddleware: it adds no task per request."""

    def __init__(self, app: Any, token: str, open_paths: frozenset[str] = frozenset({"/health"})) -> None:
        self.app, self.token, self.open_paths = app, token.encode(), open_paths

    def _authorised(self, scope: dict[str, Any]) -> bool:
        if scope.get("path") in self.open_paths:
            return True
        value = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
        scheme, _, token = value.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode("latin-1"), self.token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorised(scope):
            response = error_response(401, "missing or invalid bearer token", "authentication_error")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


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
    async def models() -> Response:
        return await proxy.list_models()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return proxy.health()

    @app.post("/admin/flush")
    async def flush(wait_s: float = Query(FLUSH_WAIT_S, ge=0, le=3600)) -> Response:
        """Write every call received so far (`RolloutProxy.flush`); a trainer or a test calls this (through
        `models.serving.proxy.flush_recorded_calls`) before reading the calls it made."""
        return JSONResponse(await proxy.flush(wait_s))

    if config.api_key is not None:
        app.add_middleware(BearerAuth, token=config.api_key)
    return app
