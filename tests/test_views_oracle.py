"""The SLICE op against TensorFlow Lite Micro: int8 programs with strided
slices (exported as STRIDED_SLICE) and broadcasts (BROADCAST_TO), run by
the tflite-micro wheel, equal the reference interpreter's and the host
firmware's bytes; and int16 (a16w8) SLICE on the host equals the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_ops_host import Fn
from torch import nn
from torchmcu.compiler import compile
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

pytest.importorskip("tflite_micro.python.tflite_micro.runtime", reason="tflite-micro wheel not installed")

from torchmcu.export.tflite import export_tflite, run_tflite_micro, summary  # noqa: E402

CASES = {  # name: (model, input shape, the TFLite op it exports as)
    "strided_rows": (lambda: Fn(lambda m, x: F.relu(m[0](x)[:, :, 1:6:2]), nn.Conv2d(2, 4, 1)), (1, 2, 7, 5),
                     "STRIDED_SLICE"),
    "channel_chunk": (lambda: Fn(lambda m, x: (lambda a, b: a + b)(*m[0](x).chunk(2, 1)), nn.Conv2d(2, 6, 1)),
                      (1, 2, 4, 4), "STRIDED_SLICE"),
    "select_last": (lambda: Fn(lambda m, x: m[0](x).select(-1, 1), nn.Linear(5, 4)), (2, 3, 5), "STRIDED_SLICE"),
    "expand": (lambda: Fn(lambda m, x: m[0](x)[:, :1].expand(-1, 3, -1) + m[0](x), nn.Linear(6, 6)), (2, 3, 6),
               "BROADCAST_TO"),
}


def _samples(shape, n=3):
    g = torch.Generator().manual_seed(11)
    return [[torch.randn(*shape, generator=g).numpy()] for _ in range(n)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_slice_matches_tflite_micro(name: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    make, shape, tfl_op = CASES[name]
    x = torch.randn(*shape)
    c = compile(make().eval(), (x,), "mps3-an547", tmp_path, quant="int8", progress=False, tile=False,
                calibration=[torch.randn(*shape) for _ in range(8)])
    slices = [op for op in c.graph.ops if op.code == "SLICE"]
    assert slices and all(c.graph.tensors[op.inputs[0]].dtype == "I8" for op in slices)
    samples = _samples(shape)
    tflite = export_tflite(c.pte)
    assert tfl_op in summary(tflite)["op_counts"]
    expected = run_reference(c.pte, samples)
    res = runner.run(tmp_path, [np.stack([s[0] for s in samples])], sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    for k, s in enumerate(samples):
        got = run_tflite_micro(tflite, s)
        for j, exp in enumerate(expected):
            assert np.array_equal(got[j].reshape(exp[k].shape), exp[k]), f"{name}: sample {k} output {j}"
            assert np.array_equal(res.outputs[j][k], exp[k]), f"{name}: firmware, sample {k} output {j}"


def test_slice_int16_on_host(tmp_path: Path, host_runner) -> None:
    torch.manual_seed(4)
    model = Fn(lambda m, x: m[1](m[0](x)[:, :, ::2]), nn.Linear(6, 6), nn.Linear(3, 4)).eval()
    x = torch.randn(2, 3, 6)
    c = compile(model, (x,), "mps3-an547", tmp_path, quant="a16w8", progress=False, tile=False,
                calibration=[torch.randn(2, 3, 6) for _ in range(8)])
    sl = next(op for op in c.graph.ops if op.code == "SLICE")
    assert c.graph.tensors[sl.inputs[0]].dtype == "I16"
    xs = [x.numpy()]
    res = runner.run(tmp_path, xs, sim="host")
    expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), xs))
    assert tol is None and all(np.array_equal(g, e) for g, e in zip(res.outputs, expected))
