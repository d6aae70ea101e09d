"""Sample models for the workbench, each a Relax IRModule with random (seeded) constant weights.

Every model file exposes `DESCRIPTION`, `INPUT_SHAPES = {"full": ..., "small": ...}` and
`build(variant) -> tvm.IRModule`. The files import TVM only inside `build`, so reading the
metadata here is cheap.
"""
from __future__ import annotations

import importlib
from types import ModuleType

# registry name -> module file
MODELS: dict[str, str] = {
    "mlp": "mlp",
    "resnet18": "resnet18",
    "mobilenetv2": "mobilenetv2",
    "bert-layer": "bert_layer",
}
VARIANTS = ("full", "small")


def get(name: str) -> ModuleType:
    """The model file for a registry name such as 'resnet18' (KeyError if unknown)."""
    return importlib.import_module(f"{__name__}.{MODELS[name]}")
