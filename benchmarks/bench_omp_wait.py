"""OpenMP wait policy on a shared CPU: a bf16 LoRA-shaped matmul forward+backward, alone and next to a second
torch process doing the same (as the trainer runs next to the vLLM engine), with OMP_WAIT_POLICY ACTIVE
(OpenMP's default here: threads spin at barriers) and PASSIVE (threads sleep). Side by side in one run.

    python -m benchmarks.bench_omp_wait      # writes benchmarks/results/omp_wait.json

Keys: `<policy>_alone_it_s`, `<policy>_shared_it_s` (iterations/s of the measured process) and the ratios
`passive_over_active_alone`, `passive_over_active_shared`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "omp_wait.json"

WORK = """
import sys, time, torch
torch.manual_seed(0)
x = torch.randn(512, 576); w = torch.randn(576, 1536, requires_grad=True)
def run(n):
    start = time.perf_counter()
    for _ in range(n):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = (x @ w).relu().sum()
        y.backward()
    return n / (time.perf_counter() - start)
run(20)
seconds = float(sys.argv[1])
if seconds > 0:  # the competitor: busy for `seconds`
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        run(20)
else:
    print(run(200))
"""


def measure(policy: str, shared: bool) -> float:
    env = {**os.environ, "OMP_WAIT_POLICY": policy}
    competitor = None
    if shared:
        competitor = subprocess.Popen([sys.executable, "-c", WORK, "60"], env=env)
        time.sleep(3.0)  # let it reach its loop
    try:
        out = subprocess.run([sys.executable, "-c", WORK, "0"], env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.strip())
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()


def main() -> None:
    result: dict[str, float | int] = {"cpus": os.cpu_count() or 0}
    for policy in ("ACTIVE", "PASSIVE"):
        for shared in (False, True):
            key = f"{policy.lower()}_{'shared' if shared else 'alone'}_it_s"
            result[key] = round(measure(policy, shared), 2)
            print(f"{key}: {result[key]}", flush=True)
    result["passive_over_active_alone"] = round(result["passive_alone_it_s"] / result["active_alone_it_s"], 3)
    result["passive_over_active_shared"] = round(result["passive_shared_it_s"] / result["active_shared_it_s"], 3)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
