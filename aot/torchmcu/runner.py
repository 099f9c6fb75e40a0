"""Running a compiled model: on the host runner or in a simulator, over a
batch of samples, with outputs and instruction counts read back from the
firmware's line protocol (see firmware/app/app.h), and the check against
the reference."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from .boards import load_board
from .errors import SimError, TorchMCUError

IO_VERSION = 1
IO_HEADER = 32
FLAG_PROFILE = 1

_LINE = re.compile(r"^tmcu: (\w+)(.*)$")


@dataclass
class RunResult:
    outputs: list[np.ndarray]  # one array per model output, samples along axis 0
    exit_code: int
    load_ticks: int
    sample_ticks: list[int]
    op_ticks: list[int]
    instructions_per_tick: Fraction | None  # None on the host: no counts there
    raw: str = ""
    command: list[str] = field(default_factory=list)

    def instructions(self, ticks: int) -> int | None:
        return None if self.instructions_per_tick is None else round(ticks * self.instructions_per_tick)


def io_blob(samples: list[list[np.ndarray]], profile: bool = False) -> bytes:
    """The io blob: header, then each sample's inputs back to back."""
    payload = b"".join(np.ascontiguousarray(x, dtype="<f4").tobytes() for s in samples for x in s)
    per = len(payload) // len(samples) if samples else 0
    header = b"TMIO" + struct.pack("<IIII", IO_VERSION, len(samples), per, FLAG_PROFILE if profile else 0)
    return header + bytes(IO_HEADER - len(header)) + payload


def parse_protocol(text: str, output_meta: list[dict[str, Any]]) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Reads the lines the app printed; other lines (board messages) are ignored."""
    info: dict[str, Any] = {"load_status": None, "load_ticks": 0, "op_ticks": [], "sample_ticks": [],
                            "done_status": None}
    outs: list[list[np.ndarray]] = [[] for _ in output_meta]
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        kind, rest = m.group(1), m.group(2).split()
        fields = dict(f.split("=", 1) for f in rest if "=" in f)
        if kind == "load":
            info["load_status"], info["load_ticks"] = int(fields["status"]), int(fields["ticks"])
        elif kind == "op":
            info["op_ticks"].append(int(fields["ticks"]))
        elif kind == "sample":
            info["sample_ticks"].append(int(fields["ticks"]))
            for k, meta in enumerate(output_meta):
                raw = bytes.fromhex(fields[f"out{k}"])
                outs[k].append(np.frombuffer(raw, dtype="<f4").reshape(meta["shape"]))
        elif kind == "done":
            info["done_status"] = int(fields["status"])
    arrays = [np.stack(o) if o else np.zeros((0, *m["shape"]), np.float32) for o, m in zip(outs, output_meta)]
    return info, arrays


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
        x = np.asarray(x, dtype=np.float32)
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


def run(out_dir: str | Path, inputs: list[np.ndarray], sim: str = "qemu", profile: bool = False,
        timeout_s: float = 300.0) -> RunResult:
    """Run the compiled model in OUT on `sim` ("qemu" or "host")."""
    out = Path(out_dir)
    meta = load_meta(out)
    blob = io_blob(split_samples(meta, inputs), profile)
    if sim == "host":
        from .build import build_host_runner
        exe = build_host_runner()
        with tempfile.TemporaryDirectory() as tmp:
            io_path = Path(tmp) / "io.bin"
            io_path.write_bytes(blob)
            cmd = [str(exe), str(out / "model.pte"), str(io_path)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        text, code, ipt = proc.stdout, proc.returncode, None
        if proc.stderr.strip():
            text += "\n" + proc.stderr
    elif sim == "qemu":
        from .sim import run_qemu
        board = load_board(meta["board"])
        elf = out / "firmware.elf"
        if not elf.is_file():
            raise TorchMCUError(f"{elf} not found; run `torchmcu build {out}` first")
        res = run_qemu(board, elf, blob, timeout_s=timeout_s)
        if res.timed_out:
            raise SimError(f"QEMU timed out after {timeout_s} s\n{res.stdout[-2000:]}")
        text, code, ipt, cmd = res.stdout, res.exit_code, board.instructions_per_tick, res.command
    else:
        raise TorchMCUError(f"unknown simulator {sim!r}: use qemu or host")
    info, outputs = parse_protocol(text, meta["outputs"])
    return RunResult(outputs, code, info["load_ticks"], info["sample_ticks"], info["op_ticks"], ipt, text, cmd)


# ---------------------------------------------------------------------------------------------
# Expected outputs and the check


def reference(out_dir: str | Path, samples: list[list[np.ndarray]]) -> list[np.ndarray]:
    """PyTorch's outputs for each sample, from the exported program."""
    import torch
    import torch.ao.quantization.fx._decomposed  # noqa: F401  the q/dq ops of quantized programs

    ep = torch.export.load(str(Path(out_dir) / "model.pt2"))
    module = ep.module()
    outs: list[list[np.ndarray]] = []
    with torch.no_grad():
        for s in samples:
            r = module(*[torch.from_numpy(np.ascontiguousarray(x)) for x in s])
            r = r if isinstance(r, (tuple, list)) else (r,)
            for k, t in enumerate(r):
                if len(outs) <= k:
                    outs.append([])
                outs[k].append(t.numpy())
    return [np.stack(o) for o in outs]


def expected(out_dir: str | Path, samples: list[list[np.ndarray]]) -> tuple[list[np.ndarray], dict[str, float] | None]:
    """What the firmware must output, and the tolerance (None: bit for bit).

    Quantized programs: the project's NumPy reference executing the program,
    bit for bit. Float programs: PyTorch, within the float tolerance."""
    meta = load_meta(out_dir)
    if meta.get("quant") == "int8":
        from .interpret import run_reference

        return run_reference((Path(out_dir) / "model.pte").read_bytes(), samples), None
    return reference(out_dir, samples), meta["float_tolerance"]


def lsb_error(out_dir: str | Path, got: list[np.ndarray], samples: list[list[np.ndarray]]) -> list[float]:
    """Per output, the largest difference from PyTorch's q/dq reference in
    units of the output's quantization step (int8 programs)."""
    from . import schema

    prog = schema.decode((Path(out_dir) / "model.pte").read_bytes())
    torch_out = reference(out_dir, samples)
    steps = []
    for k, index in enumerate(prog["outputs"]):
        # The output is a dequantize of an int8 tensor (maybe moved after it):
        # its step is that tensor's scale.
        scale, t = 0.0, index
        while True:
            producer = next((op for op in prog["ops"] if t in op["outputs"]), None)
            if producer is None or producer["code"] not in ("DEQUANTIZE_S8", "PERMUTE", "COPY"):
                break
            t = producer["inputs"][0]
            if producer["code"] == "DEQUANTIZE_S8":
                scale = prog["tensors"][t]["scale"]
                break
        err = float(np.abs(got[k].astype(np.float64) - torch_out[k]).max(initial=0.0))
        steps.append(err / scale if scale else float("nan"))
    return steps


@dataclass
class Mismatch:
    output: int
    index: tuple[int, ...]  # sample first
    got: float
    expected: float

    def __str__(self) -> str:
        return (f"output {self.output} differs at sample {self.index[0]}, element {list(self.index[1:])}: "
                f"firmware {self.got!r}, expected {self.expected!r}")


def compare(got: list[np.ndarray], expected: list[np.ndarray],
            tol: dict[str, float] | None) -> tuple[Mismatch | None, float]:
    """The first element outside tolerance (None: must be equal bit for bit),
    or None, and the max abs error."""
    worst = 0.0
    first: Mismatch | None = None
    for k, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape:
            return Mismatch(k, (0,), float("nan"), float("nan")), float("inf")
        err = np.abs(g.astype(np.float64) - e.astype(np.float64))
        worst = max(worst, float(err.max(initial=0.0)))
        if tol is None:
            bad = np.any(g.view(np.uint8).reshape(*g.shape, -1) != e.view(np.uint8).reshape(*e.shape, -1), axis=-1)
        else:
            atol = tol["atol_scale"] * max(1.0, float(np.abs(e).max(initial=0.0)))
            bad = ~(err <= atol + tol["rtol"] * np.abs(e)) | (np.isnan(g) != np.isnan(e))
        if first is None and bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            first = Mismatch(k, idx, float(g[idx]), float(e[idx]))
    return first, worst
