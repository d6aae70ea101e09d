"""The tuning form: one control per TuneSpec field, each with its own error line.

Validation goes through `engine.TuneSpec` field by field, so a message appears next to the field
that `SpecError.field` names, before anything is launched. Every message starts with its field's
name ("slices: 150 is not a percentage from 1 to 100").

The slice fields are plain Text parsed in the kernel by `engine.parse_slices` (a tags widget's front
end drops values it refuses without telling the kernel). They sync on every keystroke
(`continuous_update=True`: JupyterLab sends the value on each input event), so typing a comma or
pressing Enter has the kernel see the value at once; with `continuous_update=False` only Enter or
leaving the field would.
"""
from __future__ import annotations

import functools
import html
import os
from typing import Any

import ipywidgets as W

import workbench as engine
from workbench import COST_MODELS, DEFAULT_SWEEP, PRECISIONS, STRATEGIES, TARGETS, parse_slices

ONNX = "__onnx__"
TORCH = "torch:"  # a model dropdown value naming a torch.nn.Module or ExportedProgram in the notebook's namespace
SPEC_FIELDS = ("model", "input_shape", "target", "precision", "slices", "servers", "shards", "trials",
               "trials_per_batch", "cost_model", "strategy", "cluster", "host", "fresh")
ERROR_FIELDS = (*SPEC_FIELDS, "sweep_slices")  # a SpecError.field shown at its own control (others: the general line)
SLICE_FIELDS = ("slices", "sweep_slices")
# how a message names its field (others: the TuneSpec name)
FIELD_NAMES = {"input_shape": "input shape", "trials_per_batch": "trials per batch", "cost_model": "cost model",
               "sweep_slices": "sweep slices", "host": "tracker address"}
LABEL_WIDTH = "120px"
COMPANIONS = {"cluster": ("host",)}  # a field checked with these (a remote cluster needs a reachable tracker)


@functools.lru_cache(maxsize=1)
def hardware() -> engine.Hardware:
    """This host's hardware, detected once per kernel."""
    return engine.detect_hardware()


@functools.lru_cache(maxsize=1)
def sample_models() -> dict[str, engine.ModelInfo]:
    return {m.name: m for m in engine.list_models()}


def target_text(target: str, hw: engine.Hardware | None = None) -> str:
    """Plain words for what a target choice means here, e.g. 'CPU, 2 cores (no GPU: ...)'."""
    hw = hw or hardware()
    if target == "auto":
        return f"auto: {hw.describe(hw.default_target)}"
    if target == "cuda" and not hw.gpus:
        return f"no GPU here ({hw.gpu_note})"
    return hw.describe(target)


def slice_hint(slices: list[int] | str, target: str, hw: engine.Hardware | None = None) -> str:
    """What the slices mean on this host: core counts on CPU, SM shares (MPS) on a GPU ('' when invalid)."""
    hw = hw or hardware()
    kind = hw.default_target if target == "auto" else target
    try:
        slices = list(parse_slices(slices, "slices"))
    except engine.SpecError:
        return ""
    if kind == "cpu":
        parts = [f"{p}% = {engine.Slice(p).cores(hw.ncores)} of {hw.ncores} cores" for p in slices]
        return "CPU: a slice is a share of the cores; " + ", ".join(parts)
    return "GPU: a slice is a share of the SMs (CUDA MPS active thread percentage), one tuning pass per slice"


def host_hint(cluster: str, host: str) -> str:
    """What the cluster and tracker fields mean together, with `--host`'s warning when the tracker is exposed."""
    try:
        spec = engine.TuneSpec(host=host)
    except engine.SpecError:
        return ""
    words = "" if not cluster else ("the shard clients run on worker processes of a Dask LocalCluster here"
                                    if cluster == "local" else f"the shard clients run on the workers of {cluster}, "
                                    f"which measure through this run's tracker at {host}")
    if spec.exposed:
        words += ("; " if words else "") + (f"the tracker and servers listen on {host}: anyone who reaches it can "
                                            "run code on them")
    return words


def check_values(values: dict[str, Any], hw: engine.Hardware | None = None) -> dict[str, str]:
    """Field -> error message for a dict of form values (empty when TuneSpec(**values) would be valid)."""
    hw = hw or hardware()
    errors: dict[str, str] = {}
    for name, value in values.items():
        together = {k: values[k] for k in COMPANIONS.get(name, ()) if k in values}
        try:
            engine.TuneSpec(**{name: value, **together})
        except engine.SpecError as err:
            errors.setdefault(err.field, err.message)
        except (TypeError, ValueError) as err:
            errors.setdefault(name, str(err))
    model = values.get("model")
    if "model" not in errors and isinstance(model, str) and model not in sample_models() \
            and not model.startswith(TORCH):
        if not model.lower().endswith(".onnx"):
            errors["model"] = f"not a sample model; give an .onnx path or one of {', '.join(sample_models())}"
        elif not os.path.isfile(os.path.expanduser(model)):
            errors["model"] = f"no such file: {model}"
    if values.get("target") == "cuda" and not hw.gpus and "target" not in errors:
        errors["target"] = f"this host has no usable GPU ({hw.gpu_note}); choose auto or cpu"
    if not errors:
        try:
            engine.TuneSpec(**values)
        except engine.SpecError as err:
            errors[err.field] = err.message
    return errors


def field_name(name: str) -> str:
    """The words a message uses for a field: 'trials per batch' for trials_per_batch."""
    return FIELD_NAMES.get(name, name)


def slices_text(value: Any) -> str:
    """A slice list (or text) as the slice fields show it: [25, 50] -> '25,50'."""
    return value if isinstance(value, str) else ",".join(str(v) for v in value)


def _slices_control(value: Any) -> W.Text:
    return W.Text(value=slices_text(value), continuous_update=True, placeholder="e.g. 25,50,100",
                  layout=W.Layout(width="360px"))


def _hint_html(text: str) -> str:
    """A grey note under a field's row ('' for no note)."""
    return f"<div style='font-size:90%;margin-left:{LABEL_WIDTH};color:#555'>{html.escape(text)}</div>" if text else ""


def _row(label: str, control: W.Widget, *extra: W.Widget) -> W.HBox:
    return W.HBox([W.Label(label, layout=W.Layout(width=LABEL_WIDTH)), control, *extra],
                  layout=W.Layout(align_items="center"))


class TuneForm:
    """The controls, their error lines and the values they add up to."""

    def __init__(self, namespace: dict[str, Any] | None = None, **values: Any) -> None:
        d = engine.TuneSpec()
        models = sample_models()
        self.namespace = namespace if namespace is not None else {}
        options = ([(f"{name}", name) for name in models] + [("ONNX file ...", ONNX)]
                   + [(f"{name} (PyTorch {type(obj).__name__})", TORCH + name)
                      for name, obj in self.torch_models().items()])
        self.controls: dict[str, W.Widget] = {
            "model": W.Dropdown(options=options, value=d.model if d.model in models else options[0][1],
                                layout=W.Layout(width="260px")),
            "onnx_path": W.Text(placeholder="/path/to/model.onnx", layout=W.Layout(width="360px")),
            "input_shape": W.Text(placeholder="optional, e.g. 1,3,224,224", layout=W.Layout(width="260px")),
            "target": W.Dropdown(options=list(TARGETS), value=d.target, layout=W.Layout(width="120px")),
            "precision": W.Dropdown(options=list(PRECISIONS), value=d.precision, layout=W.Layout(width="90px"),
                                    tooltip="; ".join(f"{k}: {v}" for k, v in PRECISIONS.items())),
            "slices": _slices_control(d.slices),
            "servers": W.IntText(value=d.servers, layout=W.Layout(width="90px")),
            "shards": W.IntText(value=d.shards, layout=W.Layout(width="90px")),
            "trials": W.IntText(value=d.slice_trials(1), layout=W.Layout(width="110px")),
            "trials_per_batch": W.IntText(value=d.trials_per_batch, layout=W.Layout(width="90px")),
            "cost_model": W.Dropdown(options=list(COST_MODELS), value=d.cost_model, layout=W.Layout(width="120px")),
            "strategy": W.Dropdown(options=list(STRATEGIES), value=d.strategy, layout=W.Layout(width="150px")),
            "cluster": W.Text(placeholder="none: subprocesses here; local, or tcp://HOST:PORT",
                              layout=W.Layout(width="360px")),
            "host": W.Text(value=d.host, layout=W.Layout(width="140px")),
            "fresh": W.Checkbox(value=d.fresh, description="fresh (ignore the tuning memory)", indent=False,
                                layout=W.Layout(width="260px", margin="0 0 0 20px"),
                                tooltip="start from nothing instead of what earlier runs in this home found"),
            "sweep_slices": _slices_control(DEFAULT_SWEEP),
            "csv_folder": W.Text(value="workbench-export", layout=W.Layout(width="260px")),
        }
        for name, ctl in self.controls.items():
            ctl.add_class(f"wb-field-{name.replace('_', '-')}")
        self.errors_view: dict[str, W.HTML] = {}
        self._shown: dict[str, list[str]] = {}
        for name in (*ERROR_FIELDS, "general"):
            box = W.HTML(value="", layout=W.Layout(display="none", margin="0 0 0 " + LABEL_WIDTH))
            box.add_class("wb-err")
            box.add_class(f"wb-err-{name.replace('_', '-')}")
            self.errors_view[name] = box
        self.model_info = W.HTML()
        self.target_info = W.HTML()
        self.slice_info = W.HTML()
        self.host_info = W.HTML()
        c, e = self.controls, self.errors_view
        self.onnx_row = _row("ONNX path", c["onnx_path"])
        self.onnx_box = W.VBox([self.onnx_row, _row("input shape", c["input_shape"])], layout=W.Layout(display="none"))
        self.widget = W.VBox([
            _row("model", c["model"], self.model_info), self.onnx_box, e["model"], e["input_shape"],
            _row("target", c["target"], W.Label("precision", layout=W.Layout(width="70px", margin="0 0 0 20px")),
                 c["precision"], self.target_info), e["target"], e["precision"],
            _row("slices (%)", c["slices"]), self.slice_info, e["slices"],
            _row("servers", c["servers"], W.Label("shards", layout=W.Layout(width="60px", margin="0 0 0 20px")),
                 c["shards"], W.Label("trials", layout=W.Layout(width="50px", margin="0 0 0 20px")), c["trials"],
                 W.Label("per batch", layout=W.Layout(width="70px", margin="0 0 0 20px")),
                 c["trials_per_batch"]),
            e["servers"], e["shards"], e["trials"], e["trials_per_batch"],
            _row("cost model", c["cost_model"], W.Label("strategy", layout=W.Layout(width="70px",
                                                                                   margin="0 0 0 20px")),
                 c["strategy"], c["fresh"]), e["cost_model"], e["strategy"], e["fresh"],
            _row("Dask cluster", c["cluster"], W.Label("tracker at", layout=W.Layout(width="70px",
                                                                                    margin="0 0 0 20px")),
                 c["host"]), self.host_info, e["cluster"], e["host"],
        ])
        self.box = W.Accordion(children=[self.widget], titles=("Tuning form",), selected_index=0)
        self.box.add_class("wb-form")  # the panel shows the form in this: open until a run is shown
        self.set(**values)
        self._describe()

    def torch_models(self) -> dict[str, Any]:
        """The namespace's torch.nn.Modules and ExportedPrograms, by name (none where torch is not loaded)."""
        return {name: obj for name, obj in self.namespace.items()
                if not name.startswith("_") and engine.is_torch_model(obj)}

    # -- values --------------------------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        """The TuneSpec fields the form currently says (input_shape only for ONNX models)."""
        c = self.controls
        onnx = c["model"].value == ONNX
        out: dict[str, Any] = {
            "model": c["onnx_path"].value.strip() if onnx else c["model"].value,
            "target": c["target"].value, "precision": c["precision"].value, "slices": self.slices("slices"),
            "servers": c["servers"].value,
            "shards": c["shards"].value, "trials": c["trials"].value,
            "trials_per_batch": c["trials_per_batch"].value, "cost_model": c["cost_model"].value,
            "strategy": c["strategy"].value,
        }
        if c["fresh"].value:
            out["fresh"] = True
        shape = c["input_shape"].value.strip()
        if (onnx or str(c["model"].value).startswith(TORCH)) and shape:
            out["input_shape"] = shape
        if c["cluster"].value.strip():
            out["cluster"] = c["cluster"].value.strip()
        if c["host"].value.strip() != engine.TuneSpec().host:
            out["host"] = c["host"].value.strip()
        return out

    def slices(self, name: str = "slices") -> list[int] | str:
        """A slice field's percentages, parsed by `engine.parse_slices`; its raw text when that refuses it
        (so that `check_values` reports why)."""
        text = self.controls[name].value
        try:
            return list(parse_slices(text, name))
        except engine.SpecError:
            return text

    def summary(self) -> str:
        """One line of what the form says, e.g. 'mlp-small on auto, slices 50,100: 1 server, 2 shards, 32 trials'."""
        v, c = self.values(), self.controls
        slices = slices_text(v["slices"])
        trials = f", {v['trials']} trials" if v["trials"] else ""
        return (f"{os.path.basename(str(v['model'])) or '(no model)'} on {v['target']}, slices {slices}: "
                f"{v['servers']} server{'s' * (v['servers'] != 1)}, {v['shards']} shard{'s' * (v['shards'] != 1)}"
                f"{trials}, {c['trials_per_batch'].value} per batch")

    def set(self, **values: Any) -> None:
        """Set controls from TuneSpec-style values (model may be a sample name or an .onnx path)."""
        c = self.controls
        unknown = sorted(set(values) - set(SPEC_FIELDS) - {"sweep_slices", "csv_folder"})
        if unknown:
            raise TypeError(f"unknown field(s) {', '.join(unknown)}; the form has {', '.join(SPEC_FIELDS)}")
        for name, value in values.items():
            if name == "model":
                if value in sample_models() or str(value).startswith(TORCH):
                    c["model"].value = value
                elif str(value).endswith(".relax.json"):  # a PyTorch run's saved model: its notebook name, if here
                    handed_in = TORCH + os.path.basename(str(value)).removesuffix(".relax.json")
                    if handed_in in {v for _, v in c["model"].options}:
                        c["model"].value = handed_in
                else:
                    c["model"].value = ONNX
                    c["onnx_path"].value = str(value)
            elif name == "input_shape":
                c["input_shape"].value = "" if value is None else (
                    value if isinstance(value, str) else ",".join(map(str, value)))
            elif name in SLICE_FIELDS:
                c[name].value = slices_text(value)
            elif name == "cluster":
                c[name].value = value or ""
            else:
                c[name].value = value
        self._describe()

    def observe(self, callback) -> None:
        """Call `callback(change)` whenever any control changes."""
        for ctl in self.controls.values():
            ctl.observe(callback, names="value")

    # -- errors --------------------------------------------------------------------------------------
    def check(self) -> dict[str, str]:
        """Validate, show each message at its field, return field -> message (including sweep slices)."""
        values = self.values()
        errors = check_values(values)
        if self.controls["model"].value == ONNX and "model" in errors and not values["model"]:
            errors["model"] = "give the path of an .onnx file"
        try:
            parse_slices(self.controls["sweep_slices"].value, "sweep_slices")
        except engine.SpecError as err:
            errors[err.field] = err.message
        self.show_errors(errors, keep_general=True)
        self._describe()
        self.box.set_title(0, f"Tuning form: {self.summary()}")
        return errors

    def fold(self) -> None:
        """Collapse the form to its one-line title (which sums up what it says)."""
        self.box.selected_index = None

    def show_errors(self, errors: dict[str, str], keep_general: bool = False) -> None:
        """Show `errors` (field -> message); unknown fields go to the general line."""
        per_box: dict[str, list[str]] = {}
        for name, message in errors.items():
            box = name if name in ERROR_FIELDS else "general"
            per_box.setdefault(box, []).append(f"{field_name(name)}: {message}")
        for box_name in self.errors_view:
            if box_name == "general" and keep_general:
                continue
            self._set_error(box_name, per_box.get(box_name, []))

    def show_general(self, message: str) -> None:
        self._set_error("general", [message] if message else [])

    def _set_error(self, name: str, msgs: list[str]) -> None:
        self._shown[name] = list(msgs)
        box = self.errors_view[name]
        value = "".join(f"<div style='color:#c62828'>&#9888; {html.escape(m)}</div>" for m in msgs)
        if box.value != value:
            with box.hold_sync():
                box.value = value
                box.layout.display = "" if msgs else "none"

    def current_errors(self) -> dict[str, str]:
        """The messages now shown, per field (for snapshots and tests)."""
        return {name: "\n".join(msgs) for name, msgs in self._shown.items() if msgs}

    def _describe(self) -> None:
        c = self.controls
        onnx = c["model"].value == ONNX
        torch_model = str(c["model"].value).startswith(TORCH)
        self.onnx_box.layout.display = "" if onnx or torch_model else "none"
        self.onnx_row.layout.display = "" if onnx else "none"
        if onnx:
            self.model_info.value = "<i>an ONNX model with one input; give its shape if it has dynamic dimensions</i>"
        elif torch_model:
            self.model_info.value = ("<i>a PyTorch model from this notebook, exported through torch.export when you "
                                     "press Tune; give its input's shape (e.g. 1,3,224,224)</i>")
        else:
            m = sample_models()[c["model"].value]
            self.model_info.value = (f"<span style='font-size:90%'>{html.escape(m.description)} - input "
                                     f"{'x'.join(map(str, m.input_shape))}</span>")
        self.target_info.value = f"<span style='font-size:90%'>{html.escape(target_text(c['target'].value))}</span>"
        self.slice_info.value = _hint_html(slice_hint(self.slices("slices"), c["target"].value))
        self.host_info.value = _hint_html(host_hint(c["cluster"].value.strip(), c["host"].value.strip()))
