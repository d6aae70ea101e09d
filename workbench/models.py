"""Turn a sample-model name or an .onnx path into a tunable Relax module.

A loaded module has one function, `main`, with exactly one input tensor, its parameters bound as
constants and only static shapes (MetaSchedule needs them). TVM and onnx are imported lazily, so
`list_models()` and `check_model()` stay cheap.
"""
from __future__ import annotations

import numbers
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sample_models
from workbench.spec import SpecError

if TYPE_CHECKING:
    import onnx
    import tvm

SMALL_SUFFIX = "-small"
ONNX_EXTRA_HINT = (
    "loading ONNX files needs the 'onnx' package: pip install 'tuning-workbench[onnx]'"
)

Shape = tuple[int, ...]
Dim = int | str | None  # an ONNX dimension: a size, a symbolic name, or unknown


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
    mod: "tvm.IRModule"
    input_name: str
    input_shape: tuple[int, ...]
    dtype: str


# --------------------------------------------------------------------------------------------
# public API


def list_models() -> list[ModelInfo]:
    """The sample models, each in its full and its small (test) variant."""
    infos = []
    for key in sample_models.MODELS:
        module = sample_models.get(key)
        full, small = module.INPUT_SHAPES["full"], module.INPUT_SHAPES["small"]
        infos.append(ModelInfo(key, module.DESCRIPTION, tuple(full)))
        note = f"small variant of {key} for tests (input {'x'.join(map(str, small))}, tiny sizes)"
        infos.append(ModelInfo(key + SMALL_SUFFIX, note, tuple(small)))
    return infos


def check_model(name_or_path: str, input_shape: Shape | None = None) -> None:
    """Validate a model name or .onnx path (and `input_shape`) without importing TVM."""
    input_shape = _check_shape_value(input_shape)
    sample = _sample(name_or_path)
    if sample is not None:
        _sample_shape(name_or_path, sample[0], sample[1], input_shape)
        return
    path = _onnx_path(name_or_path)
    _onnx_signature(_read_onnx(path, load_external_data=False), path, input_shape)


def load_model(name_or_path: str, input_shape: Shape | None = None) -> LoadedModel:
    """Build a sample model or import an ONNX file; raises SpecError naming the bad field."""
    input_shape = _check_shape_value(input_shape)
    sample = _sample(name_or_path)
    if sample is not None:
        return _load_sample(name_or_path, *sample, input_shape)
    return _load_onnx(_onnx_path(name_or_path), input_shape)


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
    if input_shape is not None and input_shape != shape:
        raise SpecError(
            "input_shape",
            f"sample model {name!r} has the fixed input shape {_fmt(shape)}, "
            f"got {_fmt(input_shape)} (leave the shape out, or use a -small variant)",
        )
    return shape


def _load_sample(name: str, key: str, variant: str, input_shape: Shape | None) -> LoadedModel:
    shape = _sample_shape(name, key, variant, input_shape)
    mod = sample_models.get(key).build(variant)
    return LoadedModel(name, mod, _main_input(mod, name).name, shape, "float32")


# --------------------------------------------------------------------------------------------
# ONNX: reading and checking the file (onnx only, no TVM)


def _onnx_path(name_or_path: str) -> Path:
    """The .onnx file `name_or_path` names; SpecError for unknown names and missing files."""
    if not str(name_or_path).lower().endswith(".onnx"):
        names = ", ".join(info.name for info in list_models())
        raise SpecError(
            "model",
            f"unknown model {name_or_path!r}; sample models are: {names}, "
            "or give a path to an .onnx file",
        )
    path = Path(os.path.expanduser(name_or_path))
    if not path.exists():
        raise SpecError("model", f"ONNX file {str(path)!r} does not exist")
    if not path.is_file():
        raise SpecError("model", f"ONNX path {str(path)!r} is not a file")
    if not os.access(path, os.R_OK):
        raise SpecError("model", f"ONNX file {str(path)!r} is not readable (permission denied)")
    return path


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise SpecError("model", ONNX_EXTRA_HINT) from None
    return onnx


def _read_onnx(path: Path, load_external_data: bool) -> onnx.ModelProto:
    """Parse `path`; SpecError('model', 'cannot read ONNX file ...: why') when it is not a model."""
    onnx = _import_onnx()

    def unreadable(reason: str) -> SpecError:
        return SpecError("model", f"cannot read ONNX file {str(path)!r}: {reason}")

    if path.stat().st_size == 0:
        raise unreadable("the file is empty")
    try:
        model = onnx.load(str(path), load_external_data=load_external_data)
    except Exception as exc:  # protobuf DecodeError, missing external data, OSError, ...
        raise unreadable(f"{_short(exc)} (truncated, or not an ONNX model?)") from None
    if not model.HasField("graph") or not model.graph.node:
        raise unreadable("it holds no ONNX graph (not an ONNX model, or truncated?)")
    if not model.opset_import:
        raise unreadable("it declares no opset (truncated, or not an ONNX model?)")
    return model


def _onnx_signature(
    model: onnx.ModelProto, path: Path, input_shape: Shape | None
) -> tuple[str, Shape, str]:
    """(input name, static input shape, dtype) of a one-input model; `input_shape` fills gaps."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    initializers |= {t.values.name for t in graph.sparse_initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        names = ", ".join(repr(i.name) for i in inputs) or "none"
        raise SpecError(
            "model",
            f"ONNX model {path.name!r} has {len(inputs)} inputs ({names}); the workbench tunes models "
            "with exactly one input tensor (fold the others into constants before exporting)",
        )
    value = inputs[0]
    if value.type.WhichOneof("value") != "tensor_type":
        raise SpecError("model", f"ONNX input {value.name!r} is not a tensor (only tensors are)")
    tensor_type = value.type.tensor_type
    dims = [_dim(d) for d in tensor_type.shape.dim] if tensor_type.HasField("shape") else None
    shape = _resolve_shape(value.name, dims, input_shape)
    return value.name, shape, _onnx_dtype(value.name, tensor_type.elem_type)


def _dim(dim: Any) -> Dim:
    if dim.HasField("dim_value") and dim.dim_value > 0:
        return int(dim.dim_value)
    return dim.dim_param or None


def _resolve_shape(name: str, dims: list[Dim] | None, input_shape: Shape | None) -> Shape:
    """The model's static shape, or `input_shape` where the model leaves dimensions open."""
    if dims is None:  # unknown rank
        if input_shape is None:
            raise SpecError(
                "input_shape",
                f"input {name!r} has no declared shape; give it, e.g. --input-shape 1,3,224,224",
            )
        return input_shape
    shown = "[" + ",".join(str(d) if d is not None else "?" for d in dims) + "]"
    if input_shape is None:
        if all(isinstance(d, int) for d in dims):
            return tuple(dims)  # type: ignore[arg-type]
        example = ",".join(str(d) if isinstance(d, int) else "1" for d in dims)
        raise SpecError(
            "input_shape",
            f"input {name!r} has dynamic dimensions {shown}; give the shape, "
            f"e.g. --input-shape {example}",
        )
    if len(input_shape) != len(dims):
        raise SpecError(
            "input_shape",
            f"input {name!r} has rank {len(dims)} {shown}, but the given shape "
            f"{_fmt(input_shape)} has rank {len(input_shape)}",
        )
    for axis, (want, got) in enumerate(zip(dims, input_shape)):
        if isinstance(want, int) and want != got:
            raise SpecError(
                "input_shape",
                f"input {name!r} has shape {shown}: dimension {axis} is fixed at {want}, got {got}",
            )
    return input_shape


def _onnx_dtype(name: str, elem_type: int) -> str:
    onnx = _import_onnx()
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        type_name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "undefined"
        raise SpecError("model", f"ONNX input {name!r} has unsupported type {type_name}") from None


# --------------------------------------------------------------------------------------------
# ONNX: conversion with TVM's frontend


def _load_onnx(path: Path, input_shape: Shape | None) -> LoadedModel:
    model = _read_onnx(path, load_external_data=True)
    _check_supported_ops(model)
    name, shape, dtype = _onnx_signature(model, path, input_shape)
    mod = _convert(model, name, shape, dtype)
    param = _main_input(mod, path.name)
    _check_static(mod, path.name)
    return LoadedModel(path.stem, mod, param.name, shape, dtype)


def _check_supported_ops(model: onnx.ModelProto) -> None:
    """SpecError naming the graph's operators that TVM's ONNX frontend has no converter for."""
    try:
        from tvm.relax.frontend.onnx import onnx_frontend

        # Constant and If are handled by the frontend itself, outside the converter map.
        known = set(onnx_frontend._get_convert_map()) | {"Constant", "If"}
    except (ImportError, AttributeError):  # private API moved: from_onnx reports it instead
        return
    missing = {}
    for node in model.graph.node:
        if node.op_type not in known:
            missing.setdefault(node.op_type, node.domain)
    if missing:
        raise _unsupported_ops_error(missing)


def _unsupported_ops_error(ops: dict[str, str]) -> SpecError:
    named = ", ".join(
        repr(op) + (f" (domain {dom!r})" if dom not in ("", "ai.onnx") else "") for op, dom in ops.items()
    )
    noun, verb, it = ("operator", "is", "it") if len(ops) == 1 else ("operators", "are", "them")
    return SpecError(
        "model",
        f"ONNX {noun} {named} {verb} not supported by TVM's ONNX frontend; re-export the model without "
        f"{it} (e.g. with a different opset or standard-op replacements), or pick a sample model",
    )


def _convert(model: onnx.ModelProto, name: str, shape: Shape, dtype: str) -> tvm.IRModule:
    """from_onnx with static input shape, then inference-only decomposition (batch norm etc.)."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # renaming and checker warnings from the frontend
            mod = from_onnx(model, shape_dict={name: list(shape)}, dtype_dict={name: dtype})
    except tvm.error.OpNotImplemented as exc:
        ops = str(exc).rsplit(":", 1)[-1]
        names = [op.strip() for op in ops.split(",") if op.strip()]
        raise _unsupported_ops_error(dict.fromkeys(names, "")) from None
    except Exception as exc:  # a converter rejected an attribute, a dynamic input, ...
        op = _failing_onnx_op(exc)
        where = f"ONNX operator {op!r}" if op else "the model"
        raise SpecError(
            "model", f"TVM's ONNX frontend could not convert {where}: {_short(exc)}"
        ) from None
    passes = [relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings()]
    return tvm.transform.Sequential(passes)(mod)


def _failing_onnx_op(exc: BaseException) -> str | None:
    """The op_type the frontend was converting when `exc` was raised (from its traceback)."""
    tb = exc.__traceback__
    op = None
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_construct_nodes":
            op = tb.tb_frame.f_locals.get("op_name", op)
        tb = tb.tb_next
    return op if isinstance(op, str) else None


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


def _fmt(shape: Shape) -> str:
    return ",".join(str(d) for d in shape)


def _short(exc: BaseException, limit: int = 300) -> str:
    """'Type: last line of the message', trimmed (TVM errors carry C++ tracebacks)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
