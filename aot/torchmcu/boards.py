"""Board descriptions: cores, memories, simulator wiring and the linker script.

A board is described by a TOML file in ``<repo>/boards/`` (see
``boards/mps3-an547.toml`` for the annotated format). This module parses and
checks those files into frozen dataclasses, derives the compiler flags, the
``-D`` macros the board-side C++ in ``firmware/boards/`` needs, the link
flags, and generates a GNU ld script from the memory description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import tomllib

from .errors import TorchMCUError

__all__ = [
    "BOARDS_DIR",
    "FIRMWARE_BOARDS_DIR",
    "UART_KINDS",
    "Board",
    "BoardError",
    "Core",
    "Memory",
    "Npu",
    "RenodeTarget",
    "board_sources",
    "list_boards",
    "load_board",
]

_REPO_ROOT = Path(__file__).resolve().parents[2]
BOARDS_DIR = _REPO_ROOT / "boards"
FIRMWARE_BOARDS_DIR = _REPO_ROOT / "firmware" / "boards"

# What a memory may hold. "code"/"rodata" go to the layout's code memory,
# "data"/"bss"/"stack" to its data memory, "arena" to linker.linker_script(arenas=).
_HOLDS = frozenset({"code", "rodata", "data", "bss", "stack", "arena"})
_KINDS = frozenset({"code", "ram"})
_MVE = ("none", "int", "float")
# Core architectures: Arm Cortex-M (GCC -mcpu names, QEMU/FVP), and Cadence
# Xtensa DSPs (HiFi 4: built with Cadence's xt-clang for the core
# configuration XTENSA_CORE names, run in Cadence's ISS xt-run: torchmcu.backends.hifi.build,
# torchmcu.sim.xtrun).
_ARCHES = ("cortex-m", "xtensa")
_FLOAT_ABIS = ("soft", "softfp", "hard")
# The UARTs firmware/boards/platform.cc drives, by register layout (its TMCU_BOARD_UART_KIND):
# Arm's CMSDK APB UART (MPS2/MPS3), ST's USART of the F1/F2/F4 series (SR, DR, BRR, CR1) and
# ST's LPUART of the L4/L5/G4/H7 series (CR1, BRR, ISR, TDR; the USARTs there share it).
UART_KINDS = {"cmsdk": 0, "stm32-usart": 1, "stm32-lpuart": 2}
_SECTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Cores whose -mcpu default includes features a board may lack; the matching
# "+no..." modifiers switch them off so the compiler never emits them.
_CPUS_WITH_DSP_DEFAULT = frozenset({"cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85"})
_CPUS_WITH_MVE_DEFAULT = frozenset({"cortex-m55", "cortex-m85"})

# Libraries' allocation entry points. Wrapping them to __wrap_* names that
# nothing defines turns any use of the heap into a link error naming the
# function, and keeps newlib's malloc (and with it _sbrk) out of the image.
HEAP_FUNCTIONS = (
    "malloc", "calloc", "realloc", "free", "memalign", "aligned_alloc",
    "posix_memalign", "valloc", "pvalloc",
    "_malloc_r", "_calloc_r", "_realloc_r", "_free_r", "_memalign_r",
)


class BoardError(TorchMCUError, ValueError):
    """A board name, description file or layout request is invalid."""


@dataclass(frozen=True)
class Memory:
    name: str
    base: int
    size: int
    kind: str  # "code": rom-like memory holding the image; "ram": read-write
    speed: int  # rank, lower is faster; equal ranks are equally fast
    holds: tuple[str, ...]
    external: bool = False  # off-chip (DRAM, PSRAM, QSPI flash): compile says when a part lands there
    # The real part's wait states at the board's clock (its reference manual's table), and the width
    # of one access in bytes: the cycle model (torchmcu.sim.cycles) charges wait_states per new line of
    # code fetched from it and per literal load (no cache, prefetch or ART: not modelled).
    wait_states: int = 0
    line_bytes: int = 4

    @property
    def end(self) -> int:
        """One past the last byte."""
        return self.base + self.size

    def contains(self, address: int, size: int = 1) -> bool:
        return self.base <= address and address + size <= self.end


@dataclass(frozen=True)
class Core:
    cpu: str  # GCC -mcpu name
    fpu: str  # GCC -mfpu name, or "none"
    float_abi: str  # "soft" | "softfp" | "hard"
    dsp: bool
    mve: str  # "none" | "int" | "float"
    clock_hz: int
    arch: str = "cortex-m"  # one of _ARCHES; "xtensa": cpu names the DSP family ("hifi4")
    xtensa_core: str = ""  # Xtensa only: the default core configuration (XTENSA_CORE) to build for

    @property
    def has_fpu(self) -> bool:
        return self.fpu != "none"


@dataclass(frozen=True)
class Npu:
    """An Ethos-U beside the core (the [npu] table)."""
    accelerator: str  # Vela's accelerator config, e.g. "ethos-u55-128"
    system_config: str  # sections of aot/torchmcu/backends/ethos_u/systems.ini
    memory_mode: str
    memories: tuple[str, ...]  # the board's memories the NPU reaches (never the TCMs)
    base: int  # its register block
    irq: int

    @property
    def defines(self) -> dict[str, str]:
        """-D macros of the NPU's board support and delegate (firmware/boards/npu/,
        firmware/delegates/ethos_u/): its registers and interrupt, the vector
        table's size that puts the interrupt in it, and what the command
        streams must have been compiled for (blob.py's accelerator codes)."""
        arch, macs = self.accelerator.removeprefix("ethos-").split("-")
        return {"TMCU_BOARD_NPU_BASE": f"0x{self.base:08x}u", "TMCU_BOARD_NPU_IRQ": str(self.irq),
                "TMCU_BOARD_NUM_IRQS": str(max(16, self.irq + 1)),
                "TMCU_BOARD_NPU_ARCH": str({"u55": 0, "u65": 1, "u85": 2}[arch]), "TMCU_BOARD_NPU_MACS": macs}


@dataclass(frozen=True)
class RenodeTarget:
    """How Renode runs the board (the [renode] table; torchmcu.sim.renode)."""
    platform: str  # the platform description: a .repl of the repository's sim/renode/, or a path
    uart: str  # the peripheral the firmware writes to, as the platform names it (e.g. sysbus.usart2)
    mips: int  # the core's instructions per microsecond in Renode's virtual time (PerformanceInMips)


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    core: Core
    memories: tuple[Memory, ...]
    qemu_machine: str
    uart_base: int
    io_base: int
    io_size: int
    code_memory: str  # where the vector table, .text and .rodata go
    data_memory: str  # where .data, .bss and the stack go
    stack_size: int
    source: Path | None = field(default=None, compare=False)
    npu: Npu | None = None  # the [npu] table, when the board has one
    fvp_model: str | None = None  # the [fvp] table's model: the FVP executable simulating the board
    # The backends that may take ops on this board, in priority order (torchmcu.backends); empty:
    # every backend that applies to it.
    backends: tuple[str, ...] = ()
    uart_kind: str = "cmsdk"  # one of UART_KINDS: the register layout of the UART at uart_base
    renode: RenodeTarget | None = None  # the [renode] table, when Renode runs the board
    # [qemu] clock_hz: the clock of the QEMU machine that stands in for the board (an mps2 image
    # running the board's core: NUCLEO-L4R5ZI on mps2-an386), when it is not the board's own: SysTick
    # counts at it, so instructions convert with it; the cycle model applies the board's clock_hz.
    qemu_clock_hz: int = 0

    # -- core -----------------------------------------------------------
    @property
    def cpu(self) -> str:
        return self.core.cpu

    @property
    def clock_hz(self) -> int:
        return self.core.clock_hz

    @property
    def instructions_per_tick(self) -> Fraction:
        """Guest instructions per SysTick count under QEMU ``-icount shift=0``.

        With shift=0 each instruction advances virtual time by 1 ns and
        SysTick counts at the core clock, so one count is 1e9/clock_hz
        instructions (31.25 at 32 MHz): the clock of QEMU's machine, which is
        not the board's own when an mps2 image stands in for it (qemu_clock_hz).
        """
        return Fraction(1_000_000_000, self.qemu_clock_hz or self.core.clock_hz)

    @property
    def qemu_stand_in(self) -> bool:
        """QEMU runs the board's core on another machine (its [qemu] clock_hz differs)."""
        return bool(self.qemu_clock_hz) and self.qemu_clock_hz != self.core.clock_hz

    @property
    def cflags(self) -> list[str]:
        """Target flags; pass the same list to the compiler and the linker.
        Xtensa: the flags every Xtensa build of Cadence's tools takes (calls
        reach anywhere in the address space, literals beside the code); the
        core configuration is chosen by --xtensa-core (torchmcu.backends.hifi.build)."""
        c = self.core
        if c.arch == "xtensa":
            return ["-mlongcalls", "-mtext-section-literals"]
        mcpu = c.cpu
        if c.cpu in _CPUS_WITH_MVE_DEFAULT:
            if c.mve == "none":
                mcpu += "+nomve"
            elif c.mve == "int":
                mcpu += "+nomve.fp"
        if not c.dsp and c.cpu in _CPUS_WITH_DSP_DEFAULT:
            mcpu += "+nodsp"
        if not c.has_fpu and c.mve != "float" and c.cpu in _CPUS_WITH_MVE_DEFAULT:
            mcpu += "+nofp"
        flags = [f"-mcpu={mcpu}", "-mthumb", f"-mfloat-abi={c.float_abi}"]
        if c.has_fpu and c.float_abi != "soft":
            flags.append(f"-mfpu={c.fpu}")
        return flags

    @property
    def defines(self) -> dict[str, str]:
        """-D macros for the board-side code in firmware/boards/."""
        c = self.core
        return {
            "TMCU_BOARD_UART_BASE": f"0x{self.uart_base:08x}u",
            "TMCU_BOARD_UART_KIND": str(UART_KINDS[self.uart_kind]),
            # A simulator without semihosting (Renode) learns the exit status from a last UART line.
            "TMCU_BOARD_EXIT_LINE": "1" if self.renode else "0",
            "TMCU_BOARD_CLOCK_HZ": f"{c.clock_hz}u",
            # Whether CPACR must grant CP10/CP11: MVE needs it too, FPU or not.
            "TMCU_BOARD_HAS_FPU": "1" if c.has_fpu else "0",
            "TMCU_BOARD_HAS_MVE": {"none": "0", "int": "1", "float": "2"}[c.mve],
            "TMCU_BOARD_HAS_DSP": "1" if c.dsp else "0",
            "TMCU_BOARD_IO_BASE": f"0x{self.io_base:08x}u",
            "TMCU_BOARD_IO_SIZE": f"0x{self.io_size:08x}u",
            **(self.npu.defines if self.npu else {}),
        }

    @property
    def define_flags(self) -> list[str]:
        return [f"-D{k}={v}" for k, v in self.defines.items()]

    # -- memories -------------------------------------------------------
    def memory(self, name: str) -> Memory:
        for m in self.memories:
            if m.name == name:
                return m
        known = ", ".join(m.name for m in self.memories)
        raise BoardError(f"board {self.name!r} has no memory {name!r}; its memories are: {known}")

    def ldflags(self, linker_script_path: str | Path) -> list[str]:
        """Flags to link a firmware image: ``gcc <objects> *board.ldflags(script)``.

        Includes ``cflags`` again because the linker picks the multilib
        (FPU/ABI variant of libc, libm, libgcc) from them. No -lnosys: with
        no syscall stubs, anything that needs _sbrk, _write, ... fails to link.
        """
        wraps = ",".join(f"--wrap={f}" for f in HEAP_FUNCTIONS)
        if self.core.arch == "xtensa":
            # The core configuration's linker support package for its ISS
            # (-mlsp=sim) places the image and provides the C library's
            # simulator calls; torchmcu's ld script is for Cortex-M images.
            return [*self.cflags, "-mlsp=sim", "-Wl,--gc-sections", f"-Wl,{wraps}"]
        return [
            *self.cflags,
            "--specs=nano.specs",
            "-nostartfiles",
            f"-T{Path(linker_script_path)}",
            "-Wl,--gc-sections",
            f"-Wl,{wraps}",
            # Single-pass archive order would otherwise depend on where -lm lands.
            "-Wl,--start-group", "-lm", "-lc_nano", "-lgcc", "-Wl,--end-group",
        ]


# Loading

def list_boards(arch: str | None = "cortex-m") -> list[str]:
    """Names of the boards described in the repository's boards/ directory
    whose core is of `arch` ("cortex-m", the default: the boards QEMU, the
    FVPs and the CMSIS-Pack serve; "xtensa"); every board with None."""
    def board_arch(p: Path) -> str:
        with p.open("rb") as f:
            core = tomllib.load(f).get("core", {})
        return str(core.get("arch", "cortex-m")) if isinstance(core, dict) else "cortex-m"
    return sorted(p.stem for p in BOARDS_DIR.glob("*.toml") if arch is None or board_arch(p) == arch)


def load_board(name_or_path: str | Path) -> Board:
    """Load a board by name (``"mps3-an547"``) or by path to a TOML file."""
    if isinstance(name_or_path, Board):
        return name_or_path
    text = str(name_or_path)
    looks_like_path = isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text
    path = Path(text) if looks_like_path else BOARDS_DIR / f"{text}.toml"
    if not path.is_file():
        if looks_like_path:
            raise BoardError(f"board file {path} does not exist")
        known = ", ".join(list_boards()) or "(none)"
        raise BoardError(f"unknown board {text!r}; known boards: {known}")
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise BoardError(f"{path}: invalid TOML: {e}") from None
    return _parse_board(raw, path)


def _get(table: dict, key: str, typ: type | tuple[type, ...], where: str):
    if key not in table:
        raise BoardError(f"{where}: missing key {key!r}")
    value = table[key]
    # bool is an int subclass; never accept one for the other.
    if (typ is int and isinstance(value, bool)) or not isinstance(value, typ):
        name = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise BoardError(f"{where}: {key!r} must be {name}, got {value!r}")
    return value


def _parse_board(raw: dict, path: Path) -> Board:
    where = str(path)
    name = _get(raw, "name", str, where)
    core_t = _get(raw, "core", dict, where)
    xtensa = core_t.get("arch") == "xtensa"
    # [qemu], [io]: how QEMU runs the board; a part QEMU does not model goes without (it compiles and builds).
    qemu_t = _get(raw, "qemu", dict, where) if "qemu" in raw else {}
    layout_t = _get(raw, "layout", dict, where)
    io_t = _get(raw, "io", dict, where) if "io" in raw else {"base": 0, "size": 0}
    # [uart]: the UART the firmware prints on, for parts QEMU does not run (else [qemu] uart_base, a CMSDK UART).
    uart_t = _get(raw, "uart", dict, where) if "uart" in raw else {}
    mem_list = _get(raw, "memory", list, where)

    w = f"{where} [core]"
    # Xtensa: the Cortex-M keys do not apply (no Arm FPU, ABI or MVE); a HiFi is a DSP.
    arm_defaults = {"fpu": "none", "float_abi": "soft", "dsp": True, "mve": "none"} if xtensa else {}
    core = Core(
        cpu=_get(core_t, "cpu", str, w),
        fpu=_get({**arm_defaults, **core_t}, "fpu", str, w),
        float_abi=_get({**arm_defaults, **core_t}, "float_abi", str, w),
        dsp=_get({**arm_defaults, **core_t}, "dsp", bool, w),
        mve=_get({**arm_defaults, **core_t}, "mve", str, w),
        clock_hz=_get(core_t, "clock_hz", int, w),
        arch=_get(core_t, "arch", str, w) if "arch" in core_t else "cortex-m",
        xtensa_core=_get(core_t, "xtensa_core", str, w) if "xtensa_core" in core_t else "",
    )
    if core.arch not in _ARCHES:
        raise BoardError(f"{w}: arch must be one of {_ARCHES}, got {core.arch!r}")
    if xtensa and (core.has_fpu or core.mve != "none" or core.float_abi != "soft"):
        raise BoardError(f"{w}: an Xtensa core takes no Arm fpu, float_abi or mve")
    if core.float_abi not in _FLOAT_ABIS:
        raise BoardError(f"{w}: float_abi must be one of {_FLOAT_ABIS}, got {core.float_abi!r}")
    if core.mve not in _MVE:
        raise BoardError(f"{w}: mve must be one of {_MVE}, got {core.mve!r}")
    if core.float_abi != "soft" and not core.has_fpu:
        raise BoardError(f"{w}: float_abi {core.float_abi!r} needs an FPU (fpu is 'none')")
    if core.clock_hz <= 0:
        raise BoardError(f"{w}: clock_hz must be positive")

    memories: list[Memory] = []
    for i, m in enumerate(mem_list):
        w = f"{where} [[memory]] #{i + 1}"
        if not isinstance(m, dict):
            raise BoardError(f"{w}: must be a table")
        holds = _get(m, "holds", list, w)
        mem = Memory(
            name=_get(m, "name", str, w),
            base=_get(m, "base", int, w),
            size=_get(m, "size", int, w),
            kind=_get(m, "kind", str, w),
            speed=_get(m, "speed", int, w),
            holds=tuple(holds),
            external=_get(m, "external", bool, w) if "external" in m else False,
            wait_states=_get(m, "wait_states", int, w) if "wait_states" in m else 0,
            line_bytes=_get(m, "line_bytes", int, w) if "line_bytes" in m else 4,
        )
        if mem.wait_states < 0 or mem.line_bytes not in (2, 4, 8, 16, 32, 64):
            raise BoardError(f"{w}: wait_states must be >= 0 and line_bytes a power of two from 2 to 64")
        if not _SECTION_NAME.match(mem.name):
            raise BoardError(f"{w}: memory name {mem.name!r} must be an identifier (it names an ld region)")
        if mem.kind not in _KINDS:
            raise BoardError(f"{w}: kind must be one of {sorted(_KINDS)}, got {mem.kind!r}")
        bad = [h for h in mem.holds if h not in _HOLDS]
        if bad:
            raise BoardError(f"{w}: unknown holds {bad}; allowed: {sorted(_HOLDS)}")
        if mem.size <= 0 or mem.base < 0 or mem.end > 1 << 32:
            raise BoardError(f"{w}: memory {mem.name!r} does not fit the 32-bit address space")
        memories.append(mem)
    if not memories:
        raise BoardError(f"{where}: no [[memory]] entries")
    names = [m.name for m in memories]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BoardError(f"{where}: duplicate memory names {dupes}")
    ordered = sorted(memories, key=lambda m: m.base)
    for a, b in zip(ordered, ordered[1:]):
        if a.end > b.base:
            raise BoardError(f"{where}: memories {a.name!r} and {b.name!r} overlap")

    w = f"{where} [io]"
    io_base = _get(io_t, "base", int, w)
    io_size = _get(io_t, "size", int, w)
    if ("io" in raw and io_size <= 0) or io_size < 0 or io_base % 16:
        raise BoardError(f"{w}: the io window needs a positive size and a 16-byte aligned base")
    for m in memories:
        if io_size and io_base < m.end and m.base < io_base + io_size:
            raise BoardError(f"{w}: the io window overlaps memory {m.name!r}; it must be reserved for the runner")

    w = f"{where} [layout]"
    board = Board(
        name=name,
        description=str(raw.get("description", "")),
        core=core,
        memories=tuple(memories),
        qemu_machine=_get(qemu_t, "machine", str, f"{where} [qemu]") if qemu_t else "",
        uart_base=(_get(uart_t, "base", int, f"{where} [uart]") if uart_t else
                   _get(qemu_t, "uart_base", int, f"{where} [qemu]") if qemu_t else 0),
        uart_kind=_get(uart_t, "kind", str, f"{where} [uart]") if uart_t else "cmsdk",
        renode=_parse_renode(raw["renode"], f"{where} [renode]") if "renode" in raw else None,
        io_base=io_base,
        io_size=io_size,
        code_memory=_get(layout_t, "code", str, w),
        data_memory=_get(layout_t, "data", str, w),
        stack_size=_get(layout_t, "stack_size", int, w),
        source=path,
        npu=_parse_npu(raw["npu"], names, f"{where} [npu]") if "npu" in raw else None,
        fvp_model=_get(raw["fvp"], "model", str, f"{where} [fvp]") if "fvp" in raw else None,
        backends=tuple(str(b) for b in _get(raw, "backends", list, where)) if "backends" in raw else (),
        qemu_clock_hz=_get(qemu_t, "clock_hz", int, f"{where} [qemu]") if "clock_hz" in qemu_t else 0,
    )
    if board.qemu_clock_hz < 0:
        raise BoardError(f"{where} [qemu]: clock_hz must be positive")
    try:
        code = board.memory(board.code_memory)
        data = board.memory(board.data_memory)
    except BoardError as e:
        raise BoardError(f"{w}: {e}") from None
    if not {"code", "rodata"} <= set(code.holds):
        raise BoardError(f"{w}: code memory {code.name!r} must hold code and rodata")
    if data.kind != "ram" or not {"data", "bss", "stack"} <= set(data.holds):
        raise BoardError(f"{w}: data memory {data.name!r} must be ram holding data, bss and stack")
    if board.stack_size <= 0 or board.stack_size % 8:
        raise BoardError(f"{w}: stack_size must be a positive multiple of 8")
    if board.uart_kind not in UART_KINDS:
        raise BoardError(f"{where} [uart]: kind must be one of {', '.join(UART_KINDS)}, got {board.uart_kind!r}")
    return board


def _parse_renode(t: dict, where: str) -> RenodeTarget:
    if not isinstance(t, dict):
        raise BoardError(f"{where}: must be a table")
    r = RenodeTarget(_get(t, "platform", str, where), _get(t, "uart", str, where), _get(t, "mips", int, where))
    if r.mips <= 0:
        raise BoardError(f"{where}: mips must be positive")
    return r


def _parse_npu(t: dict, memories: list[str], where: str) -> Npu:
    if not isinstance(t, dict):
        raise BoardError(f"{where}: must be a table")
    npu = Npu(_get(t, "accelerator", str, where), _get(t, "system_config", str, where),
              _get(t, "memory_mode", str, where), tuple(_get(t, "memories", list, where)),
              _get(t, "base", int, where), _get(t, "irq", int, where))
    if not re.fullmatch(r"ethos-u(55|65|85)-\d+", npu.accelerator):
        raise BoardError(f"{where}: accelerator must look like ethos-u55-128, got {npu.accelerator!r}")
    unknown = [m for m in npu.memories if m not in memories]
    if unknown or not npu.memories:
        raise BoardError(f"{where}: memories must name the board's memories, got {list(npu.memories)}")
    return npu


def board_sources() -> list[Path]:
    """C/C++/assembly sources of firmware/boards/ to build into every firmware.

    Compile them with ``board.cflags + board.define_flags`` (plus
    ``-I firmware/boards``); test programs in subdirectories are excluded.
    """
    exts = {".c", ".cc", ".cpp", ".S", ".s"}
    return sorted(p for p in FIRMWARE_BOARDS_DIR.iterdir() if p.is_file() and p.suffix in exts)
