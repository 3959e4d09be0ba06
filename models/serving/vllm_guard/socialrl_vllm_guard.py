"""ASGI middleware loaded into the vLLM server (`--middleware socialrl_vllm_guard.GuardMiddleware`).

vLLM's own `--api-key` check (VLLM_API_KEY) covers only the /v1, /v2, /inference and /cohere routes; the
others (/tokenize, /metrics, /pause, /version, ...) stay open. This middleware makes /health the only route
that answers without the bearer token. It runs inside the engine's own environment (.venv-vllm), so it
imports nothing from the project: models/serving/engine.py puts this directory alone on the engine's
PYTHONPATH.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

OPEN_PATHS = frozenset({"/health"})


class GuardMiddleware:
    """Answers 401 to every request without `Authorization: Bearer $VLLM_API_KEY`, except GET /health."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.token = os.environ.get("VLLM_API_KEY", "").encode()

    def _authorised(self, scope: dict[str, Any]) -> bool:
        if not self.token or scope.get("path") in OPEN_PATHS:
            return True
        headers = dict(scope.get("headers") or ())
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode("latin-1"), self.token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorised(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = b'{"error": "Unauthorized"}'
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
