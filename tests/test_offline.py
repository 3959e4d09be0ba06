"""Nothing is fetched from (or sent to) a model hub at run time.

Outbound connection attempts are observed for real. In this process (where SFT, PPO and MOPD run),
`socket.getaddrinfo` and `socket.socket.connect` are wrapped for the test; in the session's vLLM engine (a
subprocess and its workers, tests/conftest.py) tests/engine_probe/sitecustomize.py, first on the engine's
PYTHONPATH, wraps them the same way from its start, so the engine's check needs no engine of its own and covers
what the other tests did with it before. A non-loopback target is
recorded and refused at once, as on a machine without a network, so no test waits on a timeout. Left
online, building SFT's TRL trainer sends a telemetry ping to huggingface.co:443 from a daemon thread (after
fetching huggingface_hub's agent registry); models/hub.py switches the libraries offline without touching
os.environ, and SOCIALRL_ALLOW_HUB=1 opts back in.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
HUB_VARIABLES = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "DISABLE_TELEMETRY",
    "DO_NOT_TRACK",
    "SOCIALRL_ALLOW_HUB",
)
"""Variables that switch the Hugging Face libraries offline (or socialrl's opt-in): unset while a stage runs."""
Stage = Callable[[Path, Path, list[str]], None]
"""(tiny model dir, scratch dir, attempts recorded so far) -> None; a stage that runs in a subprocess adds the
subprocess's attempts to the list itself."""


def _is_local(host: object) -> bool:
    """Loopback, a wildcard bind address, or no host at all; a name other than localhost is not local."""
    if host is None:
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name in ("", "localhost", "0.0.0.0", "::"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def outbound(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every non-loopback name resolution or connection attempted in this process while the test runs."""
    attempts: list[str] = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def getaddrinfo(host: object, port: object, *args: object, **kwargs: object) -> object:
        if not _is_local(host):
            attempts.append(f"resolve {host}:{port}")
            raise socket.gaierror(socket.EAI_NONAME, "outbound connections are refused in this test")
        return real_getaddrinfo(host, port, *args, **kwargs)  # type: ignore[arg-type]

    def connect(sock: socket.socket, address: object) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):  # type: ignore[index]
            attempts.append(f"connect {address}")
            raise ConnectionRefusedError("outbound connections are refused in this test")
        real_connect(sock, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.delenv("CI", raising=False)  # TRL skips its telemetry on CI: test what a user's machine does
    for name in HUB_VARIABLES:  # nor may the user's shell make the process offline for us
        monkeypatch.delenv(name, raising=False)
    return attempts


def _wait_for_telemetry(seconds: float = 30.0) -> None:
    """huggingface_hub sends telemetry from a daemon thread: let anything queued be attempted before judging."""
    from huggingface_hub.utils import _telemetry

    deadline = time.monotonic() + seconds
    while _telemetry._TELEMETRY_QUEUE.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------------- stages
def _lora() -> object:
    from models.training.config import LoraSettings

    return LoraSettings(r=4, alpha=8)


def _sft(model_dir: Path, scratch: Path, attempts: list[str]) -> None:
    """One step of SFT through TRL's SFTTrainer, evaluation and adapter save included."""
    from models.training.config import SFTSettings
    from models.training.sft import run_sft

    chat = [
        {"role": "system", "content": "You sell a bike."},
        {"role": "user", "content": "Would you take $100?"},
        {"role": "assistant", "content": "It is in great shape.\nOFFER $150"},
    ]
    settings = SFTSettings(max_steps=1, grad_accumulation=1, max_length=256, lora=_lora())  # type: ignore[arg-type]
    run_sft(model_dir, [chat] * 4, scratch / "sft", settings, eval_conversations=[chat])


def _ppo(model_dir: Path, scratch: Path, attempts: list[str]) -> None:
    """The PPO learner as models/training/ppo.py builds it (actor adapter, separate critic), and a checkpoint's
    adapter save."""
    from models.training.config import PPOHyper
    from models.training.ppo_learner import PPOLearner, ValueModel
    from models.training.sft import load_lora_model

    actor, _ = load_lora_model(model_dir, _lora())  # type: ignore[arg-type]
    PPOLearner(actor, ValueModel.from_pretrained(model_dir), PPOHyper(), pad_id=0)
    actor.save_pretrained(scratch / "ppo" / "adapter", selected_adapters=["default"])


def _mopd(model_dir: Path, scratch: Path, attempts: list[str]) -> None:
    """The MOPD student as models/training/mopd.py builds it, and its adapter save."""
    from models.training.mopd import MOPDLearner
    from models.training.mopd_config import MOPDConfig
    from models.training.sft import load_lora_model

    student, _ = load_lora_model(model_dir, _lora())  # type: ignore[arg-type]
    MOPDLearner(student, MOPDConfig(steps=1), pad_id=0)
    student.save_pretrained(scratch / "mopd" / "adapter")


STAGES: list[tuple[str, Stage]] = [("sft", _sft), ("ppo", _ppo), ("mopd", _mopd)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "stage"), STAGES, ids=[name for name, _ in STAGES])
def test_no_outbound_connection_is_attempted(
    name: str, stage: Stage, tiny_model_dir: Path, tmp_path: Path, outbound: list[str]
) -> None:
    stage(tiny_model_dir, tmp_path, outbound)
    _wait_for_telemetry()
    assert outbound == [], f"{name} reached for the network: {outbound}"
    assert not any(k in os.environ for k in HUB_VARIABLES)  # offline by the libraries' switches, not variables


@pytest.mark.slow
def test_the_engine_attempts_no_outbound_connection(vllm_engine: Any, outbound: list[str]) -> None:
    """The session's vLLM engine (tests/conftest.py: the pipeline's start, with its own environment, runtime LoRA
    and a bearer token) is healthy, loaded the connection probe (tests/engine_probe/sitecustomize.py), and none of
    its processes attempted an outbound connection since it started (its start included)."""
    from tests.conftest import OUTBOUND_LOG_ENV

    assert vllm_engine.client is not None and vllm_engine.client.healthy()
    lines = Path(vllm_engine.config.env[OUTBOUND_LOG_ENV]).read_text().splitlines()
    assert any(line.startswith("probe ") for line in lines), "the engine did not load the connection probe"
    outbound += [f"engine: {line}" for line in lines if not line.startswith("probe ")]
    _wait_for_telemetry()
    assert outbound == [], f"engine reached for the network: {outbound}"
    assert not any(k in os.environ for k in HUB_VARIABLES)  # offline by the libraries' switches, not variables


def test_the_recorder_sees_an_outbound_attempt(outbound: list[str]) -> None:
    """Control: the recorder catches an attempt (so an empty record above means none was made)."""
    with pytest.raises(OSError):
        socket.create_connection(("huggingface.co", 443), timeout=1)
    assert outbound == ["resolve huggingface.co:443"]
    socket.getaddrinfo("localhost", 80)  # loopback is not an outbound attempt
    assert outbound == ["resolve huggingface.co:443"]
    assert _is_local("127.0.0.1") and _is_local("::1") and not _is_local("huggingface.co")


@pytest.mark.parametrize(("allow", "offline"), [(None, "True True"), ("1", "False False")])
def test_importing_models_switches_the_hub_off_unless_asked(allow: str | None, offline: str) -> None:
    """In a fresh interpreter, as an entry point starts: `import models` alone switches the libraries offline
    (SOCIALRL_ALLOW_HUB=1 leaves them as their own variables set them), and no variable is set."""
    env = {k: v for k, v in os.environ.items() if k not in HUB_VARIABLES}
    if allow is not None:
        env["SOCIALRL_ALLOW_HUB"] = allow
    code = (
        "import os, models; from huggingface_hub import constants as c; "
        "print(c.HF_HUB_OFFLINE, c.HF_HUB_DISABLE_TELEMETRY, 'HF_HUB_OFFLINE' in os.environ)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == [*offline.split(), "False"]


def test_keep_offline_and_the_engine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from models.hub import ALLOW_HUB_VARIABLE, OFFLINE_ENVIRONMENT, keep_offline, subprocess_environment
    from models.serving.engine import EngineConfig, VLLMEngine

    monkeypatch.delenv(ALLOW_HUB_VARIABLE, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", False)
    environ = dict(os.environ)
    assert keep_offline() and constants.HF_HUB_OFFLINE and constants.HF_HUB_DISABLE_TELEMETRY
    assert os.environ == environ  # the libraries' switches, not the process environment
    engine_env = VLLMEngine(EngineConfig(model_path=Path("m"))).environment()
    assert all(engine_env[k] == v for k, v in OFFLINE_ENVIRONMENT.items()) and engine_env["VLLM_HOST_IP"] == "127.0.0.1"

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", False)
    monkeypatch.setenv(ALLOW_HUB_VARIABLE, "1")
    assert not keep_offline() and not constants.HF_HUB_OFFLINE and not constants.HF_HUB_DISABLE_TELEMETRY
    assert subprocess_environment() == {}
    assert "HF_HUB_OFFLINE" not in VLLMEngine(EngineConfig(model_path=Path("m"))).environment()
