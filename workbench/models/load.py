"""Turn a sample-model name or an .onnx path into a tunable Relax module.

A loaded module has one function, `main`, with exactly one input tensor, its parameters bound as
constants and only static shapes (MetaSchedule needs them). TVM and onnx are imported lazily, so
`list_models()` and `check_model()` stay cheap.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sample_models
from workbench.models import torch_module
from workbench.models.onnx_file import (
    Shape,
    check_supported_ops,
    convert,
    fmt_shape,
    fold,
    onnx_path,
    onnx_signature,
    read_onnx,
)
from workbench.spec import SpecError

if TYPE_CHECKING:
    import tvm

SMALL_SUFFIX = "-small"


@dataclass(frozen=True)
class ModelInfo:
    """A sample model as listed to users."""

    name: str
    description: str
    input_shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for task extraction: `mod["main"]` takes one input called `input_name`."""

    name: str
    mod: tvm.IRModule
    input_name: str
    input_shape: tuple[int, ...]
    dtype: str
    note: str = ""  # what was done to the model to make it tunable (an ONNX model folded for its input shape)


# --------------------------------------------------------------------------------------------
# public API


def list_models() -> list[ModelInfo]:
    """The sample models, each in its full and its small variant (tiny sizes, tuned in seconds)."""
    infos = []
    for key in sample_models.MODELS:
        module = sample_models.get(key)
        full, small = module.INPUT_SHAPES["full"], module.INPUT_SHAPES["small"]
        infos.append(ModelInfo(key, module.DESCRIPTION, tuple(full)))
        note = f"{key} at tiny sizes (input {'x'.join(map(str, small))}): tunes in seconds, to try the workbench out"
        infos.append(ModelInfo(key + SMALL_SUFFIX, note, tuple(small)))
    return infos


def check_model(name_or_path: str, input_shape: Shape | None = None) -> None:
    """Validate a model name, .onnx path or saved PyTorch model (and `input_shape`) without importing TVM."""
    input_shape = _check_shape_value(input_shape)
    sample = _sample(name_or_path)
    if sample is not None:
        _sample_shape(name_or_path, sample[0], sample[1], input_shape)
        return
    if str(name_or_path).endswith(torch_module.SUFFIX):
        _saved_shape(torch_module.read_meta(name_or_path), input_shape)
        return
    path = onnx_path(name_or_path, [info.name for info in list_models()])
    onnx_signature(read_onnx(path, load_external_data=False), path, input_shape)


def load_model(name_or_path: str, input_shape: Shape | None = None, precision: str = "fp32") -> LoadedModel:
    """Build a sample model or import an ONNX file, at `precision` (`options.PRECISIONS`); raises SpecError naming
    the bad field. Every process of a run loads it so, so that the tasks it tunes are the ones it compiles."""
    input_shape = _check_shape_value(input_shape)
    sample = _sample(name_or_path)
    if sample is not None:
        model = _load_sample(name_or_path, *sample, input_shape)
    elif str(name_or_path).endswith(torch_module.SUFFIX):
        model = _load_saved(name_or_path, input_shape)
    else:
        model = _load_onnx(onnx_path(name_or_path, [info.name for info in list_models()]), input_shape)
    return in_precision(model, precision)


FP16_NOTE = ("fp16: matmuls and convolutions run in float16 with float32 accumulation, the other operators in "
             "float16 (Relax's ToMixedPrecision); inputs and outputs stay float32, and the outputs are checked "
             "against the float32 build at float16 tolerances")


def in_precision(model: LoadedModel, precision: str) -> LoadedModel:
    """`model` at `precision`: fp16 through Relax's ToMixedPrecision (float32 accumulation, the interface kept)."""
    if precision == "fp32":
        return model
    if precision != "fp16":
        raise SpecError("precision", f"must be one of fp32, fp16, got {precision!r}")
    if model.dtype != "float32":
        raise SpecError("precision", f"fp16 applies to a float32 model; {model.name} takes {model.dtype}")
    from tvm import relax

    mod = relax.transform.ToMixedPrecision(out_dtype="float32")(_clip_as_min_max(model.mod))
    note = "; ".join(n for n in (model.note, FP16_NOTE) if n)
    return replace(model, mod=mod, note=note)


def _clip_as_min_max(mod: tvm.IRModule) -> tvm.IRModule:
    """`R.clip(x, lo, hi)` on a float32 tensor with constant bounds (ReLU6: torch's importer gives its bounds as
    PrimValues, which ToMixedPrecision cannot type) as `minimum(maximum(x, lo), hi)` on float32 constants: the same
    values, in operators the pass converts. Other clips are left as they are."""
    import tvm
    from tvm import relax
    from tvm.ir.prim.expr import FloatImm, IntImm
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    def number(bound: object) -> float | None:
        return float(bound.value) if isinstance(bound, (IntImm, FloatImm)) else None  # a symbolic bound: None

    def as_min_max(call: relax.Call, _matches: dict) -> relax.Expr:
        x, lo, hi = call.args[0], number(call.args[1]), number(call.args[2])
        if lo is None or hi is None:
            return call
        return relax.op.minimum(relax.op.maximum(x, relax.const(lo, "float32")), relax.const(hi, "float32"))

    clip = is_op("relax.clip")(wildcard().has_dtype("float32"), wildcard(), wildcard())
    out = tvm.IRModule(dict(mod.functions), attrs=mod.attrs, global_infos=mod.global_infos)
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            out[gv] = rewrite_call(clip, as_min_max, func)
    return out


# --------------------------------------------------------------------------------------------
# sample models


def _sample(name: str) -> tuple[str, str] | None:
    """'resnet18-small' -> ('resnet18', 'small'); None when `name` is not a sample model."""
    if name in sample_models.MODELS:
        return name, "full"
    if name.endswith(SMALL_SUFFIX) and name[: -len(SMALL_SUFFIX)] in sample_models.MODELS:
        return name[: -len(SMALL_SUFFIX)], "small"
    return None


def _sample_shape(name: str, key: str, variant: str, input_shape: Shape | None) -> Shape:
    shape = tuple(sample_models.get(key).INPUT_SHAPES[variant])
    if input_shape is None:
        return shape
    if len(input_shape) != len(shape) or tuple(input_shape[1:]) != shape[1:]:
        raise SpecError(
            "input_shape",
            f"sample model {name!r} takes another batch only (its first dimension): N,{fmt_shape(shape[1:])} "
            f"(its own is {fmt_shape(shape)}), got {fmt_shape(input_shape)}",
        )
    return tuple(input_shape)


def _load_sample(name: str, key: str, variant: str, input_shape: Shape | None) -> LoadedModel:
    shape = _sample_shape(name, key, variant, input_shape)
    own = tuple(sample_models.get(key).INPUT_SHAPES[variant])
    mod = sample_models.get(key).build(variant, None if shape == own else shape[0])
    return LoadedModel(name, mod, _main_input(mod, name).name, shape, "float32")


# --------------------------------------------------------------------------------------------
# a PyTorch model, converted and saved where it was handed in (torch_module.py)


def _saved_shape(meta: dict[str, Any], input_shape: Shape | None) -> Shape:
    shape = tuple(int(d) for d in meta["input_shape"])
    if input_shape is not None and tuple(input_shape) != shape:
        raise SpecError("input_shape", f"{meta['name']} was exported for input {fmt_shape(shape)}; export it again "
                                       f"for {fmt_shape(input_shape)} (got it here, where it cannot change)")
    return shape


def _load_saved(path: str, input_shape: Shape | None) -> LoadedModel:
    meta = torch_module.read_meta(path)
    shape = _saved_shape(meta, input_shape)
    mod = torch_module.load_module(path)
    _check_static(mod, meta["name"])
    return LoadedModel(meta["name"], mod, _main_input(mod, meta["name"]).name, shape, str(meta["dtype"]))


# --------------------------------------------------------------------------------------------
# ONNX (reading, checking and converting are in onnx_file.py)


def _load_onnx(path: Path, input_shape: Shape | None) -> LoadedModel:
    """Convert the model as it is; where its shapes are computed from the input's (a Reshape whose shape comes from
    Shape -> Gather -> ...), which TVM's frontend cannot take, fold it for the input shape first and say so."""
    model = read_onnx(path, load_external_data=True)
    check_supported_ops(model)
    name, shape, dtype = onnx_signature(model, path, input_shape)
    try:
        mod = convert(model, name, shape, dtype)
        _check_static(mod, path.name)
        note = ""
    except SpecError as first:
        try:
            model, note = fold(model, shape)
            mod = convert(model, name, shape, dtype)
            _check_static(mod, path.name)
        except SpecError as again:
            raise SpecError("model", f"{first.message}; folding the model for input {fmt_shape(shape)} did not help "
                                     f"({again.message})") from None
    param = _main_input(mod, path.name)
    return LoadedModel(path.stem, mod, param.name, shape, dtype, note)


# --------------------------------------------------------------------------------------------
# checks on the Relax module


def _main_input(mod: tvm.IRModule, model: str) -> Any:
    """The single parameter of `main`; SpecError if there is no main or it takes several inputs."""
    names = [gv.name_hint for gv in mod.get_global_vars()]
    if "main" not in names:
        raise SpecError("model", f"model {model!r} converted to functions {names}, but no 'main'")
    params = list(mod["main"].params)
    if len(params) != 1:
        raise SpecError(
            "model",
            f"model {model!r} converted to a 'main' with {len(params)} inputs "
            f"({', '.join(p.name for p in params)}); exactly one input tensor is supported",
        )
    return params[0]


def _check_static(mod: tvm.IRModule, model: str) -> None:
    """SpecError naming the first tensor (and the op producing it) whose shape is not static."""
    from tvm import relax

    func = mod["main"]
    for block in func.body.blocks:
        for binding in block.bindings:
            if _is_static(binding.var.ty):
                continue
            value = binding.value
            op = getattr(value.op, "name", None) if isinstance(value, relax.Call) else None
            source = f" produced by operator {op.removeprefix('relax.')!r}" if op else ""
            raise SpecError(
                "model",
                f"model {model!r} has a data-dependent or symbolic shape: tensor "
                f"{binding.var.name!r}{source} has type {binding.var.ty}; MetaSchedule needs static "
                "shapes, so replace that operator with one whose output shape does not depend on the data",
            )
    if not _is_static(func.body.body.ty):
        raise SpecError("model", f"model {model!r} returns a symbolic shape: {func.body.body.ty}")


def _is_static(ty: Any) -> bool:
    from tvm import relax, tirx

    if isinstance(ty, relax.TensorType):
        shape = ty.shape
        return shape is not None and all(isinstance(v, tirx.IntImm) for v in shape.values)
    if isinstance(ty, relax.TupleType):
        return all(_is_static(field) for field in ty.fields)
    if isinstance(ty, relax.ShapeType):
        return ty.values is not None and all(isinstance(v, tirx.IntImm) for v in ty.values)
    return True


# --------------------------------------------------------------------------------------------
# small helpers


def _check_shape_value(input_shape: Any) -> Shape | None:
    """`input_shape` as a tuple of positive ints (None stays None)."""
    if input_shape is None:
        return None
    try:
        dims = tuple(input_shape)
    except TypeError:
        dims = ()
    positive = (isinstance(d, numbers.Integral) and not isinstance(d, bool) and d > 0 for d in dims)
    if not dims or not all(positive):
        raise SpecError(
            "input_shape", f"must be positive integers such as 1,3,224,224, got {input_shape!r}"
        )
    return tuple(int(d) for d in dims)
