"""The Renode runner (torchmcu.sim.renode) and the boards it runs.

Renode is not installed here (see tests/data/renode/README.md): where it is
(`renode` on PATH, or TORCHMCU_RENODE), test_real_renode runs the firmware
in it. Otherwise:
- the boards' firmware builds (the STM32 USART/LPUART drivers included);
- the STM32 USART driver and the exit line run for real in QEMU's
  netduinoplus2 (an STM32F405: the F407's USART layout), bit-exact;
- the runner runs end to end against a STAND-IN executable
  (tests/data/renode/fake_renode.py: Renode's command line and monitor
  protocol, QEMU underneath), bit-exact with --check;
- the script, the command line and the monitor parser are tested on
  hand-written transcripts, labelled as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu import boards as B
from torchmcu.sim import RUNNERS, SimulatorNotFound, renode

DATA = REPO / "tests" / "data" / "renode"
FAKE = DATA / "fake_renode.py"
RENODE_BOARDS = ["stm32f407vg", "stm32l552ze"]


def cli(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "torchmcu", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "TORCHMCU_PLOT": "0", **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# ---------------------------------------------------------------------------------------------
# Boards and platform files


def test_boards_facts() -> None:
    f4 = B.load_board("stm32f407vg")
    assert (f4.cpu, f4.clock_hz, f4.core.dsp, f4.core.fpu) == ("cortex-m4", 168_000_000, True, "fpv4-sp-d16")
    assert f4.uart_kind == "stm32-usart" and f4.uart_base == 0x40004400
    assert f4.renode == B.RenodeTarget("stm32f407vg.repl", "sysbus.usart2", 168)
    assert [(m.name, m.base, m.size) for m in f4.memories] == [
        ("flash", 0x08000000, 1 << 20), ("ccm", 0x10000000, 64 << 10), ("sram", 0x20000000, 128 << 10)]
    assert f4.defines["TMCU_BOARD_UART_KIND"] == "1" and f4.defines["TMCU_BOARD_EXIT_LINE"] == "1"
    assert not f4.qemu_machine
    l5 = B.load_board("stm32l552ze")
    assert (l5.cpu, l5.clock_hz, l5.core.dsp) == ("cortex-m33", 110_000_000, True)
    assert l5.uart_kind == "stm32-lpuart" and l5.uart_base == 0x40008000 and l5.defines["TMCU_BOARD_UART_KIND"] == "2"
    assert [(m.name, m.base, m.size) for m in l5.memories] == [
        ("flash", 0x08000000, 512 << 10), ("sram1", 0x20000000, 192 << 10), ("sram2", 0x20030000, 64 << 10)]
    # The QEMU boards keep the CMSDK UART and semihosting's exit status.
    an547 = B.load_board("mps3-an547")
    assert an547.uart_kind == "cmsdk" and an547.defines["TMCU_BOARD_EXIT_LINE"] == "0"


@pytest.mark.parametrize("name", RENODE_BOARDS)
def test_platform_file_matches_the_board(name: str) -> None:
    """The .repl maps every memory of the board file, the UART at its base and the io window."""
    b = B.load_board(name)
    text = renode.platform_file(b).read_text()
    for m in b.memories:
        assert f"@ sysbus 0x{m.base:08X}\n    size: 0x{m.size:X}" in text, m.name
    uart = b.renode.uart.removeprefix("sysbus.")
    assert f"{uart}: UART." in text and f"0x{b.uart_base:08X}" in text
    assert f"io: Memory.MappedMemory @ sysbus 0x{b.io_base:08X}\n    size: 0x{b.io_size:X}" in text
    assert f"systickFrequency: {b.clock_hz}" in text


def test_bad_uart_kind_is_refused(tmp_path: Path) -> None:
    text = (B.BOARDS_DIR / "stm32f407vg.toml").read_text().replace('kind = "stm32-usart"', 'kind = "pl011"')
    (tmp_path / "b.toml").write_text(text)
    with pytest.raises(B.BoardError, match="kind must be one of cmsdk, stm32-usart, stm32-lpuart"):
        B.load_board(tmp_path / "b.toml")


# ---------------------------------------------------------------------------------------------
# Script, command line, output (transcripts)


def test_script_and_command() -> None:
    b = B.load_board("stm32f407vg")
    text = renode.script(b, "/w/firmware.elf", "/t/io.bin", "/t/uart.txt")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert lines == [
        'mach create "torchmcu"',
        f"machine LoadPlatformDescription @{REPO / 'sim' / 'renode' / 'stm32f407vg.repl'}",
        "sysbus.usart2 CreateFileBackend @/t/uart.txt true",
        "sysbus LoadELF @/w/firmware.elf",
        "sysbus LoadBinary @/t/io.bin 0x60000000",
        "cpu VectorTableOffset 0x08000000",
        "cpu PerformanceInMips 168",
        "start",
    ]
    assert "LoadBinary" not in renode.script(b, "/w/firmware.elf", None, "/t/uart.txt")
    assert renode.command("/opt/renode/renode", "/t/run.resc", 4321) == [
        "/opt/renode/renode", "--disable-xwt", "--plain", "--port", "4321", "/t/run.resc"]


def test_monitor_reply_transcript() -> None:
    """tests/data/renode/monitor-reply.txt: hand-written, not captured (see its README)."""
    reply = (DATA / "monitor-reply.txt").read_bytes().decode("utf-8", "replace")
    assert renode.parse_monitor_number(reply) == 1234567
    assert renode.parse_monitor_number("\x1b[0m(torchmcu) ") is None
    assert renode.parse_monitor_number("0x1f\r\n(m) ") == 31


def test_uart_transcript_gives_the_exit_status() -> None:
    """tests/data/renode/uart-digits.txt: the firmware's UART output (captured in QEMU, not Renode)."""
    text = (DATA / "uart-digits.txt").read_text()
    r = renode.result_from_output(["renode"], text, "", None, timed_out=False, instructions=99)
    assert (r.exit_code, r.timed_out, r.stats["instructions"]) == (0, False, 99)
    cut = text.split("tmcu: exit")[0]  # Renode ended (or was stopped at the time limit) before the exit line
    assert renode.result_from_output(["renode"], cut, "", 1, False, None).exit_code == 1
    late = renode.result_from_output(["renode"], cut, "", None, True, None)
    assert late.timed_out and late.exit_code == -9
    failed = renode.result_from_output(["renode"], cut + "tmcu: exit status=32\r\n", "", None, False, None)
    assert failed.exit_code == 32


def test_missing_renode_and_boards_without_a_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert "renode" in RUNNERS
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(renode.RENODE_ENV, raising=False)
    assert not RUNNERS["renode"].available()
    with pytest.raises(SimulatorNotFound, match=r"renode not found on PATH \(or \$TORCHMCU_RENODE\); install Renode"):
        RUNNERS["renode"].run("stm32f407vg", tmp_path / "fw.elf")
    with pytest.raises(SimulatorNotFound, match="mps3-an547 has no \\[renode\\] table"):
        RUNNERS["renode"].run("mps3-an547", tmp_path / "fw.elf")


# ---------------------------------------------------------------------------------------------
# Firmware for the boards


@needs_arm_gcc
@pytest.mark.parametrize("name", RENODE_BOARDS)
def test_firmware_builds(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    cli("compile", "examples/digits.py:make", "--board", name, "-o", str(out), "--quant", "int8")
    cli("build", str(out))
    size = json.loads((out / "size.json").read_text())
    b = B.load_board(name)
    nm = subprocess.run(["arm-none-eabi-nm", str(out / "firmware.elf")], capture_output=True, text=True).stdout
    vectors = int(next(ln.split()[0] for ln in nm.splitlines() if ln.endswith(" tmcu_vector_table")), 16)
    assert vectors == b.memory("flash").base  # the part boots from its flash
    assert size["stack"]["computed_bytes"] > 0


def _netduino_board(tmp_path: Path) -> Path:
    """stm32f407vg as QEMU's netduinoplus2 (STM32F405) has it: QEMU wires its
    serial port to USART1 and maps no CCM, and its SRAM goes on past 128 KiB,
    where the io window goes. The [renode] table stays: the exit line too."""
    text = (B.BOARDS_DIR / "stm32f407vg.toml").read_text()
    text = text.replace('name = "stm32f407vg"', 'name = "netduinoplus2-f405"', 1)
    text = text.replace("base = 0x40004400", "base = 0x40011000")
    text = text.replace('platform = "stm32f407vg.repl"', f'platform = "{REPO / "sim" / "renode" / "stm32f407vg.repl"}"')
    text = text.replace("[layout]", '[qemu]\nmachine = "netduinoplus2"\nuart_base = 0x40011000\n\n[layout]')
    text = text.replace("base = 0x60000000\nsize = 0x00100000", "base = 0x20020000\nsize = 0x00010000")
    ccm = text.index('[[memory]]\nname = "ccm"')
    text = text[:ccm] + text[text.index("[[memory]]", ccm + 5):]
    path = tmp_path / "netduinoplus2.toml"
    path.write_text(text)
    return path


@needs_arm_gcc
@needs_qemu
def test_stm32_usart_in_qemu_and_the_runner_end_to_end(tmp_path: Path) -> None:
    """The STM32 USART driver and the exit line, run for real (QEMU's
    STM32F405); then the whole Renode runner against the stand-in."""
    board = _netduino_board(tmp_path)
    out = tmp_path / "digits"
    cli("compile", "examples/digits.py:make", "--board", str(board), "-o", str(out), "--quant", "int8")
    cli("build", str(out))
    qemu = json.loads(cli("run", str(out), "--check", "--json").stdout)
    assert qemu["check"]["passed"] and qemu["exit_code"] == 0
    env = {renode.RENODE_ENV: str(FAKE), "FAKE_RENODE_QEMU_MACHINE": "netduinoplus2",
           "FAKE_RENODE_INSTRUCTIONS": "424242"}
    got = json.loads(cli("run", str(out), "--sim", "renode", "--check", "--json", env=env).stdout)
    assert got["check"]["passed"] and got["exit_code"] == 0
    assert got["outputs"] == qemu["outputs"] and got["simulator_instructions"] == 424242
    assert got["instructions"] is None  # Renode's ticks are not instruction counts
    text = cli("run", str(out), "--sim", "renode", env=env).stdout
    assert "instructions of the whole run (Renode's count; load, 1 sample(s) and output): 424,242" in text


# ---------------------------------------------------------------------------------------------
# Renode itself, where it is installed


@needs_arm_gcc
@pytest.mark.skipif(renode.find_renode() is None or Path(str(renode.find_renode())).resolve() == FAKE.resolve(),
                    reason="Renode not installed (renode on PATH or $TORCHMCU_RENODE); see the README's Renode section")
@pytest.mark.parametrize("name", RENODE_BOARDS)
def test_real_renode(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    cli("compile", "examples/digits.py:make", "--board", name, "-o", str(out), "--quant", "int8")
    cli("build", str(out))
    got = json.loads(cli("run", str(out), "--sim", "renode", "--check", "--json").stdout)
    assert got["check"]["passed"] and got["exit_code"] == 0 and got["simulator_instructions"] > 0
