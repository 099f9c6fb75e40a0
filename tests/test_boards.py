"""Board descriptions, linker scripts, board-side firmware and the QEMU runner.

The firmware tests build firmware/boards/test/board_selftest.cc for each
required board with the board's flags, startup, platform code and generated
linker script, run it once in QEMU and check its report.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from torchmcu import boards as B
from torchmcu import sim
from torchmcu.linker import linker_script

REQUIRED_BOARDS = ["mps3-an547", "mps2-an505", "mps2-an386"]
FPU_BOARDS = {"mps3-an547", "mps2-an505", "mps2-an386"}
TEST_DIR = B.FIRMWARE_BOARDS_DIR / "test"
GXX = "arm-none-eabi-g++"
# Shorter SysTick period in the test build so the selftest's tick loops
# cross several wraps and exercise the 64-bit extension.
TEST_SYSTICK_PERIOD = 0x10000

needs_gcc = pytest.mark.skipif(shutil.which(GXX) is None, reason=f"{GXX} not installed")
needs_qemu = pytest.mark.skipif(not sim.qemu_available(), reason="qemu-system-arm not installed")


# ---------------------------------------------------------------------------
# Board descriptions
# ---------------------------------------------------------------------------

def test_list_boards_has_required():
    names = B.list_boards()
    for name in REQUIRED_BOARDS:
        assert name in names


@pytest.mark.parametrize("name", B.list_boards())
def test_every_board_loads(name):
    board = B.load_board(name)
    assert board.name == name
    assert board.qemu_machine or board.renode  # a simulator runs every board of boards/
    assert board.memory(board.code_memory).kind == "code"
    assert board.memory(board.data_memory).kind == "ram"
    assert board.instructions_per_tick == Fraction(10**9, board.qemu_clock_hz or board.clock_hz)
    assert board.cflags[0].startswith(f"-mcpu={board.cpu}") and "-mthumb" in board.cflags
    assert board.defines["TMCU_BOARD_IO_BASE"] == f"0x{board.io_base:08x}u"
    for m in board.memories:  # the io window is reserved for the runner
        assert not (board.io_base < m.end and m.base < board.io_base + board.io_size)


def test_an547_facts():
    b = B.load_board("mps3-an547")
    assert b.cpu == "cortex-m55" and b.clock_hz == 32_000_000
    assert b.instructions_per_tick == Fraction(125, 4)
    assert b.uart_base == 0x49303000
    assert (b.memory("itcm").base, b.memory("itcm").size) == (0, 512 * 1024)
    assert (b.memory("dtcm").base, b.memory("dtcm").size) == (0x20000000, 512 * 1024)
    assert b.cflags == ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard", "-mfpu=auto"]
    assert b.defines["TMCU_BOARD_HAS_MVE"] == "2"


def test_cflags_per_core():
    assert B.load_board("mps2-an386").cflags == [
        "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
    assert B.load_board("mps2-an505").cflags == [
        "-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"]
    assert B.load_board("mps2-an385").cflags == ["-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"]


def test_unknown_board_lists_known():
    with pytest.raises(B.BoardError) as e:
        B.load_board("mps9-an999")
    msg = str(e.value)
    assert "mps9-an999" in msg
    for name in REQUIRED_BOARDS:
        assert name in msg


def test_missing_board_file():
    with pytest.raises(B.BoardError, match="does not exist"):
        B.load_board("/nonexistent/board.toml")


def _write_variant(tmp_path, old, new, name="variant.toml"):
    text = (B.BOARDS_DIR / "mps2-an386.toml").read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def test_board_file_validation(tmp_path):
    with pytest.raises(B.BoardError, match="overlap"):
        B.load_board(_write_variant(tmp_path, "base = 0x01000000", "base = 0x00300000"))
    with pytest.raises(B.BoardError, match="io window overlaps"):
        B.load_board(_write_variant(tmp_path, "base = 0x21c00000", "base = 0x21b00000"))
    with pytest.raises(B.BoardError, match="mve"):
        B.load_board(_write_variant(tmp_path, 'mve = "none"', 'mve = "maybe"'))
    with pytest.raises(B.BoardError, match="no memory 'flash'"):
        B.load_board(_write_variant(tmp_path, 'code = "ssram1"', 'code = "flash"'))
    with pytest.raises(B.BoardError, match="clock_hz"):
        B.load_board(_write_variant(tmp_path, "clock_hz = 25_000_000", 'clock_hz = "fast"'))
    with pytest.raises(B.BoardError, match="invalid TOML"):
        B.load_board(_write_variant(tmp_path, "[core]", "[core"))


def test_board_sources_exist():
    names = {p.name for p in B.board_sources()}
    assert {"startup.cc", "platform.cc"} <= names
    assert not any("test" in p.parts[-2] for p in B.board_sources())
    assert (B.FIRMWARE_BOARDS_DIR / "platform.h").is_file()


# ---------------------------------------------------------------------------
# Linker script generator
# ---------------------------------------------------------------------------

def _section_block(script: str, name: str) -> str:
    m = re.search(rf"^  {re.escape(name)}\b.*?^  \}}[^\n]*$", script, re.S | re.M)
    assert m, f"no section {name} in script"
    return m.group(0)


def test_linker_script_layout_an547():
    b = B.load_board("mps3-an547")
    s = linker_script(b, {"tmcu_arena_sram": "sram", "tmcu_arena_dtcm": "dtcm"})
    assert "itcm (rx) : ORIGIN = 0x00000000, LENGTH = 0x00080000" in s
    assert "dtcm (rwx) : ORIGIN = 0x20000000, LENGTH = 0x00080000" in s
    assert "KEEP(*(.vectors))" in _section_block(s, ".text")
    assert _section_block(s, ".text").endswith("> itcm")
    ro = _section_block(s, ".rodata")
    assert ".rodata.tmcu_program*" in ro and ro.endswith("> itcm")
    assert ro.index("ALIGN(16)") < ro.index(".rodata.tmcu_program*")
    assert _section_block(s, ".data").endswith("> dtcm AT > itcm")
    assert _section_block(s, ".bss").endswith("> dtcm")
    assert _section_block(s, ".stack").endswith("> dtcm")
    arena = _section_block(s, ".tmcu_arena_sram")
    assert "(NOLOAD)" in arena and "*(.bss.tmcu_arena_sram" in arena and arena.endswith("> sram")
    assert "__tmcu_arena_sram_start" in arena and "__tmcu_arena_sram_end" in arena
    assert _section_block(s, ".tmcu_arena_dtcm").endswith("> dtcm")
    # Arenas come before .bss, whose .bss.* would otherwise take their sections.
    assert s.index(".tmcu_arena_sram (NOLOAD)") < s.index(".bss (NOLOAD)")
    for sym in ("__tmcu_stack_top", "__tmcu_data_load", "__tmcu_bss_start", "__tmcu_bss_end"):
        assert sym in s


def test_linker_script_an505_uses_secure_aliases():
    s = linker_script(B.load_board("mps2-an505"), {})
    assert "ssram0 (rx) : ORIGIN = 0x10000000" in s
    assert _section_block(s, ".data").endswith("> ssram1 AT > ssram0")


def test_linker_script_errors():
    b = B.load_board("mps2-an386")
    with pytest.raises(B.BoardError, match=r"no memory 'sram'.*ssram1, blockram, ssram23, psram"):
        linker_script(b, {"tmcu_arena_sram": "sram"})
    with pytest.raises(B.BoardError, match="cannot hold arenas"):
        linker_script(b, {"tmcu_arena_code": "ssram1"})
    with pytest.raises(B.BoardError, match="identifier"):
        linker_script(b, {"bad name": "blockram"})


# ---------------------------------------------------------------------------
# Firmware in QEMU
# ---------------------------------------------------------------------------

def _compile(board, src: Path, obj: Path, extra=()):
    cmd = [GXX, *board.cflags, *board.define_flags, *extra, "-std=c++17", "-Os", "-g",
           "-ffunction-sections", "-fdata-sections", "-fno-exceptions", "-fno-rtti",
           "-Wall", "-Wextra", "-Werror", f"-I{B.FIRMWARE_BOARDS_DIR}", "-c", str(src), "-o", str(obj)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"compiling {src.name} failed:\n{r.stderr}"


def arenas_for(board):
    """The selftest's two arenas: the fastest and the slowest arena memory."""
    able = sorted((m for m in board.memories if "arena" in m.holds), key=lambda m: (m.speed, m.base))
    return {"tmcu_arena_fast": able[0].name, "tmcu_arena_slow": able[-1].name}


def build(board, main_src: Path, out_dir: Path, *, board_extra=()) -> tuple[Path | None, subprocess.CompletedProcess]:
    """Compile main_src + board sources and link; returns (elf or None, link result)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    objs = []
    for src in [*B.board_sources(), main_src]:
        obj = out_dir / (src.stem + ".o")
        _compile(board, src, obj, board_extra if src.parent == B.FIRMWARE_BOARDS_DIR else ())
        objs.append(str(obj))
    script = out_dir / "link.ld"
    script.write_text(linker_script(board, arenas_for(board)))
    elf = out_dir / (main_src.stem + ".elf")
    link = subprocess.run([GXX, *objs, *board.ldflags(script), "-o", str(elf)], capture_output=True, text=True)
    return (elf if link.returncode == 0 else None), link


class Selftest:
    def __init__(self, board, elf, result):
        self.board, self.elf, self.result = board, elf, result

    def field(self, pattern):
        m = re.search(pattern, self.result.stdout)
        assert m, f"{pattern!r} not in output:\n{self.result.stdout}\nstderr:\n{self.result.stderr}"
        return m


IO_DATA = bytes((i * 7 + 3) & 0xFF for i in range(5000))


def _io_request(command: int, data: bytes) -> bytes:
    return b"TMCU" + struct.pack("<II", command, len(data)) + data


@pytest.fixture(scope="module", params=REQUIRED_BOARDS)
def selftest(request, tmp_path_factory):
    if shutil.which(GXX) is None:
        pytest.skip(f"{GXX} not installed")
    if not sim.qemu_available():
        pytest.skip("qemu-system-arm not installed")
    board = B.load_board(request.param)
    elf, link = build(board, TEST_DIR / "board_selftest.cc", tmp_path_factory.mktemp(board.name),
                      board_extra=[f"-DTMCU_SYSTICK_PERIOD=0x{TEST_SYSTICK_PERIOD:x}u"])
    assert elf is not None, link.stderr
    result = sim.run_qemu(board, elf, io_blob=_io_request(0, IO_DATA), timeout_s=20)
    assert not result.timed_out, result.stdout
    return Selftest(board, elf, result)


def test_uart_output(selftest):
    assert "selftest: hello" in selftest.result.stdout
    assert "selftest: done" in selftest.result.stdout
    # .data copied and static constructors run by the startup code.
    assert "data: 1234 ctor: 42" in selftest.result.stdout


def test_semihosting_merged_into_stdout(selftest):
    assert "semihost: hello" in selftest.result.stdout


def _symbols(elf):
    out = subprocess.run(["arm-none-eabi-nm", "-S", str(elf)], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) in (3, 4):  # address [size] type name
            syms[parts[-1]] = (int(parts[0], 16), int(parts[1], 16) if len(parts) == 4 else 0)
    return syms


def test_linker_placement(selftest):
    board = selftest.board
    assert "arena: ok program: 5" in selftest.result.stdout
    syms = _symbols(selftest.elf)
    addr, size = syms["tmcu_program_selftest"]
    assert addr % 16 == 0 and board.memory(board.code_memory).contains(addr, size)
    assert syms["__tmcu_program_start"][0] == addr
    for section, mem in arenas_for(board).items():
        addr, size = syms[section]
        assert board.memory(mem).contains(addr, size), (section, mem, hex(addr))
    data = board.memory(board.data_memory)
    top, bottom = syms["__tmcu_stack_top"][0], syms["__tmcu_stack_bottom"][0]
    assert data.base <= bottom and top <= data.end and top - bottom == board.stack_size
    assert syms["tmcu_vector_table"][0] == board.memory(board.code_memory).base


def test_exit_code(selftest):
    assert selftest.result.exit_code == 7, selftest.result.stdout


def test_io_blob(selftest):
    m = selftest.field(r"io: len=(\d+) sum=(\d+)")
    assert int(m.group(1)) == len(IO_DATA)
    assert int(m.group(2)) == sum(IO_DATA)


def test_instruction_counter(selftest):
    ticks = int(selftest.field(r"loop: instructions=2000000 ticks=(\d+)").group(1))
    counted = ticks * selftest.board.instructions_per_tick
    err = abs(counted - 2_000_000) / 2_000_000
    assert err < Fraction(5, 1000), f"{selftest.board.name}: {ticks} ticks = {float(counted)} instructions"


def test_ticks_monotonic_across_wraps(selftest):
    m = selftest.field(r"mono: (\w+) span=(\d+) max_step=(\d+)")
    assert m.group(1) == "ok"
    assert int(m.group(2)) > 2 * TEST_SYSTICK_PERIOD  # crossed at least two wraps
    assert int(m.group(3)) < 100  # no step lost or gained a whole period


def test_float(selftest):
    value = int(selftest.field(r"float: (-?\d+)").group(1))
    assert abs(value - 1858658) <= 2  # (2/3)^2 + sqrt(2) = 1.8586580...
    if selftest.board.name in FPU_BOARDS:
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(selftest.elf)],
                             capture_output=True, text=True).stdout
        assert "vdiv.f32" in dis  # the hardware FPU did the work
    if selftest.board.core.mve == "float":
        assert int(selftest.field(r"mve: (-?\d+)").group(1)) == 14500  # sum of 1 + 2x


def test_hardfault_report(selftest):
    result = sim.run_qemu(selftest.board, selftest.elf, io_blob=_io_request(1, b""), timeout_s=20)
    assert "fault: now" in result.stdout
    assert "*** HardFault: pc=0x" in result.stdout
    assert result.exit_code == 250 and result.exit_reason == "HardFault"


@needs_gcc
@pytest.mark.parametrize("name", REQUIRED_BOARDS)
def test_malloc_fails_to_link(name, tmp_path):
    elf, link = build(B.load_board(name), TEST_DIR / "malloc_probe.cc", tmp_path)
    assert elf is None
    assert "malloc" in link.stderr, link.stderr


# ---------------------------------------------------------------------------
# Runner
# ---------------------------------------------------------------------------

def test_io_blob_too_large(tmp_path):
    board = B.load_board("mps2-an386")
    elf = tmp_path / "x.elf"
    elf.write_bytes(b"")
    with pytest.raises(sim.IoBlobTooLarge, match="io window"):
        sim.run_qemu(board, elf, io_blob=bytes(board.io_size + 1))


def test_missing_qemu(tmp_path, monkeypatch):
    elf = tmp_path / "x.elf"
    elf.write_bytes(b"")
    runner = sim.QemuRunner(executable="qemu-system-arm-does-not-exist")
    assert not runner.available()
    with pytest.raises(sim.SimulatorNotFound, match="not found"):
        runner.run("mps2-an386", elf)


def test_runner_protocol():
    assert isinstance(sim.get_runner("qemu"), sim.Runner)
    assert isinstance(sim.get_runner("fvp"), sim.Runner) and sim.get_runner("fvp").name == "fvp"
    with pytest.raises(ValueError, match="available: fvp, host, qemu, renode"):
        sim.get_runner("renode-x")


@needs_qemu
def test_qemu_command_line(tmp_path):
    board = B.load_board("mps3-an547")
    cmd = sim.QemuRunner().command(board, tmp_path / "fw.elf", tmp_path / "io.bin")
    joined = " ".join(cmd)
    assert "-M mps3-an547" in joined and "-icount shift=0" in joined
    assert "chardev=serial0" in joined and "-serial chardev:serial0" in joined
    assert f"loader,file={tmp_path / 'io.bin'},addr=0xdf000000,force-raw=on" in joined


@needs_gcc
@needs_qemu
def test_timeout_kills_qemu(tmp_path):
    board = B.load_board("mps2-an386")
    src = tmp_path / "spin.cc"
    src.write_text('#include "platform.h"\nint main() { tmcu_platform_init(); '
                   'tmcu_platform_write("spin\\n", 5); for (;;) { __asm__ volatile(""); } }\n')
    elf, link = build(board, src, tmp_path / "out")
    assert elf is not None, link.stderr
    result = sim.run_qemu(board, elf, timeout_s=1.5)
    assert result.timed_out
    assert "spin" in result.stdout
