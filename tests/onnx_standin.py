"""A stand-in for the third-party ONNX models users bring: a small detector-like network with 20+
distinct operator shapes (so 20+ tuning tasks), built with onnx.helper and seeded weights.

A backbone of convolutions whose channel counts and strides differ layer by layer (each a task of its
own), two heads (1x1 convolutions, a sigmoid and a softmax over different shapes) and a small
classifier. The input's batch and spatial sizes are dynamic, as exported detectors declare them, so
loading it needs `input_shape`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

CHANNELS = (8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72)  # one conv task per distinct (c_in, c_out, stride)
INPUT_SHAPE = (1, 3, 32, 32)


def build(seed: int = 0):
    """The ONNX ModelProto of the stand-in detector."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def const(name: str, shape: tuple[int, ...], scale: float) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(x: str, c_in: int, c_out: int, k: int, stride: int, tag: str, act: str = "Relu") -> str:
        w = const(f"{tag}_w", (c_out, c_in, k, k), 1.0 / np.sqrt(c_in * k * k))
        b = const(f"{tag}_b", (c_out,), 0.1)
        y = f"{tag}_conv"
        nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4))
        if act:
            nodes.append(helper.make_node(act, [y], [f"{tag}_{act.lower()}"]))
            return f"{tag}_{act.lower()}"
        return y

    x, c = "image", 3
    for i, width in enumerate(CHANNELS):
        x = conv(x, c, width, 3, 2 if i in (1, 3, 6) else 1, f"b{i}")
        c = width
    feat = x
    _ = conv(feat, c, 1, 1, 1, "score", act="Sigmoid")  # a text-probability map (used below as "score_sigmoid")
    geo = conv(feat, c, 5, 1, 1, "geo", act="")
    nodes.append(helper.make_node("Softmax", [geo], ["geo_soft"], axis=1))
    nodes.append(helper.make_node("GlobalAveragePool", [feat], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    w1, w2 = const("fc1_w", (c, 64), 1.0 / np.sqrt(c)), const("fc2_w", (64, 10), 0.125)
    nodes.append(helper.make_node("MatMul", ["flat", w1], ["fc1"]))
    nodes.append(helper.make_node("Relu", ["fc1"], ["fc1_relu"]))
    nodes.append(helper.make_node("MatMul", ["fc1_relu", w2], ["logits"]))
    nodes.append(helper.make_node("ReduceMean", ["score_sigmoid"], ["score_mean"], axes=[2, 3], keepdims=0))
    nodes.append(helper.make_node("ReduceMax", ["geo_soft"], ["geo_max"], axes=[1], keepdims=0))
    nodes.append(helper.make_node("Flatten", ["geo_max"], ["geo_flat"], axis=1))
    nodes.append(helper.make_node("Concat", ["logits", "score_mean", "geo_flat"], ["out"], axis=1))
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, "H", "W"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "standin_detector", [image], [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def save(path: Path, seed: int = 0) -> Path:
    import onnx

    onnx.save(build(seed), str(path))
    return path
