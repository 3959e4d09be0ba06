"""What the YOAO design can show when both warm-starts imitate their teachers perfectly: the profile's
propagation experiments (the same arms and paired games as `make yoao`) played by the teachers themselves,
code agents in every LLM seat: the warm-up's tutor mix (`FormatTutor`, agents/yoao/red_black_teacher.py) in the
untrained seats and the principled cooperator (the seed's teacher) in the seeds'. No engine; seconds on CPU.

The LLM run's untrained teammates learn what they can of the tutors (their imitation is measured by
`yoao_warmstart_imitation`); this is the reference their results can be read against. Results, with the
result file's keys of models/yoao/report.py (the Sugarscape and warm-start parts aside), to
benchmarks/results/yoao_tutor_reference.json.

    python -m benchmarks.bench_yoao_tutors [--profile cpu]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from agents.yoao.llm_players import SwapAgent
from agents.yoao.red_black_strategies import MuteWrapper
from agents.yoao.red_black_teacher import PrincipledCooperator
from environments.core.runtime import Agent
from models.profiles import PROFILE_NAMES, get_profile
from models.yoao import experiments, report
from models.yoao.config import YoaoSettings
from models.yoao.games import Maker
from models.yoao.seed import CODE_TEACHER, TeacherChoice
from models.yoao.seed.traces import warmup_tutor

RESULTS = Path(__file__).resolve().parent / "results" / "yoao_tutor_reference.json"


def tutor_players(settings: YoaoSettings) -> dict[str, Maker]:
    """Role -> maker with the teachers in the LLM seats: tutors of the warm-up mix for the untrained seats
    (kind and prior drawn from the seat's seed as in the warm-up data), the principled cooperator for seeds."""

    def untrained(seat: str, seed: int) -> Agent:
        return warmup_tutor(settings, seed, int(seat[1:]), seed, mirror=False)

    def seed_player(seat: str, seed: int) -> Agent:
        return PrincipledCooperator(seed)

    return {
        "untrained": untrained,
        "seed": seed_player,
        "muted": lambda seat, s: MuteWrapper(seed_player(seat, s)),
        "teacher": seed_player,
        "prompted": untrained,
        "swap": lambda seat, s: SwapAgent(seed_player(seat, s), untrained(seat, s + 1), settings.persistence_rounds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="cpu")
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    settings = profile.yoao
    start = time.perf_counter()
    models = experiments.PlayerModels(
        "http://unused.invalid/v1", "untrained", "seed", TeacherChoice(CODE_TEACHER, "code")
    )
    names = ("by_seed_count", "mute", "persistence", "baseline")
    by_frame: dict[str, dict[str, experiments.ExperimentResult]] = {name: {} for name in names}
    for frame in settings.heldout_frames:
        setup = experiments.ExperimentSetup(
            frame=frame,
            settings=settings,
            models=models,
            profile=profile.name,
            seed_version=0,
            players=tutor_players(settings),
        )
        by_count = experiments.propagation_by_seed_count(setup)
        by_frame["by_seed_count"][frame] = by_count
        by_frame["mute"][frame] = experiments.propagation_mute(setup, by_count)
        by_frame["persistence"][frame] = experiments.propagation_persistence(setup, by_count)
        by_frame["baseline"][frame] = experiments.propagation_prompting_baseline(setup, by_count)
    results = report.build_results(profile.name, settings.heldout_frames, 0, *by_frame.values(), None, {})
    benchmark = results.benchmark()
    content = {
        "what": "the propagation experiments with the teachers in every LLM seat (warm-up tutors as untrained "
        "teammates, the principled cooperator as seeds): what the design shows under perfect imitation",
        "profile": profile.name,
        "frames": list(settings.heldout_frames),
        "games_per_arm": settings.games_per_arm,
        **{
            k: benchmark[k]
            for k in report.BENCHMARK_KEYS
            if k not in ("yoao_incentives", "sugarscape", "warmstarts", "wall_s")
        },
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(report.outcomes_table(results.outcomes))
    report.write_json(RESULTS, content)
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
