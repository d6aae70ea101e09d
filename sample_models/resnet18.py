"""ResNet-18: conv-BN-ReLU stem, max pool, 4 stages of 2 basic residual blocks, avg pool, FC."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tvm
    from tvm import relax

    from ._common import Net

DESCRIPTION = "ResNet-18 CNN: conv-BN-ReLU, basic residual blocks, pooling, 1000 classes"
INPUT_SHAPES = {"full": (1, 3, 224, 224), "small": (1, 3, 16, 16)}


@dataclass(frozen=True)
class _Config:
    stem: tuple[int, int, int]  # kernel, stride, channels
    stages: tuple[tuple[int, int, int], ...]  # channels, blocks, first stride
    classes: int


_CONFIGS = {
    "full": _Config((7, 2, 64), ((64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2)), 1000),
    "small": _Config((3, 1, 8), ((8, 1, 1),), 10),
}


def _basic_block(net: Net, x: relax.Expr, c_in: int, c_out: int, stride: int) -> relax.Var:
    from tvm import relax

    y = net.conv_bn(x, c_in, c_out, 3, stride)
    y = net.conv_bn(y, c_out, c_out, 3, act=None)
    if stride == 1 and c_in == c_out:
        shortcut = x
    else:  # 1x1 projection
        shortcut = net.conv_bn(x, c_in, c_out, 1, stride, act=None)
    return net.activation(net.emit(relax.op.add(y, shortcut)), "relu")


def build(variant: str, batch: int | None = None) -> tvm.IRModule:
    from tvm.relax.op import nn as rnn

    from ._common import build_module, check_variant

    shape = check_variant(variant, INPUT_SHAPES, batch)
    cfg = _CONFIGS[variant]

    def forward(net: Net, x: relax.Var) -> relax.Var:
        kernel, stride, c = cfg.stem
        x = net.conv_bn(x, shape[1], c, kernel, stride)
        x = net.emit(rnn.max_pool2d(x, pool_size=3, strides=2, padding=1))
        for c_out, blocks, first_stride in cfg.stages:
            for i in range(blocks):
                x = _basic_block(net, x, c, c_out, first_stride if i == 0 else 1)
                c = c_out
        return net.linear(net.global_avg_pool(x), c, cfg.classes)

    return build_module(shape, forward)
