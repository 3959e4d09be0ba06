"""No model hub at run time: the Hugging Face libraries are offline unless a user asks for the hub.

Everything socialrl runs on is local (models/serving/model_store.py resolves models from local directories, the
embedded GGUF or the local HF cache), yet the libraries reach for huggingface.co on their own. Measured
(2026-12, TRL 1.16, transformers 5.19, peft 0.21, huggingface_hub 2.4), with nothing set:

* every TRL trainer sends a telemetry ping when it is built (`_BaseTrainer._send_telemetry` ->
  `huggingface_hub.utils.send_telemetry`, a HEAD to huggingface.co:443 from a daemon thread), and building its
  request headers first fetches huggingface_hub's agent registry (`/api/agent-harnesses`): SFT's trainer
  resolved huggingface.co before its first step. With a network that is an upload; without one, a wait on
  name resolution;
* PEFT's `save_pretrained` asks the hub whether the base model's config.json exists when the base model's
  directory has none (`check_file_exists_on_hf_hub`), and transformers and PEFT download whatever a name does
  not resolve to locally.

Offline by default, without touching `os.environ` (`make run` leaves the process environment as it found it):

* in this process, `keep_offline()` sets the libraries' own switches, `huggingface_hub.constants.HF_HUB_OFFLINE`
  and `HF_HUB_DISABLE_TELEMETRY`, which every hub call reads when it runs: huggingface_hub's HTTP session refuses
  any request (`OfflineModeIsEnabled`, raised before a connection is opened), telemetry and the registry fetch
  are skipped, and transformers resolves files from the local cache only (`datasets`' copies of the switch are
  set too when it is loaded). Importing the `models` package calls it (models/__init__.py), so every entry
  point (make run, make ui's code server and daemon, run_stage2, run_yoao, the CLIs, the benchmarks) is offline
  before any model code runs;
* a subprocess we spawn that loads models (the vLLM engine) gets `subprocess_environment()` in its
  environment: HF_HUB_OFFLINE=1, which huggingface_hub, transformers and datasets all read, and which also
  turns telemetry off (the engine's own usage statistics are off regardless: models/serving/engine.py).

Opting in: `SOCIALRL_ALLOW_HUB=1` in the environment leaves both alone, so the libraries follow their own
variables (HF_HUB_OFFLINE, HF_TOKEN, ...) as they would without socialrl. tests/test_offline.py records every
outbound connection attempted by an SFT run, the PPO and MOPD learners and the engine start: there are none.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ALLOW_HUB_VARIABLE = "SOCIALRL_ALLOW_HUB"
"""Set to 1 (true, yes, on) to let the Hugging Face libraries reach the hub as they would on their own."""
OFFLINE_ENVIRONMENT: Mapping[str, str] = {"HF_HUB_OFFLINE": "1"}
"""The libraries' offline switch, for the environment of a subprocess we spawn (never set in our own)."""


def hub_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the user asked for hub access (`SOCIALRL_ALLOW_HUB=1`)."""
    value = (os.environ if environ is None else environ).get(ALLOW_HUB_VARIABLE, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def subprocess_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables to add to a spawned subprocess's environment: the offline switches, or none when allowed."""
    return {} if hub_allowed(environ) else dict(OFFLINE_ENVIRONMENT)


def keep_offline() -> bool:
    """Switch the Hugging Face libraries of this process offline (see the module docstring), unless the hub is
    allowed; idempotent, and `os.environ` is left alone. Returns whether the process is now offline."""
    if hub_allowed():
        return False
    try:
        from huggingface_hub import constants
    except ImportError:  # an install without the ML extras has no hub client to switch off
        return True
    constants.HF_HUB_OFFLINE = True
    constants.HF_HUB_DISABLE_TELEMETRY = True
    config = sys.modules.get("datasets.config")  # copies the switch when it is imported; later imports read ours
    if config is not None:
        config.HF_HUB_OFFLINE = True
        config.HF_DATASETS_OFFLINE = True
    return True
