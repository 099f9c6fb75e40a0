"""Memory planning (issue #4): the liveness lower bound on the bundled models,
aliasing (concat into slices, element-wise ops in place), row-band tiling
below the classic bound, placement over several memories with budgets and
pins, clear errors when a model does not fit, and what the report says."""

from __future__ import annotations

import json
import os
import random
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu import plan as P
from torchmcu.builder.firmware import build_firmware
from torchmcu.cli import main as cli_main
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.ir import PGraph, POp, PTensor
from torchmcu.plan.lifetimes import _align
from torchmcu.program import schema
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import digits
import mlperf_tiny as mt

MODELS = list(mt.MODELS)


@pytest.fixture(scope="module")
def bundled():
    """name -> (model, example, calibration) for every bundled model."""
    out = {name: (*mt.MODELS[name](), list(mt.CALIBRATION[name](16, 0))) for name in MODELS}
    return out


def _compile(bundled, name, out, **kw):
    model, example, calibration = bundled[name]
    return compile(model, example, kw.pop("board", "mps3-an547"), out, quant="int8", calibration=calibration,
                   progress=False, io="int8", **kw)


def _run_bit_exact(out: Path, x: np.ndarray, sim: str) -> None:
    """Runs the compiled int8 model on `x` and requires the reference's bits."""
    res = runner.run(out, [x], sim=sim)
    assert res.exit_code == 0, res.raw[-800:]
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), [x]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)


# -- the planner on random lifetimes ------------------------------------------------------------

def _random_graph(rng: random.Random) -> PGraph:
    """A chain of ops, each reading one or two earlier live values."""
    p = PGraph()
    n = rng.randint(2, 14)
    for i in range(n + 1):
        size = rng.choice([16, 48, 64, 100, 256, 1000, 4096])
        p.tensors.append(PTensor(f"t{i}", (size,), "I8", buffer=i))
        p.buffers.append(size)
    p.inputs = [0]
    for i in range(n):
        ins = sorted({rng.randint(max(0, i - 3), i), i})
        p.ops.append(POp("COPY", ins, [i + 1], None, f"op{i}", None, "copy"))
    p.outputs = [n]
    return p


def test_offsets_never_overlap_and_reach_the_bound_on_chains() -> None:
    rng = random.Random(7)
    at_bound = 0
    for _ in range(300):
        p = _random_graph(rng)
        m = P.plan(p, options=P.PlanOptions(inplace=False))
        life, sizes = m.lifetimes, {b: _align(p.buffers[b]) for b in m.lifetimes}
        for a in life:
            for b in life:
                if a < b and not (life[a][1] < life[b][0] or life[b][1] < life[a][0]):
                    ra = (m.offsets[a], m.offsets[a] + sizes[a])
                    rb = (m.offsets[b], m.offsets[b] + sizes[b])
                    assert ra[1] <= rb[0] or rb[1] <= ra[0], (a, b, ra, rb)
        assert m.arena_bytes >= m.lower_bound_bytes
        at_bound += m.arena_bytes == m.lower_bound_bytes
    assert at_bound >= 285, f"only {at_bound}/300 random chains planned at their lower bound"


# -- the bundled models -------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_bundled_models_plan_at_the_lower_bound(name: str, bundled, tmp_path: Path) -> None:
    c = _compile(bundled, name, tmp_path)
    mem = c.report["memory"]
    assert [r["name"] for r in mem["regions"]] == ["dtcm"]
    for r in mem["regions"]:
        assert r["planned_bytes"] == r["lower_bound_bytes"] and r["ratio"] == 1.0, r
    assert mem["activation_bytes"] <= mem["classic_lower_bound_bytes"]
    plan_json = json.loads((tmp_path / "memory_plan.json").read_text())
    assert plan_json["regions"][0]["arena_bytes"] == mem["regions"][0]["planned_bytes"]


def test_digits_plans_at_the_lower_bound(tmp_path: Path) -> None:
    model, example = digits.make()
    c = compile(model, example, "mps2-an505", tmp_path, progress=False)
    (r,) = c.report["memory"]["regions"]
    assert r["planned_bytes"] == r["lower_bound_bytes"] == c.report["memory"]["classic_lower_bound_bytes"]


@needs_arm_gcc
@pytest.mark.parametrize("board", ["mps3-an547", "mps2-an505", "mps2-an386", "mps2-an385"])
def test_persistent_runtime_ram_is_small(board: str, tmp_path: Path) -> None:
    model, example = digits.make()
    c = compile(model, example, board, tmp_path, progress=False)
    state = c.report["memory"]["persistent_bytes"]
    assert state is not None and 0 < state <= 512, state
    assert f"runtime state: {state} B per model" in (tmp_path / "report.txt").read_text()


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet8"])
def test_tiling_goes_below_the_classic_bound_bit_exact(name: str, bundled, tmp_path: Path) -> None:
    plain = _compile(bundled, name, tmp_path / "plain", inplace=False, tile=False)
    tiled = _compile(bundled, name, tmp_path / "tiled", inplace=False, tile=True, tile_recompute=0.1)
    mem = tiled.report["memory"]
    assert mem["aliasing"]["tiled_runs"] >= 1
    assert mem["activation_bytes"] < mem["classic_lower_bound_bytes"] == plain.report["memory"]["activation_bytes"]
    x = mt.CALIBRATION[name](2, 5)
    samples = runner.program_samples(runner.load_meta(tmp_path / "plain"), [[x[i:i + 1]] for i in range(2)])
    a = run_reference(plain.pte, samples)
    b = run_reference(tiled.pte, samples)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


def test_tiled_program_runs_bit_exact_on_the_runtime(bundled, host_runner, tmp_path: Path) -> None:
    """The band ops (asymmetric padding, views into their buffers) pass the
    kernels' checks and give the untiled program's bits, under ASan/UBSan."""
    c = _compile(bundled, "resnet8", tmp_path, inplace=False, tile=True)
    assert any(".band" in op.name for op in c.graph.ops)
    x = mt.CALIBRATION["resnet8"](2, 6)
    _run_bit_exact(tmp_path, x, "host")


def test_tiling_is_on_by_default_within_its_recompute_budget(bundled, tmp_path: Path) -> None:
    """Patch-based inference is chosen automatically when it lowers the
    peak, within tile_recompute more MACs; tile=False is layer by layer."""
    off = _compile(bundled, "mobilenet_v2", tmp_path / "off", tile=False)
    assert not any(".band" in op.name for op in off.graph.ops)
    assert "tiled_runs" not in off.report["memory"]["aliasing"]
    macs = off.report["macs"]
    for budget in (0.05,):
        on = _compile(bundled, "mobilenet_v2", tmp_path / f"on{budget}", tile_recompute=budget)
        assert on.report["memory"]["aliasing"]["tiled_runs"] >= 1
        assert any(".band" in op.name for op in on.graph.ops)
        assert on.report["memory"]["activation_bytes"] < off.report["memory"]["activation_bytes"]
        assert macs == on.report["macs"] < on.report["macs_executed"] <= macs * (1 + budget)
    free = _compile(bundled, "mobilenet_v2", tmp_path / "zero", tile_recompute=0.0)
    assert free.report["macs_executed"] == macs  # only runs without a halo (1x1 and element-wise ops), if any


# -- aliasing ----------------------------------------------------------------------------------

class Cat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 6), nn.Linear(8, 10), nn.Linear(16, 4)

    def forward(self, x):
        return self.c(torch.relu(torch.cat([self.a(x), self.b(x)], dim=1)))


def test_concat_inputs_are_produced_in_their_slices(host_runner, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, x = Cat().eval(), torch.randn(1, 8)
    c = compile(model, (x,), "mps3-an547", tmp_path, progress=False)
    codes = [op.code for op in c.graph.ops]
    assert "CONCAT" not in codes and c.report["memory"]["aliasing"]["concat_in_place"] == 1
    a, b = (c.graph.tensors[op.outputs[0]] for op in c.graph.ops[:2])
    assert a.buffer == b.buffer and (a.offset, b.offset) == (0, 6 * 4)
    res = runner.run(tmp_path, [x.numpy()], sim="host")
    assert res.exit_code == 0, res.raw
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(res.outputs[0].reshape(ref.shape), ref, rtol=1e-5, atol=1e-5)

    off = compile(model, (x,), "mps3-an547", tmp_path / "off", progress=False, inplace=False)
    assert "CONCAT" in [op.code for op in off.graph.ops]


class Residual(nn.Module):
    def __init__(self, reuse: bool) -> None:
        super().__init__()
        self.reuse = reuse
        self.a, self.b, self.c = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        h = self.a(x)
        y = h + self.b(x)
        return self.c(y) * h if self.reuse else self.c(y)


def test_elementwise_op_writes_over_its_dying_input(host_runner, tmp_path: Path) -> None:
    torch.manual_seed(1)
    x = torch.randn(1, 16)
    model = Residual(reuse=False).eval()
    c = compile(model, (x,), "mps3-an547", tmp_path / "a", progress=False)
    add = next(op for op in c.graph.ops if op.code == "ADD_F32")
    out, ins = c.graph.tensors[add.outputs[0]], [c.graph.tensors[t] for t in add.inputs]
    assert any(out.buffer == t.buffer and out.offset == t.offset for t in ins)
    res = runner.run(tmp_path / "a", [x.numpy()], sim="host")
    assert res.exit_code == 0, res.raw
    with torch.no_grad():
        np.testing.assert_allclose(res.outputs[0].reshape(1, 16), model(x).numpy(), rtol=1e-5, atol=1e-5)

    # h is read again after the add: the add must not write over it.
    model = Residual(reuse=True).eval()
    c = compile(model, (x,), "mps3-an547", tmp_path / "b", progress=False)
    add = next(op for op in c.graph.ops if op.code == "ADD_F32")
    h = c.graph.tensors[add.inputs[0]]
    assert c.graph.tensors[add.outputs[0]].buffer != h.buffer
    res = runner.run(tmp_path / "b", [x.numpy()], sim="host")
    assert res.exit_code == 0, res.raw
    with torch.no_grad():
        np.testing.assert_allclose(res.outputs[0].reshape(1, 16), model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_int8_residual_adds_run_in_place_bit_exact(bundled, host_runner, tmp_path: Path) -> None:
    c = _compile(bundled, "resnet8", tmp_path)
    assert c.report["memory"]["aliasing"]["elementwise_in_place"] >= 1
    x = mt.CALIBRATION["resnet8"](2, 8)
    _run_bit_exact(tmp_path, x, "host")


def test_model_inputs_are_never_overwritten(tmp_path: Path) -> None:
    """The application may run the same input twice: an op whose input is
    the model's input never writes over it."""
    model = nn.Sequential(nn.ReLU()).eval()
    c = compile(model, (torch.randn(1, 32),), "mps3-an547", tmp_path, progress=False)
    (op,) = c.graph.ops
    assert c.graph.tensors[op.outputs[0]].buffer != c.graph.tensors[op.inputs[0]].buffer


# -- several memories --------------------------------------------------------------------------

def test_budget_spills_to_the_next_memory(bundled, tmp_path: Path) -> None:
    # No memory may hold every buffer alone (else the planner takes one memory: fewer bytes in all).
    c = _compile(bundled, "ds_cnn", tmp_path, budgets={"dtcm": 16 * 1024, "isram": 0, "sram": 16 * 1024, "ddr": 0})
    regions = c.report["memory"]["regions"]
    assert [r["name"] for r in regions] == ["dtcm", "sram"]
    assert regions[0]["planned_bytes"] <= 16 * 1024
    for r in regions:
        assert r["planned_bytes"] == r["lower_bound_bytes"]
    meta = json.loads((tmp_path / "model.json").read_text())
    assert [a["name"] for a in meta["arenas"]] == ["dtcm", "sram"]
    header = (tmp_path / "model_arenas.h").read_text()
    assert "TMCU_MODEL_NUM_ARENAS 2u" in header and "TMCU_ARENA_SRAM_SIZE" in header


@needs_qemu
@needs_arm_gcc
def test_model_spread_over_dtcm_and_sram_runs_bit_exact_in_qemu(bundled, tmp_path: Path) -> None:
    c = _compile(bundled, "ds_cnn", tmp_path, budgets={"dtcm": 12 * 1024, "isram": 0, "sram": 16 * 1024, "ddr": 0})
    assert [r.name for r in c.plan.regions] == ["dtcm", "sram"]
    elf = build_firmware(tmp_path)
    import subprocess

    syms = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    addr = {line.split()[-1]: int(line.split()[0], 16) for line in syms.splitlines() if "arena_" in line}
    assert 0x20000000 <= addr["arena_dtcm"] < 0x20080000 and 0x01000000 <= addr["arena_sram"] < 0x01200000
    x = mt.CALIBRATION["ds_cnn"](2, 9)
    _run_bit_exact(tmp_path, x, "qemu")


def test_over_budget_board_names_the_shortfall(bundled, tmp_path: Path) -> None:
    with pytest.raises(CompileError) as e:
        _compile(bundled, "ds_cnn", tmp_path, budgets={"dtcm": 4096, "isram": 0, "sram": 4096, "ddr": 0})
    msg = str(e.value)
    assert "does not fit" in msg and "short by" in msg and "dtcm 4,096 B" in msg and "sram 4,096 B" in msg
    assert "at op #" in msg


def test_unknown_budget_and_pin_names_are_refused(bundled, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="no such memory"):
        _compile(bundled, "autoencoder", tmp_path, budgets={"flash": 10})
    with pytest.raises(CompileError, match="no activation tensor or op is named 'nope'"):
        _compile(bundled, "autoencoder", tmp_path, pins={"nope": "sram"})
    with pytest.raises(CompileError, match="cannot hold activations"):
        _compile(bundled, "autoencoder", tmp_path, pins={"x": "itcm"})


def test_pin_puts_an_ops_buffers_in_a_memory(bundled, tmp_path: Path) -> None:
    c = _compile(bundled, "ds_cnn", tmp_path / "a")
    conv = next(op for op in c.graph.ops if op.code == "CONV2D_S8")
    c = _compile(bundled, "ds_cnn", tmp_path / "b", pins={conv.name: "sram"})
    names = [r.name for r in c.plan.regions]
    assert names == ["dtcm", "sram"]
    conv = next(op for op in c.graph.ops if op.name == conv.name)
    out = c.graph.tensors[conv.outputs[0]]
    assert names[c.plan.region_of[out.buffer]] == "sram"
    plan_json = json.loads((tmp_path / "b" / "memory_plan.json").read_text())
    sram = next(r for r in plan_json["regions"] if r["name"] == "sram")
    assert any(conv.name in b["tensors"] for b in sram["buffers"])


def test_cli_takes_budgets_and_pins(tmp_path: Path, capsys) -> None:
    code = cli_main(["compile", f"{REPO}/examples/digits.py:make", "--board", "mps3-an547", "-o", str(tmp_path),
                     "--budget", "dtcm=256,isram=0", "--pin", "linear_2=sram"])
    assert code == 0
    out = capsys.readouterr().out
    assert "dtcm: 256 B planned" in out and "sram:" in out
    code = cli_main(["compile", f"{REPO}/examples/digits.py:make", "--board", "mps3-an547", "-o", str(tmp_path),
                     "--budget", "dtcm"])
    assert code == 2 and "expected NAME=VALUE" in capsys.readouterr().err


# -- the report and its picture ----------------------------------------------------------------

def test_report_regions_and_picture(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("matplotlib", reason="the picture needs matplotlib (make setup installs it)")
    monkeypatch.setenv("TORCHMCU_PLOT", "1")
    model, example = digits.make()
    c = compile(model, example, "mps3-an547", tmp_path, progress=False, budgets={"dtcm": 256, "isram": 0})
    report = json.loads((tmp_path / "report.json").read_text())
    for r in report["memory"]["regions"]:
        assert {"name", "planned_bytes", "lower_bound_bytes", "ratio"} <= set(r)
        assert r["ratio"] == round(r["planned_bytes"] / r["lower_bound_bytes"], 4)
    assert "persistent_bytes" in report["memory"]
    png = tmp_path / report["memory"]["picture"]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 400 and height > 300 * len(c.plan.regions) * 0.8


@needs_qemu
@needs_arm_gcc
@pytest.mark.skipif(not os.environ.get("TORCHMCU_CMSIS_NN_DIR"),
                    reason="set TORCHMCU_CMSIS_NN_DIR to a CMSIS-NN checkout to run the tiled program on CMSIS-NN")
def test_tiled_in_place_program_on_cmsis_nn_in_qemu(bundled, tmp_path: Path) -> None:
    """CMSIS-NN's kernels take the band ops (asymmetric padding) and the
    in-place adds and give the reference's bits on the M55."""
    c = _compile(bundled, "resnet8", tmp_path, tile=True, budgets={"dtcm": 32 * 1024, "isram": 0})
    assert c.report["memory"]["aliasing"]["tiled_runs"] >= 1
    assert c.report["memory"]["aliasing"]["elementwise_in_place"] >= 1
    build_firmware(tmp_path, kernels="cmsis-nn")
    x = mt.CALIBRATION["resnet8"](2, 10)
    _run_bit_exact(tmp_path, x, "qemu")


# -- hot weights -------------------------------------------------------------------------------

def _slow_flash_board(tmp_path: Path) -> Path:
    """mps3-an547 described with its code memory slower than its DTCM, as a
    board whose program sits in flash would be (QEMU runs it all the same)."""
    text = (REPO / "boards" / "mps3-an547.toml").read_text()
    text = text.replace('name = "mps3-an547"', 'name = "an547-slow-flash"', 1)
    head, sep, tail = text.partition('name = "itcm"')
    tail = tail.replace("speed = 0", "speed = 2", 1)
    path = tmp_path / "an547-slow-flash.toml"
    path.write_text(head + sep + tail)
    return path


@needs_qemu
@needs_arm_gcc
def test_hot_weights_are_copied_at_load_and_run_bit_exact(bundled, tmp_path: Path) -> None:
    board = _slow_flash_board(tmp_path)
    c = _compile(bundled, "ds_cnn", tmp_path / "hot", board=str(board), copy_hot_weights=True)
    mem = c.report["memory"]
    assert mem["hot_weights"] and all(h["region"] == "dtcm" and h["reads_per_byte"] > 1 for h in mem["hot_weights"])
    (dtcm,) = mem["regions"]
    assert dtcm["hot_weight_bytes"] >= sum(h["bytes"] for h in mem["hot_weights"])
    assert dtcm["planned_bytes"] == dtcm["lower_bound_bytes"]  # the activations' plan is unchanged
    prog = schema.decode(c.pte)
    copies = prog["init_copies"]
    assert len(copies) == len(mem["hot_weights"])
    hot_names = {h["tensor"] for h in mem["hot_weights"]}
    assert all(t["region"] == "ARENA" for t in prog["tensors"] if t["name"] in hot_names)
    # Conv weights are read once per output pixel: the convolutions' weights go first.
    assert any("conv" in n or "weight" in n for n in hot_names)
    build_firmware(tmp_path / "hot")
    x = mt.CALIBRATION["ds_cnn"](2, 11)
    _run_bit_exact(tmp_path / "hot", x, "qemu")


def test_hot_weights_need_a_faster_memory(bundled, tmp_path: Path) -> None:
    c = _compile(bundled, "autoencoder", tmp_path, copy_hot_weights=True)  # ITCM is as fast as DTCM
    mem = c.report["memory"]
    assert mem["hot_weights"] == [] and "as fast as" in mem["hot_weights_note"]
    assert not schema.decode(c.pte).get("init_copies")


def test_several_memories_never_cost_more_than_one(bundled, tmp_path: Path) -> None:
    """ResNet-8 on the M4 board: its 16 KiB block RAM beside SSRAM. Filled
    memory by memory, the plan took 65,536 B where one memory needs
    49,728 B; planned as one address space it keeps the block RAM and
    reaches the one-memory bound."""
    c = _compile(bundled, "resnet8", tmp_path, board="mps2-an386")
    m = c.report["memory"]
    assert [r["name"] for r in m["regions"]] == ["blockram", "ssram23"]
    assert m["activation_bytes"] == m["lower_bound_bytes"]
    # MobileNetV1's 27 KB buffers fit no block RAM: one memory alone is smaller than any split.
    c = _compile(bundled, "mobilenet_v1", tmp_path / "mbv1", board="mps2-an386")
    m = c.report["memory"]
    assert m["activation_bytes"] == m["lower_bound_bytes"]
    x = mt.CALIBRATION["resnet8"](1, 8)
    _run_bit_exact(tmp_path, x, "host")
