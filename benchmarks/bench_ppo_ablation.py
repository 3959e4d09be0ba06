"""PPO from the warm-start, chosen by measurement: a fixed-budget ablation on the same seeds.

Every arm starts from the same SFT warm-start adapter (`--sft-adapter`, e.g. one `bench_sft curve` or
`make run` trained), trains the same number of PPO iterations of the same number of rollout episodes on the
cpu profile's Craigslist buyer, then plays the held-out plan (`--eval-scenarios` real CoCoA listings x the
three counterparts), paired with the warm-start itself on the same episodes.

| arm | advantage | actor lr | invalid-action penalty |
| --- | --- | --- | --- |
| `value_head` | shared value head (GAE), one critic warm-up iteration (the cpu default before) | 5e-5 | 0 |
| `value_head_lr2e-4` | shared value head (GAE), one critic warm-up iteration | 2e-4 | 0 |
| `group` | group-relative: 4 samples per scenario and counterpart, return minus the others' mean, no warm-up | 5e-5 | 0 |
| `group_lr2e-4` | group-relative (the cpu default) | 2e-4 | 0 |
| `group_penalty` | group-relative | 5e-5 | 0.05 per invalid action (training only) |

Per arm: the in-training curve (reward and its interval per iteration, KL, invalid actions), the held-out
reward, its paired difference with the warm-start (scenario-clustered bootstrap), the held-out invalid-action
and command rates, and wall seconds. Arms trained in one invocation are also paired with each other
(`comparisons`), and `choice` says which arm the cpu profile should train with and why (`choose_arm`: the
profile's group-relative arm stays unless the value-head arm beats it, paired, with an interval above 0).
The budget defaults to the cpu profile's (its PPO iterations and episodes per iteration); the value-head arm
spends its first iteration warming the critic, as the paper's PPO does, inside the same budget. The file
carries its provenance (`env_version`, commit, machine speed); arms measured on another environment version
are never merged into it. Results: benchmarks/results/ppo_ablation.json.

    python -m benchmarks.bench_ppo_ablation --sft-adapter PATH [--arms group_lr2e-4,value_head_lr2e-4] [--iterations N] [--episodes N] [--eval-scenarios 16] [--machine-speed]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "ppo_ablation.json"
ENV = "craigslist-v0"
log = logging.getLogger("socialrl.bench")

CURVE_KEYS = (
    "iteration",
    "reward_mean",
    "reward_ci_low",
    "reward_ci_high",
    "agreement_rate",
    "invalid_actions_per_episode",
    "kl",
    "entropy",
    "training_reward_mean",
    "failed_calls",
    "episodes_without_calls",
    "time_rollout_s",
    "time_train_s",
)
"""The per-iteration metrics of an arm's in-training curve."""

ARMS: dict[str, dict[str, Any]] = {
    "value_head": {"advantage": "gae", "actor_lr": 5e-5, "group_size": 1, "penalty": 0.0, "warmup": 1},
    "value_head_lr2e-4": {"advantage": "gae", "actor_lr": 2e-4, "group_size": 1, "penalty": 0.0, "warmup": 1},
    "group": {"advantage": "group", "actor_lr": 5e-5, "group_size": 4, "penalty": 0.0, "warmup": 0},
    "group_lr2e-4": {"advantage": "group", "actor_lr": 2e-4, "group_size": 4, "penalty": 0.0, "warmup": 0},
    "group_penalty": {"advantage": "group", "actor_lr": 5e-5, "group_size": 4, "penalty": 0.05, "warmup": 0},
}
"""Arm name -> what it changes in the cpu profile's PPO config (module table)."""

PROFILE_ARM = "group_lr2e-4"
"""The arm the cpu profile trains with (models/profiles.py: group-relative advantages at actor lr 2e-4)."""
CHALLENGER_ARM = "value_head_lr2e-4"
"""The paper's design at the profile's rate: a value head (GAE) with one critic warm-up iteration."""


def choose_arm(arms: dict[str, Any], comparisons: dict[str, Any]) -> dict[str, str]:
    """Which arm the profile should train with: the challenger only where it beats the profile's arm, paired
    on the same held-out episodes, with an interval above 0; otherwise the profile's arm (it spends no
    iteration warming a critic). Says why either way."""
    key = f"{CHALLENGER_ARM} - {PROFILE_ARM}"
    if PROFILE_ARM not in arms or CHALLENGER_ARM not in arms or key not in comparisons:
        return {"arm": PROFILE_ARM, "why": "not decided: both arms were not measured in one invocation"}
    diff = comparisons[key]
    if diff["ci_low"] is not None and diff["ci_low"] > 0:
        return {
            "arm": CHALLENGER_ARM,
            "why": f"{key} = {diff['mean']:+.3f} [{diff['ci_low']:+.3f}, {diff['ci_high']:+.3f}] lies above 0",
        }
    return {
        "arm": PROFILE_ARM,
        "why": f"{key} = {diff['mean']:+.3f} [{diff['ci_low']:+.3f}, "
        f"{diff['ci_high']:+.3f}]: the value head does not beat group-relative advantages, which need no "
        "critic warm-up iteration; the profile keeps them",
    }


def arm_config(name: str, iterations: int, episodes: int) -> Any:
    """The cpu profile's Craigslist PPO config with an arm's changes."""
    from models.profiles import get_profile

    arm = ARMS[name]
    config = get_profile("cpu").ppo_for(ENV)
    hyper = dataclasses.replace(config.hyper, advantage=arm["advantage"], actor_lr=arm["actor_lr"])
    return dataclasses.replace(
        config,
        run_name=f"ablation-{name.replace('.', '').replace('_', '-')}",
        iterations=iterations,
        episodes_per_iteration=episodes,
        group_size=arm["group_size"],
        critic_warmup_iterations=min(arm["warmup"], iterations - 1),
        invalid_action_penalty=arm["penalty"],
        hyper=hyper,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sft-adapter", type=Path, required=True)
    parser.add_argument("--arms", default=f"{PROFILE_ARM},{CHALLENGER_ARM}")
    parser.add_argument("--iterations", type=int, default=0, help="PPO iterations per arm (0: the cpu profile's)")
    parser.add_argument("--episodes", type=int, default=0, help="episodes per iteration (0: the cpu profile's)")
    parser.add_argument("--eval-scenarios", type=int, default=16)
    parser.add_argument("--work", type=Path, default=Path("data/bench/ppo_ablation"))
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--machine-speed", action="store_true", help="also measure the machine's PPO update speed (a few seconds)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    from models.evaluation.scenarios import held_out_scenarios
    from models.profiles import get_profile
    from models.provenance import machine_speed_or_none, provenance, result_to_extend
    from models.serving.engine import VLLMEngine, new_token
    from models.serving.model_store import resolve_model
    from models.serving.proxy import ProxyConfig, ProxyServer
    from models.settings import DataPaths
    from models.socialrl import stage1
    from models.socialrl.episode_metrics import paired_metric
    from models.storage import TableStore
    from models.training.config import Services
    from models.training.ppo import train_ppo

    profile = get_profile("cpu")
    args.iterations = args.iterations or profile.ppo.iterations
    args.episodes = args.episodes or profile.ppo.episodes_per_iteration
    wall_started = time.perf_counter()
    base = resolve_model(profile.base_model, DataPaths.from_env().models)
    plan = stage1.evaluation_plan(ENV, profile, scenarios=held_out_scenarios(ENV, args.eval_scenarios, 0, "dataset"))
    engine_key, proxy_key = new_token(), new_token()
    args.work.mkdir(parents=True, exist_ok=True)
    engine_config = profile.engine.engine_config(base, served_model_name="base", api_key=engine_key)
    existing = result_to_extend(args.output, log)
    arms: dict[str, Any] = existing.get("arms", {})
    records: dict[str, Any] = {}
    with VLLMEngine(engine_config, log_path=args.work / "vllm.log") as engine:
        proxy_config = ProxyConfig(
            upstreams=(engine.base_url,),
            base_models=("base",),
            table_root=args.work / "tables",
            api_key=proxy_key,
            upstream_api_key=engine_key,
        )
        with ProxyServer(proxy_config) as proxy:
            services = Services(engine.client, proxy.base_url, TableStore(args.work / "tables"), proxy_key)
            engine.client.load_adapter("warm-start", args.sft_adapter)
            sft, _ = stage1.evaluate_served("sft", plan, profile, proxy.base_url, "warm-start", proxy_key)
            for name in args.arms.split(","):
                config = arm_config(name, args.iterations, args.episodes)
                started = time.perf_counter()
                result = train_ppo(config, base, services, args.work / name, base, args.sft_adapter)
                train_s = time.perf_counter() - started
                if not result.history:
                    raise RuntimeError(f"arm {name}: PPO returned no iterations")
                engine.client.load_adapter(f"{config.run_name}-final", result.adapter_dir)
                trained, _ = stage1.evaluate_served(
                    name, plan, profile, proxy.base_url, f"{config.run_name}-final", proxy_key
                )
                arms[name] = {
                    "settings": ARMS[name],
                    "budget": {"iterations": args.iterations, "episodes_per_iteration": args.episodes},
                    "curve": [{k: m.get(k) for k in CURVE_KEYS} for m in result.history],
                    "heldout_reward": trained.summary.reward.as_dict(),
                    "heldout_minus_sft": paired_metric(trained.records, sft.records, "reward").as_dict(),
                    "heldout_invalid_per_turn": trained.summary.invalid_action_rate,
                    "heldout_command_rate": trained.metrics["command_rate"].mean,
                    "heldout_agreement": trained.summary.agreement_rate,
                    "kl_last": result.history[-1].get("kl"),
                    "train_wall_s": round(train_s, 1),
                    "eval_wall_s": round(trained.seconds, 1),
                }
                records[name] = trained.records
                log.info("arm %s: %s", name, {k: arms[name][k] for k in ("heldout_minus_sft", "train_wall_s")})
                comparisons = dict(existing.get("comparisons", {}))
                if CHALLENGER_ARM in records and PROFILE_ARM in records:  # paired: same plan, same seeds
                    comparisons[f"{CHALLENGER_ARM} - {PROFILE_ARM}"] = paired_metric(
                        records[CHALLENGER_ARM], records[PROFILE_ARM], "reward"
                    ).as_dict()
                existing.update(
                    {
                        **provenance(profile=profile.name, machine_update_tok_s=None),
                        "sft_adapter": str(args.sft_adapter),
                        "budget": {"iterations": args.iterations, "episodes_per_iteration": args.episodes},
                        "evaluation": {
                            "plan": f"{args.eval_scenarios} held-out CoCoA listings x {list(plan.counterparts)}"
                        },
                        "sft_heldout_reward": sft.summary.reward.as_dict(),
                        "sft_heldout_command_rate": sft.metrics["command_rate"].mean,
                        "arms": arms,
                        "comparisons": comparisons,
                        "choice": choose_arm(arms, comparisons),
                        "wall_s": round(time.perf_counter() - wall_started, 1),
                    }
                )
                args.output.write_text(json.dumps(existing, indent=2) + "\n")  # after every arm: a kill loses one
    if args.machine_speed:  # after the arms, on the same machine, so that their times can be compared
        existing["machine_update_tok_s"] = machine_speed_or_none(log)
        args.output.write_text(json.dumps(existing, indent=2) + "\n")
    log.info("wrote %s: %s", args.output, existing.get("choice"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
