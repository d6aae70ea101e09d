"""The model out: a stage's compiled library as a callable, exported with its signature and a loader needing only TVM.

`Run.model(tuned_at)` returns a `TunedModel`. Called on numpy arrays it returns numpy arrays; called on torch tensors
(or anything that speaks DLPack) it hands them to TVM without a copy and returns torch tensors. `export(folder)` writes
the library, `signature.json` (inputs, outputs, target, where it was tuned and how fast it ran) and `load.py`, a
loader that imports TVM and numpy only, so the folder works where the workbench is not installed.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.errors import SpecError
from workbench.hardware import check_cpu, cpu_lacks
from workbench.noise import NO_TUNED_SCHEDULE, fmt_timing

LIBRARY = "model.so"
SIGNATURE = "signature.json"
LOADER = "load.py"

LOADER_SOURCE = '''"""Load the tuned model in this folder with TVM alone: `model = load(); outputs = model(x)`.

Written by the Tuning Workbench; needs `apache-tvm` and numpy, not the workbench. `x`: numpy arrays (or DLPack
tensors, e.g. torch) of the shapes and dtypes in signature.json. Run this file to check it on random input.
"""
import json
import os

import numpy as np
import tvm
from tvm import relax

HERE = os.path.dirname(os.path.abspath(__file__))


class Model:
    def __init__(self, folder=HERE, device=None):
        with open(os.path.join(folder, "signature.json")) as f:
            self.signature = json.load(f)
        check_cpu(self.signature["target"])
        kind = self.signature["device"]
        self.device = device or (tvm.cuda(0) if kind == "cuda" else tvm.cpu(0))
        self.vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(folder, "model.so")), self.device)

    def __call__(self, *inputs):
        out = self.vm["main"](*[to_tvm(x, self.device) for x in inputs])
        if hasattr(out, "numpy"):
            return out.numpy()
        outs = tuple(o.numpy() for o in out)  # a model of one output returns it, not a tuple of one
        return outs[0] if len(outs) == 1 else outs


def to_tvm(x, device):
    """numpy arrays are copied; DLPack tensors (torch) are shared where TVM takes them (64-byte aligned)."""
    if not isinstance(x, np.ndarray):
        try:
            return tvm.runtime.from_dlpack(x)
        except RuntimeError:  # not aligned as TVM needs: copy
            x = np.from_dlpack(x)
    return tvm.runtime.tensor(np.ascontiguousarray(x), device)


def load(folder=HERE, device=None):
    return Model(folder, device)


%CPU_CHECK%

if __name__ == "__main__":
    model = load()
    xs = [np.random.default_rng(0).standard_normal(i["shape"]).astype(i["dtype"]) for i in model.signature["inputs"]]
    ys = model(*xs)
    for y in ys if isinstance(ys, tuple) else (ys,):
        print(y.shape, y.dtype)
'''


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: its name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Signature:
    """What an exported model takes and gives, where it runs, and what it is (signature.json)."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    device: str  # cpu | cuda
    target: dict[str, Any]
    model: str
    run: str
    tuned_at: int
    verdict: str  # the stage's: faster, within noise, slower, no tuned schedule
    latency_ms: float | None = None
    untuned_ms: float | None = None
    kept: str = "tuned"  # "untuned": the stage kept the untuned build (no tuned schedule beat it, or tuning was slower)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["inputs"] = [asdict(t) | {"shape": list(t.shape)} for t in self.inputs]
        d["outputs"] = [asdict(t) | {"shape": list(t.shape)} for t in self.outputs]
        return d


class TunedModel:
    """A stage's compiled model, loaded on first call. `signature` says what it takes, `library` is its file."""

    def __init__(self, library: str, signature: Signature) -> None:
        self.library = library
        self.signature = signature
        self._vm: Any = None
        self._device: Any = None
        self._main: Any = None
        # (type, shape, dtype) of each input of the last call made with DLPack tensors (torch's) that passed the full
        # check: a call with inputs alike skips it (a model called in a loop pays microseconds, not tens of them)
        self._seen: tuple[tuple[Any, Any, Any], ...] | None = None

    def _load(self) -> None:
        import tvm
        from tvm import relax

        check_cpu(self.signature.target)
        self._device = tvm.cuda(0) if self.signature.device == "cuda" else tvm.cpu(0)
        self._vm = relax.VirtualMachine(tvm.runtime.load_module(self.library), self._device)
        self._main = self._vm["main"]

    def __call__(self, *inputs: Any) -> Any:
        """Run the model on numpy arrays (returns numpy arrays) or DLPack tensors such as torch's (returns torch
        tensors when torch is importable, else numpy arrays); a model of several outputs returns a tuple."""
        if self._vm is None:
            self._load()
        seen = self._seen
        if seen is not None and len(inputs) == len(seen) and all(
                type(x) is t and x.shape == shape and x.dtype == dtype for x, (t, shape, dtype) in zip(inputs, seen)):
            return _outputs(self._main(*[_from_dlpack(x.contiguous(), self._device) for x in inputs]), True)
        return self._checked(inputs)

    def _checked(self, inputs: tuple[Any, ...]) -> Any:
        """The call with every input checked against the signature (and remembered where all are torch tensors)."""
        import numpy as np
        import tvm

        if len(inputs) != len(self.signature.inputs):
            raise SpecError("inputs", f"the model takes {len(self.signature.inputs)} input(s) "
                                      f"({_shapes(self.signature.inputs)}), got {len(inputs)}")
        dlpack = not all(isinstance(x, np.ndarray) for x in inputs)
        args = []
        for x, spec in zip(inputs, self.signature.inputs):
            if isinstance(x, np.ndarray):
                _check(spec, tuple(x.shape), str(x.dtype))
                args.append(tvm.runtime.tensor(np.ascontiguousarray(x), self._device))
            elif hasattr(x, "__dlpack__"):
                _check(spec, tuple(int(d) for d in x.shape), str(x.dtype).removeprefix("torch."))
                args.append(_from_dlpack(x.contiguous() if hasattr(x, "contiguous") else x, self._device))
            else:
                raise SpecError("inputs", f"expected numpy arrays or DLPack tensors (torch), got {type(x).__name__}")
        out = self._main(*args)
        if all(hasattr(x, "__dlpack__") and hasattr(x, "contiguous") for x in inputs):
            self._seen = tuple((type(x), x.shape, x.dtype) for x in inputs)
        return _outputs(out, dlpack)

    def export(self, folder: str) -> str:
        """Write the library, signature.json and load.py into `folder` (created; an existing export there is
        replaced, anything else refused); returns the folder."""
        folder = os.path.abspath(folder)
        if os.path.exists(folder) and os.listdir(folder) and not os.path.exists(os.path.join(folder, SIGNATURE)):
            raise SpecError("out", f"{folder} exists and holds something other than an exported model; give a new "
                                   "or empty folder")
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{LIBRARY}.tmp{os.getpid()}")
        shutil.copyfile(self.library, tmp)
        os.replace(tmp, os.path.join(folder, LIBRARY))
        with open(os.path.join(folder, SIGNATURE), "w") as f:
            json.dump(self.signature.to_dict(), f, indent=1)
        with open(os.path.join(folder, LOADER), "w") as f:
            f.write(loader_source())
        return folder

    def describe(self) -> str:
        s = self.signature
        what = f"{s.model} tuned at {s.tuned_at} %"
        if s.kept == "untuned":
            why = "no tuned schedule beat the defaults" if s.verdict == NO_TUNED_SCHEDULE else "tuning was slower"
            what = f"{s.model}'s untuned build ({why} at {s.tuned_at} %)"
        speed = ""
        if s.latency_ms is not None:
            speed = f", {fmt_timing(s.latency_ms)}"
            if s.untuned_ms and s.kept != "untuned":
                speed += f" against {fmt_timing(s.untuned_ms)} untuned ({s.verdict})"
        return f"{what} ({s.device}{speed}): {_shapes(s.inputs)} -> {_shapes(s.outputs)}"

    def __repr__(self) -> str:
        return f"<TunedModel {self.describe()}>"


def loader_source() -> str:
    """load.py: the loader, with the check that this CPU runs the instructions the library was compiled for."""
    return LOADER_SOURCE.replace("%CPU_CHECK%", inspect.getsource(cpu_lacks) + "\n\n" + inspect.getsource(check_cpu))


def _shapes(specs: tuple[TensorSpec, ...]) -> str:
    return ", ".join(f"{'x'.join(map(str, t.shape))} {t.dtype}" for t in specs) or "nothing"


def _check(spec: TensorSpec, shape: tuple[int, ...], dtype: str) -> None:
    if tuple(shape) != tuple(spec.shape) or dtype != spec.dtype:
        raise SpecError("inputs", f"input {spec.name!r} must be {'x'.join(map(str, spec.shape))} {spec.dtype}, got "
                                  f"{'x'.join(map(str, shape))} {dtype}")


def _from_dlpack(x: Any, device: Any) -> Any:
    """A DLPack tensor (torch's) for TVM: shared where TVM takes it (64-byte aligned, on the model's device), else
    copied through numpy."""
    import tvm

    try:
        return tvm.runtime.from_dlpack(x)
    except RuntimeError:
        import numpy as np

        return tvm.runtime.tensor(np.ascontiguousarray(np.from_dlpack(x)), device)


def _to_torch(tensor: Any) -> Any:
    try:
        import torch
    except ImportError:
        return tensor.numpy()
    return torch.from_dlpack(tensor)


def _outputs(out: Any, dlpack: bool) -> Any:
    """The VM's result as the caller's kind: torch tensors for DLPack inputs, else numpy arrays; a tuple for
    several. A model of one output returns it, as the module it came from does: torch's importer gives every model
    a tuple of outputs, one-element tuples included."""
    if hasattr(out, "numpy"):
        return _to_torch(out) if dlpack else out.numpy()
    outs = tuple(_to_torch(o) if dlpack else o.numpy() for o in out)
    return outs[0] if len(outs) == 1 else outs


def output_specs(library: str, device: str, inputs: tuple[TensorSpec, ...],
                 target: dict[str, Any]) -> tuple[TensorSpec, ...]:
    """The outputs' shapes and dtypes, read by running the library once on zeros (refused, as a call would be, where
    this CPU lacks the instructions of the CPU `target` names)."""
    import numpy as np

    model = TunedModel(library, Signature(inputs, (), device, target, "", "", 0, ""))
    out = model(*[np.zeros(t.shape, t.dtype) for t in inputs])
    outs = out if isinstance(out, tuple) else (out,)
    return tuple(TensorSpec(f"output{i}" if len(outs) > 1 else "output", tuple(o.shape), str(o.dtype))
                 for i, o in enumerate(outs))
