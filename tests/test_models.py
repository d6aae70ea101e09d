"""Sample models and the ONNX loader: build, compile, run, extract tasks, and clear errors."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from workbench.models.load import LoadedModel, check_model, list_models, load_model
from workbench.spec import SpecError

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402 - imported only once importorskip found TVM
from tvm.s_tir import meta_schedule as ms  # noqa: E402 - imported only once importorskip found TVM

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["mlp", "resnet18", "mobilenetv2", "bert-layer"]
SMALL = [f"{n}-small" for n in NAMES]


# ---------------------------------------------------------------------------------------------
# helpers


@pytest.fixture(scope="module")
def target() -> tvm.target.Target:
    return tvm.target.Target({"kind": "llvm", "num-cores": 2})


def prepare_for_tuning(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """Stage 1 of ms.relax_integration.compile_relax (see notes/tvm-0.27.md section 2)."""
    try:
        dispatch = relax.pipeline.library_dispatch_passes(target)
    except (ValueError, AttributeError):
        dispatch = []
    seq = tvm.transform.Sequential(
        [*dispatch, relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
         relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR()]
    )
    with target, tvm.transform.PassContext(opt_level=3):
        return seq(mod)


def extract(model: LoadedModel, target: tvm.target.Target) -> list:
    return ms.relax_integration.extract_tasks(prepare_for_tuning(model.mod, target), target)


def run(mod: tvm.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def random_input(model: LoadedModel) -> np.ndarray:
    return np.random.default_rng(1).standard_normal(model.input_shape).astype(model.dtype)


def output_shape(mod: tvm.IRModule) -> tuple[int, ...]:
    return tuple(int(v) for v in mod["main"].body.body.ty.shape.values)


# ---------------------------------------------------------------------------------------------
# registry


def test_list_models_names_and_shapes() -> None:
    infos = {info.name: info for info in list_models()}
    assert sorted(infos) == sorted(NAMES + SMALL)
    assert infos["resnet18"].input_shape == (1, 3, 224, 224)
    assert infos["mobilenetv2"].input_shape == (1, 3, 224, 224)
    assert infos["mlp"].input_shape == (128, 768)
    assert infos["bert-layer"].input_shape == (1, 128, 768)
    assert all(info.description and "\n" not in info.description for info in infos.values())
    assert all(info.dtype == "float32" for info in infos.values())


def test_registry_does_not_import_tvm() -> None:
    code = (
        "import sys, workbench.models.load as m; m.list_models(); m.check_model('resnet18'); "
        "m.check_model('bert-layer-small', (1, 8, 32)); "
        "assert 'tvm' not in sys.modules, 'tvm imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_unknown_model_lists_the_samples() -> None:
    for call in (check_model, load_model):
        with pytest.raises(SpecError) as info:
            call("resnet-9000")
        assert info.value.field == "model"
        assert "unknown model 'resnet-9000'" in str(info.value)
        assert "mobilenetv2-small" in str(info.value) and ".onnx" in str(info.value)


def test_a_sample_model_takes_another_batch_only() -> None:
    check_model("mlp-small", (4, 32))
    bigger = load_model("mlp-small", (8, 32))
    assert bigger.input_shape == (8, 32)
    assert "x: R.Tensor((8, 32)" in bigger.mod["main"].script() and "R.Tensor((8, 10)" in bigger.mod["main"].script()
    assert "x: R.Tensor((4, 32)" in load_model("mlp-small").mod["main"].script()
    for wrong in ((4, 33), (4, 32, 1)):
        with pytest.raises(SpecError) as info:
            check_model("mlp-small", wrong)
        assert info.value.field == "input_shape" and "N,32" in str(info.value)
    with pytest.raises(SpecError, match="positive integers"):
        check_model("mlp", (0, 768))


# ---------------------------------------------------------------------------------------------
# sample models


@pytest.mark.parametrize("name", SMALL)
def test_small_variant_compiles_and_runs(name: str) -> None:
    model = load_model(name)
    assert model.name == name and model.input_name == "x" and model.dtype == "float32"
    assert [gv.name_hint for gv in model.mod.get_global_vars()] == ["main"]
    assert len(model.mod["main"].params) == 1
    out = run(model.mod, random_input(model))
    assert out.shape == output_shape(model.mod)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("name", SMALL)
def test_small_variant_has_tasks(name: str, target: tvm.target.Target) -> None:
    tasks = extract(load_model(name), target)
    assert 0 < len(tasks) <= 12, [t.task_name for t in tasks]


@pytest.mark.parametrize("name, min_tasks", [("mlp", 2), ("bert-layer", 8)])
def test_full_variant_extracts_tasks(name: str, min_tasks: int, target: tvm.target.Target) -> None:
    tasks = extract(load_model(name), target)
    assert len(tasks) >= min_tasks
    assert any("matmul" in t.task_name for t in tasks)


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2"])
def test_full_cnn_builds_quickly(name: str) -> None:
    start = time.perf_counter()
    model = load_model(name)
    assert time.perf_counter() - start < 20
    assert model.input_shape == (1, 3, 224, 224)
    assert output_shape(model.mod) == (1, 1000)
    assert "batch_norm" not in model.mod.script(), "batch norm must be decomposed for inference"


# ---------------------------------------------------------------------------------------------
# ONNX


def tiny_onnx(batch: int | str = 1, extra_nodes: tuple = (), output: str = "y", inputs: int = 1):
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm (+ extra nodes): (model, weights)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.1).astype("float32")
    g = (rng.standard_normal((4, 5)) * 0.1).astype("float32")
    b = (rng.standard_normal(5) * 0.1).astype("float32")
    nodes = [
        helper.make_node("Conv", ["input.1", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "g", "b"], ["y"]),
        *extra_nodes,
    ]
    graph_inputs = [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [batch, 3, 8, 8])]
    extra = range(inputs - 1)
    graph_inputs += [helper.make_tensor_value_info(f"extra{i}", TensorProto.FLOAT, [1]) for i in extra]
    outputs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)]
    weights = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (g, "g"), (b, "b"))]
    graph = helper.make_graph(nodes, "tiny", graph_inputs, outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, (w, g, b)


def reference(x: np.ndarray, w: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwij,ocij->nohw", windows, w)
    return np.maximum(conv, 0).mean(axis=(2, 3)) @ g + b


def save(model, path: Path) -> str:
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.fixture()
def onnx_file(tmp_path: Path):
    pytest.importorskip("onnx")
    model, weights = tiny_onnx()
    return save(model, tmp_path / "tiny.onnx"), weights


def test_onnx_static_matches_numpy(onnx_file) -> None:
    path, weights = onnx_file
    check_model(path)
    model = load_model(path)
    assert (model.name, model.input_shape, model.dtype) == ("tiny", (1, 3, 8, 8), "float32")
    assert model.input_name == model.mod["main"].params[0].name
    x = random_input(model)
    np.testing.assert_allclose(run(model.mod, x), reference(x, *weights), atol=1e-4)


def test_onnx_dynamic_batch_needs_input_shape(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    model, weights = tiny_onnx(batch="N")
    path = save(model, tmp_path / "dyn.onnx")
    for call in (check_model, load_model):
        with pytest.raises(SpecError) as info:
            call(path)
        assert info.value.field == "input_shape"
        assert "input_shape" in str(info.value) and "[N,3,8,8]" in str(info.value)
        assert "--input-shape 1,3,8,8" in str(info.value)
    loaded = load_model(path, input_shape=(2, 3, 8, 8))
    assert loaded.input_shape == (2, 3, 8, 8)
    x = random_input(loaded)
    np.testing.assert_allclose(run(loaded.mod, x), reference(x, *weights), atol=1e-4)


@pytest.mark.parametrize(
    "shape, needle", [((2, 3, 8), "rank 4"), ((1, 4, 8, 8), "dimension 1 is fixed at 3")]
)
def test_onnx_bad_input_shape(tmp_path: Path, shape: tuple, needle: str) -> None:
    pytest.importorskip("onnx")
    path = save(tiny_onnx(batch="N")[0], tmp_path / "dyn.onnx")
    with pytest.raises(SpecError) as info:
        load_model(path, input_shape=shape)
    assert info.value.field == "input_shape" and needle in str(info.value)


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"", "the file is empty"),
        ("truncated", "cannot read ONNX file"),
        (b"this is a text file, not a model\n", "cannot read ONNX file"),
    ],
)
def test_onnx_unreadable_files(tmp_path: Path, content, needle: str) -> None:
    pytest.importorskip("onnx")
    if content == "truncated":
        data = tiny_onnx()[0].SerializeToString()
        content = data[: len(data) // 2]
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    for call in (check_model, load_model):
        with pytest.raises(SpecError) as info:
            call(str(path))
        assert info.value.field == "model"
        assert needle in str(info.value) and "bad.onnx" in str(info.value)


def test_onnx_missing_path(tmp_path: Path) -> None:
    for call in (check_model, load_model):
        with pytest.raises(SpecError, match="does not exist") as info:
            call(str(tmp_path / "nope.onnx"))
        assert info.value.field == "model"


def test_onnx_unsupported_operator(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    from onnx import helper

    custom = helper.make_node("FancyActivation", ["y"], ["z"], domain="com.example")
    model, _ = tiny_onnx(extra_nodes=(custom,), output="z")
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(SpecError) as info:
        load_model(save(model, tmp_path / "custom.onnx"))
    assert info.value.field == "model"
    assert "ONNX operator 'FancyActivation'" in str(info.value)
    assert "not supported by TVM's ONNX frontend" in str(info.value)


def test_onnx_data_dependent_shape(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    from onnx import helper

    model, _ = tiny_onnx(extra_nodes=(helper.make_node("NonZero", ["y"], ["z"]),), output="z")
    with pytest.raises(SpecError) as info:
        load_model(save(model, tmp_path / "nonzero.onnx"))
    assert info.value.field == "model"
    assert "'nonzero'" in str(info.value) and "static shapes" in str(info.value)


def test_onnx_without_the_onnx_package(onnx_file, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(SpecError, match=r"pip install 'tuning-workbench\[onnx\]'") as info:
        check_model(onnx_file[0])
    assert info.value.field == "model"


def test_onnx_needs_exactly_one_input(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    path = save(tiny_onnx(inputs=2)[0], tmp_path / "two.onnx")
    with pytest.raises(SpecError, match="has 2 inputs") as info:
        check_model(path)
    assert info.value.field == "model"


def test_the_input_shape_hint_is_built_from_the_models_own_dims() -> None:
    """A dynamic-shape image model is told a shape it can run (not 1,3,1,1): fixed sizes kept, batch 1, an
    open height and width 224."""
    from workbench.models.onnx_file import example_shape

    assert example_shape(["N", 3, "H", "W"]) == "1,3,224,224"
    assert example_shape(["N", "H", "W", 3]) == "1,224,224,3"
    assert example_shape(["N", 3, 8, 8]) == "1,3,8,8"
    assert example_shape(["batch", "seq", 768]) == "1,1,768"


def computed_shape_onnx(kind: str):
    """A model whose shapes are computed from its input's, as exported detectors and classifiers have them: 'reshape'
    flattens through Shape -> Slice -> Cast -> Div -> Cast -> ReduceProd -> Mul -> Concat -> Reshape, 'range' adds a
    Range over a dimension it reads with Shape -> Gather. Input (N, 3, 8, 8), N symbolic."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.1).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"])]
    const = {"w": w}
    if kind == "reshape":
        nodes += [helper.make_node("Slice", ["s", "st", "en"], ["hw"]),
                  helper.make_node("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
                  helper.make_node("Div", ["hwf", "two"], ["half"]),
                  helper.make_node("Cast", ["half"], ["halfi"], to=TensorProto.INT64),
                  helper.make_node("ReduceProd", ["halfi"], ["p"], keepdims=1),
                  helper.make_node("Mul", ["p", "sixteen"], ["p16"]),
                  helper.make_node("Concat", ["minus1", "p16"], ["newshape"], axis=0),
                  helper.make_node("Reshape", ["r", "newshape"], ["y"])]
        const.update(st=np.array([2]), en=np.array([4]), two=np.array([2.0], np.float32), sixteen=np.array([16]),
                     minus1=np.array([-1]))
    else:
        nodes += [helper.make_node("Gather", ["s", "i3"], ["w3"], axis=0),
                  helper.make_node("Range", ["zero", "w3", "one"], ["rg"]),
                  helper.make_node("Cast", ["rg"], ["rgf"], to=TensorProto.FLOAT),
                  helper.make_node("Add", ["r", "rgf"], ["y"])]
        const.update(i3=np.array(3), zero=np.array(0), one=np.array(1))
    inits = [numpy_helper.from_array(v.astype(np.int64) if v.dtype.kind == "i" else v, k) for k, v in const.items()]
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(("kind", "nodes"), [("reshape", 11), ("range", 7)])
def test_onnx_computed_shapes_are_folded_for_the_input_shape(tmp_path: Path, kind: str, nodes: int) -> None:
    """TVM's frontend refuses shapes computed from the input's; folded for the given input shape (onnx shape
    inference, onnxruntime's constant folding) the model converts, computes what onnxruntime computes on the
    original, and the load says what was done."""
    pytest.importorskip("onnxruntime")
    import onnxruntime as ort

    path = save(computed_shape_onnx(kind), tmp_path / f"{kind}.onnx")
    model = load_model(path, (2, 3, 8, 8))
    assert model.note == f"folded for input 2x3x8x8: {nodes} nodes to 3 (onnx shape inference, onnxruntime " \
                         "constant folding)"
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(run(model.mod, x), expected, rtol=1e-5, atol=1e-5)
    assert load_model(save(tiny_onnx()[0], tmp_path / "plain.onnx")).note == ""  # nothing to fold: not folded
