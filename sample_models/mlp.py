"""Two-layer MLP with ReLU; the full variant has BERT-base FFN sizes (128x768 -> 3072 -> 768)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tvm
    from tvm import relax

    from ._common import Net

DESCRIPTION = "two-layer MLP with ReLU at BERT-base FFN sizes (128x768 -> 3072 -> 768)"
INPUT_SHAPES = {"full": (128, 768), "small": (4, 32)}
_SIZES = {"full": (768, 3072, 768), "small": (32, 64, 10)}  # d_in, d_hidden, d_out


def build(variant: str, batch: int | None = None) -> tvm.IRModule:
    from ._common import build_module, check_variant

    shape = check_variant(variant, INPUT_SHAPES, batch)
    d_in, d_hidden, d_out = _SIZES[variant]

    def forward(net: Net, x: relax.Var) -> relax.Var:
        h = net.activation(net.linear(x, d_in, d_hidden), "relu")
        return net.linear(h, d_hidden, d_out)

    return build_module(shape, forward)
