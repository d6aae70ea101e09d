"""MobileNetV2: inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 project) with ReLU6."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tvm
    from tvm import relax

    from ._common import Net

DESCRIPTION = (
    "MobileNetV2, width 1.0, all 17 inverted residual blocks (depthwise convs, ReLU6), 1000 classes"
)
INPUT_SHAPES = {"full": (1, 3, 224, 224), "small": (1, 3, 16, 16)}


@dataclass(frozen=True)
class _Config:
    stem: tuple[int, int]  # stride, channels (3x3 conv)
    blocks: tuple[tuple[int, int, int, int], ...]  # expansion t, channels c, repeats n, stride s
    last_channels: int
    classes: int


_CONFIGS = {
    "full": _Config(
        (2, 32),
        ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
         (6, 320, 1, 1)),
        1280,
        1000,
    ),
    "small": _Config((1, 8), ((2, 8, 1, 1),), 16, 10),
}


def _inverted_residual(
    net: Net, x: relax.Expr, c_in: int, c_out: int, stride: int, expansion: int
) -> relax.Expr:
    from tvm import relax

    hidden = c_in * expansion
    y = x if expansion == 1 else net.conv_bn(x, c_in, hidden, 1, act="relu6")
    y = net.conv_bn(y, hidden, hidden, 3, stride, groups=hidden, act="relu6")  # depthwise
    y = net.conv_bn(y, hidden, c_out, 1, act=None)
    return net.emit(relax.op.add(y, x)) if stride == 1 and c_in == c_out else y


def build(variant: str, batch: int | None = None) -> tvm.IRModule:
    from ._common import build_module, check_variant

    shape = check_variant(variant, INPUT_SHAPES, batch)
    cfg = _CONFIGS[variant]

    def forward(net: Net, x: relax.Var) -> relax.Var:
        stride, c = cfg.stem
        x = net.conv_bn(x, shape[1], c, 3, stride, act="relu6")
        for t, c_out, n, s in cfg.blocks:
            for i in range(n):
                x = _inverted_residual(net, x, c, c_out, s if i == 0 else 1, t)
                c = c_out
        x = net.conv_bn(x, c, cfg.last_channels, 1, act="relu6")
        return net.linear(net.global_avg_pool(x), cfg.last_channels, cfg.classes)

    return build_module(shape, forward)
