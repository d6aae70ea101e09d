"""Shared building blocks for the sample models: seeded random constants and a few layers.

Models are written with `relax.BlockBuilder` and `relax.op` so that the CNNs can use batch norm and
pooling (the `relax.frontend.nn` exporter has neither). Importing this module imports TVM, so the
model files import it lazily inside `build()`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import tvm
from tvm import relax
from tvm.relax.op import nn as rnn

DTYPE = "float32"
SCALE = 0.1


def check_variant(variant: str, shapes: Mapping[str, tuple[int, ...]], batch: int | None = None) -> tuple[int, ...]:
    """The input shape of `variant`, with its first dimension replaced by `batch` when given; ValueError for
    unknown variants."""
    if variant not in shapes:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(shapes)}")
    return shapes[variant] if batch is None else (batch, *shapes[variant][1:])


class Net:
    """Emits layers into the current dataflow block of `bb`; all parameters are seeded constants.

    Weights are N(0, 1) scaled by min(0.1, 1/sqrt(fan_in)) so that activations stay O(1) in the
    full-size networks; biases and batch-norm statistics are scaled by 0.1.
    """

    def __init__(self, bb: relax.BlockBuilder, seed: int = 0) -> None:
        self.bb = bb
        self.rng = np.random.default_rng(seed)

    def emit(self, expr: relax.Expr) -> relax.Var:
        return self.bb.emit(expr)

    def const(
        self, shape: Sequence[int], scale: float = SCALE, offset: float = 0.0
    ) -> relax.Constant:
        data = self.rng.standard_normal(tuple(shape)) * scale + offset
        return relax.const(data.astype(DTYPE))

    def weight(self, shape: Sequence[int], fan_in: int) -> relax.Constant:
        return self.const(shape, scale=min(SCALE, 1.0 / np.sqrt(fan_in)))

    def linear(self, x: relax.Expr, d_in: int, d_out: int) -> relax.Var:
        """x @ W + b with W stored as (d_in, d_out)."""
        y = self.emit(relax.op.matmul(x, self.weight((d_in, d_out), d_in)))
        return self.emit(relax.op.add(y, self.const((d_out,))))

    def batch_norm(self, x: relax.Expr, channels: int) -> relax.Var:
        """Inference batch norm over axis 1 (DecomposeOpsForInference turns it into arithmetic)."""
        gamma, beta = self.const((channels,), offset=1.0), self.const((channels,))
        mean = self.const((channels,))
        var = relax.const(1.0 + np.abs(self.rng.standard_normal(channels) * SCALE).astype(DTYPE))
        bn = self.emit(rnn.batch_norm(x, gamma, beta, mean, var, axis=1))
        return self.emit(relax.TupleGetItem(bn, 0))

    def conv_bn(
        self,
        x: relax.Expr,
        c_in: int,
        c_out: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        act: str | None = "relu",
    ) -> relax.Var:
        """Conv2d (no bias, 'same' padding) -> batch norm -> optional ReLU / ReLU6."""
        w = self.weight((c_out, c_in // groups, kernel, kernel), (c_in // groups) * kernel * kernel)
        y = self.emit(rnn.conv2d(x, w, strides=stride, padding=kernel // 2, groups=groups))
        return self.activation(self.batch_norm(y, c_out), act)

    def activation(self, x: relax.Expr, act: str | None) -> relax.Var:
        if act is None:
            return x
        if act == "relu":
            return self.emit(rnn.relu(x))
        if act == "relu6":
            return self.emit(relax.op.clip(x, 0, 6))
        if act == "gelu":
            return self.emit(rnn.gelu(x))
        raise ValueError(f"unknown activation {act!r}")

    def layer_norm(self, x: relax.Expr, d: int) -> relax.Var:
        gamma, beta = self.const((d,), offset=1.0), self.const((d,))
        return self.emit(rnn.layer_norm(x, gamma, beta, axes=[-1]))

    def global_avg_pool(self, x: relax.Expr) -> relax.Var:
        """(N, C, H, W) -> (N, C)."""
        return self.emit(relax.op.mean(x, axis=[2, 3]))


def build_module(
    input_shape: tuple[int, ...], forward: Callable[[Net, relax.Var], relax.Expr], seed: int = 0
) -> tvm.IRModule:
    """A module whose function `main` takes one float32 input `x` and returns `forward(net, x)`."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(input_shape, DTYPE))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(forward(Net(bb, seed), x))
        bb.emit_func_output(out)
    return finalize(bb.get())


def finalize(mod: tvm.IRModule) -> tvm.IRModule:
    """Decompose batch norm for inference and drop the tuples it leaves, so the ops fuse."""
    seq = tvm.transform.Sequential(
        [relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings()]
    )
    return seq(mod)
