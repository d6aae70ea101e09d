"""ONNX files: reading and checking one (onnx only, no TVM), and converting it with TVM's frontend.

`models.load_model` is the entry point; errors are SpecErrors naming the field at fault.
"""
from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.spec import SpecError

if TYPE_CHECKING:
    import onnx
    import tvm

ONNX_EXTRA_HINT = (
    "loading ONNX files needs the 'onnx' package: pip install 'tuning-workbench[onnx]'"
)

Shape = tuple[int, ...]
Dim = int | str | None  # an ONNX dimension: a size, a symbolic name, or unknown


def onnx_path(name_or_path: str, sample_names: list[str]) -> Path:
    """The .onnx file `name_or_path` names; SpecError for unknown names (listing the sample models) and
    missing files."""
    if not str(name_or_path).lower().endswith(".onnx"):
        names = ", ".join(sample_names)
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


def read_onnx(path: Path, load_external_data: bool) -> onnx.ModelProto:
    """Parse `path`; SpecError('model', 'cannot read ONNX file ...: why') when it is not a model."""
    onnx = _import_onnx()

    def unreadable(reason: str) -> SpecError:
        return SpecError("model", f"cannot read ONNX file {str(path)!r}: {reason}")

    if path.stat().st_size == 0:
        raise unreadable("the file is empty")
    try:
        model = onnx.load(str(path), load_external_data=load_external_data)
    except Exception as exc:  # noqa: BLE001 - protobuf DecodeError, missing external data, OSError, ...: unreadable
        raise unreadable(f"{_short(exc)} (truncated, or not an ONNX model?)") from None
    if not model.HasField("graph") or not model.graph.node:
        raise unreadable("it holds no ONNX graph (not an ONNX model, or truncated?)")
    if not model.opset_import:
        raise unreadable("it declares no opset (truncated, or not an ONNX model?)")
    return model


def onnx_signature(
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


def example_shape(dims: list[Dim]) -> str:
    """A shape to suggest for a model with open dimensions: the fixed sizes kept, a leading batch dimension 1,
    and an image's open height and width (rank 4 with 1 or 3 channels first or last) 224, other open ones 1."""
    out = [d if isinstance(d, int) else None for d in dims]
    if out and out[0] is None:
        out[0] = 1
    if len(dims) == 4:
        spatial = (2, 3) if dims[1] in (1, 3) else (1, 2) if dims[3] in (1, 3) else ()
        for axis in spatial:
            out[axis] = 224 if out[axis] is None else out[axis]
    return ",".join(str(1 if d is None else d) for d in out)


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
        open_dims = ", ".join(str(d) if d else f"dimension {i}" for i, d in enumerate(dims) if not isinstance(d, int))
        raise SpecError(
            "input_shape",
            f"input {name!r} has dynamic dimensions {shown} ({open_dims} open); give the shape, "
            f"e.g. --input-shape {example_shape(dims)}",
        )
    if len(input_shape) != len(dims):
        raise SpecError(
            "input_shape",
            f"input {name!r} has rank {len(dims)} {shown}, but the given shape "
            f"{fmt_shape(input_shape)} has rank {len(input_shape)}",
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
    except Exception:  # noqa: BLE001 - any type onnx cannot map to numpy is reported as unsupported
        type_name = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "undefined"
        raise SpecError("model", f"ONNX input {name!r} has unsupported type {type_name}") from None


def check_supported_ops(model: onnx.ModelProto) -> None:
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


def convert(model: onnx.ModelProto, name: str, shape: Shape, dtype: str) -> tvm.IRModule:
    """from_onnx with static input shape, then inference-only decomposition (batch norm etc.)."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    try:
        # the frontend's renaming and checker warnings, and the failing operator it prints (the error says it)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            mod = from_onnx(model, shape_dict={name: list(shape)}, dtype_dict={name: dtype})
    except tvm.error.OpNotImplemented as exc:
        ops = str(exc).rsplit(":", 1)[-1]
        names = [op.strip() for op in ops.split(",") if op.strip()]
        raise _unsupported_ops_error(dict.fromkeys(names, "")) from None
    except Exception as exc:  # noqa: BLE001 - a converter rejected an attribute, a dynamic input, ...: a SpecError
        op = _failing_onnx_op(exc)
        where = f"ONNX operator {op!r}" if op else "the model"
        raise SpecError(
            "model", f"TVM's ONNX frontend could not convert {where}: {_short(exc)}"
        ) from None
    passes = [relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings()]
    return tvm.transform.Sequential(passes)(mod)


def fold(model: onnx.ModelProto, shape: Shape) -> tuple[onnx.ModelProto, str]:
    """`model` with its input fixed to `shape`, its shapes inferred (onnx) and its constant subgraphs folded
    (onnxruntime's basic graph optimizations), so that shapes computed from the input's (Shape -> ... -> Reshape)
    become constants TVM's frontend takes; and the note saying so. SpecError naming `model` without onnxruntime."""
    import tempfile

    onnx = _import_onnx()
    try:
        import onnxruntime as ort
    except ImportError:
        raise SpecError("model", "the model computes shapes from its input's, which TVM's frontend cannot take; pip "
                                 "install onnxruntime lets the workbench fold them for the given input shape") from None
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    dims = fixed.graph.input[0].type.tensor_type.shape.dim
    for dim, size in zip(dims, shape):
        dim.ClearField("dim_param")
        dim.dim_value = int(size)
    fixed = onnx.shape_inference.infer_shapes(fixed)
    with tempfile.TemporaryDirectory(prefix="wb-fold-") as tmp:
        src, dst = os.path.join(tmp, "in.onnx"), os.path.join(tmp, "folded.onnx")
        onnx.save(fixed, src)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = dst
        try:
            ort.InferenceSession(src, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own refusal, as one line naming the model
            raise SpecError("model", f"onnxruntime could not fold the model for input {fmt_shape(shape)}: "
                                     f"{_short(exc)}") from None
        folded = onnx.load(dst)
    note = (f"folded for input {'x'.join(map(str, shape))}: {len(model.graph.node)} nodes to "
            f"{len(folded.graph.node)} (onnx shape inference, onnxruntime constant folding)")
    return folded, note


def _failing_onnx_op(exc: BaseException) -> str | None:
    """The op_type the frontend was converting when `exc` was raised (from its traceback)."""
    tb = exc.__traceback__
    op = None
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_construct_nodes":
            op = tb.tb_frame.f_locals.get("op_name", op)
        tb = tb.tb_next
    return op if isinstance(op, str) else None




def fmt_shape(shape: Shape) -> str:
    return ",".join(str(d) for d in shape)


def _short(exc: BaseException, limit: int = 300) -> str:
    """'Type: last line of the message', trimmed (TVM errors carry C++ tracebacks)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
