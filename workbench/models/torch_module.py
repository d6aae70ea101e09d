"""PyTorch in: a `torch.nn.Module` (with example inputs) or an `ExportedProgram`, through `torch.export` and TVM's
`relax.frontend.torch.from_exported_program`, saved as a model file the run's processes load without torch.

The conversion runs once, in the process that holds the module (the notebook's kernel). It writes a folder under
`<home>/models/<name>-<hash>/`: `model.relax.json` (the Relax module with its weights bound, and its input's name,
shape and dtype) and `exported.pt2` (the ExportedProgram, which the PyTorch baseline runs eagerly). The spec then
names `model.relax.json`, a JSON file like any other, so the tuning processes need no torch (`procs.WITHOUT_TORCH`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from workbench.errors import SpecError
from workbench.spec import parse_shape, workbench_home

SUFFIX = ".relax.json"
FORMAT = "workbench-relax/1"
EXPORTED = "exported.pt2"


def is_torch_model(value: Any) -> bool:
    """Whether `value` is a torch.nn.Module or an ExportedProgram (without importing torch where it is not loaded)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "nn"):
        return False
    return isinstance(value, torch.nn.Module) or isinstance(value, torch.export.ExportedProgram)


def example_from_shape(input_shape: Any, dtype: str = "float32") -> tuple[Any, ...]:
    """Example inputs for a module given only its input's shape: one tensor of standard-normal values."""
    import torch

    if not input_shape:
        raise SpecError("input_shape", "a torch.nn.Module needs its input's shape (e.g. 1,3,224,224) or example "
                                       "inputs, so that torch.export can trace it")
    return (torch.randn(*parse_shape(input_shape), dtype=getattr(torch, dtype)),)


def save_torch_model(model: Any, example_inputs: tuple[Any, ...] | None = None, name: str | None = None,
                     home: str | None = None, input_shape: Any = None) -> str:
    """Export `model` (a torch.nn.Module, put in eval mode, with `example_inputs`; or an ExportedProgram), convert it
    to Relax and save it; returns the path of its `model.relax.json`, what `TuneSpec.model` takes.

    SpecError, naming `model`, with the operator or construct torch.export or TVM's importer cannot take."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    if isinstance(model, torch.export.ExportedProgram):
        program = model
        name = name or "exported"
    elif isinstance(model, torch.nn.Module):
        if not example_inputs:  # traced on a random tensor of the input's shape (SpecError without one)
            example_inputs = example_from_shape(input_shape)
        name = name or type(model).__name__
        model.eval()
        try:
            program = torch.export.export(model, tuple(example_inputs))
        except Exception as err:  # noqa: BLE001 - torch.export's many error types become one line naming the model
            raise SpecError("model", f"torch.export cannot take {name}: {_first_line(err)}; see the torch.export "
                                     "docs on unsupported Python constructs (data-dependent control flow)") from None
    else:
        raise SpecError("model", f"expected a torch.nn.Module or an ExportedProgram, got {type(model).__name__}")
    try:
        mod = from_exported_program(program, keep_params_as_input=False)
    except Exception as err:  # noqa: BLE001 - the importer's errors name the operator; one line says which
        listed = re.search(r"Unsupported function types \[([^\]]*)\]", str(err))
        ops = re.findall(r"[\w.]+", listed.group(1)) if listed else re.findall(r"aten\.[\w.]+", str(err))
        what = (f"operator{'s' * (len(ops) > 1)} {', '.join('aten.' + o.removeprefix('aten.') for o in ops)}"
                if ops else _first_line(err))
        raise SpecError("model", f"TVM's PyTorch importer cannot convert {name}: {what}; try replacing it with "
                                 "supported operators, or export the model to ONNX") from None
    params = list(mod["main"].params)
    if len(params) != 1:
        raise SpecError("model", f"{name} takes {len(params)} inputs; the workbench tunes models of exactly one "
                                 "input tensor")
    shape = [int(d) for d in params[0].ty.shape.values]
    dtype = str(params[0].ty.dtype)
    import tvm

    text = tvm.ir.save_json(mod)
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40] or "model"
    folder = Path(home or workbench_home()) / "models" / f"{safe}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe}{SUFFIX}"
    if not path.exists():
        meta = {"format": FORMAT, "name": safe, "source": f"torch {type(model).__name__} via torch.export",
                "input_name": params[0].name, "input_shape": shape, "dtype": dtype}
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({**meta, "module": text}))
        os.replace(tmp, path)
        torch.export.save(program, str(folder / EXPORTED))
    return str(path)


def read_meta(path: str | Path) -> dict[str, Any]:
    """A saved model's name, input and source (without its module); SpecError naming `model` when it is no such
    file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise SpecError("model", f"cannot read {path}: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SpecError("model", f"{path} is not a model the workbench saved (format {FORMAT})")
    return {k: v for k, v in data.items() if k != "module"}


def load_module(path: str | Path) -> Any:
    """The saved Relax module."""
    import tvm

    with open(path) as f:
        return tvm.ir.load_json(json.load(f)["module"])


def exported_program_path(path: str | Path) -> str | None:
    """The ExportedProgram saved beside a model file (what the PyTorch baseline runs), if there is one."""
    pt2 = Path(path).parent / EXPORTED
    return str(pt2) if pt2.exists() else None


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]
