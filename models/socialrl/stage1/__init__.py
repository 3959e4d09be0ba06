"""Stage 1 of SocialRL as plain functions (the Dagster assets call these): scenarios, teacher traces,
SFT warm-starts and their imitation of the teacher, PPO specialists, their paired evaluation, registry
documentation.

Each function takes explicit inputs (profile, directories, running services, a tracker) and returns a
frozen dataclass, so it runs the same from a test, a script or an asset.

| module | function | returns |
| --- | --- | --- |
| data | `split_scenarios` | `ScenarioSplit`: a domain's training and held-out scenario ids (disjoint by content) and their table rows |
| data | `teacher_traces` | the strategic code teacher's episodes in the learning seat, rendered as the LLM agent's chat |
| data | `trace_usability` | `TraceUsability`: can a run's traces teach a warm-start (replies, enough kept by the filter, replies the environment accepted, a reward to imitate)? |
| warmstart | `warmstart` | `WarmStart`: LoRA SFT on the filtered traces, as an MLflow run with per-step metrics and loss plots |
| warmstart | `measure_imitation` | `WarmStartImitation`: the warm-start, the teacher and the trivial baselines on the held-out plan; has the warm-start learned its teacher? |
| warmstart | `imitation_plot` | the warm-start's, teacher's and baselines' mean reward beside the paired differences (PNG) |
| specialist | `train_specialist` | `Specialist`: PPO from the warm-start, an MLflow run with per-iteration metrics and learning-curve plots, registered as `candidate` |
| report | `evaluate_specialist` | `SpecialistEvaluation`: every policy on the same held-out episodes, paired differences of reward and behaviour, transcripts; renders itself (`report()`, `markdown()`) |
| evaluation | `evaluation_plan`, `heldout_plan_identity`, `evaluate_model`, `evaluate_code_policies` | the domain's held-out plan, its identity, and the policies played on it (`PolicyResult`) |
| registry | `record_heldout`, `result_measurement`, `champion_comparison`, `promote_specialist`, `promotion_bars` | the evaluation on the registry version (plan, per-episode rewards), the one champion rule and the bars a candidate must beat first (`PromotionBar`: its warm-start and the best rule, paired) |
| registry | `select_specialist` | `SpecialistSource`: the registered specialist stage 2 builds on (`make run`'s on the profile's plan, else its own) |
"""

from models.socialrl.stage1.common import STAGE1, STAGE2, TRAINED_BY_TAG, registered_name, specialist_seat
from models.socialrl.stage1.data import (
    ScenarioSplit,
    TraceUsability,
    domain_scenarios,
    split_scenarios,
    teacher_traces,
    trace_summary,
    trace_usability,
)
from models.socialrl.stage1.evaluation import (
    CODE_POLICIES,
    PolicyResult,
    base_plan,
    evaluate_code_policies,
    evaluate_model,
    evaluate_served,
    evaluation_plan,
    heldout_plan_identity,
    llm_policy,
)
from models.socialrl.stage1.registry import (
    FROM_STAGE1,
    FROM_STAGE2,
    PromotionBar,
    SpecialistSource,
    champion_comparison,
    choose_version,
    heldout_measurement,
    promote_specialist,
    promotion_bars,
    record_heldout,
    result_measurement,
    select_specialist,
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
from models.socialrl.stage1.warmstart import (
    WarmStart,
    WarmStartImitation,
    imitation_plot,
    measure_imitation,
    warmstart,
)

__all__ = [
    "CODE_POLICIES",
    "FROM_STAGE1",
    "FROM_STAGE2",
    "POLICY_ORDER",
    "STAGE1",
    "STAGE2",
    "TRAINED_BY_TAG",
    "CurvePoint",
    "PolicyResult",
    "PromotionBar",
    "ScenarioSplit",
    "Specialist",
    "SpecialistEvaluation",
    "SpecialistSource",
    "TraceUsability",
    "WarmStart",
    "WarmStartImitation",
    "base_plan",
    "champion_comparison",
    "choose_version",
    "compare",
    "document_specialist",
    "domain_scenarios",
    "evaluate_code_policies",
    "evaluate_model",
    "evaluate_served",
    "evaluate_specialist",
    "evaluation_plan",
    "evaluation_plot",
    "heldout_measurement",
    "heldout_plan_identity",
    "imitation_plot",
    "learning_curve_plots",
    "llm_policy",
    "measure_imitation",
    "promote_specialist",
    "promotion_bars",
    "record_heldout",
    "registered_name",
    "result_measurement",
    "select_specialist",
    "specialist_seat",
    "split_scenarios",
    "teacher_traces",
    "trace_summary",
    "trace_usability",
    "train_specialist",
    "warmstart",
]
