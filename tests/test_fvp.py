"""The FVP runner (torchmcu.sim.fvp): its command lines, finding the executable,
and parsing what an FVP prints, against hand-written transcripts
(tests/data/fvp/: NOT recordings, see its README); and a real run that needs
the Corstone-300 FVP (TORCHMCU_FVP_DIR or PATH) and skips without it.
"""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc
from torchmcu import boards as B
from torchmcu.sim import SimulatorNotFound, fvp, runner

DATA = REPO / "tests" / "data" / "fvp"


def _exe(path: Path, body: str = "exit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("board, expected", [
    ("corstone-300-u55-128", [
        "FVP_Corstone_SSE-300_Ethos-U55",
        "-C", "mps3_board.visualisation.disable-visualisation=1",
        "-C", "mps3_board.telnetterminal0.start_telnet=0",
        "-C", "mps3_board.uart0.out_file=-",
        "-C", "mps3_board.uart0.unbuffered_output=1",
        "-C", "cpu0.semihosting-enable=1",
        "-C", "ethosu.num_macs=128",
        "-a", "fw.elf", "--data", "cpu0=io.bin@0x7f000000", "--timelimit", "90", "--stat"]),
    ("corstone-310-u55-256", [
        "FVP_Corstone_SSE-310",
        "-C", "mps3_board.visualisation.disable-visualisation=1",
        "-C", "mps3_board.telnetterminal0.start_telnet=0",
        "-C", "mps3_board.uart0.out_file=-",
        "-C", "mps3_board.uart0.unbuffered_output=1",
        "-C", "cpu0.semihosting-enable=1",
        "-C", "ethosu.num_macs=256",
        "-a", "fw.elf", "--data", "cpu0=io.bin@0x7f000000", "--timelimit", "90", "--stat"]),
    ("corstone-320-u85-256", [
        "FVP_Corstone_SSE-320",
        "-C", "mps4_board.visualisation.disable-visualisation=1",
        "-C", "mps4_board.telnetterminal0.start_telnet=0",
        "-C", "mps4_board.uart0.out_file=-",
        "-C", "mps4_board.uart0.unbuffered_output=1",
        "-C", "mps4_board.subsystem.cpu0.semihosting-enable=1",
        "-C", "mps4_board.subsystem.ethosu.num_macs=256",
        "-C", "vis_hdlcd.disable_visualisation=1",
        "-a", "fw.elf", "--data", "mps4_board.subsystem.cpu0=io.bin@0x7f000000", "--timelimit", "90", "--stat"]),
])
def test_command_line(board: str, expected: list[str]) -> None:
    b = B.load_board(board)
    assert fvp.command(b, b.fvp_model, "fw.elf", "io.bin", timeout_s=89.5) == expected


def test_command_line_needs_a_known_fvp() -> None:
    with pytest.raises(ValueError, match="no known FVP"):
        fvp.command(B.load_board("mps3-an547"), "x", "fw.elf")


def test_finding_the_fvp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "FVP_Corstone_SSE-300_Ethos-U55"
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv(fvp.FVP_DIR_ENV, raising=False)
    assert fvp.find_fvp(name) is None
    assert not fvp.fvp_available("corstone-300-u55-128")
    with pytest.raises(SimulatorNotFound, match=f"{name} not found in \\$TORCHMCU_FVP_DIR or on PATH"):
        fvp.FvpRunner().run("corstone-300-u55-128", tmp_path / "fw.elf")
    # An install tree: the executable sits below the directory the variable names.
    installed = _exe(tmp_path / "fvp" / "models" / "Linux64_GCC-9.3" / name)
    monkeypatch.setenv(fvp.FVP_DIR_ENV, str(tmp_path / "fvp"))
    assert fvp.find_fvp(name) == installed
    monkeypatch.delenv(fvp.FVP_DIR_ENV)
    on_path = _exe(tmp_path / "bin" / name)
    assert fvp.find_fvp(name) == on_path and fvp.fvp_available("corstone-300-u55-128")
    with pytest.raises(SimulatorNotFound, match="names no FVP"):
        fvp.FvpRunner().run("mps3-an547", tmp_path / "fw.elf")


def test_parse_a_corstone_300_run() -> None:
    """Hand-written transcript (tests/data/fvp/README.md)."""
    text = (DATA / "corstone-300_ds_cnn.txt").read_text()
    info, (out,) = runner.parse_protocol(text, [{"shape": [1, 12]}])
    assert info["load_status"] == 0 and info["done_status"] == 0 and info["sample_ticks"] == [19968, 19936]
    assert out.shape == (2, 1, 12)
    assert out[0, 0].tolist() == [0.5, -1.25, 3.0, 0.0, 2.5, -0.75, 1.0, 0.125, -2.0, 4.0, 0.25, -0.5]
    assert out[1, 0, [0, 1, 11]].tolist() == [1.5, -0.5, 2.0]
    assert fvp.parse_npu(text) == {0: {"calls": 2, "cycles": 180104.0, "ext_rd_beats": 15328.0,
                                       "ext_wr_beats": 2211.0}}
    assert fvp.parse_stats(text) == {"simulated_seconds": 0.00225, "instructions": {"cpu0": 80532},
                                     "stop_reason": None}
    res = fvp.result_from_output(["fvp"], text, "", 0, killed=False)
    assert res.exit_code == 0 and not res.timed_out and res.npu[0]["cycles"] == 180104.0


def test_parse_a_run_stopped_by_the_time_limit() -> None:
    """Hand-written transcript (tests/data/fvp/README.md)."""
    text = (DATA / "corstone-320_timelimit.txt").read_text()
    res = fvp.result_from_output(["fvp"], text, "", 0, killed=False)
    assert res.timed_out and res.stats["stop_reason"] == "CPU time has been exceeded."
    assert res.stats["instructions"] == {"mps4_board.subsystem.cpu0": 2004391}
    assert res.npu == {0: {"calls": 1, "cycles": 412500.0}}
    info, _ = runner.parse_protocol(text, [{"shape": [1, 2]}])
    assert info["done_status"] is None  # the firmware never finished


def test_runner_plumbing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner with a stand-in executable (a shell script, not an FVP)
    that records its arguments and the io blob it was given, then prints the
    hand-written transcript: checks what reaches the process and what comes
    back, not any simulation."""
    seen = tmp_path / "seen"
    body = (f'printf "%s\\n" "$@" > {seen}/args\n'
            f'for a in "$@"; do case "$a" in cpu0=*@*) f="${{a#cpu0=}}"; cp "${{f%@*}}" {seen}/io.bin;; esac; done\n'
            f'cat {DATA / "corstone-300_ds_cnn.txt"}\nexit 3\n')
    seen.mkdir()
    _exe(tmp_path / "fvp" / "FVP_Corstone_SSE-300_Ethos-U55", body)
    monkeypatch.setenv(fvp.FVP_DIR_ENV, str(tmp_path / "fvp"))
    elf = tmp_path / "fw.elf"
    elf.write_bytes(b"\x7fELF")
    blob = runner.io_blob([[np.zeros((1, 1, 49, 10), np.float32)]])
    res = fvp.FvpRunner().run("corstone-300-u55-128", elf, blob, timeout_s=5)
    args = (seen / "args").read_text().split("\n")
    assert args[args.index("-a") + 1] == str(elf) and "ethosu.num_macs=128" in args
    assert (seen / "io.bin").read_bytes() == blob
    # The firmware's status line wins over the process's own exit status.
    assert res.exit_code == 0 and not res.timed_out and res.npu[0]["calls"] == 2
    assert res.command[0].endswith("FVP_Corstone_SSE-300_Ethos-U55")


@needs_arm_gcc
@pytest.mark.skipif(not fvp.fvp_available("corstone-300-u55-128"),
                    reason="FVP_Corstone_SSE-300_Ethos-U55 not found in $TORCHMCU_FVP_DIR or on PATH")
def test_real_fvp_run(tmp_path: Path) -> None:  # pragma: no cover - needs the FVP
    """The digits MLP built for corstone-300-u55-128 on the real FVP (CPU
    only), against the reference."""
    import sys

    from torchmcu.builder.firmware import build_firmware
    from torchmcu.compiler import compile

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import digits
    finally:
        sys.path.remove(str(REPO / "examples"))
    model, example = digits.make()
    out = tmp_path / "digits"
    compile(model, example, "corstone-300-u55-128", out, progress=False)
    elf = build_firmware(out)
    meta = runner.load_meta(out)
    sample = [example[0].numpy()]
    res = fvp.FvpRunner().run("corstone-300-u55-128", elf, runner.io_blob([sample]),
                              timeout_s=120)
    assert res.exit_code == 0 and not res.timed_out, res.stdout[-2000:]
    _, outputs = runner.parse_protocol(res.stdout, meta["outputs"])
    want, tol = runner.expected(out, [sample])
    mismatch, _ = runner.compare(outputs, want, tol)
    assert mismatch is None, mismatch
    assert res.stats["instructions"], res.stdout[-2000:]
