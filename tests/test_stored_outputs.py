"""Asset outputs stored by earlier runs keep loading after a module split.

Dagster's IO manager pickles each asset's output, and a pickle names every class by the module it was defined
in. When models/socialrl/stage2.py and models/yoao/seed.py became packages, their classes moved to
submodules; the packages re-export them, so a pickle that names the old path resolves to the same class and a
downstream asset (or `run_stage2`'s read-back of a finished run) still loads what an earlier run stored."""

from __future__ import annotations

import pickle

import pytest

from models.socialrl.stage2 import cascade, mopd, scores, transfer, unified
from models.yoao.seed import dataset, selection, traces, training

# (module the class used to live in, class name, the module it lives in now)
MOVED = [
    ("models.socialrl.stage2", "PolicyScores", scores),
    ("models.socialrl.stage2", "TransferCell", transfer),
    ("models.socialrl.stage2", "TransferMatrix", transfer),
    ("models.socialrl.stage2", "TransferMatrixResult", transfer),
    ("models.socialrl.stage2", "OrderScore", cascade),
    ("models.socialrl.stage2", "CascadeOrder", cascade),
    ("models.socialrl.stage2", "CandidateScore", cascade),
    ("models.socialrl.stage2", "CascadeStage", cascade),
    ("models.socialrl.stage2", "CascadeResult", cascade),
    ("models.socialrl.stage2", "MOPDStudentResult", mopd),
    ("models.socialrl.stage2", "UnifiedRow", unified),
    ("models.socialrl.stage2", "UnifiedEvaluation", unified),
    ("models.yoao.seed", "TeacherChoice", selection),
    ("models.yoao.seed", "CandidateRow", selection),
    ("models.yoao.seed", "TeacherSelection", selection),
    ("models.yoao.seed", "TraceSet", traces),
    ("models.yoao.seed", "SeedDataset", dataset),
    ("models.yoao.seed", "TrainedAdapter", training),
    ("models.yoao.seed", "FormatWarmup", training),
]


@pytest.mark.parametrize(("old_module", "name", "new_module"), MOVED)
def test_a_pickle_naming_the_old_module_loads_the_moved_class(old_module: str, name: str, new_module: object) -> None:
    # Protocol 0's GLOBAL opcode, exactly what a pickle written before the split holds for the class.
    stored = f"c{old_module}\n{name}\n.".encode()
    assert pickle.loads(stored) is getattr(new_module, name)
