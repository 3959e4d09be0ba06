"""Memory and noise of `make ui`: the Dagster UI (`dagster dev`) and the MLflow UI started exactly as
pipelines/ui.py starts them, with MLflow's own defaults (`mlflow_defaults`: 4 uvicorn workers, job execution
on, access log on) and with the project's settings (`project`: models.tracking.SERVER_ENVIRONMENT). For each
variant: the resident memory (RSS, summed over every process of a server's tree) and the process count once
both UIs answer and a researcher has opened the MLflow experiment page, a run page and the Dagster asset
catalog in headless Chromium; and how many of MLflow's output lines were access-log lines.

    python -m benchmarks.bench_ui_memory [--data-dir DIR] [--settle-s 20]   # writes benchmarks/results/ui_memory.json

Keys per variant: `<server>_rss_mb`, `<server>_processes`, `mlflow_output_lines`, `mlflow_access_log_lines`.
A third variant, `make_ui`, runs what `make ui` runs (`python -m pipelines.ui`, which starts both servers with the
project's settings) and measures the same way: `launcher_rss_mb` (the launcher's own process), `total_rss_mb`
(the launcher with both servers' trees, what a researcher's machine holds) and `processes`.
Default data directory: a fresh temporary one (an empty registry); give `make run`'s to measure a full store.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from models.serving.process import free_port, wait_until_answers
from models.settings import DATA_DIR_ENV, REPO_ROOT, DataPaths
from models.tracking import QUIET_ENVIRONMENT, SERVER_ENVIRONMENT
from pipelines.ui import UiServer, stop, ui_servers

RESULTS = Path(__file__).resolve().parent / "results" / "ui_memory.json"
ACCESS_LINE = re.compile(r'"(GET|POST|PUT|PATCH|DELETE) /\S* HTTP/1\.[01]" \d{3}')
"""uvicorn's access-log line: `INFO:     127.0.0.1:40712 - "GET /ajax-api/... HTTP/1.1" 200`."""
CHROMIUM = "/usr/bin/chromium"


def tree_rss_mb(pid: int) -> tuple[float, int]:
    """RSS of a process and all its descendants (MB), and how many processes that is."""
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20, len(processes)


def browse(dagster_url: str, mlflow_url: str) -> None:
    """What a researcher opens first: the MLflow experiments and a run page, the Dagster asset catalog."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        for url in (f"{mlflow_url}/#/experiments", f"{mlflow_url}/#/experiments/1/runs", f"{dagster_url}/assets"):
            page.goto(url)
            page.wait_for_timeout(8000)
        browser.close()


def measure(variant: str, paths: DataPaths, settle_s: float, log_dir: Path) -> dict[str, float]:
    dagster_port, mlflow_port = free_port(), free_port()
    servers = ui_servers(paths, dagster_port, mlflow_port)
    if variant == "mlflow_defaults":  # what `make ui` ran before: only the quiet defaults
        servers = [
            s if s.name != "mlflow" else UiServer(s.name, s.argv, {**os.environ, **QUIET_ENVIRONMENT}) for s in servers
        ]
        for key in SERVER_ENVIRONMENT:
            assert key not in servers[1].env, f"{key} is set in this shell; unset it to measure MLflow's defaults"
    logs = {s.name: log_dir / f"{variant}-{s.name}.log" for s in servers}
    processes = {}
    for server in servers:
        with logs[server.name].open("wb") as out:
            processes[server.name] = subprocess.Popen(
                server.argv, cwd=REPO_ROOT, env=dict(server.env), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
    dagster_url, mlflow_url = f"http://127.0.0.1:{dagster_port}", f"http://127.0.0.1:{mlflow_port}"
    try:
        assert wait_until_answers(f"{mlflow_url}/health", 300, processes["mlflow"]), logs["mlflow"].read_text()
        assert wait_until_answers(f"{dagster_url}/server_info", 300, processes["dagster"]), logs["dagster"].read_text()
        browse(dagster_url, mlflow_url)
        time.sleep(settle_s)
        out: dict[str, float] = {}
        for name, process in processes.items():
            rss, count = tree_rss_mb(process.pid)
            out[f"{name}_rss_mb"], out[f"{name}_processes"] = round(rss, 1), count
    finally:
        stop(list(processes.values()), grace_s=60)
    lines = logs["mlflow"].read_text(errors="replace").splitlines()
    out["mlflow_output_lines"] = len(lines)
    out["mlflow_access_log_lines"] = sum(bool(ACCESS_LINE.search(line)) for line in lines)
    out["total_rss_mb"] = round(out["dagster_rss_mb"] + out["mlflow_rss_mb"], 1)
    return out


def measure_launcher(paths: DataPaths, settle_s: float, log_dir: Path) -> dict[str, float]:
    """`make ui` as a researcher starts it: the launcher, its two servers and their trees, after browsing."""
    dagster_port, mlflow_port = free_port(), free_port()
    argv = [str(REPO_ROOT / ".venv" / "bin" / "python"), "-m", "pipelines.ui"]
    argv += ["--dagster-port", str(dagster_port), "--mlflow-port", str(mlflow_port)]
    log = log_dir / "make_ui.log"
    env = {**os.environ, DATA_DIR_ENV: str(paths.root)}
    with log.open("wb") as out:
        launcher = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    dagster_url, mlflow_url = f"http://127.0.0.1:{dagster_port}", f"http://127.0.0.1:{mlflow_port}"
    try:
        assert wait_until_answers(f"{mlflow_url}/health", 300, launcher), log.read_text()
        assert wait_until_answers(f"{dagster_url}/server_info", 300, launcher), log.read_text()
        browse(dagster_url, mlflow_url)
        time.sleep(settle_s)
        total, count = tree_rss_mb(launcher.pid)
        own = psutil.Process(launcher.pid).memory_info().rss / 2**20
    finally:
        stop([launcher], grace_s=60)  # the launcher stops its servers on SIGTERM (30 s each at most)
    return {"launcher_rss_mb": round(own, 1), "total_rss_mb": round(total, 1), "processes": count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a fresh temporary directory")
    parser.add_argument("--settle-s", type=float, default=20.0, help="wait after browsing before measuring")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        paths = DataPaths(args.data_dir or Path(scratch) / "data")
        log_dir = Path(scratch)
        results: dict[str, object] = {
            variant: measure(variant, paths, args.settle_s, log_dir) for variant in ("mlflow_defaults", "project")
        }
        results["make_ui"] = measure_launcher(paths, args.settle_s, log_dir)
    results["data_dir"] = str(args.data_dir) if args.data_dir else "fresh (empty registry)"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
