"""The stand-in engine (models/serving/standin.py) answers as the project's vLLM server does, behind the real
rollout proxy: the recorded prompt ids are the chat template's, the recorded log-probs are the served model's
own (base or adapter) for the tokens it returned, and prompt log-probs match a forward pass of transformers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from models.serving.engine import EngineConfig, EngineError, new_token
from models.serving.proxy import ProxyConfig, ProxyServer
from models.serving.stack import local_engine
from models.storage import TableStore

MESSAGES = [
    {"role": "system", "content": "You are the buyer. Your target is $40."},
    {"role": "user", "content": "I'm asking $60 for the lamp."},
]


@pytest.fixture(scope="module")
def standin(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    config = EngineConfig(model_path=tiny_model_dir, served_model_name="base", api_key=new_token(), kind="standin")
    with local_engine(config, log_path=tmp_path_factory.mktemp("standin") / "engine.log") as engine:
        yield engine


@pytest.fixture(scope="module")
def hf_model(tiny_model_dir: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(
        tiny_model_dir, dtype=torch.float32
    ).eval(), AutoTokenizer.from_pretrained(tiny_model_dir)


def log_softmax_rows(model: Any, ids: list[int]) -> Any:
    import torch

    with torch.no_grad():
        return torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)


def test_local_engine_starts_the_kind_its_config_names(tiny_model_dir: Path) -> None:
    from models.serving.engine import VLLMEngine
    from models.serving.standin import StandInEngine

    assert isinstance(local_engine(EngineConfig(model_path=tiny_model_dir)), VLLMEngine)
    assert isinstance(local_engine(EngineConfig(model_path=tiny_model_dir, kind="standin")), StandInEngine)
    with pytest.raises(ValueError, match="kind"):
        local_engine(EngineConfig(model_path=tiny_model_dir, kind="llama.cpp"))


def test_the_engine_kind_comes_from_the_environment_at_the_edge(monkeypatch: pytest.MonkeyPatch) -> None:
    from models.profiles import get_profile
    from models.serving.engine_settings import ENGINE_KIND_ENV

    monkeypatch.delenv(ENGINE_KIND_ENV, raising=False)
    assert get_profile("smoke").engine.kind == "vllm"
    monkeypatch.setenv(ENGINE_KIND_ENV, "standin")
    profile = get_profile("smoke")
    assert profile.engine.kind == "standin"
    assert profile.engine.engine_config(Path("m")).kind == "standin"  # carried to the engine's config
    monkeypatch.setenv(ENGINE_KIND_ENV, "tgi")
    with pytest.raises(ValueError, match="kind"):
        get_profile("smoke")


def test_chat_through_the_proxy_records_the_templates_ids_and_the_models_log_probs(
    standin: Any, hf_model: tuple[Any, Any], tmp_path: Path
) -> None:
    model, tokenizer = hf_model
    config = ProxyConfig(
        upstreams=(standin.base_url,),
        base_models=("base",),
        table_root=tmp_path,
        port=0,
        api_key=new_token(),
        upstream_api_key=standin.config.api_key,
    )
    with ProxyServer(config, log_path=tmp_path / "proxy.log") as proxy:
        body = {"model": "base", "messages": MESSAGES, "max_tokens": 8, "temperature": 0.7, "seed": 3}
        headers = {"Authorization": f"Bearer {config.api_key}", "X-Episode-Id": "ep-standin"}
        answer = httpx.post(f"{proxy.base_url}/chat/completions", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["logprobs"] is None  # the client did not ask
        again = httpx.post(f"{proxy.base_url}/chat/completions", json=body, headers=headers, timeout=30)
        assert again.json()["choices"][0]["message"] == answer.json()["choices"][0]["message"]  # same seed
        assert proxy.flush()["in_flight"] == 0
    rows = TableStore(tmp_path).query("SELECT * FROM recorded_calls ORDER BY created_at")
    assert len(rows) == 2
    row = rows.iloc[0]
    expected_prompt = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)["input_ids"]
    assert list(row.prompt_token_ids) == list(expected_prompt)
    completion = [int(t) for t in row.completion_token_ids]
    assert len(completion) == 8 and row.finish_reason == "length"
    assert row.completion_text == tokenizer.decode(completion)
    ids = list(expected_prompt) + completion
    rows_lp = log_softmax_rows(model, ids)  # temperature 0.7: the sampled distribution's log-probs
    import torch

    scaled = torch.log_softmax(torch.log_softmax(rows_lp, -1) / 0.7, -1)
    expected = [float(scaled[len(expected_prompt) - 1 + i, t]) for i, t in enumerate(completion)]
    assert list(row.completion_logprobs) == pytest.approx(expected, abs=1e-4)


def test_prompt_log_probs_match_a_transformers_forward_pass(standin: Any, hf_model: tuple[Any, Any]) -> None:
    model, _ = hf_model
    ids = [1, 504, 3458, 314, 260, 2365, 30]
    scored = standin.client.prompt_logprobs("base", ids, top_k=3)
    rows = log_softmax_rows(model, ids)
    assert scored[0] is None and len(scored) == len(ids)
    for i in range(1, len(ids)):
        top = set(rows[i - 1].topk(3).indices.tolist())
        assert set(scored[i]) == top | {ids[i]}
        for token, value in scored[i].items():
            assert value == pytest.approx(float(rows[i - 1, token]), abs=1e-4)
    with pytest.raises(EngineError, match="prompt_logprobs"):
        standin.client.prompt_logprobs("base", ids, top_k=standin.config.max_logprobs + 1)


def test_adapters_load_change_the_log_probs_and_unload(
    standin: Any, tiny_lora_adapter: Path, tiny_model_dir: Path
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    client = standin.client
    client.load_adapter("student", tiny_lora_adapter)
    try:
        listing = httpx.get(
            f"{standin.base_url}/models", headers={"Authorization": f"Bearer {standin.config.api_key}"}
        ).json()["data"]
        assert {m["id"]: m["parent"] for m in listing} == {"base": None, "student": "base"}
        with pytest.raises(EngineError, match="already"):
            client.load_adapter("student", tiny_lora_adapter)
        ids = [1, 504, 3458, 314, 260]
        adapted = client.prompt_logprobs("student", ids, top_k=1)
        base = client.prompt_logprobs("base", ids, top_k=1)
        peft = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), tiny_lora_adapter
        ).eval()
        rows = log_softmax_rows(peft, ids)
        assert adapted[4][ids[4]] == pytest.approx(float(rows[3, ids[4]]), abs=1e-4)
        assert adapted[4][ids[4]] != pytest.approx(base[4][ids[4]], abs=1e-4)  # the adapter changes the model
    finally:
        client.unload_adapter("student")
    assert client.models() == ["base"]
    with pytest.raises(EngineError, match="cannot be found"):
        client.unload_adapter("student")
    with pytest.raises(EngineError, match="no LoRA adapter"):
        client.load_adapter("nothing", tiny_model_dir / "missing")


def test_only_health_answers_without_the_token(standin: Any) -> None:
    root = standin.base_url.removesuffix("/v1")
    assert httpx.get(f"{root}/health").status_code == 200
    assert httpx.get(f"{standin.base_url}/models").status_code == 401
    body = {"model": "base", "messages": MESSAGES, "max_tokens": 2}
    assert httpx.post(f"{standin.base_url}/chat/completions", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(f"{standin.base_url}/load_lora_adapter", json={}, headers=wrong).status_code == 401
    unknown = standin.client.http.post("/chat/completions", json={**body, "model": "ghost"})
    assert unknown.status_code == 404 and "ghost" in unknown.text


def test_runs_inside_shared_engines_share_one_engine_and_stop_it_at_the_end(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`make run` and run_stage2 launch their Dagster runs one after another inside `shared_engines()`: a run that
    serves what the run before it served takes that engine (not started again), with a proxy of its own; other
    settings stop the kept engine first (one model in memory); an engine that died is started anew; the block's
    end stops it."""
    from models.serving.engine_settings import EngineSettings
    from models.serving.stack import serve_stack, shared_engines

    settings = EngineSettings(kind="standin")
    common = {"table_root": tmp_path / "tables", "log_dir": tmp_path / "logs", "weights": tiny_model_dir}

    def served(tag: str, chosen: EngineSettings = settings) -> tuple[str, str, int]:
        with serve_stack(settings=chosen, log_tag=tag, **common) as stack:
            assert stack.client.healthy() and stack.model in stack.client.models()
            return stack.engine_base_url, stack.proxy_api_key, stack.client.models().count("base")

    with shared_engines() as shared:
        first, second = served("run-1"), served("run-2")
        assert first[0] == second[0] and first[1] != second[1]  # one engine, a proxy token per run
        assert (shared.started, shared.reused) == (1, 1)
        kept = shared._engine
        other = served("run-3", EngineSettings(kind="standin", max_model_len=1024))  # other settings
        assert other[0] != first[0] and not kept.alive() and shared.started == 2
        shared._engine.process.kill()  # the engine dies between runs
        shared._engine.process.wait()
        served("run-4", EngineSettings(kind="standin", max_model_len=1024))
        assert shared.started == 3 and shared._engine.alive()
        last = shared._engine
    assert not last.alive()  # the block's end stopped it


def test_prompt_log_prob_entries_carry_vllms_rank_and_text(tiny_model_dir: Path) -> None:
    """The vectorised `scored_prompt` against its definition, position by position: every top-k token and the
    prompt's own, with rank = 1 + tokens strictly more likely (ties share a rank) and the token's own text."""
    import torch

    from models.serving.standin import StandInModels, scored_prompt

    models = StandInModels(tiny_model_dir, "base")
    torch.manual_seed(0)
    prompt = [1, 504, 3458, 314, 260, 2365, 30, 504]
    rows = torch.log_softmax(torch.randn(len(prompt), len(models.tokenizer)), -1)
    rows[2, :] = rows[2, 0]  # a row of ties: every token ranks first
    rows[4, prompt[5]] = rows[4].max()  # the prompt's own token tied with the best
    scored = scored_prompt(models, prompt, rows, top_k=3)
    assert scored[0] is None and len(scored) == len(prompt)
    for i in range(1, len(prompt)):
        row = rows[i - 1]
        expected = {
            str(t): {
                "logprob": float(row[t]),
                "rank": int((row > row[t]).sum()) + 1,
                "decoded_token": models.tokenizer.decode([t]),
            }
            for t in [prompt[i], *row.topk(3).indices.tolist()]
        }
        assert scored[i] == expected, i  # the same tensor read twice: equal, not close
    assert scored[3][str(prompt[3])]["rank"] == 1 and scored[5][str(prompt[5])]["rank"] == 1
    assert scored_prompt(models, [7], rows, top_k=3) == [None]
