"""PyTorch in: a small CNN defined here is exported, converted, tuned through %tune and through workbench.tune, and
the tuned model gives the module's outputs; what torch.export or TVM's importer cannot take is one line naming it."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from support import CHEAP_SEARCH

import workbench as wb
from workbench.models.torch_module import save_torch_model

torch = pytest.importorskip("torch")
nn = torch.nn


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def _cnn():
    torch.manual_seed(0)
    return SmallCNN().eval(), torch.randn(1, 3, 16, 16)


def test_a_pytorch_cnn_tuned_through_tune_gives_its_outputs(tmp_path):
    cnn, x = _cnn()
    run = wb.tune(model=cnn, example_inputs=(x,), home=str(tmp_path), trials=8, trials_per_batch=4, **CHEAP_SEARCH)
    assert run.spec.model.endswith("SmallCNN.relax.json") and run.plan.input_shape == (1, 3, 16, 16)
    assert run.wait(timeout=480) == "done", (run.message, run.errors().to_dict("records"))
    assert run.results.match.iloc[0]
    model = run.model()
    assert model.signature.model == "SmallCNN" and run.headline().text.startswith("SmallCNN at 100 %")  # its name
    y = model(x)  # torch in, torch out; one output, as the module gives (not a tuple of one)
    assert isinstance(y, torch.Tensor)
    torch.testing.assert_close(y, cnn(x).detach(), rtol=1e-4, atol=1e-5)
    y_np = model(x.numpy())
    assert isinstance(y_np, np.ndarray)
    torch.testing.assert_close(torch.from_numpy(y_np), cnn(x).detach(), rtol=1e-4, atol=1e-5)
    x2 = torch.randn(1, 3, 16, 16)  # inputs alike the last call's skip the full check: still its own outputs
    y2 = model(x2)
    torch.testing.assert_close(y2, cnn(x2).detach(), rtol=1e-4, atol=1e-5)
    with pytest.raises(wb.SpecError, match="must be 1x3x16x16 float32, got 2x3x16x16 float32"):
        model(torch.randn(2, 3, 16, 16))
    with pytest.raises(wb.SpecError, match="got 1x3x16x16 float64"):
        model(x2.double())
    spec = importlib.util.spec_from_file_location("exported_load", f"{model.export(str(tmp_path / 'out'))}/load.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    y_exported = loader.load()(x.numpy())  # the exported loader too: one output, not a tuple of one
    assert isinstance(y_exported, np.ndarray)
    np.testing.assert_array_equal(y_exported, y_np)


def test_tune_magic_takes_a_module_from_the_notebooks_namespace(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    config = Config()
    config.HistoryAccessor.enabled = False
    ip = InteractiveShell.instance(config=config)
    try:
        ip.run_line_magic("load_ext", "workbench")
        ip.user_ns["cnn"], _ = _cnn()
        run = ip.run_line_magic("tune", "--model cnn --input-shape 1,3,16,16 --trials 4 --trials-per-batch 4 "
                                        "--cost-model random --strategy replay-trace --no-panel")
        assert run.spec.model.endswith("cnn.relax.json") and run.plan.input_shape == (1, 3, 16, 16)
        assert run.wait(timeout=480) == "done", run.message
        with pytest.raises(Exception, match="input_shape"):  # a module alone cannot be traced
            ip.run_line_magic("tune", "--model cnn --no-panel")
        ip.run_line_magic("unload_ext", "workbench")
    finally:
        InteractiveShell.clear_instance()


class Branchy(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


class Determinant(nn.Module):
    def forward(self, x):
        return torch.linalg.det(x)


class TwoInputs(nn.Module):
    def forward(self, x, y):
        return x + y


@pytest.mark.parametrize(("module", "inputs", "says"), [
    (Branchy(), (torch.randn(2, 2),), "torch.export cannot take Branchy: Could not guard on data-dependent"),
    (Determinant(), (torch.randn(3, 3),), "cannot convert Determinant: operator aten._linalg_det.default"),
    (TwoInputs(), (torch.randn(2), torch.randn(2)), "TwoInputs takes 2 inputs"),
])
def test_what_export_or_the_importer_cannot_take_is_named_in_one_line(tmp_path, module, inputs, says):
    with pytest.raises(wb.SpecError, match="^model: ") as err:
        save_torch_model(module, inputs, home=str(tmp_path))
    assert says in str(err.value) and "\n" not in str(err.value)
    assert not list((tmp_path / "models").glob("*/*.relax.json")) if (tmp_path / "models").exists() else True


def test_a_spec_given_a_module_says_how_to_hand_it_in():
    cnn, _ = _cnn()
    with pytest.raises(wb.SpecError, match="workbench.tune\\(model=module, example_inputs"):
        wb.TuneSpec(model=cnn)
