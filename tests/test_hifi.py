"""The Cadence HiFi backend (torchmcu.backends.hifi, firmware/delegates/hifi/, torchmcu.sim.xtrun).

What runs here, without any Cadence tool:
- the HiFi board descriptions and boards.py's Xtensa support;
- the NumPy model of nnlib's arithmetic (hifi/nnlib.py) against the project's
  reference (torchmcu.reference), bit for bit, on the layers of DS-CNN with
  their real quantization parameters and random inputs (several seeds), and
  its requantization over every shift, ties and near-ties included;
- nnlib's scratch sizes (ports of its getsize functions) against values
  worked by hand from the library's formulas;
- `torchmcu compile --board hifi4-generic` of DS-CNN: every conv/fc op
  claimed, planned scratch, the report's section and estimates;
- the generated kernel table of the "hifi" kernel set;
- the Xtensa build's command lines and the xt-run output parser, on
  hand-written transcripts (tests/data/xtsim/: NOT recordings).

Skipped here, with the variable named: the host g++ syntax/API check of the
delegate against nnlib's real headers (TORCHMCU_NNLIB_DIR), and the Xtensa
build and xt-run run (XTENSA_TOOLCHAIN_PATH, XTENSA_CORE, TORCHMCU_NNLIB_DIR).
Nothing here runs on an Xtensa target.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from torchmcu import boards as B
from torchmcu import reference as ref
from torchmcu import sim
from torchmcu.backends.hifi import build as hb
from torchmcu.backends.hifi import nnlib, partition
from torchmcu.builder import kernel_table
from torchmcu.ir import PGraph
from torchmcu.sim import xtrun as xtsim

DATA = REPO / "tests" / "data" / "xtsim"
SEEDS = (0, 1, 2)
CLAIMED_CODES = {"CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8"}


# ---------------------------------------------------------------------------------------------
# Boards


def test_hifi_boards_load_with_documented_memories() -> None:
    rt = B.load_board("imxrt600-hifi4")
    assert rt.core.arch == "xtensa" and rt.cpu == "hifi4" and rt.clock_hz == 594_000_000
    assert rt.core.xtensa_core == "nxp_rt600_RI2021_8_newlib"
    # Zephyr's nxp_rt685_hifi4.dtsi: 64 KiB data TCM at 0x24000000, 64 KiB instruction TCM at 0x24020000.
    assert (rt.memory("dtcm").base, rt.memory("dtcm").size) == (0x24000000, 64 * 1024)
    assert (rt.memory("itcm").base, rt.memory("itcm").size) == (0x24020000, 64 * 1024)
    assert rt.memory("sram").size == 512 * 1024
    gen = B.load_board("hifi4-generic")
    assert gen.core.arch == "xtensa" and gen.core.xtensa_core == ""
    for b in (rt, gen):
        assert b.qemu_machine == "" and not b.core.has_fpu and b.core.mve == "none"
        assert b.cflags == ["-mlongcalls", "-mtext-section-literals"]
        ld = b.ldflags("")
        assert "-mlsp=sim" in ld and not any(f.startswith("-T") for f in ld)
        assert any("--wrap=malloc" in f for f in ld)  # no heap on the DSP either


def test_list_boards_keeps_cortex_m_by_default() -> None:
    arm = B.list_boards()
    assert "mps3-an547" in arm and not {"hifi4-generic", "imxrt600-hifi4"} & set(arm)
    assert B.list_boards("xtensa") == ["hifi4-generic", "imxrt600-hifi4"]
    assert set(B.list_boards(None)) == set(arm) | {"hifi4-generic", "imxrt600-hifi4"}
    for name in arm:  # every Cortex-M board is as before
        assert B.load_board(name).core.arch == "cortex-m"


def test_xtensa_board_refuses_arm_options(tmp_path: Path) -> None:
    text = (B.BOARDS_DIR / "hifi4-generic.toml").read_text().replace('cpu = "hifi4"', 'cpu = "hifi4"\nmve = "int"')
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(B.BoardError, match="no Arm fpu"):
        B.load_board(path)
    path.write_text(text.replace('arch = "xtensa"', 'arch = "riscv"'))
    with pytest.raises(B.BoardError):
        B.load_board(path)


# ---------------------------------------------------------------------------------------------
# nnlib's requantization against the reference's


def test_requantize_bit_exact_for_every_shift() -> None:
    rng = np.random.default_rng(0)
    n = 200_000
    acc = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64)
    acc[: n // 2] >>= rng.integers(0, 31, n // 2)  # plenty of small magnitudes too
    mult = rng.integers(1 << 30, 1 << 31, n, dtype=np.int64)
    shift = rng.integers(-31, 31, n)
    got, want = nnlib.requantize(acc, mult, shift), ref.requantize(acc, mult, shift)
    # Where acc * 2^left overflows 32 bits nnlib saturates it first (the reference does not), so the
    # 32-bit results differ; both are then at least 2^29 in magnitude, of the same sign: the same int8.
    fits = np.abs(acc << np.maximum(shift, 0)) < (1 << 31)
    assert 0.3 < fits.mean() < 0.9
    np.testing.assert_array_equal(got[fits], want[fits])
    assert np.all(np.abs(got[~fits]) >= 1 << 29) and np.all(np.sign(got[~fits]) == np.sign(want[~fits]))
    for zp in (-128, 0, 127):
        np.testing.assert_array_equal(np.clip(got + zp, -128, 127), np.clip(want + zp, -128, 127))


@pytest.mark.parametrize("r", range(31))
def test_requantize_ties_and_near_ties(r: int) -> None:
    """The cases rounding modes disagree on: after the multiply (by 1/2 here) the value is k + 1/2,
    or one LSB of the product either side of it, before the division by 2^r. (k is bounded so that
    the accumulator fits 32 bits: at r = 31 no tie does.)"""
    bound = min(3000, 1 << (30 - r))
    k = np.arange(-bound, bound, dtype=np.int64)
    h = ((2 * k + 1) << (r - 1)) if r else k
    for delta in (-1, 0, 1):
        acc = 2 * (h + delta)  # * 2^30 / 2^31 = h + delta exactly
        np.testing.assert_array_equal(nnlib.requantize(acc, 1 << 30, -r), ref.requantize(acc, 1 << 30, -r))


def test_requantize_keeps_32_guard_bits() -> None:
    # h / 2^20 = -0.5 + 2^-20 rounds to 0. A 64-bit stage with only 16 bits below the product (the
    # 56-bit Q17.47 of older HiFi cores) would first truncate to -0.5 and round away to -1.
    acc = np.int64(-(1 << 20) + 1)
    assert int(ref.requantize(acc, 1 << 30, -20)) == 0 == int(nnlib.requantize(acc, 1 << 30, -20))
    assert nnlib.GUARD_BITS == 32
    # Shifts outside the reference's range keep an op on the portable kernels (which zero its output).
    assert partition._shift_reason(np.array([-3, -32])) is not None
    assert partition._shift_reason(np.array([31])) is not None
    assert partition._shift_reason(np.array([-31, -16, 30])) is None


# ---------------------------------------------------------------------------------------------
# DS-CNN: its program graph, the claims, and each claimed op's nnlib model against the reference


@pytest.fixture(scope="module")
def ds_cnn_graph() -> PGraph:
    """DS-CNN's int8 program graph as the layout leaves it (nothing claimed): copy before changing."""
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import mlperf_tiny as mt
    finally:
        sys.path.remove(str(REPO / "examples"))
    from torchmcu.frontend.capture import capture
    from torchmcu.frontend.quantize import quantize
    from torchmcu.passes import lower, to_program_graph

    model, example = mt.make_ds_cnn()
    q = quantize(model, example, list(mt.calibration_ds_cnn(4, seed=3)), progress=False)
    return to_program_graph(lower(capture(q, example), "float"))


@pytest.fixture(scope="module")
def ds_cnn(ds_cnn_graph: PGraph) -> tuple[PGraph, partition.HifiPlan]:
    pg = copy.deepcopy(ds_cnn_graph)
    return pg, partition.claim(pg)


def test_ds_cnn_every_conv_and_fc_is_claimed(ds_cnn) -> None:
    pg, plan = ds_cnn
    weighted = [i for i, op in enumerate(pg.ops) if op.code in CLAIMED_CODES]
    assert len(weighted) == 10  # stem, 4 x (depthwise, pointwise), fc
    assert [c.index for c in plan.claims] == weighted
    assert all(pg.ops[i].backend == "hifi" for i in weighted)
    calls = {c.call for c in plan.claims}
    assert calls == {"xa_nn_conv2d_per_chan_sym8sxasym8s", "xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s",
                     "xa_nn_matmul_per_chan_sym8sxasym8s_asym8s"}
    # Pooling and softmax stay portable, each with its reason.
    rejected = {code: reason for _, _, code, reason in plan.rejected}
    assert set(rejected) == {"AVG_POOL2D_S8", "SOFTMAX_S8"}
    # The stem has one input channel: nnlib runs it as a depthwise convolution itself.
    assert plan.claims[0].args["runs_as"] == "xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s"


def _reference_output(pg: PGraph, i: int, x: np.ndarray) -> np.ndarray:
    op = pg.ops[i]
    p = op.params[1]
    w, bias, mult, shift = (pg.tensors[t].const for t in op.inputs[1:5])
    y = pg.tensors[op.outputs[0]].dims
    common = {"output_offset": p["output_offset"], "act_min": p["act_min"], "act_max": p["act_max"]}
    if op.code == "LINEAR_S8":
        return ref.linear(x.reshape(-1, w.shape[1]), w, bias, mult, shift, **common).reshape(y)
    conv = dict(stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_top"], p["pad_left"]),
                dilation=(p["dilation_h"], p["dilation_w"]), input_offset=p["input_offset"], out_hw=(y[1], y[2]),
                **common)
    if op.code == "CONV2D_S8":
        return ref.conv2d(x, w, bias, mult, shift, **conv)
    return ref.depthwise_conv2d(x, w, bias, mult, shift, depth_multiplier=p["multiplier"], **conv)


@pytest.mark.parametrize("seed", SEEDS)
def test_nnlib_model_bit_exact_with_reference_on_ds_cnn(ds_cnn, seed: int) -> None:
    pg, plan = ds_cnn
    rng = np.random.default_rng(seed)
    compared = 0
    for c in plan.claims:
        op = pg.ops[c.index]
        dims = pg.tensors[op.inputs[0]].dims
        zp = -int(op.params[1]["input_offset"])
        # Half the inputs anywhere in int8, half near the zero point (outputs inside the clamp range).
        x = rng.integers(-128, 128, dims).astype(np.int8)
        near = np.clip(zp + rng.integers(-12, 13, dims), -128, 127).astype(np.int8)
        for sample in (x, near):
            got = partition.run_model(pg, c, sample)
            want = _reference_output(pg, c.index, sample)
            np.testing.assert_array_equal(got, want, err_msg=f"{c.name} ({c.call}), seed {seed}")
            compared += got.size
        assert len(np.unique(partition.run_model(pg, c, near))) > 2, c.name  # not all clamped
    assert compared > 140_000  # 10 layers x 2 inputs: 9 x 8000 conv outputs x 2 + 24


def test_nnlib_model_detects_a_wrong_argument(ds_cnn) -> None:
    """The comparison can fail: the same call with the padding off by one differs."""
    pg, plan = ds_cnn
    c = next(c for c in plan.claims if c.call == "xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s")
    x = np.random.default_rng(5).integers(-128, 128, pg.tensors[pg.ops[c.index].inputs[0]].dims).astype(np.int8)
    wrong = partition.Claim(c.index, c.name, c.code, c.call, {**c.args, "x_padding": 0, "y_padding": 0}, c.macs,
                            c.scratch_bytes)
    # Output dims stay; the window moves by a row and a column.
    assert not np.array_equal(partition.run_model(pg, wrong, x), _reference_output(pg, c.index, x))


def test_per_tensor_fully_connected_bit_exact() -> None:
    """xa_nn_fully_connected_sym8sxasym8s_asym8s (per-tensor requantization, one row), which DS-CNN's
    per-channel weights do not use: against reference.linear with the input offset folded into the bias."""
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        w = rng.integers(-127, 128, (12, 64)).astype(np.int8)
        x = rng.integers(-128, 128, 64).astype(np.int8)
        zp_in = int(rng.integers(-128, 128))
        bias = rng.integers(-5000, 5000, 12)
        m, sh = ref.quantize_multiplier(float(rng.uniform(1e-4, 2e-2)))
        folded = ref.fold_linear_bias(bias, w, -zp_in)
        want = ref.linear(x[None], w, folded, [m], [sh], output_offset=7)[0]
        got = nnlib.fully_connected_sym8sxasym8s_asym8s(w, x, folded, input_zero_bias=0, out_multiplier=m,
                                                        out_shift=sh, out_zero_bias=7)
        np.testing.assert_array_equal(got, want)
        # nnlib applying the input zero bias itself is the same sum.
        got2 = nnlib.fully_connected_sym8sxasym8s_asym8s(w, x, bias, input_zero_bias=-zp_in, out_multiplier=m,
                                                         out_shift=sh, out_zero_bias=7)
        np.testing.assert_array_equal(got2, want)


def test_ops_outside_the_exact_range_stay_portable(ds_cnn_graph, ds_cnn) -> None:
    pg = copy.deepcopy(ds_cnn_graph)
    i = next(i for i, op in enumerate(pg.ops) if op.code == "DEPTHWISE_CONV2D_S8")
    shift = pg.tensors[pg.ops[i].inputs[4]]
    shift.const = shift.const.copy()
    shift.const[3] = 31  # outside the reference's range: the portable kernel zeros the output
    j = next(j for j, op in enumerate(pg.ops) if op.code == "CONV2D_S8" and j > i)
    pg.ops[j].params[1]["dilation_h"] = 2
    plan = partition.claim(pg)
    reasons = {k: r for k, _, _, r in plan.rejected}
    assert "shift outside" in reasons[i] and pg.ops[i].backend == "portable"
    assert "dilation" in reasons[j] and pg.ops[j].backend == "portable"
    assert len(plan.claims) == 8
    # Refused for a value only, the depthwise op keeps nnlib's scratch: the firmware kernel checks the
    # scratch by shape at load and reads the shifts at run.
    need = ds_cnn[1].claims[[c.index for c in ds_cnn[1].claims].index(i)].scratch_bytes
    assert pg.tensors[pg.ops[i].inputs[5]].nbytes >= need > 0


def test_nnlib_argument_checks() -> None:
    x = np.zeros((4, 4, 2), np.int8)
    k = np.zeros((2, 3, 3, 2), np.int8)
    kw = {"x_stride": 1, "y_stride": 1, "x_padding": 1, "y_padding": 1, "out_height": 4, "out_width": 4,
          "out_multiplier": [1 << 30] * 2, "out_shift": [-1, -1], "out_zero_bias": 0}
    with pytest.raises(nnlib.NnlibArgumentError):
        nnlib.conv2d_per_chan_sym8sxasym8s(x, k, [0, 0], input_zero_bias=-128, **kw)  # zero point 128
    with pytest.raises(nnlib.NnlibArgumentError):
        nnlib.conv2d_per_chan_sym8sxasym8s(x, k, None, input_zero_bias=0, **kw)
    with pytest.raises(nnlib.NnlibArgumentError):
        nnlib.conv2d_per_chan_sym8sxasym8s(x, k, [0, 0], input_zero_bias=0, **{**kw, "out_shift": [-32, 0]})


# ---------------------------------------------------------------------------------------------
# Scratch


def test_scratch_sizes_worked_by_hand() -> None:
    # Pointwise 1x1, 64 -> 64 on 25x5 (nnlib's standard convolution): 8 (alignment) + 24 + 7 (state,
    # room to align it) + circular buffer 25 rows x 1 x 64 = 1600 (a multiple of 16) + 7 + 8 (bus width).
    assert nnlib.conv2d_scratch_bytes(25, 5, 64, 1, 1, 1, 0, 1, 0, 25, 5, 64) == 8 + 31 + 1600 + 7 + 8
    # Depthwise 3x3 on 25x5x64, pad 1: state 28 -> 32; buffer max(3 + 24, 1 + 25) = 27 rows x 64 x 3
    # = 5184; kernel copy 3 x 3 x 4 = 36 -> 40.
    assert nnlib.conv2d_depthwise_getsize(25, 5, 64, 3, 3, 1, 1, 1, 1, 1, 25, 5) == 32 + 5184 + 40
    # DS-CNN's stem: one input channel, so the depthwise route with multiplier 64: 8 + the kernel
    # rearranged (64 x 10 x 4 = 2560) + depthwise scratch: rows max(10 + 24 x 2, 5 + 49) = 58 x 64 x 4
    # = 14848, kernel 10 x 4 x 4 = 160, state 32.
    assert nnlib.conv2d_scratch_bytes(49, 10, 1, 10, 4, 2, 5, 2, 1, 25, 5, 64) == 8 + 2560 + 14848 + 160 + 32
    # Channels not a multiple of 4: the padded-kernel configuration needs more (kernel copy).
    plain = nnlib.conv2d_getsize(8, 8, 3, 3, 3, 3, 1, 1, 1, 1, 8, 8, 16, padding_conv2d_std=False)
    padded = nnlib.conv2d_getsize(8, 8, 3, 3, 3, 3, 1, 1, 1, 1, 8, 8, 16, padding_conv2d_std=True)
    assert padded > plain and nnlib.conv2d_scratch_bytes(8, 8, 3, 3, 3, 1, 1, 1, 1, 8, 8, 16) == padded


def test_claimed_convolutions_have_their_scratch_planned(ds_cnn) -> None:
    pg, plan = ds_cnn
    for c in plan.claims:
        op = pg.ops[c.index]
        if c.scratch_bytes:
            t = pg.tensors[op.inputs[5]]
            assert t.buffer is not None and t.const is None and t.nbytes >= c.scratch_bytes
            assert pg.buffers[t.buffer] >= c.scratch_bytes


# ---------------------------------------------------------------------------------------------
# Compile for hifi4-generic: the report


def test_compile_ds_cnn_for_hifi4_generic(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import mlperf_tiny as mt
    finally:
        sys.path.remove(str(REPO / "examples"))
    from torchmcu.compiler import compile

    model, example = mt.make_ds_cnn()
    out = tmp_path / "ds_cnn"
    res = compile(model, example, "hifi4-generic", out, quant="int8", progress=False,
                  calibration=list(mt.calibration_ds_cnn(4, seed=3)))
    r = json.loads((out / "report.json").read_text())
    h = r["hifi"]
    weighted = [op for op in r["ops"] if op["code"] in CLAIMED_CODES]
    assert len(weighted) == 10 and all(op["backend"] == "hifi" for op in weighted)
    assert [o["index"] for o in h["ops"]] == [op["index"] for op in weighted]
    assert r["coverage"]["hifi"] == 10
    assert h["macs"] == sum(op["macs"] for op in weighted) > 2_000_000
    for o in h["ops"]:
        assert o["est_cycles"] == -(-o["macs"] // partition.MACS_PER_CYCLE)
        assert o["est_us"] == pytest.approx(o["est_cycles"] / 600e6 * 1e6, abs=1e-3)
    assert h["est_cycles"] == sum(o["est_cycles"] for o in h["ops"]) and h["run_on_target"] is False
    assert "32x16-bit MACs" in h["estimate_basis"]
    text = (out / "report.txt").read_text()
    assert "HiFi 4 (nnlib) on hifi4-generic: 10 ops on the DSP" in text and "not run on an Xtensa target" in text
    # Each claimed convolution's scratch is in the plan, in the board's memories.
    plan = json.loads((out / "memory_plan.json").read_text())
    planned = {t for reg in plan["regions"] for b in reg["buffers"] for t in b["tensors"]}
    for o in h["ops"]:
        if o["scratch_bytes"]:
            assert f"{o['name']}_scratch" in planned
    assert {reg["name"] for reg in plan["regions"]} <= {"dram", "sysram"}
    # The kernel table of the hifi kernel set for this program.
    codes = [c.strip() for c in (out / "kernels.txt").read_text().split()]
    table = kernel_table.kernel_table_source(codes, "hifi")
    for code, sym in (("CONV2D_S8", "kConv2dS8"), ("DEPTHWISE_CONV2D_S8", "kDepthwiseConv2dS8"),
                      ("LINEAR_S8", "kLinearS8")):
        assert f"{code} */ &hifi::{sym}," in table
    assert "SOFTMAX_S8 */ &portable::kSoftmaxS8," in table and '#include "delegates/hifi/kernels.h"' in table
    assert res.report["hifi"] == h
    # The program with nnlib's scratch planned still loads and runs bit-exactly on the portable kernels
    # of the host runner (the host, not the DSP: this checks the plan and the program, not nnlib).
    if shutil.which("g++"):
        from torchmcu.sim import runner

        inputs = [mt.calibration_ds_cnn(2, seed=11)]  # two samples: [2, 1, 1, 49, 10]
        host = runner.run(out, inputs, sim="host")
        assert host.exit_code == 0, host.raw
        want, _ = runner.expected(out, runner.split_samples(runner.load_meta(out), inputs))
        for g, w in zip(host.outputs, want):
            np.testing.assert_array_equal(g, w)
    # The generated table and the ISS entry and platform against this model's headers: a host g++ syntax
    # check only (no Xtensa compiler here; the kernels need nnlib's headers, checked below).
    if shutil.which("g++"):
        (out / "kernel_table_hifi.cc").write_text(table)
        for src in (out / "kernel_table_hifi.cc", *hb.ENTRY_SOURCES):
            r = subprocess.run(["g++", "-std=c++17", "-fno-exceptions", "-fno-rtti", "-Wall", "-Wextra", "-Werror",
                                "-fsyntax-only", f"-I{REPO / 'firmware'}", f"-I{REPO / 'firmware' / 'include'}",
                                f"-I{out}", *B.load_board("hifi4-generic").define_flags, str(src)],
                               check=False, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


def test_arm_boards_get_no_hifi_section(tmp_path: Path) -> None:
    import torch
    from torchmcu.compiler import compile

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    res = compile(model, (torch.randn(1, 8),), "mps2-an386", tmp_path, quant="int8", progress=False)
    assert "hifi" not in res.report and all(op.backend != "hifi" for op in res.graph.ops)


# ---------------------------------------------------------------------------------------------
# Firmware sources against nnlib's real headers (host g++: a syntax and API check only)

NNLIB_DIR = os.environ.get(hb.NNLIB_ENV)


@pytest.mark.skipif(not NNLIB_DIR, reason=f"{hb.NNLIB_ENV} not set (a checkout of foss-xtensa/nnlib-hifi4)")
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("src", [s.name for s in hb.KERNEL_SOURCES])
def test_delegate_sources_compile_against_nnlib_headers(src: str) -> None:
    """Not a build of the delegate: the host compiler checks the sources'
    syntax and every nnlib call against nnlib's declarations."""
    root = hb.nnlib_root()
    cmd = ["g++", "-std=c++17", "-fno-exceptions", "-fno-rtti", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
           f"-I{REPO / 'firmware'}", *(f"-I{p}" for p in hb.nnlib_includes(root)), str(hb.HIFI_DIR / src)]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------
# The Xtensa build's command lines, and the xt-run runner


def _fake_tools(tmp_path: Path, clang: bool = True) -> dict[str, str]:
    """An XtensaTools-shaped directory of stand-in executables (never run
    here) and a fake nnlib checkout holding only the header path the build
    checks for."""
    bin_dir = tmp_path / "XtensaTools" / "bin"
    bin_dir.mkdir(parents=True)
    for name in (("xt-clang", "xt-clang++") if clang else ("xt-xcc", "xt-xc++")) + ("xt-run",):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    nn = tmp_path / "nnlib-hifi4" / "xa_nnlib"
    (nn / "include" / "nnlib").mkdir(parents=True)
    (nn / "include" / "nnlib" / "xa_nnlib_api.h").write_text("/* stand-in: path check only */\n")
    return {hb.TOOLCHAIN_ENV: str(tmp_path / "XtensaTools"), hb.NNLIB_ENV: str(tmp_path / "nnlib-hifi4")}


def test_missing_variables_are_named(tmp_path: Path) -> None:
    board = B.load_board("hifi4-generic")
    with pytest.raises(Exception, match=hb.TOOLCHAIN_ENV):
        hb.xtensa_tools(board, {})
    with pytest.raises(Exception, match=hb.CORE_ENV):
        hb.xtensa_tools(board, {hb.TOOLCHAIN_ENV: str(tmp_path)})
    with pytest.raises(Exception, match=hb.NNLIB_ENV):
        hb.nnlib_root({})
    # The RT600 board names its core configuration; XTENSA_CORE overrides it.
    rt = B.load_board("imxrt600-hifi4")
    assert hb.xtensa_tools(rt, {hb.TOOLCHAIN_ENV: str(tmp_path)}).core == "nxp_rt600_RI2021_8_newlib"
    assert hb.xtensa_tools(rt, {hb.TOOLCHAIN_ENV: str(tmp_path), hb.CORE_ENV: "hifi4_ss"}).core == "hifi4_ss"
    assert not xtsim.XtRunner({}).available("hifi4-generic")
    with pytest.raises(sim.SimulatorNotFound, match=hb.TOOLCHAIN_ENV):
        xtsim.XtRunner({}).run("hifi4-generic", tmp_path / "fw.elf")


def test_build_command_lines(tmp_path: Path) -> None:
    env = {**_fake_tools(tmp_path), hb.CORE_ENV: "hifi4_core", hb.SYSTEM_ENV: "/opt/xtensa/registry"}
    board = B.load_board("hifi4-generic")
    tools = hb.xtensa_tools(board, env)
    nn = hb.nnlib_root(env)
    assert nn == tmp_path / "nnlib-hifi4" / "xa_nnlib"
    out = tmp_path / "model"
    out.mkdir()
    cmds = hb.commands(out, board, tools, nn, opt="-O2")
    core = ["--xtensa-core=hifi4_core", "--xtensa-system=/opt/xtensa/registry"]
    compiles, link = cmds[:-1], cmds[-1]
    assert len(compiles) == len(hb.sources(out))
    by_src = {c[c.index("-c") + 1]: c for c in compiles}
    conv = by_src[str(hb.HIFI_DIR / "conv_s8.cc")]
    assert conv[0] == str(tmp_path / "XtensaTools" / "bin" / "xt-clang++") and conv[1:3] == core
    for flag in ("-mlongcalls", "-mtext-section-literals", "-std=c++17", "-fno-exceptions", "-fno-rtti", "-O2",
                 f"-I{nn / 'include'}", f"-I{nn / 'include' / 'nnlib'}", "-DTMCU_BOARD_IO_SIZE=0x00100000u"):
        assert flag in conv, flag
    model_c = by_src[str(out / "model_pte.c")]
    assert model_c[0].endswith("xt-clang") and "-std=c11" in model_c
    assert str(out / "fw-xtensa" / "kernel_table_hifi.cc") in by_src
    assert str(hb.HIFI_DIR / "main_xtensa.cc") in by_src and str(hb.HIFI_DIR / "platform_xtensa.cc") in by_src
    assert link[0].endswith("xt-clang++") and link[1:3] == core and link[-2:] == ["-o", str(out / hb.ELF_NAME)]
    assert str(nn / "lib" / "xa_nnlib_hifi4.a") in link and "-mlsp=sim" in link
    assert hb.nnlib_build_command(nn, tools) == [
        "make", "-C", str(nn / "build"), "-f", "makefile_nn_lib_hifi4", "install", "SINGLE_ROUNDING=0",
        "XTENSA_CORE=hifi4_core", "XTENSA_SYSTEM=/opt/xtensa/registry"]
    # Older releases: xt-xcc / xt-xc++.
    old = _fake_tools(tmp_path / "old", clang=False)
    assert hb.xtensa_tools(board, {**old, hb.CORE_ENV: "c"}).cxx.name == "xt-xc++"


def test_xt_run_command_line(tmp_path: Path) -> None:
    env = {**_fake_tools(tmp_path), hb.CORE_ENV: "hifi4_core"}
    tools = hb.xtensa_tools(B.load_board("hifi4-generic"), env)
    assert xtsim.command(tools, "fw.elf", "io.bin") == [
        str(tmp_path / "XtensaTools" / "bin" / "xt-run"), "--xtensa-core=hifi4_core", "--mem_model", "fw.elf",
        "io.bin"]
    assert xtsim.XtRunner(env).available("hifi4-generic")
    with pytest.raises(sim.SimulatorNotFound, match="not an Xtensa core"):
        xtsim.XtRunner(env).run("mps3-an547", tmp_path / "fw.elf")
    assert isinstance(sim.get_runner("xt-run"), xtsim.XtRunner)


def test_parse_hand_written_transcripts() -> None:
    """tests/data/xtsim/: hand-written, NOT recordings of xt-run (see its README)."""
    text = (DATA / "hifi4_ds_cnn.txt").read_text()
    r = xtsim.result_from_output(["xt-run"], text, "", 0, False)
    assert r.exit_code == 0 and not r.timed_out
    c = r.cycles
    assert c["load_cycles"] == 18234 and c["calib_cycles"] == 41 and c["samples"] == 2
    assert len(c["op_cycles"]) == 14 and c["op_cycles"][1] == 51877
    assert c["sample_cycles"] == [420112, 420098]
    bad = xtsim.result_from_output(["xt-run"], (DATA / "hifi4_load_error.txt").read_text(), "", 0, False)
    assert bad.exit_code == 0x24 and bad.cycles["status"] == 36  # InvalidOp, whatever xt-run itself returned
    killed = xtsim.result_from_output(["xt-run"], "tmcu: load status=0 ticks=1 runs=1\n", "", -9, True)
    assert killed.timed_out and killed.exit_code == -9 and killed.cycles["status"] is None


def test_runner_plumbing_with_a_stand_in_xt_run(tmp_path: Path) -> None:
    """XtRunner.run end to end with a shell script in xt-run's place (NOT the ISS): it records its
    arguments and the io blob it was handed, and prints a hand-written transcript."""
    env = {**_fake_tools(tmp_path), hb.CORE_ENV: "hifi4_core"}
    script = Path(env[hb.TOOLCHAIN_ENV]) / "bin" / "xt-run"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'args.txt'}\ncp \"$4\" {tmp_path / 'blob.bin'}\n"
                      f"cat {DATA / 'hifi4_ds_cnn.txt'}\nexit 3\n")
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    res = xtsim.XtRunner(env).run("hifi4-generic", elf, b"TMIO-blob", timeout_s=30)
    args = (tmp_path / "args.txt").read_text().split()
    assert args[:3] == ["--xtensa-core=hifi4_core", "--mem_model", str(elf)] and args[3].endswith("io.bin")
    assert (tmp_path / "blob.bin").read_bytes() == b"TMIO-blob"
    assert res.exit_code == 0 and res.cycles["sample_cycles"] == [420112, 420098]  # the firmware's status line
    with pytest.raises(sim.IoBlobTooLarge):
        xtsim.XtRunner(env).run("hifi4-generic", elf, bytes(B.load_board("hifi4-generic").io_size + 1))


# ---------------------------------------------------------------------------------------------
# A real build and ISS run: only where Cadence's tools and nnlib are installed

HAVE_XTENSA = all(os.environ.get(v) for v in (hb.TOOLCHAIN_ENV, hb.CORE_ENV, hb.NNLIB_ENV))


@pytest.mark.skipif(not HAVE_XTENSA, reason=f"needs {hb.TOOLCHAIN_ENV}, {hb.CORE_ENV} and {hb.NNLIB_ENV} "
                                            "(Cadence's Xtensa tools with a HiFi 4 core, and nnlib)")
def test_ds_cnn_on_the_iss_matches_the_reference(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "examples"))
    try:
        import mlperf_tiny as mt
    finally:
        sys.path.remove(str(REPO / "examples"))
    from torchmcu.compiler import compile
    from torchmcu.sim import runner

    model, example = mt.make_ds_cnn()
    out = tmp_path / "ds_cnn"
    compile(model, example, "hifi4-generic", out, quant="int8", progress=False)
    elf = hb.build_firmware(out)
    inputs = [mt.calibration_ds_cnn(2, seed=9)]  # two samples: [2, 1, 1, 49, 10]
    meta = runner.load_meta(out)
    blob = runner.io_blob(runner.program_samples(meta, runner.split_samples(meta, inputs)))
    res = xtsim.XtRunner().run("hifi4-generic", elf, blob, timeout_s=600)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert res.cycles["samples"] == 2
    _, got = runner.parse_protocol(res.stdout, meta["outputs"])
    host = runner.run(out, inputs, sim="host")  # the portable kernels: bit-exact with the reference
    for g, h in zip(got, host.outputs):
        np.testing.assert_array_equal(g, h)
