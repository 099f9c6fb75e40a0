"""The CMSIS-NN kernel set (firmware/kernels/cmsis_nn/, `torchmcu build
--kernels cmsis-nn`) and the scratch memory the compiler plans for it
(aot/torchmcu/backends/cmsis_nn/scratch.py).

CMSIS-NN is not part of torchmcu: the tests that build against it need
TORCHMCU_CMSIS_NN_DIR (the root of a CMSIS-NN checkout) and skip without it.
One program per model, compiled once: it runs on M4 (DSP), M33 (DSP) and M55
(MVE) and must give the NumPy reference's bits (and so the portable
kernels') on each. Built objects are reused: CMSIS-NN once per board in
$TORCHMCU_CACHE_DIR/cmsis-nn/ (by build_firmware itself), the runtime once per board in a
session directory every model of that board is built in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, needs_arm_gcc, needs_qemu
from test_ops_host import Fn
from test_quant import CASES, calib
from torch import nn
from torchmcu.backends.cmsis_nn.build import CMSIS_NN_ENV, cmsis_nn_dir
from torchmcu.backends.cmsis_nn.scratch import ISAS, buffer_size, scratch_bytes
from torchmcu.backends.portable.scratch import conv_bytes
from torchmcu.boards import load_board
from torchmcu.builder import kernel_table
from torchmcu.builder.firmware import build_firmware, kernel_set
from torchmcu.compiler import choose_arena_memory, choose_program_memory, compile
from torchmcu.errors import BuildError
from torchmcu.program import serialize
from torchmcu.sim import runner

needs_cmsis_nn = pytest.mark.skipif(
    not os.environ.get(CMSIS_NN_ENV),
    reason=f"{CMSIS_NN_ENV} is not set: point it at the root of a CMSIS-NN checkout (Include/, Source/) "
           "to build and run the CMSIS-NN kernels; torchmcu does not ship CMSIS-NN")

# ---------------------------------------------------------------------------------------------
# Scratch sizes: CMSIS-NN 7.x's get_buffer_size functions as GCC compiles them,
# worked out by hand from the C source for each ISA.

P = {"stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0, "dilation_h": 1, "dilation_w": 1}


def _p(**kw: int) -> dict[str, int]:
    return {**P, **kw}


# (name, code, x NHWC, w, y NHWC, params, (scalar, dsp, mve))
SHAPES = [
    # im2col: 27 columns; scalar/DSP two int16 rows of 28 (4-aligned): 2*28*2; MVE 4 rows of 2 lanes: 4*2*16.
    ("conv3x3", "CONV2D_S8", (1, 8, 8, 3), (8, 3, 3, 3), (1, 8, 8, 8), _p(pad_top=1, pad_left=1), (112, 112, 128)),
    # 1x1, stride 1 (arm_convolve_1x1_s8_fast: a buffer under Arm Compiler 6 only) and stride 2: none.
    ("conv1x1", "CONV2D_S8", (1, 6, 6, 16), (32, 1, 1, 16), (1, 6, 6, 32), _p(), (0, 0, 0)),
    ("conv1x1_s2", "CONV2D_S8", (1, 9, 9, 4), (6, 1, 1, 4), (1, 5, 5, 6), _p(stride_h=2, stride_w=2), (0, 0, 0)),
    # A padded 1x1 is no 1x1 for CMSIS-NN: im2col of 4 columns: 2*4*2; MVE one lane: 4*16.
    ("conv1x1_pad", "CONV2D_S8", (1, 4, 4, 4), (4, 1, 1, 4), (1, 6, 6, 4), _p(pad_top=1, pad_left=1), (16, 16, 64)),
    # 1xN (height 1, stride * C % 4 == 0): scalar/DSP as im2col (24 columns: 2*24*2); MVE: left pad 1 of
    # 8 channels beside 3*8 taps, max(24 + 8, 16 + 8).
    ("conv1xn", "CONV2D_S8", (1, 1, 12, 8), (4, 1, 3, 8), (1, 1, 12, 4), _p(pad_left=1), (96, 96, 32)),
    # Stride 2 on width 9: total padding 3*2 + 4 - 9 = 1, but the left pad is 1 (TFLite's would be 0): MVE's 1xN
    # kernel refuses it, so the kernel calls arm_convolve_s8 (its im2col: 16 columns, 2*16*2; MVE 4*16).
    ("conv1xn_asym", "CONV2D_S8", (1, 1, 9, 4), (2, 1, 4, 4), (1, 1, 4, 2), _p(stride_w=2, pad_left=1), (64, 64, 64)),
    # Total padding 3*2 + 4 - 11 = -1: C's remainder -1 counts as asymmetric: max(16 + 0, 12 + 4).
    ("conv1xn_negpad", "CONV2D_S8", (1, 1, 11, 4), (2, 1, 4, 4), (1, 1, 4, 2), _p(stride_w=2), (64, 64, 16)),
    # 3 channels * stride 1 is not a multiple of 4: not 1xN; 9 columns -> 12: 2*12*2; MVE 4*16.
    ("conv1xn_unaligned", "CONV2D_S8", (1, 1, 12, 3), (4, 1, 3, 3), (1, 1, 12, 4), _p(pad_left=1), (48, 48, 64)),
    # Depthwise 3x3, padding <= 1: arm_depthwise_conv_3x3_s8 (no buffer) on scalar/DSP; MVE's
    # optimized kernel: 4 * 124 channels * 9 taps.
    ("dw3x3", "DEPTHWISE_CONV2D_S8", (1, 7, 7, 6), (1, 3, 3, 6), (1, 7, 7, 6), _p(pad_top=1, pad_left=1),
     (0, 0, 4464)),
    # 3x3 with padding 2: DSP's optimized kernel, int16 window: 4 channels * 9 * 2.
    ("dw3x3_pad2", "DEPTHWISE_CONV2D_S8", (1, 5, 5, 4), (1, 3, 3, 4), (1, 7, 7, 4), _p(pad_top=2, pad_left=2),
     (0, 72, 4464)),
    # 5x5: DSP 16 * 25 * 2; MVE 4 * 124 * 25.
    ("dw5x5", "DEPTHWISE_CONV2D_S8", (1, 8, 8, 16), (1, 5, 5, 16), (1, 8, 8, 16), _p(pad_top=2, pad_left=2),
     (0, 800, 12400)),
    # Channel multiplier 2, batch 2, dilation 2: the generic kernel, no buffer.
    ("dw_mult2", "DEPTHWISE_CONV2D_S8", (1, 9, 9, 3), (1, 3, 3, 6), (1, 4, 4, 6), _p(stride_h=2, stride_w=2),
     (0, 0, 0)),
    ("dw_batch2", "DEPTHWISE_CONV2D_S8", (2, 5, 5, 4), (1, 3, 3, 4), (2, 5, 5, 4), _p(pad_top=1, pad_left=1),
     (0, 0, 0)),
    ("dw_dilated", "DEPTHWISE_CONV2D_S8", (1, 9, 9, 4), (1, 3, 3, 4), (1, 5, 5, 4), _p(dilation_h=2, dilation_w=2),
     (0, 0, 0)),
    # One input channel, 8 outputs: MVE runs it as a regular convolution (above 1 output channel with GCC):
    # its im2col (9 columns: 4*16) plus the 8*3*3 transposed weights.
    ("dw_one_in_ch", "DEPTHWISE_CONV2D_S8", (1, 6, 6, 1), (1, 3, 3, 8), (1, 6, 6, 8), _p(pad_top=1, pad_left=1),
     (0, 0, 136)),
    # Fully connected: MVE's kernel sums, int32 per output.
    ("linear", "LINEAR_S8", (2, 12), (20, 12), (2, 20), {}, (0, 0, 80)),
    # Avg pool: DSP's int32 sum per channel.
    ("avgpool", "AVG_POOL2D_S8", (1, 8, 8, 4), None, (1, 4, 4, 4), {"kernel_h": 2, "kernel_w": 2}, (0, 16, 0)),
    ("maxpool", "MAX_POOL2D_S8", (1, 8, 8, 4), None, (1, 4, 4, 4), {"kernel_h": 2, "kernel_w": 2}, (0, 0, 0)),
]


@pytest.mark.parametrize("case", SHAPES, ids=[s[0] for s in SHAPES])
def test_buffer_size_per_isa_matches_hand_derived(case) -> None:
    _, code, x, w, y, params, sizes = case
    assert tuple(buffer_size(code, isa, x, w, y, params) for isa in ISAS) == sizes


def test_scratch_bytes_is_the_largest_over_isas_for_convolutions_only() -> None:
    for _, code, x, w, y, params, sizes in SHAPES:
        want = max(sizes) if code in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8") else 0
        assert scratch_bytes(code, x, w, y, params) == want, code
    # LINEAR_S8's MVE kernel sums are the folded bias; pools have no scratch operand.
    assert scratch_bytes("LINEAR_S8", (2, 12), (20, 12), (2, 20), {}) == 0
    assert scratch_bytes("ADD_S8", (1, 4), None, (1, 4), {}) == 0


def test_compiled_program_plans_the_scratch_operand(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Fn(lambda m, x: m[1](F.relu(m[0](x))), nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 1)).eval()
    c = compile(model, (torch.randn(1, 3, 8, 8),), "mps3-an547", tmp_path, quant="int8",
                calibration=calib([(1, 3, 8, 8)]), progress=False)
    convs = [op for op in c.graph.ops if op.code == "CONV2D_S8"]
    # One operand per op, the larger of what the backends ask: CMSIS-NN's
    # 128 B for the 3x3 (its 1x1 needs none), the portable fast paths' for both.
    assert [len(op.inputs) for op in convs] == [6, 6]
    assert [c.graph.tensors[op.inputs[5]].dims for op in convs] == [(max(128, conv_bytes(27)),), (conv_bytes(8),)]
    scratch = c.graph.tensors[convs[0].inputs[5]]
    assert scratch.dtype == "I8" and scratch.buffer is not None
    step = c.graph.ops.index(convs[0])
    assert c.plan.lifetimes[scratch.buffer] == (step, step)  # live during its op only


def test_cmsis_nn_build_without_the_env_var_names_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(CMSIS_NN_ENV, raising=False)
    compile(nn.Linear(4, 2).eval(), (torch.randn(1, 4),), "mps2-an386", tmp_path, quant="int8",
            calibration=calib([(1, 4)]), progress=False)
    with pytest.raises(BuildError, match=CMSIS_NN_ENV):
        build_firmware(tmp_path, kernels="cmsis-nn")
    monkeypatch.setenv(CMSIS_NN_ENV, str(tmp_path))  # not a checkout
    with pytest.raises(BuildError, match=r"not a CMSIS-NN checkout"):
        build_firmware(tmp_path, kernels="cmsis-nn")
    with pytest.raises(BuildError, match="unknown kernel set"):
        build_firmware(tmp_path, kernels="cmsis")


def test_kernel_table_default_is_unchanged_and_cmsis_nn_overrides_its_ops() -> None:
    codes = ["QUANTIZE_S8", "CONV2D_S8", "LUT_S8", "LINEAR_S8"]
    portable = kernel_table.kernel_table_source(codes)
    assert "cmsis_nn" not in portable and "&portable::kConv2dS8," in portable
    table = kernel_table.kernel_table_source(codes, "cmsis-nn")
    assert "&cmsis_nn::kConv2dS8," in table and "&cmsis_nn::kLinearS8," in table
    assert "&portable::kQuantizeS8," in table and "&portable::kLutS8," in table
    assert '#include "kernels/cmsis_nn/kernels.h"' in table


# ---------------------------------------------------------------------------------------------
# Against CMSIS-NN's own C functions

HOST_MAIN = r"""
#include <stdio.h>
#include "arm_nnfunctions.h"

static void conv(const char* name, cmsis_nn_dims in, cmsis_nn_dims f, cmsis_nn_dims out, cmsis_nn_conv_params p) {
  printf("%s %d %d %d\n", name, (int)arm_convolve_wrapper_s8_get_buffer_size(&p, &in, &f, &out),
         (int)arm_convolve_wrapper_s8_get_buffer_size_dsp(&p, &in, &f, &out),
         (int)arm_convolve_wrapper_s8_get_buffer_size_mve(&p, &in, &f, &out));
}
/* A 1xN shape padded other than TFLite's way: firmware/kernels/cmsis_nn/conv_s8.cc calls arm_convolve_s8. */
static void conv_uneven(const char* name, cmsis_nn_dims in, cmsis_nn_dims f) {
  printf("%s %d %d %d\n", name, (int)arm_convolve_s8_get_buffer_size(&in, &f),
         (int)arm_convolve_s8_get_buffer_size(&in, &f), (int)arm_convolve_s8_get_buffer_size_mve(&in, &f));
}
static void dw(const char* name, cmsis_nn_dims in, cmsis_nn_dims f, cmsis_nn_dims out, cmsis_nn_dw_conv_params p) {
  printf("%s %d %d %d\n", name, (int)arm_depthwise_conv_wrapper_s8_get_buffer_size(&p, &in, &f, &out),
         (int)arm_depthwise_conv_wrapper_s8_get_buffer_size_dsp(&p, &in, &f, &out),
         (int)arm_depthwise_conv_wrapper_s8_get_buffer_size_mve(&p, &in, &f, &out));
}
static void fc(const char* name, cmsis_nn_dims f) {
  printf("%s %d %d %d\n", name, (int)arm_fully_connected_s8_get_buffer_size(&f),
         (int)arm_fully_connected_s8_get_buffer_size_dsp(&f), (int)arm_fully_connected_s8_get_buffer_size_mve(&f));
}
static void avg(const char* name, int out_w, int ch) {
  printf("%s %d %d %d\n", name, (int)arm_avgpool_s8_get_buffer_size(out_w, ch),
         (int)arm_avgpool_s8_get_buffer_size_dsp(out_w, ch), (int)arm_avgpool_s8_get_buffer_size_mve(out_w, ch));
}
int main(void) {
@CALLS@
  return 0;
}
"""


UNEVEN_1XN = {"conv1xn_asym"}  # left padding not total // 2: arm_convolve_s8, not the 1xN kernel


def _host_calls() -> str:
    calls = []
    for name, code, x, w, y, p, _ in SHAPES:
        tiles = (f"{{{p.get('stride_w', 1)}, {p.get('stride_h', 1)}}}, {{{p.get('pad_left', 0)}, {p.get('pad_top', 0)}}}, "
                 f"{{{p.get('dilation_w', 1)}, {p.get('dilation_h', 1)}}}, {{-128, 127}}")
        dims = lambda d: "(cmsis_nn_dims){" + ", ".join(map(str, d)) + "}"  # noqa: E731
        if code == "CONV2D_S8" and name in UNEVEN_1XN:
            calls.append(f'  conv_uneven("{name}", {dims(x)}, {dims(w)});')
        elif code == "CONV2D_S8":
            calls.append(f'  conv("{name}", {dims(x)}, {dims(w)}, {dims(y)}, (cmsis_nn_conv_params){{0, 0, {tiles}}});')
        elif code == "DEPTHWISE_CONV2D_S8":
            calls.append(f'  dw("{name}", {dims(x)}, {dims(w)}, {dims(y)}, '
                         f'(cmsis_nn_dw_conv_params){{0, 0, {w[3] // x[3]}, {tiles}}});')
        elif code == "LINEAR_S8":
            calls.append(f'  fc("{name}", (cmsis_nn_dims){{{w[1]}, 1, 1, {w[0]}}});')
        elif code == "AVG_POOL2D_S8":
            calls.append(f'  avg("{name}", {y[2]}, {x[3]});')
    return "\n".join(calls)


@needs_cmsis_nn
def test_buffer_size_equals_cmsis_nn_c_functions(tmp_path: Path) -> None:
    root = cmsis_nn_dir()
    src = root / "Source"
    sources = [src / "ConvolutionFunctions" / "arm_convolve_get_buffer_sizes_s8.c",
               src / "ConvolutionFunctions" / "arm_depthwise_conv_get_buffer_sizes_s8.c",
               src / "FullyConnectedFunctions" / "arm_fully_connected_get_buffer_sizes_s8.c",
               src / "PoolingFunctions" / "arm_avgpool_get_buffer_sizes_s8.c"]
    main = tmp_path / "sizes.c"
    main.write_text(HOST_MAIN.replace("@CALLS@", _host_calls()))
    exe = tmp_path / "sizes"
    proc = subprocess.run(["gcc", "-O1", "-w", f"-I{root / 'Include'}", str(main), *map(str, sources), "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        name, *sizes = line.split()
        got[name] = tuple(int(s) for s in sizes)  # host build: the generic function is the scalar one
    cases = {s[0]: s for s in SHAPES if s[1] != "MAX_POOL2D_S8"}
    assert set(got) == set(cases)
    for name, (_, code, x, w, y, p, _) in cases.items():
        assert tuple(buffer_size(code, isa, x, w, y, p) for isa in ISAS) == got[name], name


# ---------------------------------------------------------------------------------------------
# Models on M4, M33 and M55, bit for bit

BOARDS = ["mps2-an386", "mps2-an505", "mps3-an547"]  # Cortex-M4 (DSP), M33 (DSP), M55 (MVE)


class _Paths(nn.Module):
    """Kernel variants test_quant's cases do not reach: a 1xN convolution (height 1),
    a 5x5 depthwise (DSP's buffered kernel), an element-wise mul of equal
    shapes and an avg pool."""

    def __init__(self) -> None:
        super().__init__()
        self.c1xn = nn.Conv2d(4, 8, (1, 3), padding=(0, 1))
        self.dw5 = nn.Conv2d(16, 16, 5, padding=2, groups=16)
        self.pw = nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.relu(self.c1xn(x))
        a = F.relu(self.dw5(z))
        b = self.pw(z)
        return y, F.avg_pool2d(a * b, 2)


CASE_NAMES = ["conv_1xn_dilated", "conv_stride2_relu6", "depthwise", "depthwise_mult2", "add_two_convs_relu",
              "mul_inputs_broadcast", "maxpool", "global_avgpool_linear_softmax", "linear_relu_chain",
              "softmax_wide"]
MODELS = [*CASE_NAMES, "cmsis_paths", "ds_cnn", "resnet8"]


def _make(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], list, list[list[np.ndarray]]]:
    """(model, example, calibration, 3 samples)."""
    if name in ("ds_cnn", "resnet8"):
        sys.path.insert(0, str(REPO / "examples"))
        import mlperf_tiny as mt

        model, example = mt.MODELS[name]()
        cal = mt.CALIBRATION[name]
        return model, example, list(cal(8, 1)), [[x] for x in cal(2, 7)]
    torch.manual_seed(sum(map(ord, name)))
    if name == "cmsis_paths":
        model, shapes = _Paths().eval(), [(1, 4, 1, 12), (1, 16, 8, 8)]
    else:
        factory, shapes, _ = CASES[name]
        model = factory().eval()
    example = tuple(torch.randn(*s) for s in shapes)
    return model, example, calib(shapes), [list(s) for s in calib(shapes, n=3, seed=1)]


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    """name -> (program dir compiled for mps3-an547, samples, expected outputs); built on demand."""
    cache: dict[str, tuple[Path, list, list]] = {}

    def get(name: str):
        if name not in cache:
            model, example, cal, samples = _make(name)
            out = tmp_path_factory.mktemp(f"prog-{name}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(model, example, "mps3-an547", out, quant="int8", calibration=cal, progress=False)
            expected, tol = runner.expected(out, samples)
            assert tol is None
            cache[name] = (out, samples, expected)
        return cache[name]

    return get


def retarget(src: Path, dst: Path, board: str) -> None:
    """Put the program compiled in `src` in `dst` for `board`: the same
    model.pte (hence kernels.txt, kernel_table.cc and the C API); only where its arena and
    program go (model.json, model_arenas.*) follows the board. Files are
    written, not copied with their times, so make rebuilds what changed."""
    b = load_board(board)
    meta = json.loads((src / "model.json").read_text())
    pte = (src / "model.pte").read_bytes()
    size = meta["arenas"][0]["size"]
    arena = serialize.ArenaSpec(choose_arena_memory(b, size), size)
    meta.update(board=b.name, program_memory=choose_program_memory(b, len(pte), "int8"),
                arenas=[{"name": arena.name, "section": serialize.arena_section(arena), "size": size}])
    dst.mkdir(parents=True, exist_ok=True)
    symbol = meta.get("symbol", serialize.DEFAULT_SYMBOL)  # the model's C API (NAME.h, NAME.cc) builds with it
    for name in ("model.pte", "model_pte.h", "model_pte.c", "kernels.txt", "kernel_table.cc", f"{symbol}.h",
                 f"{symbol}.cc"):
        (dst / name).write_bytes((src / name).read_bytes())
    h, c = serialize.model_arena_sources([arena])
    (dst / "model_arenas.h").write_text(h)
    (dst / "model_arenas.c").write_text(c)
    (dst / "model.json").write_text(json.dumps(meta, indent=2) + "\n")


@pytest.fixture(scope="session")
def board_dir(tmp_path_factory):
    """One build directory per board: every model of a board is built there, so
    the runtime's objects are compiled once per board."""
    dirs: dict[str, Path] = {}

    def get(board: str) -> Path:
        if board not in dirs:
            dirs[board] = tmp_path_factory.mktemp(f"fw-{board}")
        return dirs[board]

    return get


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("board", BOARDS)
def test_cmsis_nn_bit_exact_in_qemu(board: str, name: str, compiled, board_dir) -> None:
    src, samples, expected = compiled(name)
    out = board_dir(board)
    retarget(src, out, board)
    build_firmware(out, kernels="cmsis-nn")
    used = kernel_set(out)
    assert all(used[c] == "cmsis-nn" for c in used if c in kernel_table.available_kernels("cmsis-nn")), used
    batch = [np.stack([s[i] for s in samples]) for i in range(len(samples[0]))]
    res = runner.run(out, batch, sim="qemu")
    assert res.exit_code == 0, res.raw[-1500:]
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, f"{name} on {board}: {mismatch}"
