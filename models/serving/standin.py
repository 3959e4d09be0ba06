"""The stand-in engine: a small OpenAI-compatible server in the project's own environment that answers like the
project's vLLM server, for the pipeline's asset and lineage tests (`EngineSettings.kind = "standin"`, or
$SOCIALRL_ENGINE=standin at an edge). Written here because no library serves a transformers model with vLLM's
extensions (token ids, runtime LoRA routes, `prompt_logprobs`) without vLLM; it starts in seconds where vLLM
takes 15-45 s, and answers a call with one forward pass.

| route | what it does |
| --- | --- |
| `GET /health` | 200 (the one route without a token, as vLLM with the project's guard) |
| `GET /v1/models` | the base model, then every loaded adapter with `parent` = the base's name (vLLM's listing) |
| `POST /v1/load_lora_adapter` `{lora_name, lora_path}` | loads a PEFT adapter on a copy of the base weights; 400 for a name already served or a path that is no adapter |
| `POST /v1/unload_lora_adapter` `{lora_name}` | drops it; 404 for a name not loaded |
| `POST /v1/chat/completions` | the chat template's prompt ids, a scripted reply (below) with the served model's log-probs, vLLM's `return_token_ids` fields |
| `POST /v1/completions` | token-id or text prompts; `prompt_logprobs` (top-k and the prompt's own token per position) from one forward pass |

The reply is scripted, not sampled: `reply_tokens` ordinary tokens drawn uniformly (without the tokenizer's
special tokens) by a generator seeded from the request's `seed` (else the request's position in the server's
life), capped by `max_tokens`, finish reason "length". A random-weight test model samples near-uniform text
anyway, and drawing costs nothing where sampling token by token costs milliseconds per token. Every log-prob
returned is the served model's own (base or adapter) for those tokens, after temperature as the project's
vLLM returns them (`logprobs_mode = "processed_logprobs"`), so the proxy records what a trainer recomputes.
"""

from __future__ import annotations

import copy
import hmac
import itertools
import logging
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from models.hub import subprocess_environment
from models.serving.engine import PARENT_ENV_PASSED, EngineError, EngineProcess
from models.settings import REPO_ROOT

log = logging.getLogger(__name__)

REPLY_TOKENS = 12
"""Tokens in a scripted reply when `max_tokens` allows as many (short: replies cost a forward pass each)."""


class StandInModels:
    """The base model and the adapters loaded on copies of it. The app answers requests one at a time on its
    event loop (a test engine; each answer is one forward pass), and the lock keeps that true for other callers."""

    def __init__(self, model_path: Path, served_name: str, reply_tokens: int = REPLY_TOKENS) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.served_name = served_name
        self.model_path = model_path
        self.reply_tokens = reply_tokens
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
        self.adapters: dict[str, tuple[Path, Any]] = {}
        self.lock = threading.Lock()
        self.calls = itertools.count()
        special = set(self.tokenizer.all_special_ids)
        self.ordinary_ids = [i for i in range(len(self.tokenizer)) if i not in special]

    def model(self, name: str) -> Any:
        if name == self.served_name:
            return self.base
        if name in self.adapters:
            return self.adapters[name][1]
        raise KeyError(name)

    def load(self, name: str, path: Path) -> None:
        from peft import PeftModel

        if name == self.served_name or name in self.adapters:
            raise ValueError(f"The lora adapter '{name}' has already been loaded.")
        if not (path / "adapter_config.json").is_file():
            raise ValueError(f"no LoRA adapter at {path} (adapter_config.json missing)")
        with self.lock:
            self.adapters[name] = (path, PeftModel.from_pretrained(copy.deepcopy(self.base), path).eval())

    def unload(self, name: str) -> None:
        with self.lock:
            if self.adapters.pop(name, None) is None:
                raise KeyError(name)

    def listing(self) -> list[dict[str, Any]]:
        base = {"id": self.served_name, "object": "model", "root": str(self.model_path), "parent": None}
        loras = [
            {"id": name, "object": "model", "root": str(path), "parent": self.served_name}
            for name, (path, _) in self.adapters.items()
        ]
        return [base, *loras]

    def chat_prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        """The prompt's token ids: the model's chat template with the generation prompt (as vLLM renders it)."""
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded  # transformers 5: a BatchEncoding
        return [int(t) for t in ids]

    def pieces(self, tokens: set[int]) -> dict[int, str]:
        """Each token's text on its own (as vLLM's `decoded_token`), decoded in one batch."""
        ordered = sorted(tokens)
        return dict(zip(ordered, self.tokenizer.batch_decode([[t] for t in ordered]), strict=True))

    def scripted_reply(self, max_tokens: int, seed: int | None) -> list[int]:
        import random

        draws = random.Random(seed if seed is not None else next(self.calls))
        return [draws.choice(self.ordinary_ids) for _ in range(max(1, min(max_tokens, self.reply_tokens)))]

    def score(self, name: str, ids: list[int], temperature: float, keep: int = 0) -> Any:
        """log-softmax(logits / temperature) at the last `keep` positions of `ids` (0: every position); row i of
        the whole sequence is the distribution of token i+1."""
        import torch

        model = self.model(name)
        with self.lock, torch.no_grad():
            logits = model(input_ids=torch.tensor([ids]), logits_to_keep=keep).logits[0].float()
        return torch.log_softmax(logits / (temperature if temperature > 0 else 1.0), dim=-1)

    def completion(
        self, name: str, prompt: list[int], body: dict[str, Any], whole: bool = False
    ) -> tuple[list[int], list[float], Any]:
        """The scripted reply to `prompt`, its log-probs under `name`, and the log-prob rows: of the whole
        sequence with `whole`, else of the reply's positions only (a forward pass that skips the prompt's head)."""
        reply = self.scripted_reply(int(body.get("max_tokens") or 16), body.get("seed"))
        keep = 0 if whole else len(reply) + 1
        rows = self.score(name, prompt + reply, float(body.get("temperature", 1.0) or 0.0), keep=keep)
        offset = len(prompt) - 1 if whole else 0
        values = [float(rows[offset + i, token]) for i, token in enumerate(reply)]
        return reply, values, rows


class StandInRequestError(ValueError):
    """A request the stand-in answers with an OpenAI-style error (`status`: 400 or 404)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def served_name(models: StandInModels, body: dict[str, Any]) -> str:
    """The model a request names (the base when it names none); 404 for one not served."""
    name = str(body.get("model") or models.served_name)
    try:
        models.model(name)
    except KeyError:
        raise StandInRequestError(f"The model `{name}` does not exist.", 404) from None
    return name


def usage(prompt: list[int], reply: list[int]) -> dict[str, int]:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(reply), "total_tokens": len(prompt) + len(reply)}


def chat_response(models: StandInModels, body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion as vLLM returns it (with `return_token_ids`: the prompt's and the reply's ids)."""
    name = served_name(models, body)
    try:
        prompt = models.chat_prompt(body["messages"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StandInRequestError(f"unreadable messages: {exc}") from exc
    reply, values, _ = models.completion(name, prompt, body)
    ids = bool(body.get("return_token_ids"))
    pieces = [models.tokenizer.decode([t]) for t in reply]
    logprobs = {
        "content": [
            {"token": p, "logprob": v, "bytes": list(p.encode()), "top_logprobs": []}
            for p, v in zip(pieces, values, strict=True)
        ]
    }
    log.info("chat %s prompt=%d reply=%d", name, len(prompt), len(reply))
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": models.tokenizer.decode(reply)},
        "logprobs": logprobs if body.get("logprobs") else None,
        "finish_reason": "length",
        "token_ids": reply if ids else None,
    }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": name,
        "prompt_token_ids": prompt if ids else None,
        "choices": [choice],
        "usage": usage(prompt, reply),
    }


def scored_prompt(models: StandInModels, prompt: list[int], rows: Any, top_k: int) -> list[dict[str, Any] | None]:
    """vLLM's `prompt_logprobs`: None for the first token; at every other position the top `top_k` tokens and
    the prompt's own, keyed by token id, each with its log-prob, rank and text. Computed for all positions at
    once (a per-position loop over the vocabulary took 2 ms a token, seconds for one MOPD segment)."""
    import torch

    if len(prompt) < 2:
        return [None]
    scored_rows = rows[: len(prompt) - 1]
    own = torch.tensor(prompt[1:])
    own_values = scored_rows.gather(1, own[:, None])[:, 0]
    own_ranks = (scored_rows > own_values[:, None]).sum(1) + 1  # vLLM's rank: 1 + tokens strictly more likely
    best_values, best_ids = scored_rows.topk(top_k, dim=1)
    # A top-k token's rank is 1 + the count of strictly larger values, all of which sit ahead of it in the
    # sorted top k.
    best_ranks = (best_values[:, None, :] > best_values[:, :, None]).sum(2) + 1
    own_l, own_values_l, own_ranks_l = own.tolist(), own_values.tolist(), own_ranks.tolist()
    best_ids_l, best_values_l, best_ranks_l = best_ids.tolist(), best_values.tolist(), best_ranks.tolist()
    pieces = models.pieces({*own_l, *(t for ids in best_ids_l for t in ids)})
    scored: list[dict[str, Any] | None] = [None]
    for i, token in enumerate(own_l):
        entry = {str(token): {"logprob": own_values_l[i], "rank": own_ranks_l[i], "decoded_token": pieces[token]}}
        for best, value, rank in zip(best_ids_l[i], best_values_l[i], best_ranks_l[i], strict=True):
            entry[str(best)] = {"logprob": value, "rank": rank, "decoded_token": pieces[best]}
        scored.append(entry)
    return scored


def completion_response(models: StandInModels, body: dict[str, Any], max_logprobs: int) -> dict[str, Any]:
    """A completion of one prompt (text or token ids) as vLLM returns it, `prompt_logprobs` included."""
    name = served_name(models, body)
    raw = body.get("prompt")
    if isinstance(raw, str):
        prompt = list(models.tokenizer.encode(raw))
    elif isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
        prompt = [int(t) for t in raw]
    else:
        raise StandInRequestError("the stand-in engine takes one prompt: a string or a list of token ids")
    top_k = body.get("prompt_logprobs")
    if top_k is not None and not 0 <= int(top_k) <= max_logprobs:
        raise StandInRequestError(f"prompt_logprobs must be within [0, {max_logprobs}], got {top_k}")
    reply, values, rows = models.completion(name, prompt, body, whole=top_k is not None)
    ids = bool(body.get("return_token_ids"))
    logprobs = {
        "tokens": [models.tokenizer.decode([t]) for t in reply],
        "token_logprobs": values,
        "top_logprobs": None,
        "text_offset": None,
    }
    log.info("completion %s prompt=%d reply=%d prompt_logprobs=%s", name, len(prompt), len(reply), top_k)
    choice = {
        "index": 0,
        "text": models.tokenizer.decode(reply),
        "logprobs": logprobs if body.get("logprobs") is not None else None,
        "finish_reason": "length",
        "token_ids": reply if ids else None,
        "prompt_token_ids": prompt if ids else None,
        "prompt_logprobs": scored_prompt(models, prompt, rows, int(top_k)) if top_k is not None else None,
    }
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": name,
        "choices": [choice],
        "usage": usage(prompt, reply),
    }


def create_app(models: StandInModels, api_key: str | None, max_logprobs: int) -> Any:
    """The stand-in's FastAPI app (see the module table)."""
    app = FastAPI(title="socialrl stand-in engine")

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        sent = request.headers.get("authorization", "")
        expected = f"Bearer {api_key}"
        if api_key and request.url.path != "/health" and not hmac.compare_digest(sent.encode(), expected.encode()):
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return await call_next(request)

    @app.exception_handler(StandInRequestError)
    async def refuse(request: Request, exc: StandInRequestError) -> JSONResponse:
        body = {"error": {"message": str(exc), "type": "BadRequestError", "code": exc.status}}
        return JSONResponse(body, status_code=exc.status)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {}

    @app.get("/v1/models")
    def list_models() -> Any:
        return {"object": "list", "data": models.listing()}

    @app.post("/v1/load_lora_adapter")
    async def load_adapter(body: dict[str, Any]) -> Any:
        try:
            models.load(str(body["lora_name"]), Path(str(body["lora_path"])))
        except (KeyError, ValueError, OSError) as exc:
            raise StandInRequestError(f"loading adapter failed: {exc}") from exc
        log.info("loaded adapter %s from %s", body["lora_name"], body["lora_path"])
        return f"Success: LoRA adapter '{body['lora_name']}' added successfully."

    @app.post("/v1/unload_lora_adapter")
    async def unload_adapter(body: dict[str, Any]) -> Any:
        name = str(body.get("lora_name"))
        try:
            models.unload(name)
        except KeyError:
            raise StandInRequestError(f"The lora adapter '{name}' cannot be found.", 404) from None
        log.info("unloaded adapter %s", name)
        return f"Success: LoRA adapter '{name}' removed successfully."

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> Any:  # async: answered one at a time on the event loop's thread
        return chat_response(models, body)

    @app.post("/v1/completions")
    async def complete(body: dict[str, Any]) -> Any:
        return completion_response(models, body, max_logprobs)

    return app


API_KEY_ENV = "SOCIALRL_STANDIN_API_KEY"
"""Where the subprocess reads its bearer token (never on the command line)."""


class StandInEngine(EngineProcess):
    """The stand-in engine as a subprocess (`python -m models.serving.standin`), started and stopped as vLLM's
    server is. A process of its own, as vLLM's: in a thread of the run's process its forward passes and the run's
    own Python work (agents, the trainer) took turns on one interpreter lock (20 chats: 3.7 s there, 0.45 s as a
    subprocess)."""

    name = "stand-in engine"
    poll_s = 0.2

    def command(self) -> list[str]:
        c = self.config
        return [
            sys.executable, "-m", "models.serving.standin",
            "--model", str(c.model_path), "--served-model-name", c.served_model_name,
            "--host", c.host, "--port", str(self.port), "--max-logprobs", str(c.max_logprobs),
        ]  # fmt: skip

    def environment(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in PARENT_ENV_PASSED if name in os.environ}
        env.update(subprocess_environment())  # offline hub switches, as the engine's
        env["PYTHONPATH"] = str(REPO_ROOT)
        env["OMP_NUM_THREADS"] = "1"  # one request at a time on a tiny model: one thread, cores left to the run
        if self.config.api_key:
            env[API_KEY_ENV] = self.config.api_key
        return env

    def check_startable(self) -> None:
        if not (Path(self.config.model_path) / "config.json").is_file():
            raise EngineError(f"the stand-in engine needs a checkpoint directory, got {self.config.model_path}")


def main(argv: list[str] | None = None) -> None:
    """`python -m models.serving.standin --model DIR [--port N]`: serve until SIGTERM."""
    import argparse

    import torch
    import uvicorn

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--served-model-name", default="base")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--max-logprobs", type=int, default=20)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    models = StandInModels(args.model, args.served_model_name)
    app = create_app(models, os.environ.get(API_KEY_ENV) or None, args.max_logprobs)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
