"""The GPU path of the training stages: device selection (CUDA mocked only for the selection logic), dtypes,
attention kernel and gradient checkpointing on CPU; imports without TRL (a GPU box has torch, transformers
and peft); the learner benchmark under those packages only. Tests marked `gpu` run where torch sees CUDA
(benchmarks/gpu_check.sh) and are skipped elsewhere.

Nothing here needs this project's other dependencies or its test models: the models are tiny Qwen3s with
random weights and a word-level tokenizer, written to a temporary folder, so the `gpu` tests run on a GPU
machine that has only torch, transformers, peft and pytest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch

from models.training.config import ComputeSettings, LoraSettings, PPOConfig, PPOHyper, SFTSettings
from models.training.device import load_kwargs, select_device, weights_dtype
from models.training.ppo_learner import PPOLearner, ValueModel, token_logprobs
from models.training.segments import RecordedTurn, episode_samples

ROOT = Path(__file__).resolve().parent.parent

# Packages a GPU box lacks; a finder hides them (find_spec and metadata both say absent, as on that box).
ABSENT_FINDER = """
import importlib.abc, importlib.metadata, sys
ABSENT = {absent!r}
class Absent(importlib.abc.MetaPathFinder):
    def __init__(self, finders):
        self.finders = finders
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            return None
        for finder in self.finders:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                return spec
        return None
    def find_distributions(self, context=importlib.metadata.DistributionFinder.Context()):
        for finder in self.finders:
            for dist in getattr(finder, "find_distributions", lambda c: [])(context):
                if dist.metadata["Name"].lower().replace("-", "_") not in ABSENT:
                    yield dist
sys.meta_path[:] = [Absent(list(sys.meta_path))]
"""
GPU_BOX_ABSENT = ("trl", "duckdb", "dagster", "mlflow", "ray", "vllm", "datasets", "socialrl")


def _run_without(absent: tuple[str, ...], code: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    program = ABSENT_FINDER.format(absent=set(absent)) + code
    return subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


# ------------------------------------------------------------------------------------------- selection
def test_auto_picks_cuda_when_torch_sees_a_gpu_else_the_cpu() -> None:
    with (
        mock.patch.object(torch.cuda, "is_available", return_value=True),
        mock.patch.object(torch.cuda, "current_device", return_value=1),
    ):
        assert select_device("auto") == torch.device("cuda", 1)
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        assert select_device("auto") == torch.device("cpu")
        assert select_device("cpu") == torch.device("cpu")
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            select_device("cuda")
    with (
        mock.patch.object(torch.cuda, "is_available", return_value=True),
        mock.patch.object(torch.cuda, "device_count", return_value=2),
    ):
        assert select_device("cuda:1") == torch.device("cuda", 1)
        with pytest.raises(RuntimeError, match="sees 2 GPU"):
            select_device("cuda:2")


def test_compute_settings_reject_what_they_cannot_run() -> None:
    assert ComputeSettings().device == "auto" and ComputeSettings().attn_implementation == "sdpa"
    assert not ComputeSettings().gradient_checkpointing
    for device in ("tpu", "cuda:x", "cpu:0", "mps"):
        with pytest.raises(ValueError, match="device must be"):
            ComputeSettings(device=device)
    with pytest.raises(ValueError, match="attn_implementation"):
        ComputeSettings(attn_implementation="flash")


def test_ppo_config_round_trips_compute_and_data_parallel_settings() -> None:
    data = {
        "env_id": "craigslist-v0",
        "compute": {"device": "cuda:0", "gradient_checkpointing": True},
        "data_parallel": {"workers": 2, "ray_address": "auto"},
    }
    config = PPOConfig.from_dict(data)
    assert config.compute == ComputeSettings(device="cuda:0", gradient_checkpointing=True)
    assert config.data_parallel.workers == 2 and config.data_parallel.ray_address == "auto"
    assert PPOConfig.from_dict({"env_id": "craigslist-v0"}).data_parallel.enabled is False


def test_the_embedded_profiles_keep_the_cpu_defaults() -> None:
    from models.profiles import CPU, PAPER, SMOKE

    for profile in (SMOKE, CPU):
        assert profile.ppo.compute == ComputeSettings() and profile.sft.compute == ComputeSettings()
        assert profile.ppo.data_parallel.workers == 1 and not profile.ppo.data_parallel.enabled
        assert profile.engine.tensor_parallel_size == profile.engine.data_parallel_size == 1
    assert CPU.ppo.bf16 and CPU.sft.bf16  # asked for; used where the CPU has native bf16 (models/hardware.py)
    assert PAPER.ppo.compute.device == "cuda" and PAPER.ppo.data_parallel.workers > 1
    assert PAPER.ppo.bf16 and PAPER.sft.bf16


def test_weights_dtype_follows_the_stage_where_the_device_has_native_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("models.hardware.native_bf16", lambda device_type="cpu": True)
    assert weights_dtype(True) is torch.bfloat16 and weights_dtype(False) is torch.float32
    assert load_kwargs(ComputeSettings(attn_implementation="eager"), bf16=True) == {
        "dtype": torch.bfloat16,
        "attn_implementation": "eager",
    }


def test_a_cpu_without_native_bf16_trains_and_serves_in_fp32(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """bf16 is a speed setting: where the CPU would emulate it (no AVX512-BF16 or AMX) the weights, the
    autocast, the SFT trainer and the engine fall back to fp32, and say so once."""
    from models import hardware
    from models.serving.engine import EngineConfig, VLLMEngine, served_dtype
    from models.training.device import autocast
    from models.training.sft import trainer_config

    monkeypatch.setattr(hardware, "native_bf16", lambda device_type="cpu": device_type == "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    hardware._say_fp32.cache_clear()
    with caplog.at_level("WARNING", logger="socialrl.hardware"):
        assert weights_dtype(True) is torch.float32 and weights_dtype(True, "cpu") is torch.float32
        assert not autocast("cpu", True)._enabled
        assert trainer_config(SFTSettings(bf16=True), tmp_path, on_cpu=True).bf16 is False
        assert served_dtype("bfloat16") == "float32" and served_dtype("float16") == "float16"
        command = VLLMEngine(EngineConfig(model_path=tmp_path)).command()
        assert command[command.index("--dtype") + 1] == "float32"
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all("no native bf16" in m for m in said)  # once for training, once for the engine
    # On a device with native bf16 the stage's setting stands.
    monkeypatch.setattr(hardware, "native_bf16", lambda device_type="cpu": True)
    assert weights_dtype(True) is torch.bfloat16 and autocast("cpu", True)._enabled
    assert served_dtype("bfloat16") == "bfloat16"


def test_native_bf16_reads_the_cpu_and_rejects_unknown_devices() -> None:
    from models import hardware

    flags = hardware.cpu_flags()
    if flags:  # Linux: torch's own check agrees with the flags it is built from
        assert hardware.native_bf16("cpu") == bool({"avx512_bf16", "amx_bf16"} & flags)
    with pytest.raises(ValueError, match="unknown device type"):
        hardware.native_bf16("tpu")


# ------------------------------------------------------------------------------------- tiny local models
def write_tiny_qwen(directory: Path, hidden: int = 64, layers: int = 2, vocab: int = 320, seed: int = 0) -> Path:
    """A random-weight Qwen3 and a word-level tokenizer in `directory` (no download, no project data)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config

    directory.mkdir(parents=True, exist_ok=True)
    words = {f"w{i}": i for i in range(4, vocab)} | {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3}
    backend = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    tokenizer.save_pretrained(directory)
    config = Qwen3Config(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        vocab_size=vocab,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen") / "model")


def _samples(vocab: int = 320) -> list:
    rng = torch.Generator().manual_seed(3)
    samples = []
    for e in range(4):
        prompt = tuple(torch.randint(4, vocab, (12,), generator=rng).tolist())
        first = tuple(torch.randint(4, vocab, (5,), generator=rng).tolist())
        second_prompt = (*prompt, *first, *torch.randint(4, vocab, (6,), generator=rng).tolist())
        second = tuple(torch.randint(4, vocab, (4,), generator=rng).tolist())
        turns = [RecordedTurn(prompt, first, (-5.0,) * 5), RecordedTurn(second_prompt, second, (-5.0,) * 4)]
        samples.append(episode_samples(f"e{e}", turns, reward=float(e % 2)))
    return samples


def _learner(qwen_dir: Path, compute: ComputeSettings, bf16: bool, critic: str = "separate") -> PPOLearner:
    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    lora = LoraSettings(r=4, alpha=8, target_modules=("q_proj", "v_proj", "up_proj"))
    actor, _ = load_lora_model(qwen_dir, lora, bf16=bf16, compute=compute)
    value_model = ValueModel.from_pretrained(qwen_dir, compute) if critic == "separate" else None
    hyper = PPOHyper(actor_lr=1e-2, critic_lr=1e-2, minibatch_episodes=4, micro_batch_tokens=64, critic=critic)
    return PPOLearner(actor, value_model, hyper, pad_id=0, bf16=bf16)


def _one_update(learner: PPOLearner) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    prepared, _ = learner.prepare(_samples())
    stats = learner.update(prepared, train_actor=True, generator=torch.Generator().manual_seed(0))
    trained = {
        n: p.detach().float().cpu().clone()
        for module in (learner.actor, learner.critic)
        for n, p in module.named_parameters()
        if p.requires_grad
    }
    return stats, trained


# ---------------------------------------------------------------------------------- dtype, kernels, memory
def test_cpu_bf16_loading_keeps_the_adapter_and_critic_in_fp32(qwen_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from models.training.sft import load_lora_model

    monkeypatch.setattr("models.hardware.native_bf16", lambda device_type="cpu": True)  # a CPU with native bf16

    compute = ComputeSettings(device="cpu")
    actor, tokenizer = load_lora_model(qwen_dir, LoraSettings(r=4, alpha=8), bf16=True, compute=compute)
    dtypes = {(p.requires_grad, p.dtype) for p in actor.parameters()}
    assert dtypes == {(True, torch.float32), (False, torch.bfloat16)}
    assert {p.device.type for p in actor.parameters()} == {"cpu"}
    assert actor.config._attn_implementation == "sdpa"
    assert not actor.is_gradient_checkpointing
    assert tokenizer.pad_token_id == 0
    critic = ValueModel.from_pretrained(qwen_dir, ComputeSettings(device="cpu", attn_implementation="eager"))
    assert {p.dtype for p in critic.parameters()} == {torch.float32}
    assert critic.backbone.config._attn_implementation == "eager"
    fp32, _ = load_lora_model(qwen_dir, LoraSettings(r=4, alpha=8), bf16=False, compute=compute)
    assert {p.dtype for p in fp32.parameters()} == {torch.float32}


def test_gradient_checkpointing_changes_memory_not_the_update(qwen_dir: Path) -> None:
    """Recomputing activations in the backward pass gives the same update (fp32: bit-for-bit up to rounding)."""
    plain = _learner(qwen_dir, ComputeSettings(device="cpu"), bf16=False)
    checkpointed = _learner(qwen_dir, ComputeSettings(device="cpu", gradient_checkpointing=True), bf16=False)
    assert checkpointed.actor.is_gradient_checkpointing and checkpointed.critic.backbone.is_gradient_checkpointing
    (stats_a, weights_a), (stats_b, weights_b) = _one_update(plain), _one_update(checkpointed)
    for key in ("policy_loss", "value_loss", "actor_grad_norm"):
        assert stats_b[key] == pytest.approx(stats_a[key], rel=1e-4, abs=1e-6), key
    assert weights_a.keys() == weights_b.keys()
    assert all(torch.allclose(weights_a[k], weights_b[k], atol=1e-5) for k in weights_a)
    untouched = _learner(qwen_dir, ComputeSettings(device="cpu"), bf16=False)
    before = {n: p.detach().clone() for n, p in untouched.actor.named_parameters() if p.requires_grad}
    assert any(not torch.allclose(before[n], weights_a[n]) for n in before)  # the update did move the adapter


# ------------------------------------------------------------------------------------- the GPU box's packages
def test_the_learner_sft_and_configs_import_without_trl_or_the_services(qwen_dir: Path) -> None:
    """On a GPU box with torch, transformers and peft only: the learner, the SFT module (TRL is imported
    inside run_sft) and the settings import, and a learner loads and runs on the tiny model."""
    code = f"""
import sys
import models.training.config, models.training.device, models.training.ppo_learner, models.training.sft
from pathlib import Path
from models.training.config import ComputeSettings, LoraSettings, PPOHyper
from models.training.ppo_learner import PPOLearner, ValueModel, token_logprobs
from models.training.segments import Segment
from models.training.sft import load_lora_model
actor, _ = load_lora_model(Path({str(qwen_dir)!r}), LoraSettings(r=4, alpha=8), bf16=True, compute=ComputeSettings())
learner = PPOLearner(actor, ValueModel.from_pretrained(Path({str(qwen_dir)!r})), PPOHyper(), pad_id=0, bf16=True)
print(len(token_logprobs(actor, [Segment([5, 6, 7, 8], [3], [0.0])], 0)[0]))
try:
    import trl
except ImportError:
    print("trl absent")
print(sorted(m for m in {GPU_BOX_ABSENT!r} if m in sys.modules))
"""
    out = _run_without(GPU_BOX_ABSENT, code)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["1", "trl", "absent", "[]"]


@pytest.mark.slow
def test_the_learner_benchmark_runs_with_torch_transformers_and_peft_only(tmp_path: Path) -> None:
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['bench_learner.py', '--device', 'cpu', '--shape', 'small', '--iterations', '1', "
        f"'--episodes', '4', '--output', {str(tmp_path / 'out.json')!r}]\n"
        "runpy.run_path('benchmarks/bench_learner.py', run_name='__main__')\n"
    )
    out = _run_without(GPU_BOX_ABSENT, code, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line == json.loads((tmp_path / "out.json").read_text())
    assert line["shape"] == "small" and line["device"] == "cpu"
    # The FLOPs actually counted: an actor update is 4 N_lin + 6 N_lora per token plus attention, not 6 N.
    assert 0 < line["mfu"]["update"] < 1.5 and line["tokens_per_s"]["update"] > 0
    assert line["actor_trainable_params"] < line["actor_params"] / 10


def test_flops_of_a_lora_update_by_hand() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_learner import QWEN3_4B, ModelShape, Workload, flops

    # Qwen3-4B: 36 layers x (q,o: 2 x 2560 x 4096; k,v: 2 x 2560 x 1024; mlp 3 x 2560 x 9728) + head 2560 x 151936
    per_layer = 2 * 2560 * 4096 + 2 * 2560 * 1024 + 3 * 2560 * 9728
    assert QWEN3_4B.matmul_params(lm_head=True) == 36 * per_layer + 2560 * 151_936
    assert 3.9e9 < QWEN3_4B.matmul_params(lm_head=True) < 4.1e9  # the model's 4.0B (tied embeddings counted once)
    tiny = ModelShape(
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=4,
        vocab_size=10,
    )
    work = Workload(
        actor=tiny,
        critic=tiny,
        episodes=1,
        turns=1,
        system_tokens=1,
        env_tokens=1,
        agent_tokens=1,
        micro_batch_tokens=64,
        iterations=1,
        lora_rank=1,
    )
    counted = flops(work, [3], head_tokens=1)
    n_lin = 2 * 8 * 8 + 2 * 8 * 4 + 3 * 8 * 16  # 416: the decoder layer's matmuls
    n_head = 8 * 10  # the LM head, run on the one agent token's predicting position only
    n_lora = 1 * ((8 + 8) + (8 + 4) + (8 + 4) + (8 + 8) + (8 + 16) + (8 + 16) + (16 + 8))  # 128
    attn = 1 * 2 * 2 * 2 * 4 * 3 * 4 / 2  # layers x 2 matmuls x 2 FLOPs x heads x head_dim x S(S+1)/2
    assert counted["actor_update"] == pytest.approx((4 * n_lin + 6 * n_lora) * 3 + 4 * n_head * 1 + 3 * attn)


# ------------------------------------------------------------------------------------------------ on a GPU
@pytest.mark.gpu
def test_on_cuda_the_learner_loads_bf16_with_sdpa_and_its_log_probs_match_fp32(qwen_dir: Path) -> None:
    learner = _learner(qwen_dir, ComputeSettings(), bf16=True)
    assert learner.device.type == "cuda"
    assert {p.device.type for p in learner.actor.parameters()} == {"cuda"}
    assert {p.dtype for p in learner.actor.parameters() if not p.requires_grad} == {torch.bfloat16}
    assert {p.dtype for p in learner.critic.parameters()} == {torch.float32}
    assert learner.actor.config._attn_implementation == "sdpa"
    reference = _learner(qwen_dir, ComputeSettings(device="cpu"), bf16=False)
    segments = [s for sample in _samples() for s in sample.segments]
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        on_gpu = torch.cat(token_logprobs(learner.actor, segments, 0)).float().cpu()
    with torch.no_grad():
        on_cpu = torch.cat(token_logprobs(reference.actor, segments, 0))
    assert on_gpu.shape == on_cpu.shape
    assert float((on_gpu - on_cpu).abs().max()) < 0.05  # bf16 weights and compute against fp32


@pytest.mark.gpu
def test_on_cuda_an_update_moves_the_adapter_and_checkpointing_agrees(qwen_dir: Path) -> None:
    plain = _learner(qwen_dir, ComputeSettings(device="cuda"), bf16=True)
    before = {n: p.detach().float().cpu().clone() for n, p in plain.actor.named_parameters() if p.requires_grad}
    stats, weights = _one_update(plain)
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert any(not torch.allclose(before[n], weights[n]) for n in before)
    checkpointed = _learner(qwen_dir, ComputeSettings(device="cuda", gradient_checkpointing=True), bf16=True)
    stats_ckpt, weights_ckpt = _one_update(checkpointed)
    assert stats_ckpt["policy_loss"] == pytest.approx(stats["policy_loss"], rel=0.05, abs=1e-3)
    drift = max(float((weights[k] - weights_ckpt[k]).abs().max()) for k in weights)
    assert drift < 1e-2


@pytest.mark.gpu
def test_on_cuda_sft_settings_pick_the_gpu_and_a_shared_critic_runs(qwen_dir: Path) -> None:
    assert SFTSettings().compute.device == "auto" and select_device("auto").type == "cuda"
    learner = _learner(qwen_dir, ComputeSettings(), bf16=True, critic="shared")
    assert next(learner.critic.parameters()).device.type == "cuda"
    stats, _ = _one_update(learner)
    assert stats["update_tokens"] > 0 and torch.isfinite(torch.tensor(stats["value_loss"]))


def test_the_paper_shapes_build_as_the_papers_models_on_the_meta_device() -> None:
    """The benchmark's configs are the paper's models: 4.02B + a 33M-parameter LoRA adapter (r 16 on the seven
    projections) in bf16/fp32, and a 1.72B fp32 critic (no weights are allocated on the meta device)."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.bench_learner import QWEN3_4B, WORKLOADS, build_models

    actor, critic = build_models(WORKLOADS["paper"], torch.device("meta"), gradient_checkpointing=False)
    trainable = sum(p.numel() for p in actor.parameters() if p.requires_grad)
    assert trainable == QWEN3_4B.lora_params(16, LoraSettings().target_modules) == 33_030_144
    assert sum(p.numel() for p in actor.parameters()) - trainable == 4_022_468_096
    assert sum(p.numel() for p in critic.parameters()) == 1_720_577_025
    assert {p.dtype for p in actor.parameters() if not p.requires_grad} == {torch.bfloat16}
    assert {p.dtype for p in critic.parameters()} == {torch.float32}
