"""What a call of the exported model costs from Python, beside PyTorch eager: a model's untuned build, compiled with
Relax's CUDA-graph capture off and on, called through `TunedModel` (as `Run.model` and the exported loader call it)
and through the VM's function directly, timed side by side (`bench.side_by_side`) with PyTorch eager.

    python -m bench.call_overhead --model mlp:1024 --precision fp16 --out DIR/call_overhead.json

On a GPU (CUDA events) the gap between `tuned` and `vm` is the workbench's own per-call cost, and the one between the
builds with and without CUDA graphs is the launches' host cost; on a CPU it times the wall clock (no graphs).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from bench.h200_vs_pytorch import model_input, pytorch_contenders
from bench.side_by_side import Contender, cpu_timer, cuda_timer, interleaved, summary


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.call_overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mlp:1024")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from workbench.hardware import detect, target_spec
    from workbench.models.load import load_model
    from workbench.results.compile import compile_with_database
    from workbench.runs.model import Signature, TensorSpec, TunedModel, _from_dlpack
    from workbench.tuning.intrinsics import pass_config

    key, _, shape = model_input(args.model)
    tspec = target_spec(args.target, detect())
    target, device = tspec.build(), "cuda" if tspec.kind == "cuda" else "cpu"
    model = load_model(key, shape, args.precision)
    work = tempfile.mkdtemp(prefix="call-overhead-")
    inputs = (TensorSpec("input", tuple(model.input_shape), model.dtype),)
    contenders, x = pytorch_contenders(args.model, args.precision, device)
    for graph in (False, True) if device == "cuda" else (False,):
        lib = compile_with_database(model.mod, target, None, os.path.join(work, f"graph{int(graph)}.so"),
                                    cuda_graph=graph, tir_config=pass_config(tspec.kind, args.precision))
        built = TunedModel(lib, Signature(inputs, (), device, {}, key, "", 100, ""))
        built(x)  # loads the VM
        tag = "_graph" if graph else ""
        contenders[f"tuned{tag}"] = Contender(built, x)
        if not graph:
            main_fn, arg = built._main, _from_dlpack(x, built._device)  # noqa: SLF001 - the VM call, no wrapper
            contenders["vm"] = Contender(lambda a, f=main_fn: f(a), arg)
    times = interleaved(contenders, cuda_timer if device == "cuda" else cpu_timer, args.rounds)
    got = {"model": args.model, "precision": args.precision, "device": device,
           **summary(times, "tuned", "vm")}
    if "tuned_graph" in times:
        got["graph_vs_no_graph"] = summary(times, "tuned_graph", "tuned")["paired"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(got, indent=1) + "\n")
    print(json.dumps(got), flush=True)


if __name__ == "__main__":
    main()
