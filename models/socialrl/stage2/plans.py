"""Stage 2's evaluation plans (held-out, paired by construction; and the validation probe on training
scenarios) and the registered specialists and warm-starts every stage-2 asset starts from (chosen by
`stage1.select_specialist`: `make run`'s on the profile's held-out plan, else run_stage2's own)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.socialrl.baselines import BASELINES
from environments import Scenario
from models.evaluation.policy import EvaluationPlan, store_evaluation
from models.evaluation.scenarios import training_scenarios
from models.profiles import Profile, get_profile
from models.serving.adapters import serve_adapter
from models.serving.engine import EngineClient, EngineError
from models.socialrl import stage1
from models.socialrl.stage2.scores import PolicyScores, baseline_policy
from models.storage import TableStore
from models.tracking import Tracker

log = logging.getLogger("socialrl.stage2")


class MissingSpecialistError(LookupError):
    """A stage-2 domain has no registered specialist."""


def evaluation_profile(profile: Profile) -> Profile:
    """The profile as every stage-2 held-out evaluation sees it (stage-2 scenario count and counterparts)."""
    s = profile.stage2.resolved(profile)
    return replace(profile, heldout_scenarios=s.heldout_scenarios, eval_counterparts=s.eval_counterparts)


def heldout_plan(profile: Profile, domain: str) -> EvaluationPlan:
    """The domain's stage-2 held-out plan: every stage-2 held-out evaluation, model or code, plays this one,
    so any two of them are paired episode by episode."""
    return stage1.evaluation_plan(domain, evaluation_profile(profile), seed=profile.stage2.eval_seed)


def probe_scenarios(env_id: str, profile: Profile) -> list[Scenario]:
    """The validation probe's scenarios of a domain: from the training split, never held out."""
    return training_scenarios(env_id, profile.stage2.probe_scenarios, profile.stage2.probe_seed)


def _parallel(jobs: Sequence[Callable[[], Any]], workers: int) -> list[Any]:
    """Run evaluation jobs in threads (each runs its own event loop), so several policies' and domains'
    episodes reach the engine together and batch there."""
    if len(jobs) <= 1 or workers <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: job(), jobs))


def evaluate_policies(
    profile: Profile,
    base_url: str,
    policies: Mapping[str, str],
    domains: Sequence[str],
    store: TableStore | None = None,
    run_id: str = "stage2",
    pairs: Iterable[tuple[str, str]] | None = None,
    api_key: str | None = None,
) -> list[PolicyScores]:
    """Every policy (label -> served model name) on every domain's held-out plan (or only the given
    (label, domain) pairs); the evaluations go to the `evaluations` and episode tables when `store` is given.
    `api_key` is the proxy's token."""
    plan_profile = evaluation_profile(profile)
    wanted = list(pairs) if pairs is not None else [(p, d) for p in policies for d in domains]

    def job(label: str, domain: str) -> Callable[[], PolicyScores]:
        def run() -> PolicyScores:
            start = time.perf_counter()
            model = policies[label]
            plan = heldout_plan(profile, domain)
            result = stage1.evaluate_model(domain, plan_profile, base_url, model, api_key=api_key, plan=plan)
            if store is not None:
                store_evaluation(store, result, f"stage2:{label}@{domain}", f"{run_id}:{label}@{domain}")
            scores = PolicyScores.from_result(label, model, result)
            log.info(
                "held-out %s on %s: mean %.3f over %d episodes (%.0f s)",
                label,
                domain,
                scores.mean,
                len(scores.rewards),
                time.perf_counter() - start,
            )
            return scores

        return run

    return _parallel([job(p, d) for p, d in wanted], profile.stage2.parallel_evaluations)


def evaluate_baselines(
    profile: Profile, domains: Sequence[str], store: TableStore | None = None, run_id: str = "stage2"
) -> list[PolicyScores]:
    """The trivial code baselines (agents/socialrl/baselines.py: accept the first offer, hold the target, split
    the difference) on every domain's held-out plan: what a trained stage-2 policy must beat on the same
    episodes. Code only: no engine, seconds. Stored like the models' evaluations when `store` is given."""
    out = []
    for domain in domains:
        played = stage1.evaluate_code_policies(heldout_plan(profile, domain), labels=tuple(BASELINES))
        for name, (policy, result) in played.items():
            label = baseline_policy(name)
            if store is not None:
                store_evaluation(store, result, f"stage2:{label}@{domain}", f"{run_id}:{label}@{domain}")
            out.append(PolicyScores.from_result(label, policy.model, result))
    return out


def probe_rewards(
    profile: Profile,
    base_url: str,
    models: Mapping[str, str],
    domains: Sequence[str],
    pairs: Iterable[tuple[str, str]] | None = None,
    api_key: str | None = None,
) -> dict[str, dict[str, float]]:
    """Mean validation-probe reward of every model (label -> served name) on every domain (or only the given
    (label, domain) pairs): label -> domain -> mean. `api_key` is the proxy's token."""
    probe = replace(profile, eval_counterparts=profile.stage2.probe_counterparts)
    wanted = list(pairs) if pairs is not None else [(label, d) for label in models for d in domains]

    def job(label: str, domain: str) -> Callable[[], tuple[str, str, float]]:
        def run() -> tuple[str, str, float]:
            result = stage1.evaluate_model(
                domain,
                probe,
                base_url,
                models[label],
                seed=profile.stage2.probe_seed,
                scenarios=probe_scenarios(domain, profile),
                api_key=api_key,
            )
            return label, domain, float(result.summary.mean_reward)

        return run

    out: dict[str, dict[str, float]] = {label: {} for label in models}
    for label, domain, mean in _parallel([job(label, d) for label, d in wanted], profile.stage2.parallel_evaluations):
        out[label][domain] = mean
    return out


@dataclass(frozen=True)
class DomainAdapters:
    """A domain's registered specialist and its SFT warm-start (when one was trained)."""

    env_id: str
    specialist: str
    """Registry reference, e.g. "socialrl-dnd-specialist v3 (candidate, champion; stage1 registry)"."""
    specialist_path: Path
    sft_path: Path | None
    """The newest finished `sft-<domain>` MLflow run's adapter with this profile, if any."""
    source: stage1.SpecialistSource | None = None
    """Which version it is and where it came from (`stage1.select_specialist`)."""


def registered_adapters(tracker: Tracker, domains: Sequence[str], profile: Profile | str) -> dict[str, DomainAdapters]:
    """Each domain's specialist as `stage1.select_specialist` chooses it (the one `make run` evaluated on the
    profile's held-out plan, else run_stage2's own) and SFT warm-start; a domain without one raises
    MissingSpecialistError naming it (before anything else runs). `profile` may be given by name."""
    profile = get_profile(profile) if isinstance(profile, str) else profile
    out: dict[str, DomainAdapters] = {}
    missing = []
    for env_id in domains:
        source = stage1.select_specialist(tracker, env_id, profile)
        if source is None:
            missing.append(env_id)
            continue
        local = tracker.lookup(source.model_name, alias=None, version=source.version)
        sft = tracker.latest_run_artifact(f"sft-{env_id}", "adapter", {"profile": profile.name, "env_id": env_id})
        out[env_id] = DomainAdapters(env_id, source.reference(), local.path, sft, source)
    if missing:
        raise MissingSpecialistError(
            "no registered specialist evaluated on the held-out plan for "
            + ", ".join(f"{d} ({stage1.registered_name(d)})" for d in missing)
            + ": run stage 1 for "
            + ",".join(missing)
            + " first (make run DOMAINS=..., or python -m pipelines.run_stage2, which trains what is missing)"
        )
    return out


def serve(engine: EngineClient, name: str, path: Path, what: str) -> str:
    """Load an adapter into the engine under `name`; a refusal names `what` (e.g. the domain's teacher)."""
    try:
        return serve_adapter(engine, name, path)
    except EngineError as exc:
        raise EngineError(f"{what}: the engine cannot load the adapter at {path}: {exc}") from exc
