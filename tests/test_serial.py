"""`torchmcu run --device PORT`: the host side of a real board, against a fake
board on a pseudo-terminal that replays a recorded firmware session.

tests/data/serial/session.json holds what the digits MLP's firmware printed in
QEMU for each request `run --device` sends (re-record it with
tests/data/serial/record.py when the line protocol changes). The fake board
reads what the host writes, finds the request among the recorded ones and
answers with the recorded lines; variants stay silent, talk noise (a wrong
baud rate), corrupt a line or stop half way, and the host must then fail
with a clear error within its timeout.
"""

from __future__ import annotations

import json
import os
import select
import struct
import threading
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from torchmcu import cli
from torchmcu.sim import runner
from torchmcu.sim.serial import DeviceError, request_blobs, run_device

pytest.importorskip("serial", reason="pyserial not installed (make setup installs it)")

DATA = Path(__file__).parent / "data" / "serial"
MODEL = DATA / "digits"
SESSION = json.loads((DATA / "session.json").read_text())
ARRAYS = dict(np.load(DATA / "arrays.npz"))
REPLIES = {bytes.fromhex(s["request"]): s["reply"].encode() for s in SESSION["sessions"]}


class FakeBoard(threading.Thread):
    """Plays the board on the master side of a pty: says "tmcu: ready" until
    the first request arrives, then answers each complete io blob with
    answer(blob) (None: stays silent)."""

    def __init__(self, master: int, answer: Callable[[bytes], bytes | None]) -> None:
        super().__init__(daemon=True)
        self.master = master
        self.answer = answer
        self.requests: list[bytes] = []
        self.stop = threading.Event()

    def run(self) -> None:
        buf = b""
        while not self.stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                if not buf and not self.requests:
                    os.write(self.master, b"tmcu: ready\n")
                continue
            try:
                buf += os.read(self.master, 4096)
            except OSError:
                return
            while True:
                start = buf.find(b"TMIO")
                if start < 0 or len(buf) < start + 32:
                    break
                samples, per = struct.unpack_from("<II", buf, start + 8)
                end = start + 32 + samples * per
                if len(buf) < end:
                    break
                blob, buf = buf[start:end], buf[end:]
                self.requests.append(blob)
                reply = self.answer(blob)
                if reply is not None:
                    for i in range(0, len(reply), 64):  # in pieces, as a UART delivers it
                        os.write(self.master, reply[i:i + 64])


@pytest.fixture
def board() -> Iterator[Callable[[Callable[[bytes], bytes | None]], tuple[str, FakeBoard]]]:
    """Starts a fake board with the given answer function; yields (port, board)."""
    started: list[tuple[int, int, FakeBoard]] = []

    def start(answer: Callable[[bytes], bytes | None]) -> tuple[str, FakeBoard]:
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line editing: a byte pipe like a USB serial port
        fake = FakeBoard(master, answer)
        fake.start()
        started.append((master, slave, fake))
        return os.ttyname(slave), fake

    yield start
    for master, slave, fake in started:
        fake.stop.set()
        fake.join(timeout=2)
        os.close(slave)
        os.close(master)


def recorded(blob: bytes) -> bytes | None:
    return REPLIES.get(blob)


def run(port: str, timeout_s: float = 5.0) -> runner.RunResult:
    return run_device(MODEL, [ARRAYS["inputs"]], port, profile=True, timeout_s=timeout_s, settle_s=1.0)


def test_recorded_session_is_a_real_firmware_run() -> None:
    # The fixture answers the exact requests the host sends today.
    meta = runner.load_meta(MODEL)
    assert request_blobs(meta, [ARRAYS["inputs"]], profile=True) == list(REPLIES), \
        "the requests changed: re-record with tests/data/serial/record.py"
    assert all(b"tmcu: done status=0" in r for r in REPLIES.values())


def test_replayed_session_gives_the_firmware_outputs(board) -> None:
    port, fake = board(recorded)
    res = run(port)
    assert fake.requests == list(REPLIES)  # one request per sample, the first profiled
    assert res.exit_code == 0
    got = res.outputs[0]
    assert got.shape == ARRAYS["qemu"].shape == (3, 1, 10)
    assert got.tobytes() == ARRAYS["qemu"].astype("<f4").tobytes()  # what QEMU's firmware printed, bit for bit
    mismatch, _ = runner.compare([got], [ARRAYS["pytorch"]], runner.load_meta(MODEL)["float_tolerance"])
    assert mismatch is None, mismatch
    assert len(res.sample_ticks) == 3 and all(t > 0 for t in res.sample_ticks)
    assert len(res.op_ticks) == 3 and res.load_ticks > 0
    assert res.instructions(res.sample_ticks[0]) is None  # hardware: ticks, not instructions


def test_cli_run_device_check(board, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port, _ = board(recorded)
    x = tmp_path / "x.npy"
    np.save(x, ARRAYS["inputs"])
    status = cli.main(["run", str(MODEL), "--device", port, "--input", str(x), "--json", "--check",
                       "--timeout", "5"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0
    assert result["check"]["passed"] is True
    assert np.array(result["outputs"][0]).shape == (3, 1, 10)  # one model output, three samples
    assert result["instructions"] is None and len(result["ticks_per_sample"]) == 3


def _fails_within(port: str, timeout_s: float, match: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match=match):
        run(port, timeout_s=timeout_s)
    assert time.monotonic() - t0 < timeout_s + 3.0  # the settle second, then one timeout: no hang


def test_silent_board_times_out(board) -> None:
    port, fake = board(lambda blob: None)
    _fails_within(port, 1.0, "no answer from the board")
    assert len(fake.requests) == 1


def test_noise_at_a_wrong_baud_rate_is_named(board) -> None:
    port, _ = board(lambda blob: bytes(range(128, 256)) * 4 + b"\r\n\xfe\xf0\x80\n")
    _fails_within(port, 1.0, "no torchmcu protocol line .* wrong baud rate")


def test_corrupted_line_is_an_error(board) -> None:
    def corrupt(blob: bytes) -> bytes | None:
        reply = REPLIES[blob].decode()
        return reply.replace(" out0=", " out0=zz", 1).encode()

    port, _ = board(corrupt)
    _fails_within(port, 5.0, "malformed line .*out0 is not 40 bytes of hex")


def test_session_that_stops_half_way_times_out(board) -> None:
    def truncated(blob: bytes) -> bytes | None:
        return REPLIES[blob].split(b"tmcu: sample")[0]

    port, _ = board(truncated)
    _fails_within(port, 1.0, "started answering but sent no 'done' line")


def test_board_rejecting_the_request_is_explained(board) -> None:
    port, _ = board(lambda blob: b"tmcu: load status=0 ticks=5\ntmcu: done status=80 samples=0\ntmcu: ready\n")
    _fails_within(port, 5.0, "rejected the request .*bad io")
