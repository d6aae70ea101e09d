"""PyTorch twins of the sample models: the same layers at the same sizes, in torch.nn, for the baseline a user of
PyTorch would run (eager). Their weights are random, not the Relax models': a twin is timed, never compared for
outputs. Imports torch; only the baseline's timing process loads this file."""
from __future__ import annotations

import torch
from torch import nn

from . import bert_layer, mlp, mobilenetv2, resnet18


def _conv_bn(c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, act: str | None = "relu"):
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(c_out)]
    if act:
        layers.append(nn.ReLU6() if act == "relu6" else nn.ReLU())
    return nn.Sequential(*layers)


class _Basic(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_conv_bn(c_in, c_out, 3, stride), _conv_bn(c_out, c_out, 3, act=None))
        self.short = (nn.Identity() if stride == 1 and c_in == c_out
                      else _conv_bn(c_in, c_out, 1, stride, act=None))

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


class _Inverted(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, t: int) -> None:
        super().__init__()
        hidden = c_in * t
        expand = [] if t == 1 else [_conv_bn(c_in, hidden, 1, act="relu6")]
        self.body = nn.Sequential(*expand, _conv_bn(hidden, hidden, 3, stride, groups=hidden, act="relu6"),
                                  _conv_bn(hidden, c_out, 1, act=None))
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class _Head(nn.Module):
    def __init__(self, c: int, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(x.mean(dim=(2, 3)))


class _BertLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        dh = d // self.heads
        q = self.q(x).reshape(b, s, self.heads, dh).permute(0, 2, 1, 3)
        k = self.k(x).reshape(b, s, self.heads, dh).permute(0, 2, 3, 1)
        v = self.v(x).reshape(b, s, self.heads, dh).permute(0, 2, 1, 3)
        ctx = torch.softmax((q @ k) * dh**-0.5, dim=-1) @ v
        x = self.ln1(x + self.o(ctx.permute(0, 2, 1, 3).reshape(b, s, d)))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


def twin(key: str, variant: str) -> nn.Module:
    """The eager PyTorch twin of sample model `key` ('mlp', 'resnet18', 'mobilenetv2', 'bert-layer') in `variant`
    ('full' or 'small'), in eval mode. Any batch runs through it."""
    torch.manual_seed(0)
    if key == "mlp":
        d_in, d_hidden, d_out = mlp._SIZES[variant]
        model: nn.Module = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))
    elif key == "resnet18":
        cfg = resnet18._CONFIGS[variant]
        kernel, stride, c = cfg.stem
        layers: list[nn.Module] = [_conv_bn(3, c, kernel, stride), nn.MaxPool2d(3, 2, 1)]
        for c_out, blocks, first in cfg.stages:
            for i in range(blocks):
                layers.append(_Basic(c, c_out, first if i == 0 else 1))
                c = c_out
        model = nn.Sequential(*layers, _Head(c, cfg.classes))
    elif key == "mobilenetv2":
        cfg = mobilenetv2._CONFIGS[variant]
        stride, c = cfg.stem
        layers = [_conv_bn(3, c, 3, stride, act="relu6")]
        for t, c_out, n, s in cfg.blocks:
            for i in range(n):
                layers.append(_Inverted(c, c_out, s if i == 0 else 1, t))
                c = c_out
        model = nn.Sequential(*layers, _conv_bn(c, cfg.last_channels, 1, act="relu6"),
                              _Head(cfg.last_channels, cfg.classes))
    elif key == "bert-layer":
        cfg = bert_layer._CONFIGS[variant]
        d = bert_layer.INPUT_SHAPES[variant][2]
        model = _BertLayer(d, cfg.heads, cfg.ff)
    else:
        raise KeyError(key)
    return model.eval()
