"""Stage 1 of SocialRL as plain functions (the Dagster assets call these): scenarios, teacher traces,
SFT warm-starts and their imitation of the teacher, PPO specialists, their paired evaluation, registry
documentation.

Each function takes explicit inputs (profile, directories, running services, a tracker) and returns a
frozen dataclass, so it runs the same from a test, a script or an asset.

| module | function | returns |
| --- | --- | --- |
| data | `split_scenarios` | `ScenarioSplit`: a domain's training and held-out scenario ids (disjoint by content) and their table rows |
| data | `teacher_traces` | the strategic code teacher's episodes in the learning seat, rendered as the LLM agent's chat |
| warmstart | `warmstart` | `WarmStart`: LoRA SFT on the filtered traces, as an MLflow run with per-step metrics and loss plots |
| warmstart | `measure_imitation` | `WarmStartImitation`: the warm-start, the teacher and the trivial baselines on the held-out plan; has the warm-start learned its teacher? |
| specialist | `train_specialist` | `Specialist`: PPO from the warm-start, an MLflow run with per-iteration metrics and learning-curve plots, registered as `candidate` |
| report | `evaluate_specialist` | `SpecialistEvaluation`: every policy on the same held-out episodes, paired differences of reward and behaviour, transcripts; renders itself (`report()`, `markdown()`) |
| evaluation | `evaluation_plan`, `evaluate_model`, `evaluate_code_policies` | the domain's held-out plan and the policies played on it (`PolicyResult`) |
"""

from models.socialrl.stage1.common import registered_name, specialist_seat
from models.socialrl.stage1.data import ScenarioSplit, domain_scenarios, split_scenarios, teacher_traces, trace_summary
from models.socialrl.stage1.evaluation import (
    CODE_POLICIES,
    PolicyResult,
    base_plan,
    evaluate_code_policies,
    evaluate_model,
    evaluate_served,
    evaluation_plan,
    llm_policy,
)
from models.socialrl.stage1.report import (
    POLICY_ORDER,
    SpecialistEvaluation,
    compare,
    document_specialist,
    evaluate_specialist,
    evaluation_plot,
)
from models.socialrl.stage1.specialist import CurvePoint, Specialist, learning_curve_plots, train_specialist
from models.socialrl.stage1.warmstart import WarmStart, WarmStartImitation, measure_imitation, warmstart

__all__ = [
    "CODE_POLICIES",
    "POLICY_ORDER",
    "CurvePoint",
    "PolicyResult",
    "ScenarioSplit",
    "Specialist",
    "SpecialistEvaluation",
    "WarmStart",
    "WarmStartImitation",
    "base_plan",
    "compare",
    "document_specialist",
    "domain_scenarios",
    "evaluate_code_policies",
    "evaluate_model",
    "evaluate_served",
    "evaluate_specialist",
    "evaluation_plan",
    "evaluation_plot",
    "learning_curve_plots",
    "llm_policy",
    "measure_imitation",
    "registered_name",
    "specialist_seat",
    "split_scenarios",
    "teacher_traces",
    "trace_summary",
    "train_specialist",
    "warmstart",
]
