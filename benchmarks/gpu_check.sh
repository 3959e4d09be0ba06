#!/usr/bin/env bash
# The GPU check (docs/scale_out.md): on a machine with a CUDA GPU and only torch, transformers, peft and pytest
# (no pip, no network, nothing of this project installed), from the repository root:
#
#     bash benchmarks/gpu_check.sh [RESULTS_DIR]
#
# 1. the learner tests marked `gpu` (tests/test_gpu_path.py: bf16 loading, SDPA, an update, gradient
#    checkpointing on CUDA), at most 3 minutes;
# 2. benchmarks/bench_learner.py with the paper's shapes (actor Qwen3-4B + LoRA, critic Qwen3-1.7B, random
#    weights), at most 5 minutes; if it runs out of memory, once more with gradient checkpointing.
# Prints the benchmark's JSON line last and writes it to RESULTS_DIR/learner_gpu.json (default
# benchmarks/results). Under 8 minutes in all; exits non-zero when a step fails.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
RESULTS=${1:-benchmarks/results}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s)

echo "== machine"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
"$PY" -c 'import sys, torch, transformers, peft; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, "cuda", torch.cuda.is_available())'
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)' || { echo "no CUDA GPU visible"; exit 3; }

echo "== learner tests marked gpu"
timeout 180 "$PY" -m pytest -q -m gpu tests/test_gpu_path.py -p no:cacheprovider -W ignore::DeprecationWarning
tests=$?

echo "== bench_learner --shape paper"
timeout 300 "$PY" benchmarks/bench_learner.py --device cuda --shape paper --output "$RESULTS/learner_gpu.json" \
    > "$RESULTS/bench_learner.log" 2>&1
bench=$?
if [ $bench -ne 0 ] && grep -q "OutOfMemoryError\|out of memory" "$RESULTS/bench_learner.log"; then
    echo "out of memory: again with gradient checkpointing"
    timeout 240 "$PY" benchmarks/bench_learner.py --device cuda --shape paper --gradient-checkpointing \
        --iterations 2 --output "$RESULTS/learner_gpu.json" > "$RESULTS/bench_learner.log" 2>&1
    bench=$?
fi
[ $bench -ne 0 ] && tail -40 "$RESULTS/bench_learner.log"

echo "== done in $(( $(date +%s) - start )) s: tests rc=$tests, bench rc=$bench"
[ $bench -eq 0 ] && tail -1 "$RESULTS/bench_learner.log"
[ $tests -eq 0 ] && [ $bench -eq 0 ]
