"""`make yoao`: run `yoao_job` (the job the UI shows) with one profile, in this process, on the Dagster instance
the UI uses (pipelines/launcher.py):

    python -m pipelines.run_yoao [--profile smoke|cpu|paper] [--data-dir DIR] [--results PATH]

One Dagster run per held-out frame of the profile (`yoao.heldout_frames`, each a partition of the
experiments); the first run also builds the seed (teacher selection, traces, dataset, format warm-up, seed
SFT) and runs Sugarscape, the last also pools everything into `yoao_results`. Each run starts and stops the
code location's `yoao_engine` (vLLM serving the profile's `yoao.model`, the seeds' base model) and rollout
proxy (~40 s on CPU). The wall time of every asset is read from Dagster's step
statistics (summed over partitions) and written with the results to `--results` (default
benchmarks/results/yoao_<profile>.json, exactly the keys of models/yoao/report.py); the full report goes to
<data>/reports/yoao-<profile>.json. Exits non-zero when a run fails.

A frame whose last run did not finish (a killed command, an engine the OOM killer took) goes on after the assets
that run materialised, so the warm-starts are not trained again; `--force` plays everything again.
`--rebuild-results` replays nothing: it materialises `yoao_results` again with this code's report (after a
change to what the report measures) from the experiments the instance's last runs materialised, and writes the
result file with those runs' asset times.
"""

import argparse
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from assets import yoao as yoao_assets
from assets import yoao_experiments
from models.profiles import PROFILE_NAMES, get_profile
from models.provenance import machine_speed_or_none, provenance
from models.settings import REPO_ROOT, DataPaths
from models.yoao.report import BENCHMARK_KEYS, write_json
from pipelines.launcher import Launcher
from pipelines.run_lineage import configure_logging

log = logging.getLogger("socialrl.run_yoao")

SEED_PIPELINE = (*yoao_assets.SEED_PIPELINE_ASSETS, "yoao_warmstart_imitation", "sugarscape_zero_shot")
EXPERIMENTS = yoao_experiments.EXPERIMENTS


@dataclass(frozen=True, kw_only=True)
class YoaoRun:
    """One Dagster run of the group."""

    frame: str
    assets: tuple[str, ...]
    success: bool
    run_id: str
    seconds: float
    step_seconds: dict[str, float]
    """Asset -> wall time of its step (Dagster's step statistics)."""
    error: str = ""


def plan(frames: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """(partition, assets) per run: the seed pipeline and Sugarscape with the first frame, the results with
    the last (one run when the profile has one held-out frame)."""
    runs = []
    for i, frame in enumerate(frames):
        assets = (
            *(SEED_PIPELINE if i == 0 else ()),
            *EXPERIMENTS,
            *(("yoao_results",) if i == len(frames) - 1 else ()),
        )
        runs.append((frame, assets))
    return runs


def run_yoao(
    profile_name: str,
    data: Path | None = None,
    results_path: Path | None = None,
    log_file: Path | None = None,
    machine_speed: bool = False,
    rebuild_results: bool = False,
    force: bool = False,
):
    """Run `yoao_job` per planned frame (module docstring); returns (runs, YoaoResults or None, written result
    file, which leads with the provenance of models/provenance.py; `machine_speed`: measure the machine's PPO
    update speed for it after the runs). The job serves the profile's YOAO model on the code location's
    `yoao_engine`. A frame whose last run did not finish goes on after what that run materialised
    (`launch_frame`), unless `force`. `rebuild_results`: the runs that last materialised each asset stand for it and
    only `yoao_results` runs again (`earlier_runs`)."""
    profile = get_profile(profile_name)
    paths = DataPaths(data) if data is not None else DataPaths.from_env()
    launcher = Launcher(profile.name, paths, "run_yoao", log_file=log_file)
    runs: list[YoaoRun] = []
    results = None
    for frame, assets in plan(profile.yoao.heldout_frames):
        if rebuild_results:
            earlier = earlier_runs(launcher, frame, [a for a in assets if a != "yoao_results"])
            missing = "an asset to rebuild from was never materialised"
            runs.extend(earlier or [YoaoRun(frame=frame, assets=assets, success=False, run_id="", seconds=0.0,
                                            step_seconds={}, error=missing)])  # fmt: skip
            if earlier is None:
                break
            if "yoao_results" not in assets:
                continue
            assets = ("yoao_results",)
        launched = launch_frame(launcher, frame, assets, resume=not (force or rebuild_results))
        runs.extend(launched)
        if not launched[-1].success:
            break
        if "yoao_results" in assets:
            results = launcher.load("yoao_results")
    written = None
    if results is not None:
        benchmark = results.benchmark()
        benchmark["wall_s"] = asset_wall_times(runs)
        assert tuple(benchmark) == BENCHMARK_KEYS
        speed = machine_speed_or_none(log) if machine_speed else None
        benchmark = {**provenance(profile=profile.name, machine_update_tok_s=speed), **benchmark}
        written = write_json(
            results_path or REPO_ROOT / "benchmarks" / "results" / f"yoao_{profile.name}.json", benchmark
        )
    return runs, results, written


def launch_frame(launcher: Launcher, frame: str, assets: tuple[str, ...], resume: bool) -> list[YoaoRun]:
    """One frame's run of `assets`. With `resume`, what the frame's newest unfinished run (killed, failed: the
    OOM killer took its engine) materialised is not redone, and that run stands for those assets, so their
    times still count; the last entry is this run."""
    earlier = launcher.unfinished("yoao_job", frame) if resume else None
    run = (
        launcher.resume("yoao_job", frame, assets=assets) if resume else launcher.run("yoao_job", frame, assets=assets)
    )
    out = []
    if earlier is not None and earlier.materialised and run.run_id:
        out.append(finished_part(launcher, frame, earlier.run_id, earlier.materialised))
    failures = run.error[:1000]
    steps = launcher.step_seconds(run.run_id) if run.run_id else {}  # no run id: a definition error
    ok = bool(run.run_id) and run.success
    out.append(YoaoRun(frame=frame, assets=assets, success=ok, run_id=run.run_id, seconds=run.seconds,
                       step_seconds=steps, error=failures))  # fmt: skip
    print(f"[yoao] run {run.run_id[:8]} ({frame}): {'ok' if ok else 'FAILED: ' + failures} ({run.seconds:.0f} s)",
          flush=True)  # fmt: skip
    return out


def earlier_runs(launcher: Launcher, frame: str, assets: list[str]) -> list[YoaoRun] | None:
    """The runs that last materialised `assets` (the experiments: `frame`'s partition), each with those assets'
    step times (a resumed job's assets come from two runs); None when one of them was never materialised."""
    by_run: dict[str, list[str]] = {}
    for asset in assets:
        record = launcher.latest(asset, frame if asset in EXPERIMENTS else None)
        if record is None:
            return None
        by_run.setdefault(record.run_id, []).append(asset)
    return [finished_part(launcher, frame, run_id, names) for run_id, names in by_run.items()]


def finished_part(launcher: Launcher, frame: str, run_id: str, assets: Sequence[str]) -> YoaoRun:
    """The part of an earlier run that materialised `assets`, with those assets' step times only."""
    steps = {k: v for k, v in launcher.step_seconds(run_id).items() if k.split(".")[0] in assets}
    return YoaoRun(frame=frame, assets=tuple(assets), success=True, run_id=run_id, seconds=sum(steps.values()),
                   step_seconds=steps)  # fmt: skip


def asset_wall_times(runs: list[YoaoRun]) -> dict[str, float]:
    """Asset -> seconds of its steps over every run (a partitioned asset's partitions summed)."""
    out: dict[str, float] = {}
    for run in runs:
        for step, seconds in run.step_seconds.items():
            name = step.split(".")[0]
            if name in SEED_PIPELINE or name in EXPERIMENTS or name == "yoao_results":
                out[name] = round(out.get(name, 0.0) + seconds, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=PROFILE_NAMES, default=None, help="default: $SOCIALRL_PROFILE or cpu")
    parser.add_argument("--data-dir", type=Path, default=None, help="overrides $SOCIALRL_DATA_DIR")
    parser.add_argument("--results", type=Path, default=None, help="default: benchmarks/results/yoao_<profile>.json")
    parser.add_argument(
        "--machine-speed", action="store_true", help="measure the machine's PPO update speed after the run (seconds)"
    )
    parser.add_argument(
        "--force", action="store_true", help="play everything again, even what an unfinished run materialised"
    )
    parser.add_argument(
        "--rebuild-results",
        action="store_true",
        help="replay nothing: materialise yoao_results again from the last runs' experiments and write the file",
    )
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    paths = DataPaths(args.data_dir) if args.data_dir else DataPaths.from_env()
    root = paths.root
    log_file = paths.log_file("yoao")
    configure_logging(log_file)
    frames = ", ".join(profile.yoao.heldout_frames)
    print(f"[yoao] profile {profile.name}, held-out frames {frames}, data {root}; full log {log_file}", flush=True)
    start = time.perf_counter()
    runs, results, written = run_yoao(
        profile.name, root, args.results, log_file, args.machine_speed, args.rebuild_results, args.force
    )
    print(f"\n[yoao] finished in {(time.perf_counter() - start) / 60:.1f} min")
    if results is not None:
        print("\n" + results.markdown())
        print(f"\nwall time per asset (s): {json.dumps(asset_wall_times(runs))}")
        print(f"results: {written}\nfull report: {root / 'reports' / f'yoao-{profile.name}.json'}")
    failed = [r for r in runs if not r.success]
    if failed or results is None:
        print(f"[yoao] failed: {[(r.frame, r.error) for r in failed]}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
