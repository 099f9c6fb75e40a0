"""I/O without waste: --io-layout nhwc (with --io int8) makes the program
take and give its tensors in the order and dtype the kernels run in, so no
PERMUTE, QUANTIZE or DEQUANTIZE runs at the edges; results are the same
values as the default program's, and `run` still takes and gives PyTorch's
order."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torchmcu.compiler import compile
from torchmcu.sim import runner


class Net(nn.Module):
    """A feature map (4-D) and logits (2-D) out, an image in."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.dw(torch.relu(self.c1(x))))
        return y, self.fc(y.mean((2, 3)))


def _codes(out) -> list[str]:
    return (out / "kernels.txt").read_text().split()


def test_nhwc_int8_io_runs_nothing_at_the_edges(tmp_path) -> None:
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(1, 3, 12, 10)
    calib = {"x": np.random.RandomState(1).randn(16, 1, 3, 12, 10).astype(np.float32)}
    plain = compile(model, (x,), "mps3-an547", tmp_path / "plain", quant="int8", calibration=calib, progress=False)
    lean = compile(model, (x,), "mps3-an547", tmp_path / "lean", quant="int8", calibration=calib, io="int8",
                   io_layout="nhwc", progress=False)
    edges = {e["code"] for e in plain.report["io"]["edge_ops"]}
    assert {"PERMUTE", "QUANTIZE_S8", "DEQUANTIZE_S8"} <= edges
    assert lean.report["io"]["edge_ops"] == []
    assert "PERMUTE" not in _codes(tmp_path / "lean") and "QUANTIZE_S8" not in _codes(tmp_path / "lean")
    assert len(lean.graph.ops) < len(plain.graph.ops)
    meta = runner.load_meta(tmp_path / "lean")
    assert [t["layout"] for t in meta["inputs"] + meta["outputs"]] == ["NHWC", "NHWC", "NC"]
    assert meta["outputs"][0]["dims"] == [1, 6, 5, 8] and meta["outputs"][0]["shape"] == [1, 8, 6, 5]
    header = (tmp_path / "lean" / "model.h").read_text()
    assert '#define TMCU_MODEL_INPUT0_LAYOUT "NHWC"' in header and "I/O chosen at compile: --io-layout nhwc" in header

    xs = np.random.RandomState(2).randn(3, 1, 3, 12, 10).astype(np.float32)
    a = runner.run(tmp_path / "plain", [xs], sim="host")
    b = runner.run(tmp_path / "lean", [xs], sim="host")
    assert a.exit_code == 0 and b.exit_code == 0, a.raw + b.raw
    # The lean program's int8 outputs, in PyTorch's order, dequantized: the default program's floats exactly.
    for k, out_meta in enumerate(meta["outputs"]):
        assert b.outputs[k].dtype == np.int8 and b.outputs[k].shape == a.outputs[k].shape
        deq = (np.float32(out_meta["scale"]) * (b.outputs[k].astype(np.float32) - np.float32(out_meta["zero_point"])))
        np.testing.assert_array_equal(deq.astype(np.float32), a.outputs[k])
    expected, tol = runner.expected(tmp_path / "lean", runner.split_samples(meta, [xs]))
    mismatch, _ = runner.compare(b.outputs, expected, tol)
    assert tol is None and mismatch is None, mismatch


def test_nhwc_float_io_matches_pytorch(tmp_path) -> None:
    torch.manual_seed(1)
    model = Net().eval()
    x = torch.randn(1, 3, 8, 8)
    plain = compile(model, (x,), "mps2-an386", tmp_path / "plain", progress=False)
    lean = compile(model, (x,), "mps2-an386", tmp_path / "lean", io_layout="nhwc", progress=False)
    count = lambda c: sum(op.code == "PERMUTE" for op in c.graph.ops)  # noqa: E731
    assert count(plain) >= 2 and count(lean) == 0  # the input's and the feature map's
    xs = np.random.RandomState(3).randn(2, 1, 3, 8, 8).astype(np.float32)
    res = runner.run(tmp_path / "lean", [xs], sim="host")
    expected, tol = runner.expected(tmp_path / "lean", runner.split_samples(runner.load_meta(tmp_path / "lean"), [xs]))
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, mismatch


def test_io_layout_is_checked(tmp_path) -> None:
    import pytest
    from torchmcu.errors import CompileError

    with pytest.raises(CompileError, match="io_layout"):
        compile(nn.Linear(2, 2), (torch.randn(1, 2),), "mps2-an505", tmp_path, io_layout="chwn", progress=False)
