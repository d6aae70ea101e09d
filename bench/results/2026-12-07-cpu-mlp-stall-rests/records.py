"""What `kernels.py` and `topk.py` share: a finished run's merged records, and one record built alone with inputs to
time it on (the tuner's argument shapes, standard-normal values)."""
import json

import numpy as np
import tvm
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms

from workbench.hardware import TargetSpec


def merged(run: str):
    """The run's merged database of its 100 % stage, and the target it was tuned for."""
    with open(f"{run}/plan.json") as f:
        target = TargetSpec.from_dict(json.load(f)["target"]).build()
    m = f"{run}/stages/100/merged"
    db = ms.database.JSONDatabase(f"{m}/database_workload.json", f"{m}/database_tuning_record.json",
                                  allow_missing=False)
    return db, target


def built(rec, target, dev):
    """`rec` applied to its workload and compiled alone: (the module to time, its function's name, its inputs)."""
    sch = Schedule(rec.workload.mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    lib = tvm.compile(sch.mod, target=target)
    name = sch.mod.get_global_vars()[0].name_hint
    args = [tvm.runtime.tensor(np.random.default_rng(0).standard_normal([int(d) for d in a.shape]).astype(str(a.dtype)),
                               dev) for a in ms.arg_info.ArgInfo.from_prim_func(sch.mod[name])]
    return getattr(lib, "mod", lib), name, args
