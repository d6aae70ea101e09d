"""BERT encoder layer (post-LN): hand-written multi-head self-attention and a GELU FFN."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tvm
    from tvm import relax

    from ._common import Net

DESCRIPTION = (
    "BERT encoder layer: hand-written multi-head attention, LayerNorm, GELU FFN "
    "(d=768, 12 heads, ff=3072, seq 128)"
)
INPUT_SHAPES = {"full": (1, 128, 768), "small": (1, 8, 32)}


@dataclass(frozen=True)
class _Config:
    heads: int
    ff: int


_CONFIGS = {"full": _Config(12, 3072), "small": _Config(2, 64)}


def _attention(net: Net, x: relax.Expr, batch: int, seq: int, d: int, heads: int) -> relax.Var:
    """softmax(Q K^T / sqrt(dh)) V over `heads` heads, then the output projection."""
    from tvm import relax
    from tvm.relax import op

    dh = d // heads

    def project(perm: list[int]) -> relax.Var:
        y = net.emit(op.reshape(net.linear(x, d, d), (batch, seq, heads, dh)))
        return net.emit(op.permute_dims(y, perm))

    q, k, v = project([0, 2, 1, 3]), project([0, 2, 3, 1]), project([0, 2, 1, 3])
    scores = net.emit(op.multiply(net.emit(op.matmul(q, k)), relax.const(dh**-0.5, "float32")))
    ctx = net.emit(op.matmul(net.emit(op.nn.softmax(scores, axis=-1)), v))  # (b, h, s, dh)
    ctx = net.emit(op.reshape(net.emit(op.permute_dims(ctx, [0, 2, 1, 3])), (batch, seq, d)))
    return net.linear(ctx, d, d)


def build(variant: str, batch: int | None = None) -> tvm.IRModule:
    from tvm.relax import op

    from ._common import build_module, check_variant

    shape = check_variant(variant, INPUT_SHAPES, batch)
    batch, seq, d = shape
    cfg = _CONFIGS[variant]

    def forward(net: Net, x: relax.Var) -> relax.Var:
        x = net.layer_norm(net.emit(op.add(x, _attention(net, x, batch, seq, d, cfg.heads))), d)
        h = net.linear(net.activation(net.linear(x, d, cfg.ff), "gelu"), cfg.ff, d)
        return net.layer_norm(net.emit(op.add(x, h)), d)

    return build_module(shape, forward)
