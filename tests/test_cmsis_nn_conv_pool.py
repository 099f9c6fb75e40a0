"""The CMSIS-NN kernels of the convolution / pooling family beyond TFLite's
2-D convolutions and pools (tests/test_cmsis_nn.py's method): transposed
convolutions on arm_transpose_conv_wrapper_s8 (both of its paths), causal
(unevenly padded) 1xN convolutions on arm_convolve_s8, grouped
convolutions, and the pools whose PyTorch options CMSIS-NN lacks (they run
on the portable kernel, same bits). Programs compiled once run on M4 (DSP),
M33 (DSP) and M55 (MVE) in QEMU and must give the NumPy reference's bits.
Scratch sizes are checked against CMSIS-NN's own C size functions.

CMSIS-NN is not part of torchmcu: these tests need TORCHMCU_CMSIS_NN_DIR.
"""

from __future__ import annotations

import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import needs_arm_gcc, needs_qemu
from test_cmsis_nn import needs_cmsis_nn, retarget
from test_models_conv_pool import make
from test_quant import calib
from torch import nn
from torchmcu.backends.cmsis_nn.build import cmsis_nn_dir
from torchmcu.backends.cmsis_nn.scratch import ISAS, buffer_size, scratch_bytes
from torchmcu.builder import kernel_table
from torchmcu.builder.firmware import build_firmware, kernel_set
from torchmcu.compiler import compile
from torchmcu.sim import runner

BOARDS = ["mps2-an386", "mps2-an505", "mps3-an547"]  # Cortex-M4 (DSP), M33 (DSP), M55 (MVE)


class Geometry(nn.Module):
    """Every path of the CMSIS-NN wrappers these ops take: transposed
    convolutions with more than 16 input channels and stride <= 2 (a
    convolution of the upscaled input), with fewer or stride 3 (the scatter
    kernel), and with an output past the full result (portable); causal and
    'same' 1-D convolutions and a dilated causal depthwise one; a grouped
    convolution; pools with ceil_mode, dilation and count_include_pad."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.ModuleList([nn.ConvTranspose2d(20, 8, 3, 2, 1, output_padding=1),
                                   nn.ConvTranspose2d(20, 8, 4, 2, 1), nn.ConvTranspose2d(20, 6, 2, 2),
                                   nn.ConvTranspose2d(20, 6, 3, 1, 1), nn.ConvTranspose2d(20, 6, 5, 3, 2, output_padding=2),
                                   nn.ConvTranspose2d(20, 6, 3, 2, 0, output_padding=1)])
        self.narrow = nn.ModuleList([nn.ConvTranspose2d(8, 6, 3, 2, 1, output_padding=1),
                                     nn.ConvTranspose2d(8, 6, 4, 2, 1), nn.ConvTranspose2d(8, 6, 3, 3)])
        self.causal = nn.Conv1d(8, 12, 3, dilation=2)
        self.same = nn.Conv1d(8, 12, 4, padding="same")
        self.dw = nn.Conv1d(12, 12, 3, groups=12, dilation=4)
        self.grouped = nn.Conv2d(20, 12, 3, groups=4, padding=1)

    def forward(self, x: torch.Tensor, a: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        c = self.causal(F.pad(a, (4, 0)))
        return (*(m(x) for m in self.wide), *(m(z) for m in self.narrow), self.dw(F.pad(c, (8, 0))),
                self.same(a), self.grouped(x), F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.max_pool2d(x, 3, 2, 1, dilation=2))


def _geometry() -> tuple[nn.Module, list[tuple[int, ...]]]:
    torch.manual_seed(0)
    return Geometry().eval(), [(1, 20, 5, 6), (1, 8, 24), (1, 8, 5, 4)]


MODELS = {"geometry": _geometry, "unet": lambda: make("unet"), "melresnet": lambda: make("wavernn_melresnet"),
          "maskrcnn_predictor": lambda: make("maskrcnn_predictor")}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    cache: dict[str, tuple[Path, list, list]] = {}

    def get(name: str):
        if name not in cache:
            model, shapes = MODELS[name]()
            out = tmp_path_factory.mktemp(f"prog-{name}")
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message="torchmcu")  # all int8
                compile(model, tuple(torch.randn(*s) for s in shapes), "mps3-an547", out, quant="int8",
                        calibration=calib(shapes), progress=False)
            samples = [list(s) for s in calib(shapes, n=2, seed=1)]
            expected, tol = runner.expected(out, samples)
            assert tol is None
            cache[name] = (out, samples, expected)
        return cache[name]

    return get


def _run(src: Path, samples, out: Path, board: str, kernels: str):
    retarget(src, out, board)
    build_firmware(out, kernels=kernels)
    batch = [np.stack([s[i] for s in samples]) for i in range(len(samples[0]))]
    res = runner.run(out, batch, sim="qemu")
    assert res.exit_code == 0, res.raw[-1500:]
    return res


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", BOARDS)
def test_geometry_bit_exact_on_cmsis_nn(board: str, compiled, tmp_path: Path) -> None:
    src, samples, expected = compiled("geometry")
    res = _run(src, samples, tmp_path, board, "cmsis-nn")
    used = kernel_set(tmp_path)
    assert used["TRANSPOSE_CONV2D_S8"] == "cmsis-nn" and used["CONV2D_S8"] == "cmsis-nn", used
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, f"{board}: {mismatch}"


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name", ["unet", "melresnet", "maskrcnn_predictor"])
@pytest.mark.parametrize("kernels", ["portable", "cmsis-nn"])
def test_models_bit_exact_on_m55(name: str, kernels: str, compiled, tmp_path: Path) -> None:
    src, samples, expected = compiled(name)
    res = _run(src, samples, tmp_path, "mps3-an547", kernels)
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, f"{name} ({kernels}): {mismatch}"


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
def test_cmsis_nn_runs_the_transposed_conv_itself(tmp_path: Path) -> None:
    """CMSIS-NN's transposed convolution really runs (no silent fallback to
    the portable kernel): on M55 it takes far fewer instructions."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.ConvTranspose2d(32, 16, 3, 2, 1, output_padding=1)).eval()
    shapes = [(1, 32, 8, 8)]
    src = tmp_path / "prog"
    compile(model, (torch.randn(*shapes[0]),), "mps3-an547", src, quant="int8", calibration=calib(shapes),
            progress=False)
    samples = [list(calib(shapes, n=1)[0])]
    counts = {}
    for kernels in ("portable", "cmsis-nn"):
        out = tmp_path / kernels
        retarget(src, out, "mps3-an547")
        build_firmware(out, kernels=kernels)
        res = runner.run(out, [samples[0][0][None]], sim="qemu", profile=True)
        assert res.exit_code == 0, res.raw[-1500:]
        ops = [op["code"] for op in __import__("json").loads((src / "report.json").read_text())["ops"]]
        counts[kernels] = res.kernel_instructions()[ops.index("TRANSPOSE_CONV2D_S8")]
    assert counts["cmsis-nn"] * 3 < counts["portable"], counts


# ---------------------------------------------------------------------------------------------
# Scratch: the sizes scratch.py computes against CMSIS-NN's C functions

P = {"stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0, "dilation_h": 1, "dilation_w": 1}

# (name, x NHWC, w [out, kh, kw, in], y NHWC, stride, pad)
TRANSPOSED = [
    ("conv_path_s2", (1, 8, 8, 32), (16, 3, 3, 32), (1, 16, 16, 16), 2, 1),
    ("conv_path_s1", (1, 5, 6, 20), (6, 3, 3, 20), (1, 5, 6, 6), 1, 1),
    ("scatter_narrow", (1, 5, 4, 8), (6, 4, 4, 8), (1, 10, 8, 6), 2, 1),
    ("scatter_s3", (1, 5, 6, 20), (6, 5, 5, 20), (1, 14, 17, 6), 3, 2),
]

HOST_MAIN = r"""
#include <stdio.h>
#include "arm_nnfunctions.h"
int main(void) {
@CALLS@
  return 0;
}
"""


@needs_cmsis_nn
def test_transposed_and_uneven_1xn_scratch_equals_cmsis_nn_c_functions(tmp_path: Path) -> None:
    root = cmsis_nn_dir()
    calls = []
    for name, x, w, y, s, p in TRANSPOSED:
        d = lambda v: "(cmsis_nn_dims){" + ", ".join(map(str, v)) + "}"
        params = f"(cmsis_nn_transpose_conv_params){{0, 0, {{{s}, {s}}}, {{{p}, {p}}}, {{0, 0}}, {{1, 1}}, {{-128, 127}}}}"
        calls.append(f'  {{ cmsis_nn_transpose_conv_params p = {params}; cmsis_nn_dims x = {d(x)}, w = {d(w)}, '
                     f'y = {d(y)}; printf("{name} %d %d %d\\n", (int)arm_transpose_conv_s8_get_buffer_size(&p, &x, &w, &y), '
                     f'(int)arm_transpose_conv_s8_get_buffer_size_mve(&p, &x, &w, &y), '
                     f'(int)arm_transpose_conv_s8_get_reverse_conv_buffer_size(&p, &x, &w)); }}')
    # A causal 1xN (8 channels, kernel 3, left pad 2): the kernel calls arm_convolve_s8.
    calls.append('  { cmsis_nn_dims x = {1, 1, 24, 8}, w = {12, 1, 3, 8}; printf("causal %d %d\\n", '
                 '(int)arm_convolve_s8_get_buffer_size(&x, &w), (int)arm_convolve_s8_get_buffer_size_mve(&x, &w)); }')
    main = tmp_path / "sizes.c"
    main.write_text(HOST_MAIN.replace("@CALLS@", "\n".join(calls)))
    src = root / "Source" / "ConvolutionFunctions"
    exe = tmp_path / "sizes"
    proc = subprocess.run(["gcc", "-O1", "-w", f"-I{root / 'Include'}", str(main),
                           str(src / "arm_transpose_conv_get_buffer_sizes_s8.c"),
                           str(src / "arm_convolve_get_buffer_sizes_s8.c"), "-o", str(exe)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    got = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        name, *sizes = line.split()
        got[name] = [int(v) for v in sizes]
    for name, x, w, y, s, p in TRANSPOSED:
        ctx, ctx_mve, reverse = got[name]
        params = {**P, "stride_h": s, "stride_w": s, "pad_top": p, "pad_left": p}
        ours = {isa: buffer_size("TRANSPOSE_CONV2D_S8", isa, x, w, y, params) for isa in ISAS}
        if reverse:  # the convolution path: its im2col buffer (4-aligned), then the reversed filter
            assert ours["mve"] == (ctx_mve + 3) // 4 * 4 + reverse and ours["dsp"] == (ctx + 3) // 4 * 4 + reverse, name
        else:  # the scatter path: at least what CMSIS-NN asks, the same on every core
            assert ours["dsp"] == ours["mve"] >= max(ctx, ctx_mve), name
        assert scratch_bytes("TRANSPOSE_CONV2D_S8", x, w, y, params) == max(ours.values())
    causal = {**P, "pad_left": 2}
    sizes = [buffer_size("CONV2D_S8", isa, (1, 1, 24, 8), (12, 1, 3, 8), (1, 1, 24, 12), causal) for isa in ISAS]
    assert sizes == [got["causal"][0], got["causal"][0], got["causal"][1]]


def test_kernel_table_takes_the_cmsis_nn_transposed_conv() -> None:
    table = kernel_table.kernel_table_source(["TRANSPOSE_CONV2D_S8", "RESIZE_BILINEAR_S8"], "cmsis-nn")
    assert "&cmsis_nn::kTransposeConv2dS8," in table and "&portable::kResizeBilinearS8," in table
