"""The Theory-of-Mind study as Dagster assets, per domain: tom_traces -> tom_student -> tom_analysis.

Thin: each asset calls models/socialrl/tom.py (the five arms, the skill scorers and the statistics are
documented there) and stores tables, MLflow runs and metadata. `tom_job` materialises the three for the
profile's ToM domains; `python -m pipelines.run_tom` runs it and writes the results file.
"""

import json
from pathlib import Path

from dagster import AssetExecutionContext, MetadataValue, Output, asset

from assets.common import execution_id, mlflow_links
from assets.socialrl import DOMAINS
from models.evaluation.policy import store_evaluation
from models.evaluation.transcripts import representative_transcripts, transcripts_markdown
from models.plots import grouped_bars, markdown_image
from models.serving.adapters import serve_adapter
from models.serving.model_store import resolve_model
from models.socialrl import stage1, tom
from models.socialrl.teachers import traces_from_rows
from resources import EngineResource, MlflowResource, SettingsResource, StoreResource

GROUP = "tom"


def _rounded(values: dict[str, float]) -> dict[str, float | None]:
    return {k: round(v, 3) if v == v else None for k, v in values.items()}  # NaN (no records) -> None


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"python", "duckdb"})
def tom_traces(
    context: AssetExecutionContext, settings: SettingsResource, store: StoreResource
) -> Output[tom.StudyTraces]:
    """The strategic code teacher's INFER -> ACT -> ANTICIPATE traces on the study's training scenarios (every
    seat, the fixed counterparts), to the `traces` table; both students train on these same episodes."""
    env_id = context.partition_key
    profile = settings.get_profile()
    run_id = f"tom-{execution_id(context)}"
    traces = tom.study_traces(env_id, profile, run_tag=f"tom-traces-{run_id}")
    store.store().append("traces", [t.row(run_id) for t in traces])
    summary = stage1.trace_summary(traces)
    variety = tom.reasoning_variety(traces)
    mean_reward = float(summary.get("mean_reward", float("nan")))
    result = tom.StudyTraces(env_id, run_id, len(traces), 0, mean_reward, variety)
    sample = tom.sft_traces(traces[:1], "tom")[0].messages if traces else []
    turns = "\n\n".join(f"**{m['role']}**: {m['content']}" for m in sample[1:5]).replace("\n", "  \n")
    return Output(
        result,
        metadata={"episodes": len(traces), "mean_reward": result.mean_reward, "run_id": run_id,
                  "scaffolded_sample": MetadataValue.md(turns),
                  "reasoning_distinct_share": MetadataValue.json(_rounded(variety.distinct_share)),
                  "reasoning_instruction_copy_rate": MetadataValue.json(_rounded(variety.instruction_copy_rate))},
    )  # fmt: skip


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"pytorch", "mlflow"})
def tom_student(
    context: AssetExecutionContext,
    tom_traces: tom.StudyTraces,
    settings: SettingsResource,
    store: StoreResource,
    mlflow: MlflowResource,
) -> Output[tom.StudyStudents]:
    """Two LoRA students on the same teacher traces with the same settings: `sft_act` (ACT text only, today's
    warm-start) and `sft_tom` (the whole INFER -> ACT -> ANTICIPATE turn, the scaffold's prompt); MLflow runs."""
    env_id = context.partition_key
    profile = settings.get_profile()
    frame = store.store().query("SELECT * FROM traces WHERE env_id = ? AND run_id = ?", [env_id, tom_traces.run_id])
    traces = traces_from_rows(frame.itertuples(index=False))
    base_dir = resolve_model(profile.base_model, settings.paths().models)
    output = settings.paths().run_dir("tom", env_id, execution_id(context))
    students = tom.train_students(env_id, traces, profile, base_dir, output, mlflow.tracker())
    result = tom.StudyStudents(env_id, tom_traces.run_id, students)
    return Output(
        result,
        metadata={
            **{f"{arm}_train_loss": s.train_loss for arm, s in students.items()},
            **{f"{arm}_examples": s.examples for arm, s in students.items()},
            **{f"{arm}_seconds": round(s.wall_seconds, 1) for arm, s in students.items()},
            **{f"{arm}_passes": round(s.passes, 2) for arm, s in students.items() if s.pass_tokens},
            **{f"{arm}_train_tokens": s.train_tokens for arm, s in students.items()},
            "mlflow_runs": MetadataValue.json({arm: s.mlflow_run_id for arm, s in students.items()}),
        },
    )


def arms_plot(result: tom.ToMDomainResult) -> bytes:
    """Mean reward per arm, and the scaffolded arms' skill scores, with their intervals."""
    arms = list(result.arms)

    def triple(e) -> tuple[float, float, float] | None:
        return (e.mean, e.ci_low, e.ci_high) if e is not None and e.n else None

    bars = {
        "mean reward": [triple(result.arms[a]) for a in arms],
        "INFER score": [triple(result.skills[a].infer) if a in result.skills else None for a in arms],
        "ANTICIPATE score": [triple(result.skills[a].anticipate) if a in result.skills else None for a in arms],
    }
    return grouped_bars(arms, bars, f"ToM study, {result.env_id} ({result.seat})", "score", ylim=(0.0, 1.0))


@asset(partitions_def=DOMAINS, group_name=GROUP, kinds={"vllm", "duckdb", "mlflow"})
def tom_analysis(
    context: AssetExecutionContext,
    tom_student: tom.StudyStudents,
    settings: SettingsResource,
    store: StoreResource,
    engine: EngineResource,
    mlflow: MlflowResource,
) -> Output[tom.ToMDomainResult]:
    """The five arms (base plain, base + ToM prompt, SFT on ACT plain and with the ToM prompt, SFT on INFER -> ACT ->
    ANTICIPATE) on the same held-out episodes: mean rewards, paired differences, INFER / ANTICIPATE scores against
    the environment's ground truth, and each skill's correlation with reward (scenario-clustered bootstrap CIs)."""
    env_id = context.partition_key
    profile = settings.get_profile()
    run_id = execution_id(context)
    models = {"base": "base"}
    for arm, student in tom_student.students.items():
        models[arm] = serve_adapter(engine.client, f"{env_id}-tom-{arm}", Path(student.adapter_dir))
    runs = tom.run_arms(env_id, profile, engine.proxy_base_url, models, api_key=engine.proxy_api_key)
    for arm, run in runs.items():
        store_evaluation(store.store(), run.result, f"{env_id}:tom:{arm}", f"tom-{run_id}-{arm}")
    result = tom.analyse(env_id, runs, students=tom_student.students)
    png = arms_plot(result)
    # What each arm says: its best, median and worst held-out episode (and the most refused), arm by arm.
    transcripts = "\n\n".join(
        transcripts_markdown(representative_transcripts(run.result, arm), title=f"{arm} on {env_id}")
        for arm, run in runs.items()
    )
    details = {env_id: {**result.result_file_entry(), **result.details()}}
    report = settings.paths().reports / f"tom-{env_id}-{run_id}.json"
    tom.write_json(report, details)
    tracker = mlflow.tracker()
    with tracker.start_run(f"tom-analysis-{env_id}", params={"profile": profile.name, "env_id": env_id}) as run:
        run.log_metrics(0, **{f"reward_{arm}": e.mean for arm, e in result.arms.items() if e.n})
        run.log_file(f"tom-{env_id}.png", png, "plots")
        run.log_file(f"tom-{env_id}.json", json.dumps(details, indent=2), "results")
        run.log_file(f"tom-{env_id}-transcripts.md", transcripts, "transcripts")
    return Output(
        result,
        metadata={
            "results": MetadataValue.md(result.markdown()),
            "plot": MetadataValue.md(markdown_image(png, f"ToM study {env_id}")),
            "transcripts": MetadataValue.md(transcripts),
            "report": str(report),
            **{f"reward_{arm}": e.mean for arm, e in result.arms.items()},
            "mlflow_run_id": run.run_id,
            **mlflow_links(context, mlflow, run.run_id),
        },
    )
