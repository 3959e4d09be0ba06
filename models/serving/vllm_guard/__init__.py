"""Modules the vLLM server loads from this directory, which models/serving/engine.py puts alone on the engine's
PYTHONPATH: the auth middleware (socialrl_vllm_guard.py) and, through the entry point in
socialrl_vllm_plugins-0.1.dist-info, the CPU LoRA ops plugin (socialrl_vllm_cpu_lora.py). A package so it ships."""
