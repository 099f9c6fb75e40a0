"""Running a compiled model: on the host runner or in a simulator, over a
batch of samples, with outputs and instruction counts read back from the
firmware's line protocol (see firmware/app/app.h), and the check against
the reference."""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..boards import load_board
from ..errors import SimError, TorchMCUError
from . import RUNNERS, get_runner
from .base import Runner
from .fvp import parse_npu

IO_VERSION = 1
IO_HEADER = 32
FLAG_PROFILE = 1

_LINE = re.compile(r"^tmcu: (\w+)(.*)$")


@dataclass
class RunResult:
    """What a run printed. Tick figures measured `runs` times (the load, the
    profile, the first sample's repeats) are means over the runs: each run
    starts at another phase of the tick counter, so the mean is finer than
    one tick."""
    outputs: list[np.ndarray]  # one array per model output, samples along axis 0
    exit_code: int
    load_ticks: float
    sample_ticks: list[int]
    op_ticks: list[float]  # per op of the first sample, the profiler's cost included
    instructions_per_tick: Fraction | None  # None on the host: no counts there
    raw: str = ""
    command: list[str] = field(default_factory=list)
    calib_ticks: float = 0.0  # the profiler's own cost per op (an op with no kernel)
    repeat_ticks: float | None = None  # the first sample, mean over its repeats
    runs: int = 1
    # Per NPU partition, its PMU figures (cycles, ...; means over the calls) from the
    # delegate's "tmcu: npu" lines (profiled runs of an Ethos-U program on an FVP).
    npu: dict[int, dict[str, float]] = field(default_factory=dict)
    # The stack's high-water mark the startup measured when main returned (bytes; None: not reported)
    # and the stack's size.
    stack_used: int | None = None
    stack_size: int | None = None
    # The whole run's instructions as the simulator counts them itself (Renode's monitor), when it does.
    sim_instructions: int | None = None
    # The cycle model's figures (run(cycles=True) in QEMU, for a core with a timing table): torchmcu.sim.cycles.
    cycles: Any = None

    def kernel_cycles(self) -> list[float | None]:
        """Each op's own cycles (the cycle model's; None without it), as kernel_instructions."""
        got = self.cycles.op_cycles if self.cycles is not None else []
        return [got[i] if i < len(got) else None for i in range(len(self.op_ticks))]

    def instructions(self, ticks: float) -> int | None:
        return None if self.instructions_per_tick is None else round(ticks * self.instructions_per_tick)

    def kernel_instructions(self) -> list[int | None]:
        """Each op's own instructions: its kernel's run, the call included."""
        return [self.instructions(t - self.calib_ticks) for t in self.op_ticks]

    def inference_instructions(self) -> int | None:
        ticks = self.repeat_ticks if self.repeat_ticks is not None else (
            self.sample_ticks[0] if self.sample_ticks else None)
        return None if ticks is None else self.instructions(ticks)

    def overhead_per_op(self) -> float | None:
        """The framework's instructions per op: one inference less the sum of
        the kernels' own, over the number of ops."""
        total = self.inference_instructions()
        kernels = self.kernel_instructions()
        if total is None or not kernels or any(k is None for k in kernels):
            return None
        return (total - sum(k for k in kernels if k is not None)) / len(kernels)


def io_blob(samples: list[list[np.ndarray]], profile: bool = False, repeat: int = 1) -> bytes:
    """The io blob: header, then each sample's inputs back to back, each in
    its own dtype (float32 unless the program takes int8, int16 or int32). `repeat` runs the
    load, the profile and the first sample that many times (mean figures)."""
    payload = b"".join(np.ascontiguousarray(x if x.dtype in (np.int8, np.int16, np.int32) else x.astype("<f4")).tobytes()
                       for s in samples for x in s)
    per = len(payload) // len(samples) if samples else 0
    header = b"TMIO" + struct.pack("<IIIII", IO_VERSION, len(samples), per, FLAG_PROFILE if profile else 0,
                                   repeat)
    return header + bytes(IO_HEADER - len(header)) + payload


def parse_protocol(text: str, output_meta: list[dict[str, Any]]) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Reads the lines the app printed; other lines (board messages) are ignored.
    Figures measured over several runs come back as means."""
    info: dict[str, Any] = {"load_status": None, "load_ticks": 0, "op_ticks": [], "sample_ticks": [],
                            "done_status": None, "calib_ticks": 0.0, "repeat_ticks": None, "runs": 1,
                            "stack_used": None, "stack_size": None}
    outs: list[list[np.ndarray]] = [[] for _ in output_meta]
    op_sums: dict[int, int] = {}
    op_passes = 0
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        kind, rest = m.group(1), m.group(2).split()
        fields = dict(f.split("=", 1) for f in rest if "=" in f)
        runs = max(1, int(fields.get("runs", 1)))
        if kind == "load" and info["load_status"] is None:  # the first (a board over serial loads per sample)
            info["load_status"] = int(fields["status"])
            info["load_ticks"] = int(fields["ticks"]) / runs
            info["runs"] = runs
        elif kind == "calib":
            info["calib_ticks"] = int(fields["ticks"]) / runs
        elif kind == "repeat":
            info["repeat_ticks"] = int(fields["ticks"]) / runs
        elif kind == "op":
            index = int(rest[0])
            op_passes += index == 0
            op_sums[index] = op_sums.get(index, 0) + int(fields["ticks"])
        elif kind == "sample":
            info["sample_ticks"].append(int(fields["ticks"]))
            for k, meta in enumerate(output_meta):
                raw = bytes.fromhex(fields[f"out{k}"])
                dtype = {"int8": np.dtype(np.int8), "int16": np.dtype("<i2")}.get(meta.get("dtype"), np.dtype("<f4"))
                outs[k].append(to_logical(np.frombuffer(raw, dtype=dtype).reshape(meta.get("dims", meta["shape"])),
                                          meta))
        elif kind == "done":
            info["done_status"] = int(fields["status"])
        elif kind == "stack":
            info["stack_used"], info["stack_size"] = int(fields["used"]), int(fields["size"])
    info["op_ticks"] = [op_sums[i] / max(op_passes, 1) for i in sorted(op_sums)]
    arrays = [np.stack(o) if o else np.zeros((0, *m["shape"]), np.float32) for o, m in zip(outs, output_meta)]
    return info, arrays


def to_program(x: np.ndarray, m: dict[str, Any]) -> np.ndarray:
    """One sample of a tensor in PyTorch's order as the program holds it
    (model.json "perm": channels last with --io-layout nhwc)."""
    perm = m.get("perm")
    return np.ascontiguousarray(np.transpose(x, perm)) if perm and list(perm) != sorted(perm) else x


def to_logical(x: np.ndarray, m: dict[str, Any]) -> np.ndarray:
    """One sample of a tensor as the program holds it, in PyTorch's order."""
    perm = m.get("perm")
    return np.ascontiguousarray(np.transpose(x, np.argsort(perm))) if perm and list(perm) != sorted(perm) else x


def program_samples(meta: dict[str, Any], samples: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Samples in the program's input dtypes and layout: float inputs of an
    int8-input program are quantized as the device's QUANTIZE would
    (TFLite's rounding), and permuted to the program's order."""
    from .. import reference as ref

    def convert(x: np.ndarray, m: dict[str, Any]) -> np.ndarray:
        if m.get("dtype") == "int8" and x.dtype != np.int8:
            x = ref.quantize(x, m["scale"], m["zero_point"])
        if m.get("dtype") == "int32":  # an integer or bool input (PyTorch's int64 / bool)
            x = np.asarray(x).astype(np.int32)
        if m.get("dtype") == "int16":  # a hand-built program's int16 input
            x = np.asarray(x).astype(np.int16)
        elif np.asarray(x).dtype == np.int16:
            x = np.asarray(x).astype(np.float32)
        return to_program(x, m)
    return [[convert(x, m) for x, m in zip(s, meta["inputs"])] for s in samples]


def float_samples(meta: dict[str, Any], samples: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Samples as PyTorch takes them: int8 inputs dequantized."""
    from .. import reference as ref

    return [[ref.dequantize(x, m["scale"], m["zero_point"]) if x.dtype == np.int8 else x
             for x, m in zip(s, meta["inputs"])] for s in samples]


def load_meta(out_dir: str | Path) -> dict[str, Any]:
    path = Path(out_dir) / "model.json"
    if not path.is_file():
        raise TorchMCUError(f"{out_dir} is not a compiled model (no model.json); run `torchmcu compile` first")
    return json.loads(path.read_text())


def split_samples(meta: dict[str, Any], inputs: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Inputs shaped like the example inputs are one sample; with one more
    leading axis, a batch of samples."""
    if len(inputs) != len(meta["inputs"]):
        raise TorchMCUError(f"the model takes {len(meta['inputs'])} input(s), got {len(inputs)}")
    batches = []
    for x, m in zip(inputs, meta["inputs"]):
        shape = tuple(m["shape"])
        x = np.asarray(x)
        x = x if x.dtype == np.int8 and m.get("dtype") == "int8" else \
            x.astype(np.int32) if m.get("dtype") == "int32" else x.astype(np.float32)
        if x.shape == shape:
            x = x[None]
        elif x.shape[1:] != shape:
            raise TorchMCUError(f"input {m['name']} has shape {list(x.shape)}; expected {list(shape)} "
                                f"or [N, {', '.join(map(str, shape))}]")
        batches.append(x)
    n = batches[0].shape[0]
    if any(b.shape[0] != n for b in batches):
        raise TorchMCUError("inputs have different numbers of samples")
    return [[b[i] for b in batches] for i in range(n)]


def run(out_dir: str | Path, inputs: list[np.ndarray], sim: str | Runner = "qemu", profile: bool = False,
        timeout_s: float = 300.0, repeat: int = 1, cycles: bool = False) -> RunResult:
    """Run the compiled model in OUT on `sim`: a runner's name ("qemu",
    "host", "fvp": the board's Arm FVP, for programs with Ethos-U calls,
    "xt-run": Cadence's Xtensa ISS) or a runner (a board over a serial port:
    torchmcu.sim.serial). `repeat` measures the load, the profile and the
    first sample that many times. `cycles`: in QEMU, on a core with a
    timing table, QEMU also logs every executed block for the cycle model
    (torchmcu.sim.cycles: RunResult.cycles; a slower run)."""
    out = Path(out_dir)
    meta = load_meta(out)
    blob = io_blob(program_samples(meta, split_samples(meta, inputs)), profile, repeat)
    try:
        r = sim if not isinstance(sim, str) else get_runner(sim)
    except ValueError:
        raise TorchMCUError(f"unknown simulator {sim!r}: use {', '.join(RUNNERS)}") from None
    board = load_board(meta["board"])
    image = out / r.image
    if not image.is_file():
        raise TorchMCUError(f"{image} not found; run `torchmcu build {out}` first")
    parser = None
    if cycles and getattr(r, "name", "") == "qemu" and hasattr(r, "run_traced"):
        from . import cycles as cyc
        if cyc.has_model(board):
            try:
                parser = cyc.tracer(board, image)
            except TorchMCUError:  # no objdump/nm: the run goes on without the estimate
                parser = None
    res = (r.run_traced(board, image, blob, parser, timeout_s=timeout_s) if parser is not None
           else r.run(board, image, blob, timeout_s=timeout_s))
    if res.timed_out:
        raise SimError(f"{r.name} timed out after {timeout_s} s\n{res.stdout[-2000:]}")
    ipt = board.instructions_per_tick if r.counts_instructions else None
    info, outputs = parse_protocol(res.stdout, meta["outputs"])
    estimate = None
    if parser is not None:
        from . import cycles as cyc
        estimate = cyc.estimate(board, image, parser.finish(), len(info["op_ticks"]), repeat if profile else 0)
    return RunResult(outputs, res.exit_code, info["load_ticks"], info["sample_ticks"], info["op_ticks"], ipt,
                     res.stdout, res.command, calib_ticks=info["calib_ticks"], repeat_ticks=info["repeat_ticks"],
                     runs=info["runs"], npu=parse_npu(res.stdout), stack_used=info["stack_used"],
                     stack_size=info["stack_size"], sim_instructions=getattr(res, "stats", {}).get("instructions"),
                     cycles=estimate)


@dataclass
class AppResult:
    """A run of firmware built from the application's own sources."""
    output: str  # its UART output (the startup's "tmcu: stack" line included)
    exit_code: int  # main's return value
    stack_used: int | None
    stack_size: int | None
    command: list[str]


def run_app(out_dir: str | Path, sim: str = "qemu", timeout_s: float = 300.0) -> AppResult:
    """Run OUT/firmware.elf built with `torchmcu build --app` (no io blob):
    its output and main's return value."""
    out = Path(out_dir)
    meta = load_meta(out)
    if sim != "qemu":
        raise TorchMCUError(f"firmware built from your own sources runs in QEMU (--sim qemu), not {sim}")
    image = out / "firmware.elf"
    if not image.is_file():
        raise TorchMCUError(f"{image} not found; run `torchmcu build {out} --app ...` first")
    res = get_runner("qemu").run(load_board(meta["board"]), image, None, timeout_s=timeout_s)
    if res.timed_out:
        raise SimError(f"qemu timed out after {timeout_s} s\n{res.stdout[-2000:]}")
    info, _ = parse_protocol(res.stdout, [])
    return AppResult(res.stdout, res.exit_code, info["stack_used"], info["stack_size"], res.command)


# ---------------------------------------------------------------------------------------------
# Expected outputs and the check


def reference(out_dir: str | Path, samples: list[list[np.ndarray]], float64: bool = False) -> list[np.ndarray]:
    """PyTorch's outputs for each sample (float inputs), from the exported
    program (for int8 programs: PyTorch's q/dq model). float64: the same
    program with its parameters and inputs in float64."""
    return _run_exported(_load_exported(out_dir), out_dir, samples, float64)


def _load_exported(out_dir: str | Path, name: str = "model.pt2") -> Any:
    """A saved program of the build directory, in a process that may never
    have compiled: the ops it can hold are registered first."""
    import torch
    import torch.ao.quantization.fx._decomposed  # noqa: F401  the q/dq ops of quantized programs

    from ..frontend import attention  # noqa: F401  torchmcu::attention_softmax (int8 attention)

    return torch.export.load(str(Path(out_dir) / name))


def _run_exported(ep: Any, out_dir: str | Path, samples: list[list[np.ndarray]], float64: bool) -> list[np.ndarray]:
    """reference() on a loaded program. float64 converts the parameters the
    program's module shares with `ep`: run it last on one `ep`."""
    import torch

    module = ep.module()
    dtype = torch.float64 if float64 else torch.float32
    if float64:
        module = module.to(torch.float64)
        # Lifted tensor constants (re-parameterization's folded weights, frontend/reparam.py) are plain
        # attributes, which .to() leaves in float32: a float64 input then meets a float32 bias.
        for sub in module.modules():
            for k, v in list(vars(sub).items()):
                if isinstance(v, torch.Tensor) and v.is_floating_point() and not isinstance(v, torch.nn.Parameter):
                    setattr(sub, k, v.to(torch.float64))
    outs: list[list[np.ndarray]] = []
    # A streaming model's state (compile state=...): zeros, then each sample's new state feeds the next.
    state = load_meta(out_dir).get("state") or []
    carried = {s["input"]: torch.zeros(s["shape"], dtype=dtype) for s in state}
    user = set(ep.graph_signature.user_inputs)
    kinds = [n.meta["val"].dtype for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]

    def to_torch(x: np.ndarray, k: int) -> Any:
        # a copy: a model that mutates its input in place (x.tanh_()) must not change the samples;
        # integer and bool inputs (int32 in the program) as the model's own dtype
        x = torch.from_numpy(np.array(x, copy=True))
        kind = kinds[k] if k < len(kinds) else None
        return x.to(kind) if kind is not None and not kind.is_floating_point else x.to(dtype)
    with torch.no_grad():
        for s in samples:
            given = iter(to_torch(x, k) for k, x in enumerate(s))
            args = [carried[k] if k in carried else next(given) for k in range(len(s) + len(carried))]
            r = torch.utils._pytree.tree_leaves(module(*args))  # nested tuples (an LSTM's (y, (h, c))) flattened
            for st in state:
                carried[st["input"]] = r[st["output"]]
            r = [t for k, t in enumerate(r) if k not in {st["output"] for st in state}]
            for k, t in enumerate(r):
                if len(outs) <= k:
                    outs.append([])
                outs[k].append(t.numpy())
    return [np.stack(o) for o in outs]


def expected(out_dir: str | Path, samples: list[list[np.ndarray]]) -> tuple[list[np.ndarray], dict[str, Any] | None]:
    """What the firmware must output, and the tolerance (None: bit for bit).

    Quantized programs: the project's NumPy reference executing the program,
    bit for bit. Float programs: the exported program run in float64, within
    the float tolerance plus a slack per output and sample of
    `pytorch_factor` times how far PyTorch's own float32 result is from
    float64 (see compiler.FLOAT_TOLERANCE): the firmware's float32 sums
    round in another order than PyTorch's, by as much as the computation's
    depth and magnitudes make PyTorch's own rounding."""
    meta = load_meta(out_dir)
    if meta.get("quant") in ("int8", "int4", "a16w8"):
        from ..program.interpret import run_reference

        got = run_reference((Path(out_dir) / "model.pte").read_bytes(), program_samples(meta, samples))
        return [np.stack([to_logical(x, m) for x in o]) if len(o) else o
                for o, m in zip(got, meta["outputs"])], None
    tol: dict[str, Any] = dict(meta["float_tolerance"])
    floats = float_samples(meta, samples)
    ep = _load_exported(out_dir)  # loaded once (seconds for a CNN), float32 first: float64 converts it
    ref32 = _run_exported(ep, out_dir, floats, float64=False)
    try:
        ref64 = _run_exported(ep, out_dir, floats, float64=True)
    except Exception:  # an op with no float64 kernel in PyTorch: PyTorch's float32, no slack
        return ref32, tol
    factor = float(tol.get("pytorch_factor", 0.0))
    tol["slack"] = [factor * np.abs(a.astype(np.float64) - b).reshape(len(b), -1).max(axis=1, initial=0.0)
                    for a, b in zip(ref32, ref64)]
    return ref64, tol


def lsb_error(out_dir: str | Path, got: list[np.ndarray], samples: list[list[np.ndarray]]) -> list[float]:
    """Per output, the largest difference from PyTorch's q/dq reference in
    units of the output's quantization step (int8 programs); nan for an
    output with no quantization step (a float op's): see qdq_error."""
    return [float("nan") if lsb is None else lsb for _, lsb in qdq_error(out_dir, got, samples)]


def qdq_error(out_dir: str | Path, got: list[np.ndarray],
              samples: list[list[np.ndarray]]) -> list[tuple[float, float | None]]:
    """Per output, the largest difference from PyTorch's q/dq reference: in
    the output's own units, and in units of its quantization step (None
    when the output comes from no DEQUANTIZE: a float op computed it)."""
    from .. import reference as ref
    from ..program import schema

    meta = load_meta(out_dir)
    prog = schema.decode((Path(out_dir) / "model.pte").read_bytes())
    torch_out = reference(out_dir, float_samples(meta, samples))
    errors: list[tuple[float, float | None]] = []
    for k, index in enumerate(prog["outputs"]):
        out_meta = meta["outputs"][k]
        value = got[k]
        if out_meta.get("dtype") == "int8":  # the program's own output is int8
            scale = out_meta["scale"]
            value = ref.dequantize(value, scale, out_meta["zero_point"])
        else:
            scale = _output_step(prog, index)
        err = _max_abs(value, torch_out[k])
        errors.append((err, err / scale if scale else None))
    return errors


def _max_abs(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest |got - expected|; nan on both sides is no difference, nan
    on one side an infinite one (never a nan figure)."""
    g, e = got.astype(np.float64), expected.astype(np.float64)
    err = np.abs(g - e)
    err = np.where((g == e) | (np.isnan(g) & np.isnan(e)), 0.0, np.where(np.isnan(err), np.inf, err))
    return float(err.max(initial=0.0))


def output_dequantize(prog: dict[str, Any], index: int) -> dict[str, Any] | None:
    """The DEQUANTIZE op behind a float output (through any PERMUTE or COPY
    after it), or None: a float op computed it."""
    t = index
    while True:
        producer = next((op for op in prog["ops"] if t in op["outputs"]), None)
        if producer is None or producer["code"] not in ("DEQUANTIZE_S8", "DEQUANTIZE_S16", "PERMUTE", "COPY"):
            return None
        if producer["code"] in ("DEQUANTIZE_S8", "DEQUANTIZE_S16"):
            return producer
        t = producer["inputs"][0]


def _output_step(prog: dict[str, Any], index: int) -> float:
    """The quantization step behind a float output: the scale of the integer
    tensor its DEQUANTIZE read (0 when there is none)."""
    dq = output_dequantize(prog, index)
    return 0.0 if dq is None else float(prog["tensors"][dq["inputs"][0]]["scale"])


@dataclass
class Mismatch:
    output: int
    index: tuple[int, ...]  # sample first
    got: float
    expected: float
    shapes: tuple[list[int], list[int]] | None = None  # (firmware's, expected): the output's shape differs

    def __str__(self) -> str:
        if self.shapes is not None:
            return f"output {self.output} has shape {self.shapes[0]}, expected {self.shapes[1]}"
        return (f"output {self.output} differs at sample {self.index[0]}, element {list(self.index[1:])}: "
                f"firmware {self.got!r}, expected {self.expected!r}")


def compare(got: list[np.ndarray], expected: list[np.ndarray],
            tol: dict[str, Any] | None) -> tuple[Mismatch | None, float]:
    """The first element outside tolerance (None: must be equal bit for bit),
    or None, and the max abs error. Within tolerance: |got - e| <= atol +
    rtol |e| + slack, atol = atol_scale * max(1, max |e|), slack (tol["slack"],
    from expected(): per output, per sample) 0 when absent."""
    worst = 0.0
    first: Mismatch | None = None
    for k, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape:
            return Mismatch(k, (0,), 0.0, 0.0, (list(g.shape), list(e.shape))), float("inf")
        err = np.abs(g.astype(np.float64) - e.astype(np.float64))
        worst = max(worst, _max_abs(g, e))
        if tol is None:
            bad = np.any(g.view(np.uint8).reshape(*g.shape, -1) != e.view(np.uint8).reshape(*e.shape, -1), axis=-1)
        else:
            finite = np.abs(e[np.isfinite(e)]).astype(np.float64)  # an inf or nan in e must not make atol one
            atol = tol["atol_scale"] * max(1.0, float(finite.max(initial=0.0)))
            slack = tol.get("slack")
            extra = 0.0 if slack is None else np.asarray(slack[k], np.float64).reshape((-1,) + (1,) * (e.ndim - 1))
            same = (g == e) | (np.isnan(g) & np.isnan(e))  # inf as inf, nan as nan: PyTorch's own result
            bad = ~((err <= atol + tol["rtol"] * np.abs(e) + extra) | same)
        if first is None and bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            first = Mismatch(k, idx, float(g[idx]), float(e[idx]))
    return first, worst
