"""The middleware module vLLM loads from this directory (see socialrl_vllm_guard.py); a package so it ships."""
