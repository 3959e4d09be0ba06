"""Format warm-up recipes compared by the listener probe (models/yoao/listening.py), before a `make yoao`.

A warm-up whose `argue_minus_vote_only` is not above 0 cannot show the mute test in the LLM games, and one
that only follows its team's stated majority cannot be moved by one seed; the probe tells them apart in minutes
where the propagation games take an hour. Two steps:

    # train a warm-up variant: the profile's format warm-up with YoaoSettings overrides (and SFT steps)
    python -m benchmarks.bench_yoao_listener train --name adv48 --dir <dir> --set warmup_games=48 \\
        --set warmup_advocate_share=0.5 [--steps 48]
    # probe adapters side by side on one vLLM engine configured as the profile's YOAO engine
    python -m benchmarks.bench_yoao_listener probe --adapter base=<dir>/base/adapter --adapter adv48=... \\
        [--games 8] [--machine-speed]

`train` writes `<dir>/<name>/adapter` and `<dir>/<name>/recipe.json` (the overrides, the held-out loss curve,
the data's vote balance and majority-following, the wall time); `probe` writes one row per adapter (its
recipe.json when beside it, the probe's `as_json`) to benchmarks/results/yoao_listener_<profile>.json with the
provenance of models/provenance.py.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from models.profiles import Profile, get_profile
from models.provenance import machine_speed_or_none, provenance
from models.serving.engine import VLLMEngine
from models.serving.model_store import resolve_model
from models.settings import DataPaths
from models.yoao.listening import run_listener_probe

RESULTS = Path(__file__).resolve().parent / "results"
RECIPE = "recipe.json"
log = logging.getLogger("socialrl.bench")


def overrides_of(items: list[str]) -> dict[str, Any]:
    """`--set field=value` pairs as YoaoSettings overrides (values read as Python literals, else strings)."""
    out: dict[str, Any] = {}
    for item in items:
        name, _, text = item.partition("=")
        try:
            out[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[name] = text
    return out


def train(args: argparse.Namespace) -> int:
    from models.yoao.seed.training import format_warmup

    profile = get_profile(args.profile)
    overrides = overrides_of(args.set)
    yoao = dataclasses.replace(profile.yoao.resolved(profile.base_model), **overrides)
    if args.steps:
        yoao = dataclasses.replace(yoao, warmup_sft=dataclasses.replace(yoao.warmup_sft, max_steps=args.steps))
    out = args.dir / args.name
    start = time.perf_counter()
    warmup = format_warmup(yoao, resolve_model(str(yoao.model), DataPaths.from_env().models), out)
    recipe = {
        "name": args.name,
        "profile": profile.name,
        "overrides": overrides,
        "steps": warmup.adapter.steps,
        "games": yoao.warmup_games,
        "conversations": warmup.adapter.conversations,
        "eval_curve": [[step, round(loss, 4)] for step, loss in warmup.adapter.eval_curve],
        "plateau_gain": round(warmup.adapter.plateau_gain, 4),
        "black_share": round(warmup.black_share, 4),
        "follows_majority": round(warmup.follows_majority, 4),
        "wall_s": round(time.perf_counter() - start, 1),
    }
    (out / RECIPE).write_text(json.dumps(recipe, indent=2) + "\n")
    print(f"trained {args.name}: {out / 'adapter'}")
    return 0


def adapters_of(items: list[str]) -> dict[str, str]:
    """`--adapter NAME=DIR` pairs, each DIR checked to hold a PEFT adapter."""
    adapters = dict(item.split("=", 1) for item in items)
    for name, path in adapters.items():
        if not (Path(path) / "adapter_config.json").is_file():
            raise SystemExit(f"--adapter {name}: {path} holds no adapter_config.json")
    return adapters


@contextmanager
def yoao_engine(profile: Profile, adapters: dict[str, str]) -> Iterator[VLLMEngine]:
    """vLLM serving the profile's YOAO model as the YOAO engine is configured, `adapters` loaded by name."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    yoao = profile.yoao.resolved(profile.base_model)
    model_dir = resolve_model(str(yoao.model), DataPaths.from_env().models)
    config = profile.engine.engine_config(model_dir, served_model_name="base", **yoao.engine_overrides())
    with VLLMEngine(config) as engine:
        for name, path in adapters.items():
            engine.client.load_adapter(name, path)
        yield engine


def probe(args: argparse.Namespace) -> int:
    adapters = adapters_of(args.adapter)
    profile = get_profile(args.profile)
    yoao = profile.yoao.resolved(profile.base_model)
    games = args.games or yoao.listener_games
    rows = []
    with yoao_engine(profile, adapters) as engine:
        for name, path in adapters.items():
            result = run_listener_probe(yoao, engine.base_url, name, adapter=name, games=games)
            log.info("%s\n%s", name, result.markdown())
            recipe_file = Path(path).parent / RECIPE
            recipe = json.loads(recipe_file.read_text()) if recipe_file.is_file() else None
            rows.append({"recipe": recipe, **result.as_json()})
    write_rows(args.result or RESULTS / f"yoao_listener_{profile.name}.json", profile, rows, args.machine_speed)
    return 0


def write_rows(out: Path, profile: Profile, rows: list[dict[str, Any]], machine_speed: bool) -> None:
    """`rows` with the provenance of models/provenance.py (and `machine_update_tok_s` when asked) to `out`."""
    speed = machine_speed_or_none(log) if machine_speed else None
    out.write_text(
        json.dumps({**provenance(profile=profile.name, machine_update_tok_s=speed), "rows": rows}, indent=2) + "\n"
    )
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    steps = parser.add_subparsers(dest="step", required=True)
    t = steps.add_parser("train", help="train a format warm-up variant")
    t.add_argument("--name", required=True)
    t.add_argument("--dir", type=Path, required=True, help="the variant goes to <dir>/<name>")
    t.add_argument("--set", action="append", default=[], help="a YoaoSettings override, field=value")
    t.add_argument("--steps", type=int, default=None, help="SFT steps (default: the profile's warm-up's)")
    p = steps.add_parser("probe", help="probe trained warm-ups side by side")
    p.add_argument("--adapter", action="append", required=True, help="NAME=DIR of a format warm-up adapter")
    p.add_argument("--games", type=int, default=None, help="paired games per arm (default: the profile's)")
    p.add_argument("--machine-speed", action="store_true", help="measure machine_update_tok_s too")
    p.add_argument("--result", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    return train(args) if args.step == "train" else probe(args)


if __name__ == "__main__":
    raise SystemExit(main())
