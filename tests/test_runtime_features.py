"""Runtime features the memory planner relies on, on hand-built programs:

- in-place element-wise ops: an output may be the very bytes of an input
  (ADD_S8 writing over its first input, ...); any other overlap between an
  op's output and its inputs is refused when the method loads;
- init copies (Program.init_copies): Method::load copies weights from the
  constant segment into an arena once, after every check, and the weight
  tensor, an ARENA tensor at the copy's destination, reads the copy;
- weights are data: the load reads no tensor value, and a bias, multiplier
  or shift a kernel cannot take (out of range) gives zeros, not undefined
  behaviour.

Each program runs on the host runner (AddressSanitizer + UBSan) and is
compared bit for bit with the project's reference interpreter; with
TORCHMCU_CMSIS_NN_DIR set, the in-place program also runs on CMSIS-NN's
element-wise kernels in QEMU (Cortex-M55, MVE).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_arm_gcc, needs_qemu
from torchmcu import reference as ref
from torchmcu.boards import load_board
from torchmcu.builder import kernel_table
from torchmcu.compiler import choose_arena_memory
from torchmcu.program import serialize
from torchmcu.program.c_api import IoTensor, api_sources
from torchmcu.program.interpret import Interpreter, run_reference
from torchmcu.sim import runner

OK, INVALID_TENSOR, INVALID_OP = 0x00, 0x23, 0x24
WIRE = serialize.WIRE_DTYPES


class Builder:
    """A program tree built by hand: arena tensors at given offsets, constants
    appended to the segment 16-byte aligned."""

    def __init__(self, arena_bytes: int) -> None:
        self.tensors: list[dict] = []
        self.ops: list[dict] = []
        self.segment = bytearray()
        self.arena_bytes = arena_bytes

    def arena(self, name: str, dtype: str, dims: list[int], offset: int, scale: float = 0.0, zp: int = 0) -> int:
        nbytes = int(np.prod(dims)) * np.dtype(WIRE[dtype]).itemsize
        t = {"name": name, "dtype": dtype, "dims": dims, "region": "ARENA", "arena": 0, "offset": offset,
             "nbytes": nbytes}
        if scale:
            t.update(scale=scale, zero_point=zp)
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, name: str, dtype: str, value: np.ndarray) -> int:
        data = np.ascontiguousarray(value).astype(WIRE[dtype]).tobytes()
        offset = len(self.segment)
        self.segment += data + bytes(serialize._pad(len(data)) - len(data))
        self.tensors.append({"name": name, "dtype": dtype, "dims": list(value.shape), "region": "CONSTANT",
                             "offset": offset, "nbytes": len(data)})
        return len(self.tensors) - 1

    def op(self, code: str, inputs: list[int], outputs: list[int], params: tuple | None = None) -> None:
        self.ops.append({"code": code, "inputs": inputs, "outputs": outputs, "params": params, "name": code.lower()})

    def tree(self, inputs: list[int], outputs: list[int]) -> dict:
        return {"version": serialize.PROGRAM_VERSION, "tensors": self.tensors, "ops": self.ops, "inputs": inputs,
                "outputs": outputs, "arenas": [{"name": "sram", "size": self.arena_bytes}], "constant_offset": 0,
                "constant_size": len(self.segment)}


def run_host(host_runner: Path, tmp_path: Path, pte: bytes, tree: dict,
             samples: list[list[np.ndarray]]) -> tuple[int, list[np.ndarray], str]:
    """Status, outputs (samples along axis 0) and stdout of the host runner."""
    prog = tmp_path / "p.pte"
    prog.write_bytes(pte)
    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob(samples))
    proc = subprocess.run([str(host_runner), str(prog), str(io)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-3000:]
    meta = [{"shape": tree["tensors"][t]["dims"], "dtype": "int8" if tree["tensors"][t]["dtype"] == "I8" else "f32"}
            for t in tree["outputs"]]
    _, outs = runner.parse_protocol(proc.stdout, meta)
    return proc.returncode, outs, proc.stdout


# --------------------------------------------------------------------------------------------
# In place


SHAPE = [1, 4, 4, 8]  # 128 int8 elements: whole MVE/DSP blocks and none left over
N = int(np.prod(SHAPE))


def add_program(out_offset: int) -> tuple[dict, bytes]:
    """x + y (int8) with y at 0, x at 128 and the sum at `out_offset`; then a
    CLAMP_S8 of the sum in place, so two in-place kernels run in a row."""
    b = Builder(arena_bytes=512)
    sx, zx, sy, zy, so, zo = 0.05, -3, 0.02, 7, 0.06, 1
    y = b.arena("y", "I8", SHAPE, 0, sy, zy)
    x = b.arena("x", "I8", SHAPE, 128, sx, zx)
    s = b.arena("sum", "I8", SHAPE, out_offset, so, zo)
    b.op("ADD_S8", [x, y], [s], ("QuantAddParams", ref.add_params(sx, zx, sy, zy, so, zo)))
    c = b.arena("clamped", "I8", SHAPE, out_offset, so, zo)
    b.op("CLAMP_S8", [s], [c], ("QuantClampParams", {"min": -100, "max": 90}))
    tree = b.tree([x, y], [c])
    return tree, serialize.to_pte(tree, bytes(b.segment))


def add_samples(n: int = 3) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(5)
    return [[rng.integers(-128, 128, SHAPE, dtype=np.int8), rng.integers(-128, 128, SHAPE, dtype=np.int8)]
            for _ in range(n)]


def test_add_s8_in_place_is_bit_exact(host_runner: Path, tmp_path: Path) -> None:
    tree, pte = add_program(out_offset=128)  # the sum overwrites x
    samples = add_samples()
    status, outs, stdout = run_host(host_runner, tmp_path, pte, tree, samples)
    assert status == OK, stdout[-1000:]
    expected = run_reference(pte, samples)
    np.testing.assert_array_equal(outs[0], expected[0])
    # And the reference itself is what the ops compute on the original inputs.
    p = tree["ops"][0]["params"][1]
    direct = [ref.clamp(ref.add(x, y, p), -100, 90) for x, y in samples]
    np.testing.assert_array_equal(expected[0], np.stack(direct))


@pytest.mark.parametrize("offset", [129, 127, 64, 200, 1])
def test_partial_overlap_is_refused(host_runner: Path, tmp_path: Path, offset: int) -> None:
    """The sum overlapping x (128..255) or y (0..127) without being either."""
    tree, pte = add_program(out_offset=offset)
    status, _, stdout = run_host(host_runner, tmp_path, pte, tree, add_samples(1))
    assert status == INVALID_OP and f"tmcu: load status={INVALID_OP} " in stdout, stdout[-1000:]
    with pytest.raises(ValueError, match="partially"):
        Interpreter(pte)


def test_in_place_is_refused_where_the_kernel_does_not_allow_it(host_runner: Path, tmp_path: Path) -> None:
    """A permute (it gathers across the tensor) over its own input."""
    b = Builder(arena_bytes=256)
    x = b.arena("x", "F32", [2, 8], 0)
    y = b.arena("y", "F32", [8, 2], 0)
    b.op("PERMUTE", [x], [y], ("PermuteParams", {"perm": [1, 0]}))
    tree = b.tree([x], [y])
    pte = serialize.to_pte(tree, bytes(b.segment))
    status, _, stdout = run_host(host_runner, tmp_path, pte, tree, [[np.ones((2, 8), np.float32)]])
    assert status == INVALID_OP, stdout[-1000:]
    with pytest.raises(ValueError, match="in place"):
        Interpreter(pte)


def test_float_unary_and_binary_in_place(host_runner: Path, tmp_path: Path) -> None:
    """sigmoid(x) over x, then (that + y) over y, then max with x-bytes in place."""
    b = Builder(arena_bytes=256)
    x = b.arena("x", "F32", [3, 5], 0)
    y = b.arena("y", "F32", [3, 5], 64)
    s = b.arena("s", "F32", [3, 5], 0)
    b.op("SIGMOID_F32", [x], [s])
    t = b.arena("t", "F32", [3, 5], 64)
    b.op("ADD_F32", [s, y], [t], ("BinaryParams", {}))
    u = b.arena("u", "F32", [3, 5], 64)
    b.op("MAXIMUM_F32", [s, t], [u], ("BinaryParams", {}))
    tree = b.tree([x, y], [u])
    pte = serialize.to_pte(tree, bytes(b.segment))
    rng = np.random.default_rng(1)
    samples = [[rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)]]
    status, outs, stdout = run_host(host_runner, tmp_path, pte, tree, samples)
    assert status == OK, stdout[-1000:]
    xs, ys = samples[0]
    sig = 1 / (1 + np.exp(-xs.astype(np.float64)))
    np.testing.assert_allclose(outs[0][0], np.maximum(sig, sig + ys), rtol=1e-6, atol=1e-6)


IO_DTYPE = {"I8": "int8", "I16": "int16", "F32": "float32"}  # a hand-built program's inputs and outputs (the runner's I/O)


def build_dir(tmp_path, tree: dict, pte: bytes, board: str):
    """A build directory for a hand-built program: what `torchmcu compile`
    writes, as far as `build` and `run` need it (the arena in a memory of
    the board, the model's C API sources)."""
    out = tmp_path / "build"
    out.mkdir()
    (out / "model.pte").write_bytes(pte)
    h, c = serialize.model_pte_sources(pte)
    (out / "model_pte.h").write_text(h)
    (out / "model_pte.c").write_text(c)
    size = tree["arenas"][0]["size"]
    arenas = [serialize.ArenaSpec(choose_arena_memory(load_board(board), size), size)]
    h, c = serialize.model_arena_sources(arenas)
    (out / "model_arenas.h").write_text(h)
    (out / "model_arenas.c").write_text(c)
    codes = sorted({op["code"] for op in tree["ops"]})
    (out / "kernel_table.cc").write_text(kernel_table.kernel_table_source(codes))
    (out / "kernels.txt").write_text("".join(f"{c}\n" for c in codes))

    def io(t: int) -> IoTensor:
        d = tree["tensors"][t]
        return IoTensor(d["name"], tuple(d["dims"]), tuple(range(len(d["dims"]))), IO_DTYPE[d["dtype"]],
                        d.get("scale", 0.0), d.get("zero_point", 0))

    h, c = api_sources(serialize.DEFAULT_SYMBOL, [io(t) for t in tree["inputs"]], [io(t) for t in tree["outputs"]],
                       {"board": board, "quant": "int8", "arena_bytes": size,
                        "program_bytes": len(serialize.device_image(pte))})
    (out / f"{serialize.DEFAULT_SYMBOL}.h").write_text(h)
    (out / f"{serialize.DEFAULT_SYMBOL}.cc").write_text(c)

    def meta(t: int) -> dict:
        d = tree["tensors"][t]
        return {"name": d["name"], "shape": d["dims"], "dtype": IO_DTYPE[d["dtype"]],
                "scale": d.get("scale", 0.0), "zero_point": d.get("zero_point", 0)}

    (out / "model.json").write_text(json.dumps({
        "board": board, "arenas": [{"name": a.name, "section": serialize.arena_section(a), "size": a.size}
                                   for a in arenas],
        "inputs": [meta(t) for t in tree["inputs"]], "outputs": [meta(t) for t in tree["outputs"]],
        "quant": "int8", "float_tolerance": {"rtol": 1e-5, "atol_scale": 1e-5}}))
    return out


@needs_arm_gcc
@needs_qemu
@pytest.mark.skipif(not os.environ.get("TORCHMCU_CMSIS_NN_DIR"),
                    reason="CMSIS-NN not given: set TORCHMCU_CMSIS_NN_DIR to a CMSIS-NN checkout")
def test_add_s8_in_place_on_cmsis_nn_in_qemu(tmp_path: Path) -> None:
    from torchmcu.builder.firmware import build_firmware, kernel_set

    tree, pte = add_program(out_offset=128)
    out = build_dir(tmp_path, tree, pte, "mps3-an547")
    build_firmware(out, kernels="cmsis-nn")
    assert kernel_set(out)["ADD_S8"] == "cmsis-nn"
    samples = add_samples()
    res = runner.run(out, [np.stack([s[0] for s in samples]), np.stack([s[1] for s in samples])], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    np.testing.assert_array_equal(res.outputs[0], run_reference(pte, samples)[0])


# --------------------------------------------------------------------------------------------
# Init copies


def linear_s8_program(copy_weights: tuple[str, ...] = ()) -> tuple[dict, bytes]:
    tree, segment = linear_s8_tree(copy_weights)
    return tree, serialize.to_pte(tree, segment)


def linear_s8_tree(copy_weights: tuple[str, ...] = ()) -> tuple[dict, bytes]:
    """y = linear_s8(x) with its operands in the constant segment; those named
    in copy_weights instead in the arena, copied there at load."""
    rng = np.random.default_rng(3)
    b = Builder(arena_bytes=80)
    x = b.arena("x", "I8", [2, 24], 0, 0.1, 4)
    y = b.arena("y", "I8", [2, 12], 48, 0.2, -5)
    w = rng.integers(-127, 128, (12, 24), dtype=np.int8)
    mult, shift = ref.conv_requant(0.1, rng.uniform(0.005, 0.02, 12), 0.2)
    consts = {"w": ("I8", w), "bias": ("I32", ref.fold_linear_bias(rng.integers(-500, 500, 12), w, -4)),
              "multiplier": ("I32", mult), "shift": ("I32", shift)}
    ids = {k: b.const(k, dt, v) for k, (dt, v) in consts.items()}
    b.op("LINEAR_S8", [x, ids["w"], ids["bias"], ids["multiplier"], ids["shift"]], [y],
         ("QuantLinearParams", {"input_offset": -4, "output_offset": -5}))
    tree = b.tree([x], [y])
    copies = []
    for name in copy_weights:
        t = b.tensors[ids[name]]
        dst = serialize._pad(b.arena_bytes)
        copies.append({"src": t["offset"], "dst": dst, "nbytes": t["nbytes"], "arena": 0})
        t.update(region="ARENA", arena=0, offset=dst)
        b.arena_bytes = dst + serialize._pad(t["nbytes"])
    tree = b.tree([x], [y])
    if copies:
        tree["init_copies"] = copies
    return tree, bytes(b.segment)


def linear_samples() -> list[list[np.ndarray]]:
    rng = np.random.default_rng(9)
    return [[rng.integers(-128, 128, (2, 24), dtype=np.int8)] for _ in range(2)]


@pytest.mark.parametrize("copied", [("w",), ("w", "bias", "multiplier", "shift")], ids=["weights", "all"])
def test_init_copies_run_bit_exact(host_runner: Path, tmp_path: Path, copied: tuple[str, ...]) -> None:
    samples = linear_samples()
    tree0, pte0 = linear_s8_program()
    tree1, pte1 = linear_s8_program(copied)
    assert tree1["arenas"][0]["size"] > tree0["arenas"][0]["size"]
    status0, outs0, _ = run_host(host_runner, tmp_path, pte0, tree0, samples)
    status1, outs1, stdout = run_host(host_runner, tmp_path, pte1, tree1, samples)
    assert status0 == OK and status1 == OK, stdout[-1000:]
    np.testing.assert_array_equal(outs1[0], outs0[0])
    np.testing.assert_array_equal(outs1[0], run_reference(pte1, samples)[0])
    np.testing.assert_array_equal(outs0[0], run_reference(pte0, samples)[0])


@pytest.mark.parametrize("edit", [
    {"src": 2}, {"dst": 66}, {"arena": 1}, {"nbytes": 1 << 20},
    {"src": "end"},  # the copy reads past the constant segment
    {"dst": "end"},  # the copy writes past the arena
], ids=["src_misaligned", "dst_misaligned", "arena_out_of_range", "too_long", "src_past_segment", "dst_past_arena"])
def test_bad_init_copy_is_refused(host_runner: Path, tmp_path: Path, edit: dict) -> None:
    tree, segment = linear_s8_tree(("w",))
    c = tree["init_copies"][0]
    for k, v in edit.items():
        if v == "end":
            v = (tree["constant_size"] if k == "src" else tree["arenas"][0]["size"]) - c["nbytes"] + 4
        c[k] = v
    pte = serialize.to_pte(copy.deepcopy(tree), segment)
    status, _, stdout = run_host(host_runner, tmp_path, pte, tree, linear_samples())
    assert status == INVALID_TENSOR and f"tmcu: load status={INVALID_TENSOR} " in stdout, stdout[-1000:]


# --------------------------------------------------------------------------------------------
# Values are data


@pytest.mark.parametrize("name,index,value", [
    ("bias", 0, 2**31 - 1), ("bias", 5, -(2**31)), ("multiplier", 3, -5), ("shift", 11, 31), ("shift", 0, -40),
], ids=["bias_max", "bias_min", "negative_multiplier", "shift_31", "shift_minus_40"])
def test_out_of_range_values_give_zeros(host_runner: Path, tmp_path: Path, name: str, index: int,
                                        value: int) -> None:
    tree, segment = linear_s8_tree()
    t = next(t for t in tree["tensors"] if t["name"] == name)
    seg = bytearray(segment)
    seg[t["offset"] + 4 * index:t["offset"] + 4 * index + 4] = np.int32(value).tobytes()
    pte = serialize.to_pte(tree, bytes(seg))
    samples = linear_samples()
    status, outs, stdout = run_host(host_runner, tmp_path, pte, tree, samples)
    assert status == OK, stdout[-1000:]
    np.testing.assert_array_equal(outs[0], np.zeros_like(outs[0]))
    # The same program with its values in range computes real outputs.
    _, good, _ = run_host(host_runner, tmp_path, serialize.to_pte(tree, segment), tree, samples)
    assert np.any(good[0] != 0)
