"""Robustness: what a hostile or damaged input does to the runtime and the
compiler.

The runtime must never crash on a corrupted program: the host runner (built
with AddressSanitizer + UBSan, the program in an exactly sized heap buffer)
is fed truncations, random byte flips and targeted semantic corruptions of a
compiled model, and must exit with 0 or one of the documented error codes
(firmware/core/error.h, firmware/app/app.h), never with a sanitizer finding.
Targeted corruptions must be refused with their specific error.

The compiler must refuse what it cannot lower with a message naming the ATen
op, the operand shapes and the user's source line, and the CLI must print it
without a traceback.
"""

from __future__ import annotations

import copy
import inspect
import random
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError, TorchMCUError
from torchmcu.program import schema, serialize
from torchmcu.sim import runner

# firmware/core/error.h
OK = 0x00
INVALID_PROGRAM = 0x20
UNSUPPORTED_VERSION = 0x21
MISALIGNED_PROGRAM = 0x22
INVALID_TENSOR = 0x23
INVALID_OP = 0x24
KERNEL_MISSING = 0x30
ARENA_TOO_SMALL = 0x31
ARENA_MISMATCH = 0x32
CHECKSUM_MISMATCH = 0x25  # a program compiled with --crc whose bytes changed
BAD_IO = 0x50  # firmware/app/app.h kStatusBadIo
DOCUMENTED = {OK, INVALID_PROGRAM, UNSUPPORTED_VERSION, MISALIGNED_PROGRAM, INVALID_TENSOR, INVALID_OP,
              KERNEL_MISSING, ARENA_TOO_SMALL, ARENA_MISMATCH, CHECKSUM_MISMATCH, BAD_IO}

BOARD = "mps3-an547"
SEED = 20240611
WORKERS = 2  # each run is its own short process; two keep both cores busy


# --------------------------------------------------------------------------------------------
# The program under attack and the harness


class SmallNet(nn.Module):
    """conv2d + relu -> max pool -> flatten -> linear -> softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.conv(x)))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


class Program:
    def __init__(self, pte: bytes, io: Path, reference: np.ndarray, work: Path) -> None:
        self.pte = pte
        self.io = io
        self.reference = reference
        self.work = work
        self.tree = schema.decode(pte)
        self.fb_size = self.tree["constant_offset"]  # the flatbuffer (padded) precedes the segment
        self.segment = pte[self.fb_size:]


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Program:
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(1, 2, 6, 6)
    out = tmp_path_factory.mktemp("robust_model")
    compile(model, (x,), BOARD, out, progress=False)
    work = tmp_path_factory.mktemp("robust_variants")
    io = work / "io.bin"
    io.write_bytes(runner.io_blob([[x.numpy()]]))  # written once, shared by every variant
    with torch.no_grad():
        ref = model(x).numpy()
    return Program((out / "model.pte").read_bytes(), io, ref, work)


class Outcome:
    def __init__(self, name: str, proc: subprocess.CompletedProcess) -> None:
        self.name = name
        self.status = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def problems(self) -> list[str]:
        """Why this run counts as a crash (empty when it does not)."""
        found = []
        if "AddressSanitizer" in self.stderr or "runtime error" in self.stderr:
            found.append("sanitizer finding")
        if self.status not in DOCUMENTED:
            found.append(f"undocumented exit status {self.status:#x}")
        elif f"tmcu: done status={self.status} " not in self.stdout:
            found.append("exit status not reported by the app's done line")
        return found

    def describe(self) -> str:
        return (f"{self.name}: exit {self.status:#x}: {'; '.join(self.problems()) or 'ok'}\n"
                f"stdout: {self.stdout[-500:]}\nstderr: {self.stderr[-3000:]}")


def run_variants(host_runner: Path, program: Program, variants: list[tuple[str, bytes]]) -> list[Outcome]:
    def one(item: tuple[int, tuple[str, bytes]]) -> Outcome:
        i, (name, data) = item
        path = program.work / f"v{i}.pte"
        path.write_bytes(data)
        proc = subprocess.run([str(host_runner), str(path), str(program.io)], capture_output=True,
                              text=True, errors="replace", timeout=60)
        path.unlink()
        return Outcome(name, proc)

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, enumerate(variants)))


def assert_no_crash(outcomes: list[Outcome]) -> None:
    bad = [o for o in outcomes if o.problems()]
    assert not bad, f"{len(bad)} of {len(outcomes)} variants crashed the runtime; first:\n{bad[0].describe()}"


def sample_output(outcome: Outcome) -> np.ndarray:
    line = next(ln for ln in outcome.stdout.splitlines() if ln.startswith("tmcu: sample 0 "))
    hexed = dict(f.split("=", 1) for f in line.split() if "=" in f)["out0"]
    return np.frombuffer(bytes.fromhex(hexed), dtype="<f4")


# --------------------------------------------------------------------------------------------
# The harness itself


def test_runner_has_sanitizers(host_runner: Path, program: Program) -> None:
    """A crash must be visible: the runner is built with ASan and UBSan."""
    nm = subprocess.run(["nm", str(host_runner)], capture_output=True, text=True)
    if nm.returncode != 0:
        pytest.skip("nm unavailable")
    assert "__asan_init" in nm.stdout and "__ubsan_handle" in nm.stdout


def test_intact_program_runs(host_runner: Path, program: Program) -> None:
    """The unmodified program, and the same program decoded and re-encoded (the
    path every targeted corruption takes), load and reproduce PyTorch: a
    corruption test's status is then the corruption's doing."""
    reencoded = serialize.to_pte(copy.deepcopy(program.tree), program.segment)
    assert reencoded == program.pte
    for o in run_variants(host_runner, program, [("intact", program.pte), ("reencoded", reencoded)]):
        assert o.status == OK and not o.problems(), o.describe()
        assert "tmcu: done status=0 samples=1" in o.stdout, o.describe()
        np.testing.assert_allclose(sample_output(o), program.reference.ravel(), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# (a) truncation, (b) random byte flips


def test_truncated_programs_are_refused(host_runner: Path, program: Program) -> None:
    """Every length of the flatbuffer part, and a stride through the constant
    segment: the recorded segment no longer fits, so each is InvalidProgram."""
    n = len(program.pte)
    lengths = sorted(set(range(0, program.fb_size + 1)) | set(range(program.fb_size, n, 12)) | {n - 1})
    outcomes = run_variants(host_runner, program, [(f"truncated to {k} of {n} bytes", program.pte[:k])
                                                   for k in lengths])
    assert_no_crash(outcomes)
    wrong = [o for o in outcomes if o.status != INVALID_PROGRAM]
    assert not wrong, f"{len(wrong)} truncations not refused as InvalidProgram; first:\n{wrong[0].describe()}"


def _flipped(pte: bytes, fb_size: int, rng: random.Random, nbytes: int) -> tuple[str, bytes]:
    buf = bytearray(pte)
    edits = []
    for _ in range(nbytes):
        # Mostly in the flatbuffer, where structure lives; some in the constants.
        pos = rng.randrange(fb_size) if rng.random() < 0.85 else rng.randrange(len(buf))
        old = buf[pos]
        new = rng.choice([old ^ (1 << rng.randrange(8)), rng.randrange(256), 0x00, 0xFF, 0x7F, 0x80])
        buf[pos] = new
        edits.append(f"[{pos}] {old:#04x}->{new:#04x}")
    return f"seed {SEED} flips " + ", ".join(edits), bytes(buf)


def test_random_byte_flips_never_crash(host_runner: Path, program: Program) -> None:
    rng = random.Random(SEED)
    variants = [_flipped(program.pte, program.fb_size, rng, 1) for _ in range(200)]
    variants += [_flipped(program.pte, program.fb_size, rng, rng.randint(2, 8)) for _ in range(200)]
    outcomes = run_variants(host_runner, program, variants)
    assert_no_crash(outcomes)
    # The flips must reach past the verifier, or they test only its first check.
    statuses = {o.status for o in outcomes}
    assert INVALID_PROGRAM in statuses and statuses - {INVALID_PROGRAM}, statuses


# --------------------------------------------------------------------------------------------
# (c) targeted semantic corruptions


def _op(tree: dict, code: str) -> dict:
    return next(op for op in tree["ops"] if op["code"] == code)


def _tensor(tree: dict, region: str) -> dict:
    return next(t for t in tree["tensors"] if t["region"] == region)


def _tensor_index(tree: dict, region: str) -> int:
    return next(i for i, t in enumerate(tree["tensors"]) if t["region"] == region)


def _set(obj: dict, **kw) -> None:
    obj.update(kw)


def _bogus_union_schema() -> schema.Schema:
    """The schema with one more OpParams member, for a union type the runtime
    does not know (17)."""
    s = copy.deepcopy(schema.load())
    s.tables["BogusParams"] = schema.Table("BogusParams", [schema.Field("x", "int", False, 0, 0)])
    s.unions["OpParams"].members.append("BogusParams")
    return s


def _encode_with(tree: dict, segment: bytes, s: schema.Schema) -> bytes:
    """serialize.to_pte with another schema."""
    size = serialize._pad(len(schema.encode(dict(tree, constant_offset=0xFFFFFFF0), s)))
    fb = schema.encode(dict(tree, constant_offset=size), s)
    return fb + bytes(size - len(fb)) + segment


def _mutations() -> list[tuple[str, object, int]]:
    """(id, mutate(tree) or ("raw", fn(pte)), expected status)."""
    arena_size = lambda tr: tr["arenas"][0]["size"]  # noqa: E731
    return [
        # Tensors: InvalidTensor.
        ("tensor_offset_past_arena",
         lambda tr: _set(_tensor(tr, "ARENA"), offset=arena_size(tr) - _tensor(tr, "ARENA")["nbytes"] + 4),
         INVALID_TENSOR),
        ("tensor_offset_far_past_arena", lambda tr: _set(_tensor(tr, "ARENA"), offset=0xFFFFFFF0), INVALID_TENSOR),
        ("constant_offset_past_segment",
         lambda tr: _set(_tensor(tr, "CONSTANT"), offset=tr["constant_size"]), INVALID_TENSOR),
        ("constant_offset_misaligned", lambda tr: _set(_tensor(tr, "CONSTANT"), offset=2), INVALID_TENSOR),
        ("dims_product_not_nbytes",
         lambda tr: _set(_tensor(tr, "ARENA"), dims=[2, *_tensor(tr, "ARENA")["dims"][1:]]), INVALID_TENSOR),
        ("nbytes_not_dims_product",
         lambda tr: _set(_tensor(tr, "CONSTANT"), nbytes=_tensor(tr, "CONSTANT")["nbytes"] - 4), INVALID_TENSOR),
        ("negative_dim", lambda tr: _set(_tensor(tr, "ARENA"), dims=[-1, *_tensor(tr, "ARENA")["dims"][1:]]),
         INVALID_TENSOR),
        ("negative_dims_positive_product",
         lambda tr: _set(_tensor(tr, "ARENA"), dims=[-1, -1, *_tensor(tr, "ARENA")["dims"][1:]]), INVALID_TENSOR),
        ("zero_dim_zero_nbytes", lambda tr: _set(_tensor(tr, "ARENA"), dims=[0, 2, 6, 6], nbytes=0), INVALID_TENSOR),
        ("rank_7", lambda tr: _set(_tensor(tr, "ARENA"), dims=[1, 1, 1, 2, 6, 6, 1]), INVALID_TENSOR),
        ("dims_product_overflows",
         lambda tr: _set(_tensor(tr, "ARENA"), dims=[65536, 65536, 65536, 65536], nbytes=0), INVALID_TENSOR),
        ("dims_product_wraps_to_nbytes",  # 4 * 8 * 134217737 = 2^32 + 288: a 32-bit product wraps to nbytes
         lambda tr: _set(_tensor(tr, "ARENA"), dims=[8, 134217737]), INVALID_TENSOR),
        ("unknown_dtype", lambda tr: _set(_tensor(tr, "ARENA"), dtype=9), INVALID_TENSOR),
        ("unknown_region", lambda tr: _set(_tensor(tr, "ARENA"), region=2), INVALID_TENSOR),
        ("arena_index_out_of_range", lambda tr: _set(_tensor(tr, "ARENA"), arena=1), INVALID_TENSOR),
        # Ops: InvalidOp.
        ("op_input_index_out_of_range",
         lambda tr: _op(tr, "CONV2D_F32")["inputs"].__setitem__(0, len(tr["tensors"])), INVALID_OP),
        ("op_input_index_below_minus_one",
         lambda tr: _op(tr, "CONV2D_F32")["inputs"].__setitem__(1, -2), INVALID_OP),
        ("op_input_index_int_min",
         lambda tr: _op(tr, "LINEAR_F32")["inputs"].__setitem__(0, -(2**31)), INVALID_OP),
        ("op_output_index_out_of_range",
         lambda tr: _set(_op(tr, "SOFTMAX_F32"), outputs=[len(tr["tensors"]) + 100]), INVALID_OP),
        ("op_required_input_absent", lambda tr: _op(tr, "LINEAR_F32")["inputs"].__setitem__(1, -1), INVALID_OP),
        ("op_too_many_inputs", lambda tr: _set(_op(tr, "LINEAR_F32"), inputs=[0] * 9), INVALID_OP),
        ("op_no_outputs", lambda tr: _set(_op(tr, "SOFTMAX_F32"), outputs=[]), INVALID_OP),
        # (op codes leave gaps between the areas' ranges: one past the largest)
        ("op_code_out_of_range", lambda tr: _set(_op(tr, "CONV2D_F32"),
                                                 code=max(schema.load().enums["OpCode"].values.values()) + 1),
         INVALID_OP),
        ("op_code_max", lambda tr: _set(_op(tr, "CONV2D_F32"), code=0xFFFF), INVALID_OP),
        ("op_code_changed_conv_to_linear", lambda tr: _set(_op(tr, "CONV2D_F32"), code="LINEAR_F32"), INVALID_OP),
        ("conv_stride_0", lambda tr: _op(tr, "CONV2D_F32")["params"][1].update(stride_h=0), INVALID_OP),
        ("conv_stride_negative", lambda tr: _op(tr, "CONV2D_F32")["params"][1].update(stride_w=-1), INVALID_OP),
        ("conv_dilation_huge", lambda tr: _op(tr, "CONV2D_F32")["params"][1].update(dilation_h=2**31 - 1),
         INVALID_OP),
        ("conv_padding_negative", lambda tr: _op(tr, "CONV2D_F32")["params"][1].update(pad_top=-1), INVALID_OP),
        ("conv_groups_0", lambda tr: _op(tr, "CONV2D_F32")["params"][1].update(groups=0), INVALID_OP),
        ("conv_weight_swapped_for_bias",
         lambda tr: _op(tr, "CONV2D_F32")["inputs"].reverse(), INVALID_OP),
        ("pool_kernel_0", lambda tr: _op(tr, "MAX_POOL2D_F32")["params"][1].update(kernel_h=0), INVALID_OP),
        ("pool_window_mismatch", lambda tr: _op(tr, "MAX_POOL2D_F32")["params"][1].update(stride_w=1), INVALID_OP),
        ("softmax_axis_out_of_range", lambda tr: _op(tr, "SOFTMAX_F32")["params"][1].update(axis=2), INVALID_OP),
        ("softmax_axis_negative", lambda tr: _op(tr, "SOFTMAX_F32")["params"][1].update(axis=-1), INVALID_OP),
        ("permute_repeated_axis", lambda tr: _op(tr, "PERMUTE")["params"][1].update(perm=[0, 2, 2, 1]), INVALID_OP),
        ("permute_axis_out_of_range", lambda tr: _op(tr, "PERMUTE")["params"][1].update(perm=[0, 2, 3, 7]),
         INVALID_OP),
        ("permute_perm_too_long", lambda tr: _op(tr, "PERMUTE")["params"][1].update(perm=[0, 1, 2, 3, 4, 5, 6, 7]),
         INVALID_OP),
        ("params_union_mismatched",
         lambda tr: _set(_op(tr, "CONV2D_F32"), params=("LinearParams", {"act_min": 0.0})), INVALID_OP),
        ("params_absent", lambda tr: _set(_op(tr, "MAX_POOL2D_F32"), params=None), INVALID_OP),
        ("op_output_in_constant_region",
         lambda tr: _set(_op(tr, "CONV2D_F32"), outputs=[_tensor_index(tr, "CONSTANT")]), INVALID_OP),
        ("model_output_in_constant_region", lambda tr: _set(tr, outputs=[_tensor_index(tr, "CONSTANT")]),
         INVALID_OP),
        ("model_input_in_constant_region", lambda tr: _set(tr, inputs=[_tensor_index(tr, "CONSTANT")]),
         INVALID_OP),
        ("model_input_index_out_of_range", lambda tr: _set(tr, inputs=[len(tr["tensors"])]), INVALID_OP),
        # Program: version, identifier, segment, arenas.
        ("version_next", lambda tr: _set(tr, version=serialize.PROGRAM_VERSION + 1), UNSUPPORTED_VERSION),
        ("version_0", lambda tr: _set(tr, version=0), UNSUPPORTED_VERSION),
        ("version_absent", lambda tr: tr.pop("version"), UNSUPPORTED_VERSION),
        ("wrong_identifier", ("raw", lambda pte: pte[:4] + b"TMCV" + pte[8:]), INVALID_PROGRAM),
        ("identifier_lowercase", ("raw", lambda pte: pte[:4] + b"tmcu" + pte[8:]), INVALID_PROGRAM),
        ("root_offset_past_end", ("raw", lambda pte: (len(pte) + 4).to_bytes(4, "little") + pte[4:]),
         INVALID_PROGRAM),
        ("root_offset_misaligned", ("raw", lambda pte: (int.from_bytes(pte[:4], "little") + 1).to_bytes(4, "little")
                                    + pte[4:]), INVALID_PROGRAM),
        ("params_union_type_unknown", ("bogus_union", None), INVALID_PROGRAM),
        ("constant_size_past_end", ("encoded", lambda tr, seg: (tr, seg[:-16])), INVALID_PROGRAM),
        ("arena_count_over_limit",
         lambda tr: _set(tr, arenas=[dict(tr["arenas"][0], name=f"a{i}") for i in range(5)]), ARENA_MISMATCH),
        ("no_arenas", lambda tr: _set(tr, arenas=[]), INVALID_TENSOR),
    ]


MUTATIONS = _mutations()


def _variant(program: Program, mutation: object) -> bytes:
    if isinstance(mutation, tuple):
        kind, fn = mutation
        if kind == "raw":
            return fn(program.pte)
        if kind == "encoded":
            tree, seg = fn(copy.deepcopy(program.tree), program.segment)
            # The flatbuffer records the full segment size; the file carries less.
            size = program.fb_size
            fb = schema.encode(dict(tree, constant_offset=size))
            assert len(fb) <= size
            return fb + bytes(size - len(fb)) + seg
        if kind == "bogus_union":
            tree = copy.deepcopy(program.tree)
            _op(tree, "CONV2D_F32")["params"] = ("BogusParams", {"x": 1})
            return _encode_with(tree, program.segment, _bogus_union_schema())
        raise AssertionError(kind)
    tree = copy.deepcopy(program.tree)
    mutation(tree)
    return serialize.to_pte(tree, program.segment)


@pytest.fixture(scope="module")
def targeted(host_runner: Path, program: Program) -> dict[str, Outcome]:
    """Every targeted variant, run once in parallel; each test reads its result."""
    variants = [(name, _variant(program, m)) for name, m, _ in MUTATIONS]
    return {o.name: o for o in run_variants(host_runner, program, variants)}


@pytest.mark.parametrize("name,expected", [(n, e) for n, _, e in MUTATIONS], ids=[n for n, _, _ in MUTATIONS])
def test_targeted_corruption_is_refused(targeted: dict[str, Outcome], name: str, expected: int) -> None:
    o = targeted[name]
    assert not o.problems(), o.describe()
    assert o.status == expected, f"expected status {expected:#x}\n{o.describe()}"
    assert f"tmcu: load status={expected} " in o.stdout, o.describe()  # refused at load, before any sample


# --------------------------------------------------------------------------------------------
# A seeded structural fuzz: random edits of the decoded tree, so corruptions
# stay well-formed flatbuffers and reach the tensor and kernel checks.


def _tree_edit(tree: dict, rng: random.Random) -> None:
    codes = list(schema.load().enums["OpCode"].values)
    members = schema.load().unions["OpParams"].members
    n = len(tree["tensors"])
    what = rng.randrange(6)
    if what == 0:  # reshape a tensor, keeping nbytes consistent
        t = rng.choice(tree["tensors"])
        t["dims"] = [rng.choice([1, 2, 3, 4, 5, 6, 9, 36]) for _ in range(rng.randint(1, 6))]
        t["nbytes"] = 4 * int(np.prod(t["dims"]))
    elif what == 1:
        t = rng.choice(tree["tensors"])
        t["offset"] = rng.choice([0, 4, 16, 144, 288, 576, rng.randrange(2048)])
        t["region"] = rng.choice(["ARENA", "CONSTANT", t["region"]])
    elif what == 2:
        rng.choice(tree["ops"])["code"] = rng.choice(codes)
    elif what == 3:
        op = rng.choice(tree["ops"])
        key = rng.choice(["inputs", "outputs"])
        op[key] = [rng.randrange(-1, n) for _ in range(rng.randint(1, 4))]
    elif what == 4:
        op = rng.choice(tree["ops"])
        if op["params"] is not None and op["params"][1] and rng.random() < 0.7:
            body = op["params"][1]
            key = rng.choice(sorted(body))
            if isinstance(body[key], list):
                body[key] = [rng.randrange(-1, 7) for _ in range(rng.randint(0, 7))]
            elif isinstance(body[key], float):
                body[key] = rng.choice([0.0, -1.0, float("nan")])
            elif not isinstance(body[key], bool):
                body[key] = rng.choice([-1, 0, 1, 2, 3, 7, 65536, 65537, 2**31 - 1, -(2**31)])
        else:
            op["params"] = (rng.choice(members), {})
    else:
        i, j = rng.randrange(len(tree["ops"])), rng.randrange(len(tree["ops"]))
        tree["ops"][i], tree["ops"][j] = tree["ops"][j], tree["ops"][i]


def test_structural_fuzz_never_crashes(host_runner: Path, program: Program) -> None:
    rng = random.Random(SEED + 1)
    variants = []
    for k in range(300):
        tree = copy.deepcopy(program.tree)
        for _ in range(rng.randint(1, 3)):
            _tree_edit(tree, rng)
        # The name carries the edited tree, so a failure can be reproduced from the report.
        ops = [(op["code"], op["inputs"], op["outputs"], op["params"]) for op in tree["ops"]]
        name = f"seed {SEED + 1} tree edit #{k}: ops {ops} tensors {tree['tensors']}"
        variants.append((name, serialize.to_pte(tree, program.segment)))
    outcomes = run_variants(host_runner, program, variants)
    assert_no_crash(outcomes)
    statuses = {o.status for o in outcomes}
    assert {OK, INVALID_TENSOR, INVALID_OP} <= statuses, statuses  # reached loads, refusals and runs


# --------------------------------------------------------------------------------------------
# Compile time: unsupported constructs


class CumsumNet(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x)
        return torch.cumsum(y, dim=1)


class SortNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return torch.sort(y, dim=-1).values


def _line_of(cls: type, needle: str) -> int:
    lines, start = inspect.getsourcelines(cls.forward)
    hits = [start + i for i, ln in enumerate(lines) if needle in ln]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.mark.parametrize("cls,needle,op,shape", [
    (CumsumNet, "torch.cumsum(", "aten.cumsum", "(2, 5)"),
    (SortNet, "torch.sort(", "aten.sort", "(2, 7)"),
], ids=["cumsum", "sort"])
def test_unsupported_op_names_op_shape_and_source_line(tmp_path: Path, cls: type, needle: str, op: str,
                                                       shape: str) -> None:
    with pytest.raises(CompileError) as info:
        compile(cls(), (torch.randn(2, 5),), BOARD, tmp_path, progress=False)
    msg = str(info.value)
    line = _line_of(cls, needle)
    assert op in msg, msg
    assert shape in msg, msg
    assert Path(__file__).name in msg and f"line {line}" in msg, msg
    assert needle in msg, msg  # the offending code itself
    assert info.value.op is not None and info.value.op.startswith(op)


def test_training_mode_batchnorm_compiles_in_eval(tmp_path: Path, host_runner: Path) -> None:
    """A model left in training mode: compile evaluates it (running statistics,
    not the batch's), so the firmware matches model.eval()."""
    torch.manual_seed(1)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    model = nn.Sequential(nn.Conv2d(2, 3, 3), bn, nn.ReLU()).train()
    x = torch.randn(1, 2, 5, 5)
    compile(model, (x,), BOARD, tmp_path, progress=False)
    res = runner.run(tmp_path, [x.numpy()], sim="host")
    assert res.exit_code == 0, res.raw
    with torch.no_grad():
        expected = model.eval()(x).numpy()
        batch_stats = model.train()(x).numpy()
    assert not np.allclose(expected, batch_stats, atol=1e-3)  # the two modes really differ here
    np.testing.assert_allclose(res.outputs[0][0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("example", [(3.0,), (np.zeros((2, 5), np.float32),), ([1.0, 2.0, 3.0, 4.0, 5.0],),
                                     (torch.randn(2, 5), "x")],
                         ids=["float", "ndarray", "list", "tensor_and_str"])
def test_non_tensor_example_input_is_a_clear_error(tmp_path: Path, example: tuple) -> None:
    with pytest.raises(TorchMCUError) as info:
        compile(nn.Linear(5, 3), example, BOARD, tmp_path, progress=False)
    msg = str(info.value)
    bad = next(i for i, x in enumerate(example) if not isinstance(x, torch.Tensor))
    assert f"example input {bad}" in msg and type(example[bad]).__name__ in msg and "Tensor" in msg, msg


def test_bare_scalar_example_input_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TorchMCUError, match="example input"):
        compile(nn.Linear(5, 3), 3.0, BOARD, tmp_path, progress=False)


# --------------------------------------------------------------------------------------------
# The CLI


def test_cli_reports_unsupported_op_without_traceback(tmp_path: Path, capsys) -> None:
    from torchmcu import cli

    src = textwrap.dedent("""\
        import torch
        from torch import nn


        class Net(nn.Module):
            def forward(self, x):
                y = x + 1
                return torch.cumsum(y, dim=0)


        def make():
            return Net(), (torch.randn(3, 4),)
        """)
    model_file = tmp_path / "cumsum_model.py"
    model_file.write_text(src)
    line = 1 + next(i for i, ln in enumerate(src.splitlines()) if "torch.cumsum(" in ln)
    code = cli.main(["compile", f"{model_file}:make", "--board", BOARD, "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    assert "torchmcu: error:" in err, err
    after = err.split("torchmcu: error:", 1)[1]
    assert "aten.cumsum" in after and "(3, 4)" in after, err
    assert f'"{model_file}", line {line}' in after and "torch.cumsum(y, dim=0)" in after, err
