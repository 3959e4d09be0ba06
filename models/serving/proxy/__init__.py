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

Hardening. Tags are checked on arrival: a header that does not fit the table (an X-Turn-Index
above 2**31 - 1, an id longer than 256 characters) and a model name that is not valid text (a lone surrogate)
get a 400 naming the header or field before any upstream call. A body nested deeper than `max_json_depth`
gets a 400 (1,000 levels made the decoder raise RecursionError, a 500). A row that still cannot be written
goes to the dead-letter file with its reason and never back into the buffer (recorder.py), and text that is
not valid Unicode is stored escaped (models/storage.py), so one bad call cannot stop the recording. With a
token (`api_key`) every route but /health needs it; a non-loopback `host` needs one.

Run it as a process: `python -m models.serving.proxy --upstream http://127.0.0.1:8000/v1 --port 8100`, or from
Python with `ProxyServer(config)` (a subprocess) or `ProxyThread(config)` (uvicorn in a thread).

Reading the rows of calls one has made: call `flush_recorded_calls(url, api_key)` (or `proxy.flush()`) first. It
returns once every call the proxy has received is written (POST /admin/flush: the calls in flight are waited
for, then the buffer is written and every write in progress awaited), so a reader never waits for time or
polls for rows. A stopped proxy has written everything (SIGTERM flushes); a killed one lost its buffer.

Several upstreams are replicas of one engine: each call goes to the replica with the fewest calls in flight,
a replica that fails in transport or on /health leaves the rotation until a probe succeeds, and a call that
failed on one replica is retried on another; its row names the replica that answered (docs/scale_out.md).

The package: config.py (ProxyConfig), recorder.py (CallRecorder: buffer, shards, dead letters), replicas.py
(Replicas: least-outstanding choice, health state), calls.py (tags and model checked on arrival, the upstream
body, the client's view, the recorded rows, errors), app.py (RolloutProxy, the FastAPI app, authentication),
server.py (ProxyServer, ProxyThread), cli.py (the command line). Subprocesses are spawned and stopped by models/serving/process.py, shared with the engine.
"""

from __future__ import annotations

from models.serving.proxy.app import BearerAuth, RolloutProxy, create_app
from models.serving.proxy.calls import (
    BadRequest,
    BodyTooLarge,
    check_model_name,
    error_body,
    json_depth_exceeds,
    read_tags,
)
from models.serving.proxy.cli import main, parse_args
from models.serving.proxy.config import API_KEY_ENV, TABLE, UPSTREAM_API_KEY_ENV, UPSTREAM_KINDS, ProxyConfig
from models.serving.proxy.recorder import CallRecorder
from models.serving.proxy.server import ProxyServer, ProxyThread, flush_recorded_calls

__all__ = [
    "API_KEY_ENV",
    "TABLE",
    "UPSTREAM_API_KEY_ENV",
    "UPSTREAM_KINDS",
    "BadRequest",
    "BearerAuth",
    "BodyTooLarge",
    "CallRecorder",
    "ProxyConfig",
    "ProxyServer",
    "ProxyThread",
    "RolloutProxy",
    "check_model_name",
    "create_app",
    "error_body",
    "flush_recorded_calls",
    "json_depth_exceeds",
    "main",
    "parse_args",
    "read_tags",
]
