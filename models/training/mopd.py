"""Multi-teacher on-policy distillation (MOPD): one student learns every domain from that domain's specialist.

One step:
1. curriculum: every `curriculum_every` steps the caller's probe measures the student's reward per domain;
   domain d is then sampled with probability proportional to max(eps, gap_d), where
   gap_d = (teacher_d - student_d) / (teacher_d - base_d) is the share of the teacher's advantage over the
   base not yet absorbed (a domain whose teacher is no better than the base gets eps; when that holds for
   every domain the draw is uniform, a decision recorded as `fell_back`: every decision is in the result);
2. rollout: the student (served by vLLM as `<run>-v<step>`) plays `episodes_per_step` episodes, their domains
   drawn from the curriculum, in each domain's learning seat through the rollout proxy, exactly as a PPO
   rollout (models.training.rollouts.rollout_specs) and at the rollouts' temperature (`temperature`); the
   proxy records the engine's token ids;
3. teacher scoring: each episode's recorded turns are packed into prefix-stable segments
   (models.training.segments.episode_samples) and each segment is scored by the specialist of the
   episode's domain in ONE completions request to the same engine (`EngineClient.prompt_logprobs`: the
   segment's token ids as the prompt, `prompt_logprobs: top_k`, `max_tokens: 1`, under the teacher's
   adapter name), so the teacher scores the student's own tokens without re-tokenising anything;
4. update: one AdamW step on the mean over the student's tokens of the reverse KL from student to teacher,
   KL(p_s || p_t) = sum_v p_s(v) (log p_s(v) - log p_t(v)), both at temperature 1;
5. sync: the new adapter is saved and hot-loaded as `<run>-v<step+1>` (the previous one unloaded).

The update (models/training/mopd_learner.py: the loss, the learner) runs on the student's device, CPU or CUDA.

Top-k approximation (`topk_reverse_kl`): the engine returns the teacher's log-probs of its top-k tokens and of
the sampled token only. With S that set and R everything else, the loss is the exact reverse KL between the
two distributions coarsened to the outcomes {each v in S} and {R}:
    sum_{v in S} p_s(v) (log p_s(v) - log p_t(v)) + p_s(R) (log p_s(R) - log p_t(R)),
with p(R) = 1 - sum_{v in S} p(v). It is >= 0, is 0 exactly when the coarsened distributions agree, never
exceeds the full KL (data-processing inequality), and equals it when S covers the vocabulary. The tail term
keeps the student from moving mass outside the teacher's top-k; p_t(R) is floored at `tail_floor` (bf16
engine log-probs can sum to slightly more than 1).

TRL 1.16's DistillationTrainer distils one teacher on single-turn prompts it generates itself; here the
episodes are multi-turn, recorded by the proxy, and routed to six teachers served as LoRA adapters of the
student's own base model by one engine, so the loop is ours (the rollout half is PPO's).

Every step writes a checkpoint (adapter, optimiser, RNG and metric history) atomically; `train_mopd` resumes
from the newest one. Each call names its episodes with its own attempt token (models.training.rollouts
`rollout_tag`), so a step the killed attempt had already played scores the resumed attempt's calls only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from environments.core.runtime import EpisodeResult, run_episodes
from models.records import rows_for
from models.serving.adapters import advance_adapter
from models.serving.engine import EngineClient, EngineError
from models.training.config import PPOConfig, Services
from models.training.mopd_config import CurriculumDecision, MOPDConfig, MOPDResult
from models.training.mopd_learner import MOPDLearner, ScoredSegment
from models.training.mopd_learner import student_log_distributions as student_log_distributions
from models.training.mopd_learner import topk_reverse_kl as topk_reverse_kl
from models.training.ppo import flush_proxy, load_recorded_turns
from models.training.rollouts import rollout_specs
from models.training.segments import Segment, episode_samples
from models.training.sft import load_lora_model

log = logging.getLogger("socialrl.mopd")


# ------------------------------------------------------------------------------------------- curriculum
def curriculum_gaps(
    teacher: Mapping[str, float], base: Mapping[str, float], student: Mapping[str, float], min_advantage: float = 0.0
) -> dict[str, float | None]:
    """gap_d = (teacher_d - student_d) / (teacher_d - base_d): 1 where the student is still at the base, 0
    where it matches the teacher; None where the teacher beats the base by no more than `min_advantage`."""
    gaps: dict[str, float | None] = {}
    for domain, t in teacher.items():
        advantage = t - base[domain]
        gaps[domain] = (t - student[domain]) / advantage if advantage > min_advantage else None
    return gaps


def curriculum_probabilities(gaps: Mapping[str, float | None], eps: float) -> dict[str, float]:
    """Sampling probability of each domain, proportional to max(eps, gap) (eps where the gap is undefined)."""
    if not gaps:
        raise ValueError("no domains to sample")
    weights = {d: eps if g is None or not math.isfinite(g) else max(eps, g) for d, g in gaps.items()}
    total = sum(weights.values())
    return {d: w / total for d, w in weights.items()}


def curriculum_decision(
    step: int,
    targets: Mapping[str, tuple[float, float]],
    student: Mapping[str, float],
    eps: float,
    min_advantage: float = 0.0,
) -> CurriculumDecision:
    """The curriculum's decision at `step` from the (teacher, base) probe targets and the student's probe
    rewards: the gaps and the sampling probabilities they give (uniform when no gap is defined, which the
    decision records as `fell_back`)."""
    teacher = {d: t for d, (t, _) in targets.items()}
    base = {d: b for d, (_, b) in targets.items()}
    gaps = curriculum_gaps(teacher, base, student, min_advantage)
    return CurriculumDecision(step, dict(student), gaps, curriculum_probabilities(gaps, eps))


def sample_domains(probabilities: Mapping[str, float], n: int, rng: random.Random) -> list[str]:
    """`n` domains drawn independently with the given probabilities."""
    domains = list(probabilities)
    return rng.choices(domains, weights=[probabilities[d] for d in domains], k=n)


# ------------------------------------------------------------------------------------- teacher scoring
def score_segment(
    engine: EngineClient, teacher: str, domain: str, segment: Segment, top_k: int, max_tokens: int
) -> ScoredSegment:
    """The teacher's top-k log-probs at the segment's agent positions, from one prompt_logprobs request."""
    ids = segment.input_ids[:max_tokens]
    scored = engine.prompt_logprobs(teacher, ids, top_k)
    positions = [p for p in segment.agent_positions if p < len(ids)]
    rows = [scored[p] for p in positions]
    width = max((len(r) for r in rows if r), default=1)
    teacher_ids = torch.zeros((len(rows), width), dtype=torch.long)
    teacher_logprobs = torch.zeros((len(rows), width), dtype=torch.float32)
    valid = torch.zeros((len(rows), width), dtype=torch.bool)
    sampled = torch.zeros(len(rows), dtype=torch.float32)
    for i, (position, row) in enumerate(zip(positions, rows, strict=True)):
        if not row or ids[position] not in row:
            raise EngineError(f"teacher {teacher!r} returned no log-prob for the sampled token at position {position}")
        tokens = list(row)
        teacher_ids[i, : len(tokens)] = torch.tensor(tokens)
        teacher_logprobs[i, : len(tokens)] = torch.tensor([max(row[t], -1e4) for t in tokens])
        valid[i, : len(tokens)] = True
        sampled[i] = row[ids[position]]
    return ScoredSegment(
        domain=domain,
        segment=segment,
        teacher_ids=teacher_ids,
        teacher_logprobs=teacher_logprobs,
        valid=valid,
        positions=positions,
        sampled_teacher_logprob=sampled,
    )


# ------------------------------------------------------------------------------------------------- loop
@dataclass
class MOPDState:
    """What a checkpoint holds besides the tensors."""

    step: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    probabilities: dict[str, float] = field(default_factory=dict)
    """The curriculum's current sampling probabilities."""
    gaps: dict[str, float | None] = field(default_factory=dict)
    """The gaps they came from."""
    student_rewards: dict[str, float] = field(default_factory=dict)
    """The student's latest probe rewards per domain."""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """Every curriculum decision so far (`CurriculumDecision` fields; a checkpoint written before they were
    recorded resumes with none)."""


def _checkpoint(output: Path, state: MOPDState, learner: MOPDLearner) -> Path:
    checkpoints = output / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    final = checkpoints / f"step{state.step:05d}"
    build = Path(tempfile.mkdtemp(prefix=".tmp-", dir=checkpoints))
    learner.student.save_pretrained(build / "adapter", save_embedding_layers=False)
    torch.save(
        {"optimizer": learner.optimizer.state_dict(), "torch_rng": torch.get_rng_state()}, build / "trainer_state.pt"
    )
    (build / "state.json").write_text(json.dumps(asdict(state), indent=1))
    if final.exists():
        shutil.rmtree(final)
    os.replace(build, final)
    for old in sorted(checkpoints.glob("step*"))[:-2]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_mopd_checkpoint(output: Path) -> Path | None:
    found = sorted(p for p in (output / "checkpoints").glob("step*") if (p / "state.json").is_file())
    return found[-1] if found else None


def _serve(engine: EngineClient, learner: MOPDLearner, output: Path, name: str, previous: str | None) -> str:
    directory = output / "adapters" / name
    if directory.exists():
        shutil.rmtree(directory)
    learner.student.save_pretrained(directory, save_embedding_layers=False)
    return advance_adapter(engine, name, directory, previous)


def check_teachers(engine: EngineClient, teachers: Mapping[str, str], top_k: int) -> None:
    """Every teacher adapter is served and answers a top-k scoring request; fails naming the domain."""
    served = set(engine.models())
    for domain, name in teachers.items():
        if name not in served:
            raise EngineError(f"{domain}: teacher adapter {name!r} is not loaded in the engine")
        try:
            engine.prompt_logprobs(name, [1, 2], top_k)
        except EngineError as exc:
            raise EngineError(f"{domain}: teacher adapter {name!r} cannot score tokens: {exc}") from exc


def train_mopd(
    config: MOPDConfig,
    base_model_dir: Path,
    services: Services,
    output: Path,
    teachers: Mapping[str, str],
    seats: Mapping[str, str],
    targets: Mapping[str, tuple[float, float]] | None = None,
    probe: Callable[[str], Mapping[str, float]] | None = None,
    init_adapter: Path | None = None,
    min_advantage: float = 0.0,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> MOPDResult:
    """Distil the `teachers` (domain -> served adapter name, already loaded in `services.engine`) into one
    student, from `init_adapter` or a fresh LoRA on the base model; see the module docstring.

    seats: domain -> the student's seat. targets: domain -> (teacher, base) probe reward, and probe: served
    student name -> domain -> probe reward; both are needed for the gap-closed curriculum (without them the
    domains are sampled uniformly). Resumes from the newest checkpoint under `output`."""
    domains = list(teachers)
    if not config.temperature > 0:
        raise ValueError("MOPDConfig.temperature is 0 (the rollouts'): resolve it first (Stage2Settings.resolved)")
    if set(seats) != set(domains):
        raise ValueError(f"seats given for {sorted(seats)}, teachers for {sorted(domains)}")
    if (targets is None) != (probe is None) or (targets is not None and set(targets) != set(domains)):
        raise ValueError("give targets (teacher, base) for every domain together with a probe, or neither")
    check_teachers(services.engine, teachers, config.top_k)  # before any training step
    output.mkdir(parents=True, exist_ok=True)
    checkpoint = latest_mopd_checkpoint(output)
    learner, tokenizer, state = _start_learner(config, base_model_dir, checkpoint, init_adapter)
    resumed_from = state.step if checkpoint is not None else None
    # A fresh LoRA adapter starts as the base model (its B matrices are zero): its first probe is the base's.
    fresh = init_adapter is None and checkpoint is None
    served = _serve(services.engine, learner, output, f"{config.run_name}-v{state.step}", None)
    rollout = PPOConfig(
        env_id=domains[0],
        counterparts=config.counterparts,
        temperature=config.temperature,
        max_new_tokens=config.max_new_tokens,
        seed=config.seed,
    )
    attempt = uuid.uuid4().hex[:8]  # this process's episode ids (rollout_tag): a killed attempt's calls stay apart
    while state.step < config.steps:
        step = state.step
        metrics: dict[str, Any] = {"step": step, "adapter": served}
        start = time.perf_counter()
        _update_curriculum(state, config, domains, targets, probe, served, fresh and step == 0, min_advantage)
        metrics["time_probe_s"] = time.perf_counter() - start
        start = time.perf_counter()
        results, episode_domain = _rollouts(
            config, rollout, state.probabilities, step, domains, seats, services, served, attempt
        )
        metrics["time_rollout_s"] = time.perf_counter() - start
        start = time.perf_counter()
        jobs, rewards = _segments_by_domain(domains, seats, services, results, episode_domain)
        if not jobs:
            raise RuntimeError(f"step {step}: the proxy recorded no student calls")
        scored = _score_segments(config, services.engine, teachers, jobs)
        metrics["time_teacher_s"] = time.perf_counter() - start
        start = time.perf_counter()
        update = learner.update(scored)
        metrics["time_train_s"] = time.perf_counter() - start
        start = time.perf_counter()
        served = _serve(services.engine, learner, output, f"{config.run_name}-v{step + 1}", served)
        metrics["time_sync_s"] = time.perf_counter() - start
        _step_metrics(metrics, update, jobs, results, rewards, state)
        state.history.append(metrics)
        state.step = step + 1
        _checkpoint(output, state, learner)
        if on_step is not None:
            on_step(metrics)
    final = output / "adapter"
    learner.student.save_pretrained(final, save_embedding_layers=False)
    tokenizer.save_pretrained(final)
    curriculum = tuple(CurriculumDecision(**d) for d in state.decisions)
    return MOPDResult(final, served, state.history, resumed_from, curriculum)


def _start_learner(
    config: MOPDConfig, base_model_dir: Path, checkpoint: Path | None, init_adapter: Path | None
) -> tuple[MOPDLearner, Any, MOPDState]:
    """The student (from the newest checkpoint, else `init_adapter`, else a fresh LoRA) with its optimiser,
    RNG and loop state restored."""
    torch.manual_seed(config.seed)
    student, tokenizer = load_lora_model(
        base_model_dir, config.lora, checkpoint / "adapter" if checkpoint else init_adapter, bf16=config.bf16
    )
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    learner = MOPDLearner(student, config, pad_id)
    state = MOPDState()
    if checkpoint is not None:
        # Onto the CPU first: a checkpoint written on a GPU resumes anywhere; the optimiser moves its state to
        # the parameters' device itself.
        saved = torch.load(checkpoint / "trainer_state.pt", map_location="cpu", weights_only=True)
        learner.optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["torch_rng"])
        state = MOPDState(**json.loads((checkpoint / "state.json").read_text()))
    return learner, tokenizer, state


def _update_curriculum(
    state: MOPDState,
    config: MOPDConfig,
    domains: Sequence[str],
    targets: Mapping[str, tuple[float, float]] | None,
    probe: Callable[[str], Mapping[str, float]] | None,
    served: str,
    at_base: bool,
    min_advantage: float,
) -> None:
    """Step 1: every `curriculum_every` steps (and on resume) probe the student and re-weigh the domains by
    their gaps; without targets the domains stay uniform. `at_base`: the student is still the base model."""
    if targets is not None and probe is not None and (state.step % config.curriculum_every == 0 or not state.gaps):
        if at_base:
            state.student_rewards = {d: targets[d][1] for d in domains}
        else:
            state.student_rewards = {d: float(r) for d, r in probe(served).items()}
        decision = curriculum_decision(state.step, targets, state.student_rewards, config.curriculum_eps, min_advantage)
        state.gaps, state.probabilities = decision.gaps, decision.probabilities
        state.decisions.append(asdict(decision))
        if decision.fell_back:
            log.warning(
                "MOPD step %d: no teacher beats the base on the probe (targets %s): the curriculum falls back to "
                "uniform sampling",
                state.step,
                {d: tuple(round(v, 3) for v in targets[d]) for d in domains},
            )
    elif not state.probabilities:
        state.probabilities = {d: 1.0 / len(domains) for d in domains}


def _rollouts(
    config: MOPDConfig,
    rollout: PPOConfig,
    probabilities: Mapping[str, float],
    step: int,
    domains: Sequence[str],
    seats: Mapping[str, str],
    services: Services,
    served: str,
    attempt: str,
) -> tuple[list[EpisodeResult], dict[str, str]]:
    """Step 2: the step's episodes, their domains drawn from the curriculum, each in its domain's learning seat
    through the proxy (stored with the episode tables, named by `attempt`); returns the results and episode
    id -> domain."""
    drawn = sample_domains(probabilities, config.episodes_per_step, random.Random(f"{config.seed}:{step}"))
    specs, episode_domain = [], {}
    for domain in domains:
        count = drawn.count(domain)
        if count == 0:
            continue
        domain_config = replace(
            rollout,
            env_id=domain,
            seat=seats[domain],
            episodes_per_iteration=count,
            run_name=f"{config.run_name}-{domain.removesuffix('-v0')}",
        )
        for spec in rollout_specs(
            domain_config, step, services.proxy_base_url, served, services.proxy_api_key, attempt
        ):
            specs.append(spec)
            episode_domain[spec.episode_id] = domain
    results: list[EpisodeResult] = asyncio.run(
        run_episodes(specs, concurrency=config.concurrency, turn_timeout=config.turn_timeout_s)
    )
    flush_proxy(services.proxy_base_url, services.proxy_api_key)
    services.store.append_all(rows_for(results, run_id=f"{config.run_name}:{attempt}:step{step}"))
    return results, episode_domain


def _segments_by_domain(
    domains: Sequence[str],
    seats: Mapping[str, str],
    services: Services,
    results: Sequence[EpisodeResult],
    episode_domain: Mapping[str, str],
) -> tuple[list[tuple[str, Segment]], dict[str, list[float]]]:
    """Step 3a: every episode's recorded turns packed into prefix-stable segments, with their domain, and the
    seat's rewards per domain."""
    jobs: list[tuple[str, Segment]] = []
    rewards: dict[str, list[float]] = {}
    for domain in domains:
        mine = [r for r in results if episode_domain[r.episode_id] == domain]
        if not mine:
            continue
        seat = seats[domain]
        rewards[domain] = [r.outcome.roles[seat].reward for r in mine]
        recorded = load_recorded_turns(services.store, [r.episode_id for r in mine], seat)
        for result in mine:
            turns = [t for t in recorded.get(result.episode_id, []) if t.completion_ids]
            if turns:  # an episode whose every reply came back empty has no student token to score
                sample = episode_samples(result.episode_id, turns, 0.0, pack=True)
                jobs += [(domain, segment) for segment in sample.segments]
    return jobs, rewards


def _score_segments(
    config: MOPDConfig, engine: EngineClient, teachers: Mapping[str, str], jobs: Sequence[tuple[str, Segment]]
) -> list[ScoredSegment]:
    """Step 3b: each segment scored by its domain's teacher (concurrent prompt_logprobs requests)."""
    with ThreadPoolExecutor(max_workers=config.teacher_requests) as pool:
        return list(
            pool.map(
                lambda job: score_segment(
                    engine, teachers[job[0]], job[0], job[1], config.top_k, config.max_sequence_tokens
                ),
                jobs,
            )
        )


def _step_metrics(
    metrics: dict[str, Any],
    update: Mapping[str, float],
    jobs: Sequence[tuple[str, Segment]],
    results: Sequence[EpisodeResult],
    rewards: Mapping[str, list[float]],
    state: MOPDState,
) -> None:
    """The step's metrics (in place) and its log line."""
    agent_tokens = sum(len(s.agent_positions) for _, s in jobs)
    metrics.update(
        {
            **update,
            "unscored_tokens": agent_tokens - int(update["scored_tokens"]),
            "episodes": len(results),
            "reward_mean": sum(sum(v) for v in rewards.values()) / len(results),
            **{f"reward/{d}": sum(v) / len(v) for d, v in rewards.items()},
            **{f"episodes/{d}": len(v) for d, v in rewards.items()},
            **{f"probability/{d}": p for d, p in state.probabilities.items()},
            **{f"gap/{d}": g for d, g in state.gaps.items() if g is not None},
            **{f"student_probe/{d}": r for d, r in state.student_rewards.items()},
        }
    )
    log.info(
        "mopd step %d: reverse KL %.4f over %d tokens, reward %.3f, domains %s (%.0f s rollout, %.0f s teacher, "
        "%.0f s train)",
        metrics["step"],
        update["reverse_kl"],
        int(update["scored_tokens"]),
        metrics["reward_mean"],
        {d.removesuffix("-v0"): len(v) for d, v in rewards.items()},
        metrics["time_rollout_s"],
        metrics["time_teacher_s"],
        metrics["time_train_s"],
    )
