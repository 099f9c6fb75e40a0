"""The Ethos-U delegate in the program, the planner and the runtime (issue #7):
models compiled for corstone-300-u55-128 with their convolutions in one
ETHOS_U call, planned where the NPU reaches, read by the reference
interpreter bit for bit like the same model compiled for the CPU; the
delegate's load-time check of its blob on the host (sanitizers on), against
the real program and targeted and random corruptions of it; the firmware
built with the Ethos-U core driver (TORCHMCU_ETHOSU_DRIVER_DIR) and run in
QEMU up to the NPU call; and on the Corstone-300 FVP (TORCHMCU_FVP_DIR).

Needs the tosa-tools and ethos-u-vela packages (make setup installs them).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc

ethos_u = pytest.importorskip("torchmcu.backends.ethos_u")
pytestmark = pytest.mark.skipif(not ethos_u.available(),
                                reason="needs the tosa-tools and ethos-u-vela packages (make setup installs them)")

from torchmcu import boards as B
from torchmcu import plan as P
from torchmcu.backends.ethos_u.build import ETHOSU_DRIVER_ENV
from torchmcu.builder import kernel_table
from torchmcu.builder.firmware import build_firmware
from torchmcu.builder.host import build_host_runner
from torchmcu.compiler import compile
from torchmcu.errors import BuildError, CompileError
from torchmcu.ir import PGraph, POp, PTensor
from torchmcu.program import schema, serialize
from torchmcu.program.interpret import run_reference
from torchmcu.sim import fvp, runner

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny as mt

BOARD = "corstone-300-u55-128"
CPU_BOARD = "mps3-an547"  # the same Cortex-M55, no NPU
MODELS = ["ds_cnn", "mobilenet_v1", "mobilenet_v2"]
CONVS = {"CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8"}

# firmware/core/error.h, firmware/app/app.h
OK, INVALID_PROGRAM, INVALID_TENSOR, INVALID_OP = 0x00, 0x20, 0x23, 0x24
KERNEL_MISSING, DELEGATE_FAILED, BAD_IO = 0x30, 0x40, 0x50
DOCUMENTED = {OK, INVALID_PROGRAM, 0x21, 0x22, INVALID_TENSOR, INVALID_OP, KERNEL_MISSING, 0x31, 0x32,
              DELEGATE_FAILED, BAD_IO}

needs_driver = pytest.mark.skipif(not os.environ.get(ETHOSU_DRIVER_ENV),
                                  reason=f"set {ETHOSU_DRIVER_ENV} to the Ethos-U core driver's sources "
                                         "(ethos-u-core-driver, or Zephyr's hal_ethos_u module)")


def _compile(name: str, board: str, out: Path):
    model, example = mt.MODELS[name]()
    return compile(model, example, board, out, quant="int8", calibration={"x": mt.CALIBRATION[name](8, 1)},
                   progress=False, avg_pool_rounding="tflite")  # TOSA's rescale: TFLite's rounding (the NPU's)


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ds_cnn_npu")
    _compile("ds_cnn", BOARD, out)
    return out


def _samples(out: Path, name: str, n: int, seed: int) -> list[list[np.ndarray]]:
    meta = runner.load_meta(out)
    return runner.program_samples(meta, runner.split_samples(meta, [mt.CALIBRATION[name](n, seed)]))


# ---------------------------------------------------------------------------------------------
# The compiler: the three models


@pytest.mark.parametrize("name", MODELS)
def test_model_compiles_with_every_conv_on_the_npu(name: str, tmp_path: Path) -> None:
    c = _compile(name, BOARD, tmp_path / "npu")
    board = B.load_board(BOARD)
    # The program: quantize, one NPU call, softmax, dequantize.
    assert [op.code for op in c.graph.ops] == ["QUANTIZE_S8", "ETHOS_U", "SOFTMAX_S8", "DEQUANTIZE_S8"]
    r = c.report["ethos_u"]
    convs = [op for op in r["ops"] if op["code"] in CONVS]
    assert len(convs) >= 10 and all(op["where"] == "npu" for op in convs)
    assert {op["code"] for op in r["ops"] if op["where"] == "cpu"} == {"QUANTIZE_S8", "SOFTMAX_S8", "DEQUANTIZE_S8"}
    part, = r["partitions"]
    assert part["numerics"]["bit_exact"] and part["numerics"]["samples"] == 4  # example input + 3 calibration
    e = part["estimates"]
    assert e["total_cycles"] >= e["npu_cycles"] > 0 and 0 < e["mac_utilisation"] <= 1
    assert e["memories"]["Sram"]["read_bytes"] > 0 and e["memories"]["OffChipFlash"]["read_bytes"] > 0
    assert r["calls"] == [{"partition": 0, "op": 1, "name": "ethos_u_0"}]
    assert c.report["ops"][1]["backend"] == "ethos-u" and c.report["ops"][1]["macs"] == c.report["macs"]
    text = (tmp_path / "npu" / "report.txt").read_text()
    assert "Ethos-U: ethos-u55-128" in text and "MAC utilisation" in text and "calls: partition 0 = op #1" in text

    # Placement: the blob in the constant segment on 16 bytes, the program where the
    # NPU reads it (DDR), the call's buffers in memories the NPU reaches.
    assert runner.load_meta(tmp_path / "npu")["program_memory"] == "ddr"
    prog = schema.decode(c.pte)
    call = prog["ops"][1]
    blob, scratch, fast = (prog["tensors"][t] if t >= 0 else None for t in call["inputs"][:3])
    assert blob["region"] == "CONSTANT" and blob["dtype"] == "U8" and blob["offset"] % 16 == 0
    assert fast is None and scratch["nbytes"] == part["scratch_bytes"]
    for t in [scratch, *(prog["tensors"][i] for i in call["inputs"][3:] + call["outputs"])]:
        assert t["region"] == "ARENA" and prog["arenas"][t["arena"]]["size"] > 0
        assert c.plan.regions[t["arena"]].name in board.npu.memories and t["offset"] % 16 == 0, t["name"]
    # Never more bytes than one memory would take (here one NPU-reachable memory holds it all).
    assert c.report["memory"]["activation_bytes"] <= c.report["memory"]["lower_bound_bytes"]

    # The reference interpreter runs the call (the partition's ops, kept for tools)
    # and gives the bits of the same model compiled for the CPU.
    cpu = tmp_path / "cpu"
    _compile(name, CPU_BOARD, cpu)
    samples = _samples(tmp_path / "npu", name, 3, 41)
    got = run_reference(c.pte, samples)
    want = run_reference((cpu / "model.pte").read_bytes(), samples)
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    # The device image drops that copy: the blob and a small flatbuffer remain.
    device = len(serialize.device_image(c.pte))
    assert part["blob_bytes"] < device < part["blob_bytes"] + 2048


def test_a_partition_with_too_many_outputs_gives_an_op_back() -> None:
    """A delegate call takes at most two outputs (kMaxOutputs): three NPU clamps
    whose outputs are all the graph's become a partition of two and a CPU op."""
    t = [PTensor("x", (1, 4, 4, 8), "I8", scale=0.05)] + [PTensor(f"c{k}", (1, 4, 4, 8), "I8", scale=0.05)
                                                         for k in range(3)]
    pg = PGraph(tensors=t, inputs=[0], outputs=[1, 2, 3])
    for k, tensor in enumerate(t):
        tensor.buffer = k
        pg.buffers.append(tensor.nbytes)
    for k in range(3):
        pg.ops.append(POp("CLAMP_S8", [0], [k + 1], ("QuantClampParams", {"min": -10 - k, "max": 10}), f"c{k}",
                          None, "clamp"))
    result = ethos_u.compile_partitions(pg, BOARD)
    assert [p.ops for p in result.partitions] == [[0, 1]]
    assert "takes at most 5 and 2" in result.cpu_ops[2]


# ---------------------------------------------------------------------------------------------
# The planner's hook: buffers of ops an accelerator runs stay where it reaches


def _npu_graph() -> PGraph:
    """x -> clamp -> a -> ETHOS_U(a, scratch) -> y -> clamp -> z."""
    t = [PTensor(n, (1, 64), "I8", scale=0.1) for n in ("x", "a", "y", "z")] + [PTensor("s_scratch", (256,), "U8")]
    pg = PGraph(tensors=t, inputs=[0], outputs=[3])
    for k, tensor in enumerate(t):
        tensor.buffer = k
        pg.buffers.append(tensor.nbytes)
    clamp = ("QuantClampParams", {"min": -5, "max": 5})
    pg.ops = [POp("CLAMP_S8", [0], [1], clamp, "c0", None, "clamp"),
              POp("ETHOS_U", [-1, 4, -1, 1], [2], None, "npu", None, "ethos_u"),
              POp("CLAMP_S8", [2], [3], clamp, "c1", None, "clamp")]
    return pg


def test_planner_keeps_npu_operands_in_memories_the_npu_reaches() -> None:
    regions = [P.RegionSpec("dtcm", 0, 1 << 20), P.RegionSpec("sram", 1, 1 << 20)]
    free = _npu_graph()
    mem = P.plan(free, regions, P.PlanOptions(inplace=False))
    assert {r.name for r in mem.regions} == {"dtcm"}  # everything fits the fastest memory
    pg = _npu_graph()
    mem = P.plan(pg, regions, P.PlanOptions(inplace=False, operand_memories={"ETHOS_U": ("sram", "ddr")}))
    where = {t.name: mem.regions[mem.region_of[t.buffer]].name for t in pg.tensors}
    # Split between the TCM and the SRAM the plan would take more bytes than the SRAM alone: one memory.
    assert set(where.values()) == {"sram"} and mem.arena_bytes == mem.lower_bound_bytes
    pg = _npu_graph()  # a pin keeps the CPU's buffer in the TCM; the NPU's stay where it reaches
    mem = P.plan(pg, regions, P.PlanOptions(inplace=False, pins={"x": "dtcm"},
                                            operand_memories={"ETHOS_U": ("sram", "ddr")}))
    where = {t.name: mem.regions[mem.region_of[t.buffer]].name for t in pg.tensors}
    assert where == {"x": "dtcm", "a": "sram", "y": "sram", "z": "dtcm", "s_scratch": "sram"}
    with pytest.raises(CompileError, match="npu .ETHOS_U. reads and writes only sram, ddr"):
        P.plan(_npu_graph(), regions[:1], P.PlanOptions(operand_memories={"ETHOS_U": ("sram", "ddr")}))
    with pytest.raises(CompileError, match="pin of s_scratch to dtcm: the op using it reaches only sram"):
        P.plan(_npu_graph(), regions, P.PlanOptions(pins={"s_scratch": "dtcm"},
                                                    operand_memories={"ETHOS_U": ("sram",)}))


def test_kernel_table_names_the_delegate_only_when_used() -> None:
    plain = kernel_table.kernel_table_source(["QUANTIZE_S8", "SOFTMAX_S8"])
    assert "ethos_u" not in plain
    table = kernel_table.kernel_table_source(["QUANTIZE_S8", "ETHOS_U"])
    assert '#include "delegates/ethos_u/kernels.h"' in table and "/* 35 ETHOS_U */ &ethos_u::kEthosU," in table
    assert "ETHOS_U" not in kernel_table.available_kernels()  # the host runner's table: nullptr


# ---------------------------------------------------------------------------------------------
# The runtime on the host: no driver, so no delegate; then the delegate's own check


def test_host_runner_refuses_a_program_with_npu_calls(ds_cnn: Path, host_runner: Path) -> None:
    res = runner.run(ds_cnn, [mt.CALIBRATION["ds_cnn"](1, 2)], sim="host")
    assert res.exit_code == KERNEL_MISSING, res.raw
    assert f"tmcu: load status={KERNEL_MISSING} " in res.raw


class Blob:
    """The program and where its blob and ETHOS_U op are, for corruptions."""

    def __init__(self, pte: bytes) -> None:
        self.pte = pte
        self.tree = schema.decode(pte)
        self.segment = pte[self.tree["constant_offset"]:]
        op = next(op for op in self.tree["ops"] if op["code"] == "ETHOS_U")
        self.op = self.tree["ops"].index(op)
        self.blob_tensor = op["inputs"][0]
        self.at = self.tree["constant_offset"] + self.tree["tensors"][self.blob_tensor]["offset"]

    def poke(self, offset: int, fmt: str, value: int) -> bytes:
        buf = bytearray(self.pte)
        struct.pack_into(fmt, buf, self.at + offset, value)
        return bytes(buf)

    def u32(self, offset: int) -> int:
        return struct.unpack_from("<I", self.pte, self.at + offset)[0]

    def edited(self, edit) -> bytes:
        tree = schema.decode(self.pte)
        edit(tree)
        return serialize.to_pte(tree, self.segment)


def _run_all(exe: Path, io: Path, work: Path, variants: list[tuple[str, bytes]]) -> list[tuple[str, int, str, str]]:
    def one(item: tuple[int, tuple[str, bytes]]) -> tuple[str, int, str, str]:
        i, (name, data) = item
        path = work / f"v{i}.pte"
        path.write_bytes(data)
        proc = subprocess.run([str(exe), str(path), str(io)], capture_output=True, text=True, errors="replace",
                              timeout=60, check=False)
        path.unlink()
        return name, proc.returncode, proc.stdout, proc.stderr

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, enumerate(variants)))


def _crashed(status: int, stdout: str, stderr: str) -> bool:
    return ("AddressSanitizer" in stderr or "runtime error" in stderr or status not in DOCUMENTED
            or f"tmcu: done status={status} " not in stdout)


def test_delegate_check_accepts_the_blob_and_refuses_corruptions(ds_cnn: Path, tmp_path: Path) -> None:
    """The delegate's load-time check (delegates/ethos_u/blob.cc, built for the
    host with sanitizers): the compiled program loads and its call then
    reports the missing NPU (DelegateFailed); each targeted corruption of the
    blob or the call's operands is refused at load with its error, and random
    byte flips over the blob's header never crash it."""
    exe = build_host_runner(sanitize=True, ethos_u=B.load_board(BOARD))
    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob(_samples(ds_cnn, "ds_cnn", 1, 5)))
    b = Blob((ds_cnn / "model.pte").read_bytes())
    cmd_at, ro_at = b.u32(12), b.u32(20)

    def scratch_nbytes(tree: dict) -> None:
        tree["tensors"][tree["ops"][b.op]["inputs"][1]]["nbytes"] -= 16

    def no_scratch(tree: dict) -> None:
        tree["ops"][b.op]["inputs"][1] = -1

    def one_input_less(tree: dict) -> None:
        tree["ops"][b.op]["inputs"] = tree["ops"][b.op]["inputs"][:3]

    def output_size(tree: dict) -> None:
        out = tree["tensors"][tree["ops"][b.op]["outputs"][0]]
        out["nbytes"], out["dims"] = 8, [1, 8]

    def blob_in_ram(tree: dict) -> None:
        tree["tensors"][b.blob_tensor]["region"] = "ARENA"
        tree["tensors"][b.blob_tensor]["nbytes"] = 64

    targeted = [
        ("magic", b.poke(0, "<I", 0x58584D54), INVALID_OP),
        ("version 2", b.poke(4, "<H", 2), INVALID_OP),
        ("header shorter than its I/O table", b.poke(6, "<H", 48), INVALID_OP),
        ("compiled for an Ethos-U85", b.poke(8, "<B", 2), INVALID_OP),
        ("compiled for 256 MACs", b.poke(10, "<H", 256), INVALID_OP),
        ("command stream misaligned", b.poke(12, "<I", cmd_at + 4), INVALID_OP),
        ("command stream past the blob", b.poke(16, "<I", 0xFFFFFFF0), INVALID_OP),
        ("command stream without its payload fourcc", b.poke(cmd_at, "<I", 0), INVALID_OP),
        ("read-only data past the blob", b.poke(20, "<I", ro_at + (1 << 20)), INVALID_OP),
        ("scratch larger than its operand", b.poke(28, "<I", b.u32(28) + 16), INVALID_TENSOR),
        ("scratch region is the weights' region", b.poke(37, "<B", 0), INVALID_OP),
        ("region out of range", b.poke(36, "<B", 9), INVALID_OP),
        ("two inputs in the header", b.poke(40, "<H", 2), INVALID_OP),
        ("I/O without regions of their own", b.poke(9, "<B", 0), INVALID_OP),
        ("input in the scratch's region", b.poke(48, "<B", 1), INVALID_OP),
        ("input bytes differ", b.poke(48 + 8, "<I", b.u32(48 + 8) + 1), INVALID_TENSOR),
        ("output offset in its region", b.poke(64 + 4, "<I", 16), INVALID_OP),
        ("scratch operand smaller than the blob's", b.edited(scratch_nbytes), INVALID_TENSOR),
        ("scratch operand left out", b.edited(no_scratch), INVALID_OP),
        ("operand count", b.edited(one_input_less), INVALID_OP),
        ("output operand of other bytes", b.edited(output_size), INVALID_TENSOR),
        ("blob in RAM", b.edited(blob_in_ram), INVALID_OP),
    ]
    rng = random.Random(7)
    flips = []
    for k in range(120):
        buf = bytearray(b.pte)
        for _ in range(rng.randrange(1, 4)):
            pos = b.at + rng.randrange(80)  # the header and the I/O table
            buf[pos] = rng.choice([buf[pos] ^ (1 << rng.randrange(8)), rng.randrange(256), 0, 0xFF])
        flips.append((f"flips {k}", bytes(buf)))
    variants = [("intact", b.pte)] + [(n, d) for n, d, _ in targeted] + flips
    outcomes = _run_all(exe, io, tmp_path, variants)
    crashed = [o for o in outcomes if _crashed(o[1], o[2], o[3])]
    assert not crashed, f"{crashed[0][0]}: exit {crashed[0][1]:#x}\n{crashed[0][2][-500:]}\n{crashed[0][3][-2000:]}"
    _, status, stdout, _ = outcomes[0]
    assert "tmcu: load status=0 " in stdout and status == DELEGATE_FAILED, stdout
    wrong = [(n, s, want) for (n, s, _, _), (_, _, want) in zip(outcomes[1:], targeted) if s != want]
    assert not wrong, wrong
    flipped = [s for _, s, _, _ in outcomes[1 + len(targeted):]]
    assert flipped.count(INVALID_OP) > 30  # most flips are caught at load


_SAMPLE = r"""
// A measurement as the Ethos-U delegate leaves it after its call (its PMU
// figures), for the app's profile line. The program's op 1 is the call: the
// profiler's second take (after op 1) finds it, once.
#include "torchmcu/torchmcu.h"
extern "C" int tmcu_delegate_take_sample(tmcu_delegate_sample* out) {
  static int takes = 0;
  if (takes++ != 1) return 0;
  *out = tmcu_delegate_sample{0, 3, 180112ull, {15328, 2211, 9000, 0}, {"sram_rd_beats", "sram_wr_beats", "ext_rd_beats", nullptr}};
  return 1;
}
"""


def test_profile_prints_the_delegate_measurement_as_fvp_parses_it(ds_cnn: Path, tmp_path: Path) -> None:
    """The app prints a delegate's measurement after the op that made it, in
    the line torchmcu.sim.fvp.parse_npu reads (the FVP transcripts are hand-written)."""
    from torchmcu.builder import firmware as build

    fw = build.FIRMWARE
    (tmp_path / "sample.cc").write_text(_SAMPLE)
    (tmp_path / "table.cc").write_text(kernel_table.kernel_table_source([*kernel_table.available_kernels(), "ETHOS_U"]))
    exe = tmp_path / "host"
    defines = [f"-D{k}={v}" for k, v in B.load_board(BOARD).npu.defines.items()]
    sources = [*build.runtime_sources(), fw / "host" / "main_host.cc", fw / "host" / "platform_host.cc",
               fw / "delegates" / "ethos_u" / "blob.cc", fw / "host" / "ethos_u_host.cc", tmp_path / "sample.cc",
               tmp_path / "table.cc"]
    subprocess.run(["g++", "-std=c++17", "-O0", "-fno-rtti", "-fno-exceptions", "-Wall", "-Wextra", "-Werror",
                    f"-I{fw}", f"-I{fw / 'include'}", *defines, *map(str, sources), "-o", str(exe)], check=True)
    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob(_samples(ds_cnn, "ds_cnn", 1, 5), profile=True))
    out = subprocess.run([str(exe), str(ds_cnn / "model.pte"), str(io)], capture_output=True, text=True,
                         check=False).stdout
    lines = out.splitlines()
    npu = [k for k, line in enumerate(lines) if line.startswith("tmcu: npu ")]
    assert len(npu) == 1 and lines[npu[0] - 1].startswith("tmcu: op 1 "), out  # after the call's op line
    assert fvp.parse_npu(out) == {0: {"calls": 1, "cycles": 180112.0, "sram_rd_beats": 15328.0,
                                      "sram_wr_beats": 2211.0, "ext_rd_beats": 9000.0}}


# ---------------------------------------------------------------------------------------------
# Firmware: without the driver, a clear error; with it, a link for the Cortex-M55


@needs_arm_gcc
def test_build_without_the_driver_names_the_variable(ds_cnn: Path, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ETHOSU_DRIVER_ENV, raising=False)
    with pytest.raises(BuildError, match=f"set {ETHOSU_DRIVER_ENV} to its sources"):
        build_firmware(ds_cnn)
    monkeypatch.setenv(ETHOSU_DRIVER_ENV, str(tmp_path))
    with pytest.raises(BuildError, match="is not the Ethos-U core driver"):
        build_firmware(ds_cnn)


@needs_arm_gcc
@needs_driver
def test_firmware_links_the_delegate_and_runs_to_the_npu_in_qemu(ds_cnn: Path) -> None:
    """With the driver: the firmware links for the Cortex-M55 without a heap,
    the NPU's interrupt in its vector slot, the program in DDR. QEMU's
    mps3-an547 is the same system without the NPU: the program loads (the
    delegate checks its blob on the M55), the CPU ops before the call run, and
    the call reports the missing NPU (DelegateFailed) instead of hanging."""
    elf = build_firmware(ds_cnn)
    nm = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    symbols = {line.split()[-1]: int(line.split()[0], 16) for line in nm.splitlines() if len(line.split()) == 3}
    for name in ("ethosu_init", "ethosu_invoke_v3", "ethosu_reserve_driver", "tmcu_npu_irq_handler",
                 "tmcu_delegate_take_sample", "_ZN8torchmcu7ethos_u7kEthosUE"):
        assert name in symbols, name
    assert not any(s in symbols for s in ("malloc", "free", "_sbrk", "printf", "fprintf"))
    assert 0x70000000 <= symbols["tmcu_model_pte"] < 0x7f000000  # DDR: the NPU reads the weights there
    board = B.load_board(BOARD)
    vectors = subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "--only-section=.text", str(elf), "/dev/stdout"],
                             capture_output=True, check=True).stdout
    slot = struct.unpack_from("<I", vectors, 4 * (16 + board.npu.irq))[0]
    assert slot & ~1 == symbols["tmcu_npu_irq_handler"]
    if shutil.which("qemu-system-arm") is None:
        pytest.skip("qemu-system-arm not installed (make setup installs it)")
    res = runner.run(ds_cnn, [mt.CALIBRATION["ds_cnn"](1, 2)], sim="qemu", profile=True, timeout_s=60)
    assert "tmcu: load status=0 " in res.raw and res.exit_code == DELEGATE_FAILED, res.raw
    assert "tmcu: op 0 ticks=" in res.raw  # the quantize before the call ran


@needs_arm_gcc
@needs_driver
@pytest.mark.skipif(not fvp.fvp_available(BOARD),
                    reason="needs the Corstone-300 FVP (FVP_Corstone_SSE-300_Ethos-U55): set TORCHMCU_FVP_DIR "
                           "to its install directory")
def test_ds_cnn_on_the_fvp_npu_is_bit_exact(ds_cnn: Path) -> None:
    build_firmware(ds_cnn)
    x = mt.CALIBRATION["ds_cnn"](2, 9)
    res = runner.run(ds_cnn, [x], sim="fvp", profile=True, timeout_s=300)
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(ds_cnn, runner.split_samples(runner.load_meta(ds_cnn), [x]))
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert tol is None and mismatch is None, str(mismatch)
    assert res.npu[0]["cycles"] > 0 and res.npu[0]["calls"] >= 1
