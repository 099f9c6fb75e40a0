"""`torchmcu run DIR --device PORT`: a compiled model on a real board, over a
serial port, with the line protocol the firmware prints in QEMU.

The board runs firmware that answers requests on its serial port: the sketch
of `torchmcu export --arduino` does (firmware/boards/arduino/serial_io.cpp).
A session:

    board -> host   "tmcu: ready" once it waits for a request (optional: the host
                    also goes ahead after `settle_s` of silence)
    host -> board   an io blob (firmware/app/app.h: "TMIO" header, then the
                    inputs' bytes), one sample per request so the board needs
                    room for one sample only; the first asks for the per-op profile
    board -> host   the app's lines: load, op (profiled request), sample, done;
                    anything else on the port (a sketch's own prints) is ignored
    ... the next request once "done" arrived.

Every wait has a deadline: a silent board, a wrong baud rate (bytes that are
never a protocol line), a session that stops half way or a malformed line each
raise DeviceError saying which, never a hang. Ticks are the board's own counter
(micros() on Arduino): there are no instruction counts on hardware.

Any pyserial URL works as PORT: /dev/ttyACM0, COM3, socket://host:port,
rfc2217://host:port.
"""

from __future__ import annotations

import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..errors import TorchMCUError
from . import runner
from .base import SimResult

DEFAULT_BAUD = 115200
READY = "tmcu: ready"
STATUS_BAD_IO = 0x50  # firmware/app/app.h kStatusBadIo
_PROTOCOL = re.compile(r"^tmcu: (\w+)(.*)$")
_DTYPE_BYTES = {"float32": 4, "int8": 1}


class DeviceError(TorchMCUError):
    """The board did not answer, or not in the torchmcu line protocol."""


class Port(Protocol):
    """What is used of a pyserial port (tests may pass any object with these)."""

    def write(self, data: bytes) -> int | None: ...
    def flush(self) -> None: ...
    def read(self, size: int = 1) -> bytes: ...
    def close(self) -> None: ...


def open_port(port: str, baud: int = DEFAULT_BAUD) -> Port:
    try:
        import serial
    except ImportError as e:  # pragma: no cover - pyserial is a dependency of `make setup`
        raise DeviceError("--device needs pyserial: pip install pyserial (make setup installs it)") from e
    try:
        # A short read timeout: the deadlines below are enforced by the caller.
        return serial.serial_for_url(port, baudrate=baud, timeout=0.05, write_timeout=10)
    except (serial.SerialException, OSError, ValueError) as e:
        raise DeviceError(f"cannot open serial port {port}: {e}") from e


def split_blob(blob: bytes) -> list[bytes]:
    """A runner's io blob as the requests sent to the board, one sample each
    (the board needs room for one sample only); the first keeps the flags
    (the profile) and the repeat count."""
    version, count, per, flags, repeat = struct.unpack_from("<IIIII", blob, 4)
    payload = blob[runner.IO_HEADER:]
    out = []
    for k in range(count):
        header = b"TMIO" + struct.pack("<IIIII", version, 1, per, flags if k == 0 else 0, repeat if k == 0 else 1)
        out.append(header + bytes(runner.IO_HEADER - len(header)) + payload[k * per:(k + 1) * per])
    return out


def request_blobs(meta: dict[str, Any], inputs: list[np.ndarray], profile: bool = False) -> list[bytes]:
    """The io blobs sent to the board, one sample each; the first carries the
    profile flag when `profile`."""
    return split_blob(runner.io_blob(runner.program_samples(meta, runner.split_samples(meta, inputs)), profile))


class _Lines:
    """Lines from a port, each wait bounded by a deadline."""

    def __init__(self, port: Port, name: str) -> None:
        self.port = port
        self.name = name
        self.pending = b""
        self.received = 0  # bytes, this session
        self.noise: list[str] = []  # lines that are not the protocol, this session

    def next_line(self, deadline: float) -> str | None:
        """The next complete line, or None at the deadline."""
        while b"\n" not in self.pending:
            if time.monotonic() >= deadline:
                return None
            chunk = self.port.read(256)
            self.received += len(chunk)
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode("utf-8", errors="replace").strip("\r\x00 ")

    def settle(self, quiet_s: float) -> None:
        """Reads and drops what the board prints before it waits for requests
        (a sketch's boot output): until "tmcu: ready", or `quiet_s` without a
        byte, or ten times that in all."""
        end = time.monotonic() + 10 * quiet_s
        quiet_until = time.monotonic() + quiet_s
        while time.monotonic() < min(end, quiet_until):
            chunk = self.port.read(256)
            if chunk:
                quiet_until = time.monotonic() + quiet_s
                self.pending += chunk
                lines = self.pending.split(b"\n")
                self.pending = lines.pop()
                if any(line.decode("utf-8", "replace").strip("\r\x00 ") == READY for line in lines):
                    return


@dataclass
class _Session:
    lines: list[str] = field(default_factory=list)
    status: int | None = None


def _check_line(line: str, meta: dict[str, Any]) -> str | None:
    """What is wrong with a protocol line, or None."""
    m = _PROTOCOL.match(line)
    assert m is not None
    kind, rest = m.group(1), m.group(2).split()
    fields = dict(f.split("=", 1) for f in rest if "=" in f)
    need = {"load": ("status", "ticks"), "op": ("ticks",), "sample": ("ticks",), "done": ("status", "samples")}
    for key in need.get(kind, ()):
        if not fields.get(key, "").isdigit():
            return f"field {key!r} missing or not a number"
    if kind == "sample":
        for k, out in enumerate(meta["outputs"]):
            value = fields.get(f"out{k}")
            if value is None:
                return f"output out{k} missing"
            nbytes = int(np.prod(out["shape"])) * _DTYPE_BYTES.get(out.get("dtype", "float32"), 4)
            if len(value) != 2 * nbytes or re.fullmatch(r"[0-9a-fA-F]*", value) is None:
                return f"out{k} is not {nbytes} bytes of hex: is the board running this model?"
    return None


def _exchange(lines: _Lines, port: Port, blob: bytes, meta: dict[str, Any], timeout_s: float,
              baud: int) -> _Session:
    """Sends one request and reads its answer, from "load" to "done"."""
    lines.received, lines.noise = 0, []
    port.write(blob)
    port.flush()
    session = _Session()
    deadline = time.monotonic() + timeout_s
    while True:
        line = lines.next_line(deadline)
        if line is None:
            raise DeviceError(_timeout_message(lines, session, timeout_s, baud))
        m = _PROTOCOL.match(line)
        if m is None:
            if line:
                lines.noise.append(line)
            continue
        kind = m.group(1)
        if kind == "ready" or (kind != "load" and not session.lines):
            continue  # between answers, or the tail of an earlier one
        # Kinds not checked here (e.g. newer profile lines) go to the protocol parser as they are.
        problem = _check_line(line, meta)
        if problem:
            raise DeviceError(f"malformed line from the board on {lines.name} ({problem}): {line[:200]!r}")
        if kind == "load":
            session = _Session()
        session.lines.append(line)
        if kind == "done":
            session.status = int(line.split("status=", 1)[1].split()[0])
            return session


def _timeout_message(lines: _Lines, session: _Session, timeout_s: float, baud: int) -> str:
    where = f"the board on {lines.name}"
    if session.lines:
        return (f"{where} started answering but sent no 'done' line within {timeout_s:g} s "
                f"(last line: {session.lines[-1][:120]!r})")
    if lines.received == 0:
        return (f"no answer from {where} within {timeout_s:g} s: is firmware that serves `torchmcu run "
                f"--device` running (the example sketch of `torchmcu export --arduino`), at {baud} baud?")
    sample = (lines.noise[0] if lines.noise else lines.pending.decode("utf-8", "replace"))[:80]
    return (f"{where} sent {lines.received} bytes within {timeout_s:g} s but no torchmcu protocol line "
            f"(first: {sample!r}): a wrong baud rate (--baud, now {baud}) or other firmware?")


class SerialRunner:
    """A board over a serial port behind torchmcu.sim's Runner interface.

    The board already runs the model's firmware (flashed by the user):
    nothing is sent but the io blob, over the port one sample per request,
    and the build directory needs only its model.json.
    `outputs` (model.json's) lets each sample line be checked against the
    model's output sizes."""

    name = "device"
    image = "model.json"
    counts_instructions = False  # ticks are the board's own counter

    def __init__(self, port: str | Port, baud: int = DEFAULT_BAUD, settle_s: float = 2.0,
                 outputs: list[dict[str, Any]] | None = None) -> None:
        self.port, self.baud, self.settle_s, self.outputs = port, baud, settle_s, outputs or []

    def available(self) -> bool:
        return True

    def run(self, board: Any, image: str | Path, io_blob: bytes | None = None,
            timeout_s: float = 60.0) -> SimResult:
        """`timeout_s` bounds each request; `settle_s` is the silence after
        which the host stops waiting for "tmcu: ready" and sends anyway."""
        port = self.port
        name = port if isinstance(port, str) else getattr(port, "name", "the serial port")
        dev = open_port(port, self.baud) if isinstance(port, str) else port
        meta = {"outputs": self.outputs}
        sessions: list[_Session] = []
        try:
            lines = _Lines(dev, str(name))
            if self.settle_s > 0:
                lines.settle(self.settle_s)
            for blob in split_blob(io_blob or b""):
                session = _exchange(lines, dev, blob, meta, timeout_s, self.baud)
                sessions.append(session)
                if session.status == STATUS_BAD_IO:
                    raise DeviceError(f"the board on {name} rejected the request (status 0x50, bad io): the "
                                      f"blob arrived incomplete or does not fit its buffer ({len(blob)} bytes "
                                      "needed)")
                if session.status != 0:
                    break
        finally:
            if isinstance(port, str):
                dev.close()
        status = next((s.status for s in sessions if s.status != 0), 0)
        return SimResult(stdout="\n".join(line for s in sessions for line in s.lines) + "\n",
                         exit_code=int(status or 0), timed_out=False,
                         command=[f"serial {name} at {self.baud} baud"])


def run_device(out_dir: str | Path, inputs: list[np.ndarray], port: str | Port, baud: int = DEFAULT_BAUD,
               profile: bool = False, timeout_s: float = 60.0, settle_s: float = 2.0) -> runner.RunResult:
    """Run the compiled model of `out_dir` on the board at `port` (a pyserial
    URL, or an open port), one request per sample."""
    meta = runner.load_meta(out_dir)
    device = SerialRunner(port, baud, settle_s, meta["outputs"])
    return runner.run(out_dir, inputs, sim=device, profile=profile, timeout_s=timeout_s)
