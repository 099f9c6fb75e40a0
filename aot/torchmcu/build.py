"""Firmware and host builds of a compiled model.

`build_firmware(out_dir)` writes OUT/fw/Makefile (so a user can rebuild or
read the exact commands) and runs it: the runtime core, the portable
kernels (only those in the generated kernel table survive --gc-sections),
the board support and the generated model sources, linked with the
board's generated linker script into OUT/firmware.elf.

`build_host_runner()` builds the same runtime for the host with every
kernel, for tests (optionally with AddressSanitizer and UBSan).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import serialize
from .boards import Board, board_sources, linker_script, load_board
from .errors import BuildError

REPO = Path(__file__).resolve().parents[2]
FIRMWARE = REPO / "firmware"

CORE_SOURCES = ["core/program.cc", "core/method.cc"]
APP_SOURCES = ["app/app.cc"]
CXXFLAGS = ["-std=c++17", "-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics",
            "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra", "-Werror"]
CFLAGS = ["-std=c11", "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra"]
CROSS = "arm-none-eabi-"


def kernel_sources() -> list[Path]:
    return sorted((FIRMWARE / "kernels" / "portable").glob("*.cc"))


def runtime_sources() -> list[Path]:
    return [FIRMWARE / s for s in CORE_SOURCES + APP_SOURCES] + kernel_sources()


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BuildError(f"{tool} not found on PATH; install it (Debian: gcc-arm-none-eabi "
                         "libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib), or run `make setup`")
    return path


@dataclass
class FirmwareSize:
    text: int
    data: int
    bss: int

    def as_dict(self) -> dict[str, int]:
        return {"text": self.text, "data": self.data, "bss": self.bss}


def elf_size(elf: Path) -> FirmwareSize:
    out = subprocess.run([_require(CROSS + "size"), "-B", str(elf)], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1].split()
    return FirmwareSize(int(out[0]), int(out[1]), int(out[2]))


# ---------------------------------------------------------------------------------------------
# Where the flash goes: every byte the ELF loads (text + data in `size -B`'s
# terms), attributed through the linker map to the input file it came from.

SIZE_PARTS = ("startup_libc", "runtime", "kernels", "model", "app")


def size_part(path: str) -> str:
    """The part an input file of the link belongs to."""
    name = path.replace("\\", "/")
    base = name.rsplit("/", 1)[-1]
    if base in ("model_pte.o", "model_arenas.o"):
        return "model"  # the program array and the arena table
    if "/firmware/core/" in name:
        return "runtime"
    if "/firmware/kernels/" in name or base.startswith("kernel_table") or "libcmsis-nn.a" in base:
        return "kernels"
    if "/firmware/delegates/" in name or f"/{ETHOSU_OBJ_DIR}/" in name:
        return "kernels"  # the Ethos-U delegate and its driver
    if "/firmware/app/" in name:
        return "app"
    return "startup_libc"  # board startup and platform, libc, libgcc, libm, linker stubs


def _loaded_sections(elf: Path) -> dict[str, tuple[int, int]]:
    """Sections the image loads (allocated, not NOBITS): name -> (address, size)."""
    out = subprocess.run([_require(CROSS + "readelf"), "-S", "-W", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    sections = {}
    for m in re.finditer(r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)",
                         out, re.MULTILINE):
        name, kind, addr, size, flags = m.groups()
        if "A" in flags and kind != "NOBITS" and int(size, 16):
            sections[name] = (int(addr, 16), int(size, 16))
    return sections


_OUT_SECTION = re.compile(r"^(\.\S+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)(?:\s+load address 0x[0-9a-f]+)?)?\s*$")
_IN_SECTION = re.compile(r"^ (\S+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*))?$")
_IN_CONT = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
_FILL = re.compile(r"^ \*fill\*\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)")


def size_breakdown(elf: Path, map_path: Path) -> dict:
    """The loaded bytes of `elf` by part (SIZE_PARTS) and by input file, from
    the linker map: each input section counts for its file; the padding
    before the next one (alignment fill), for the same file. The parts sum
    to text + data exactly (checked)."""
    sections = _loaded_sections(elf)
    lines = map_path.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("Linker script and memory map"))
    by_file: dict[str, int] = {}
    current: str | None = None  # the output section being read, when it is loaded
    items: list[tuple[int, int, str]] = []  # (address, size, file) in the current output section

    def close() -> None:
        if current is None:
            return
        base, size = sections[current]
        items.sort()
        end = base + size
        for k, (addr, n, f) in enumerate(items):
            nxt = items[k + 1][0] if k + 1 < len(items) else end
            by_file[f] = by_file.get(f, 0) + max(n, nxt - addr)  # its bytes and the gap after them
        if items and items[0][0] > base:  # bytes before the first input: the first file's alignment
            by_file[items[0][2]] = by_file.get(items[0][2], 0) + items[0][0] - base

    pending: str | None = None  # an input section name whose numbers are on the next line
    for line in lines[start + 1:]:
        out = _OUT_SECTION.match(line)
        if out and not line.startswith(" "):
            close()
            current, items, pending = (out.group(1) if out.group(1) in sections else None), [], None
            continue
        if current is None:
            continue
        fill = _FILL.match(line)
        if fill:
            continue  # attributed with the gaps above
        if pending is not None:
            cont = _IN_CONT.match(line)
            pending = None
            if cont and int(cont.group(2), 16):
                items.append((int(cont.group(1), 16), int(cont.group(2), 16), cont.group(3).strip()))
            continue
        inp = _IN_SECTION.match(line)
        if inp and not inp.group(1).startswith("*") and not inp.group(1).startswith("0x"):
            if inp.group(2) is None:
                pending = inp.group(1)
            elif int(inp.group(3), 16):
                items.append((int(inp.group(2), 16), int(inp.group(3), 16), inp.group(4).strip()))
    close()
    parts = {p: 0 for p in SIZE_PARTS}
    for f, n in by_file.items():
        parts[size_part(f)] += n
    size = elf_size(elf)
    total = sum(s for _, s in sections.values())
    if sum(parts.values()) != total or total != size.text + size.data:
        raise BuildError(f"size breakdown of {elf}: parts sum to {sum(parts.values())} B, loaded sections to "
                         f"{total} B, text + data is {size.text + size.data} B")
    files = {f: n for f, n in sorted(by_file.items(), key=lambda e: -e[1])}
    return {"elf": str(elf), "text": size.text, "data": size.data, "bss": size.bss, "flash": size.text + size.data,
            "parts": parts, "files": files}


def format_size(b: dict) -> str:
    parts = ", ".join(f"{name.replace('_', '/')} {n:,} B" for name, n in b["parts"].items())
    return f"flash {b['flash']:,} B = {parts}"


VERIFY_LEVELS = ("full", "minimal")


def _makefile(board: Board, out: Path, opt: str, kset: _CmsisNN | None = None, npu: _EthosU | None = None,
              verify: str = "full", symbol: str = "model") -> str:
    fw = out / "fw"
    inc = [f"-I{FIRMWARE}", f"-I{FIRMWARE / 'include'}", f"-I{out}"]
    cxx = [*board.cflags, opt, *CXXFLAGS, *inc, *(kset.cxx_includes if kset else []), *(npu.cxx_flags if npu else []),
           *board.define_flags, *(["-DTORCHMCU_VERIFY=0"] if verify == "minimal" else []),
           *([f"-DTMCU_MODEL_SYMBOL={symbol}"] if symbol != serialize.DEFAULT_SYMBOL else [])]
    cc = [*board.cflags, opt, *CFLAGS, *inc, *board.define_flags]
    table = kset.table if kset else out / "kernel_table.cc"
    sources = [*runtime_sources(), *(kset.kernel_sources if kset else []), *(npu.sources if npu else []),
               FIRMWARE / "app" / "main_firmware.cc", *board_sources(), table, out / "model_pte.c",
               out / "model_arenas.c"]
    objs = []
    rules = []
    for src in sources:
        rel = src.relative_to(REPO) if src.is_relative_to(REPO) else Path("model") / src.name
        obj = fw / "obj" / rel.with_suffix(".o")
        objs.append(obj)
        compiler, flags = ("$(CC)", "$(CFLAGS)") if src.suffix == ".c" else ("$(CXX)", "$(CXXFLAGS)")
        rules.append(f"{obj}: {src} {fw / 'Makefile'} | $(DIRS)\n\t@mkdir -p $(@D)\n\t{compiler} {flags} -MMD -MP -c $< -o $@\n")
    if npu:  # the driver's C sources, with its own flags (its warnings are not ours)
        for src in npu.driver_sources:
            obj = fw / "obj" / ETHOSU_OBJ_DIR / src.with_suffix(".o").name
            objs.append(obj)
            rules.append(f"{obj}: {src} {fw / 'Makefile'}\n\t@mkdir -p $(@D)\n\t$(CC) $(NPU_CFLAGS) -MMD -MP -c $< -o $@\n")
    libs = [kset.library] if kset else []
    if kset:  # CMSIS-NN, built once per board and flags into a cache outside OUT
        rules.append(f"{kset.library}:\n\t$(MAKE) -f {kset.library.parent / 'Makefile'}\n")
    lines = [
        f"# Generated by `torchmcu build` for board {board.name}.",
        f"# Kernels: {kset.describe() if kset else 'portable'}.",
        f"# Program verification at load: {verify}.",
        *([f"# Delegate: {npu.describe()}."] if npu else []),
        f"CC := {CROSS}gcc",
        f"CXX := {CROSS}g++",
        f"CFLAGS := {' '.join(cc)}",
        f"CXXFLAGS := {' '.join(cxx)}",
        f"NPU_CFLAGS := {' '.join([*board.cflags, opt, *npu.driver_cflags]) if npu else ''}",
        f"LDFLAGS := {' '.join(board.ldflags(fw / 'firmware.ld'))} -Wl,-Map={fw / 'firmware.map'}",
        f"OBJS := {' '.join(str(o) for o in objs)}",
        "DIRS :=",
        "",
        f"LIBS := {' '.join(str(lib) for lib in libs)}",
        "",
        f"{out / 'firmware.elf'}: $(OBJS) $(LIBS) {fw / 'firmware.ld'} {fw / 'Makefile'}",
        "\t$(CXX) $(OBJS) $(LIBS) $(LDFLAGS) -o $@",
        "",
        *rules,
        "-include $(OBJS:.o=.d)",
        "",
    ]
    return "\n".join(lines)


def build_firmware(out_dir: str | Path, board: str | Board | None = None, opt: str = "-Os",
                   jobs: int | None = None, verbose: bool = False, kernels: str = "portable",
                   verify: str = "full") -> Path:
    """Build OUT/firmware.elf for the board the model was compiled for.

    kernels: "portable" (the project's own) or "cmsis-nn": the int8 ops
    CMSIS-NN has kernels for run on it (firmware/kernels/cmsis_nn/), the rest
    on the portable kernels; CMSIS-NN comes from $TORCHMCU_CMSIS_NN_DIR. The
    kernel of each op is recorded in OUT/fw/kernels.txt.

    verify: "full" (default) checks the program completely when it loads (a
    bad one gets an error code); "minimal" builds the runtime for trusted
    programs (TORCHMCU_VERIFY=0, core/program.h Verification::kMinimal): the
    program compiled into this image is loaded without the verifier and the
    kernels' checks, which are left out of the image. Minimal verification
    at load is safe only because the program is the one `torchmcu compile`
    wrote and the build links it in."""
    if verify not in VERIFY_LEVELS:
        raise BuildError(f"unknown verification {verify!r}; choose one of {', '.join(VERIFY_LEVELS)}")
    if kernels not in serialize.KERNEL_SETS:
        raise BuildError(f"unknown kernel set {kernels!r}; choose one of {', '.join(serialize.KERNEL_SETS)}")
    out = Path(out_dir).resolve()
    meta_path = out / "model.json"
    if not meta_path.is_file():
        raise BuildError(f"{out} is not a compiled model (no model.json); run `torchmcu compile` first")
    meta = json.loads(meta_path.read_text())
    board = board if isinstance(board, Board) else load_board(board or meta["board"])
    if board.core.arch == "xtensa":  # Cadence's compiler and nnlib (the hifi kernel set): torchmcu.hifi.build
        from .hifi.build import build_firmware as build_xtensa

        return build_xtensa(out, board, opt)
    _require(CROSS + "g++")
    fw = out / "fw"
    fw.mkdir(exist_ok=True)
    arenas = {a["section"]: a["name"] for a in meta["arenas"]}
    _write_if_changed(fw / "firmware.ld", linker_script(board, arenas, meta.get("program_memory")))
    codes = _program_codes(out)
    npu = _EthosU(board) if serialize.DELEGATE_CODE in codes else None  # BuildError without the driver
    kset = _CmsisNN(board, out, codes) if kernels == "cmsis-nn" else None
    if kset:
        kset.write_library_makefile()
        _write_if_changed(kset.table, serialize.kernel_table_source(codes, kernels))
    cmsis = set(serialize.available_kernels(kernels)) if kset else set()
    _write_if_changed(fw / "kernels.txt", f"# kernels: {kset.describe() if kset else 'portable'}\n" + "".join(
        f"{c} {'ethos-u' if c == serialize.DELEGATE_CODE else 'cmsis-nn' if c in cmsis else 'portable'}\n"
        for c in codes))
    _write_if_changed(fw / "Makefile", _makefile(board, out, opt, kset, npu, verify,
                                                 meta.get("symbol", serialize.DEFAULT_SYMBOL)))
    cmd = ["make", "-s", "-f", str(fw / "Makefile"), f"-j{jobs or os.cpu_count() or 1}"]
    proc = subprocess.run(cmd, capture_output=not verbose, text=True)
    if proc.returncode != 0:
        log = f"{proc.stdout or ''}{proc.stderr or ''}"
        overflow = re.search(r"region [`'](\w+)' overflowed by (\d+) bytes", log)
        if overflow:
            raise BuildError(f"the firmware does not fit board {board.name}: memory {overflow.group(1)} "
                             f"overflowed by {int(overflow.group(2)):,} bytes\n{log}")
        raise BuildError(f"firmware build failed ({' '.join(cmd)}):\n{log}")
    elf = out / "firmware.elf"
    (out / "size.json").write_text(json.dumps({**size_breakdown(elf, fw / "firmware.map"), "verify": verify},
                                              indent=2) + "\n")
    return elf


def _program_codes(out: Path) -> list[str]:
    """The op codes of the compiled program (OUT/kernels.txt, written by compile)."""
    listing = out / "kernels.txt"
    if not listing.is_file():
        raise BuildError(f"{listing} not found; run `torchmcu compile` again")
    return [line.strip() for line in listing.read_text().splitlines() if line.strip()]


def kernel_set(out_dir: str | Path) -> dict[str, str]:
    """The kernel set of the last build of OUT: op code -> "portable" | "cmsis-nn"."""
    listing = Path(out_dir) / "fw" / "kernels.txt"
    return dict(line.split() for line in listing.read_text().splitlines() if line and not line.startswith("#"))


# ---------------------------------------------------------------------------------------------
# CMSIS-NN (kernels="cmsis-nn"). Third-party code: never in this repository. The
# user's checkout is named by TORCHMCU_CMSIS_NN_DIR (its root: Include/, Source/);
# CMSIS-NN releases before 5.0 also include CMSIS-Core's cmsis_compiler.h, found
# through TORCHMCU_CMSIS_CORE_DIR (a CMSIS-Core include directory, or the root
# of a CMSIS_5 / CMSIS_6 checkout). Its C sources are compiled once per board
# and flags into build/cmsis-nn/<board>-<hash>/libcmsis-nn.a, at -O2 as TFLM's
# release builds, with its own flags (its warnings are not errors); the
# firmware links that archive and --gc-sections keeps what the kernels call.

CMSIS_NN_ENV = "TORCHMCU_CMSIS_NN_DIR"
CMSIS_CORE_ENV = "TORCHMCU_CMSIS_CORE_DIR"
CMSIS_NN_CFLAGS = ["-O2", "-ffunction-sections", "-fdata-sections"]
CMSIS_NN_CACHE = REPO / "build" / "cmsis-nn"


def cmsis_nn_dir() -> Path:
    value = os.environ.get(CMSIS_NN_ENV)
    if not value:
        from .deps import cached_cmsis_nn_dir

        cached = cached_cmsis_nn_dir()  # the pack `torchmcu deps cmsis-nn` fetched, if any
        if cached is not None:
            return cached
        raise BuildError(f"kernels='cmsis-nn' needs CMSIS-NN: set {CMSIS_NN_ENV} to the root of a CMSIS-NN "
                         "checkout (the directory holding Include/ and Source/, e.g. a clone of "
                         "https://github.com/ARM-software/CMSIS-NN), or fetch its pack with "
                         "`torchmcu deps cmsis-nn`; torchmcu does not ship it")
    root = Path(value).expanduser().resolve()
    if not (root / "Include" / "arm_nnfunctions.h").is_file() or not (root / "Source").is_dir():
        raise BuildError(f"{CMSIS_NN_ENV}={value} is not a CMSIS-NN checkout: expected "
                         f"{root / 'Include' / 'arm_nnfunctions.h'} and {root / 'Source'}")
    return root


def cmsis_core_include() -> Path | None:
    value = os.environ.get(CMSIS_CORE_ENV)
    if not value:
        return None
    root = Path(value).expanduser().resolve()
    for inc in (root, root / "Include", root / "CMSIS" / "Core" / "Include"):
        if (inc / "cmsis_compiler.h").is_file():
            return inc
    raise BuildError(f"{CMSIS_CORE_ENV}={value} holds no cmsis_compiler.h (give a CMSIS-Core include "
                     "directory, or the root of a CMSIS_5 / CMSIS_6 checkout)")


def cmsis_nn_sources(root: Path) -> list[Path]:
    """CMSIS-NN's integer kernels: Source/**/*.c but the float API (*_f16.c,
    *_f32.c, built only with ARM_NN_ENABLE_F16/F32)."""
    return sorted(p for p in (root / "Source").rglob("*.c") if not p.stem.endswith(("_f16", "_f32")))


class _CmsisNN:
    """Where CMSIS-NN comes from and goes for one firmware build."""

    def __init__(self, board: Board, out: Path, codes: list[str]) -> None:
        self.root = cmsis_nn_dir()
        self.core = cmsis_core_include()
        self.board = board
        includes = [self.root / "Include", *([self.core] if self.core else [])]
        self.cxx_includes = [f"-isystem{p}" for p in includes]  # its headers' warnings are not ours
        self.cflags = [*board.cflags, *CMSIS_NN_CFLAGS, *(f"-I{p}" for p in includes)]
        self.sources = cmsis_nn_sources(self.root)
        self.kernel_sources = sorted((FIRMWARE / "kernels" / "cmsis_nn").glob("*.cc"))
        self.table = out / "fw" / "kernel_table_cmsis_nn.cc"
        digest = hashlib.sha256(" ".join(self.cflags).encode())
        for f in [*self.sources, *sorted((self.root / "Include").rglob("*.h"))]:
            digest.update(str(f.relative_to(self.root)).encode())
            digest.update(f.read_bytes())
        self.library = CMSIS_NN_CACHE / f"{board.name}-{digest.hexdigest()[:16]}" / "libcmsis-nn.a"

    def describe(self) -> str:
        core = f", CMSIS-Core {self.core}" if self.core else ""
        return f"cmsis-nn (CMSIS-NN {self.root}{core}; the other ops portable)"

    def write_library_makefile(self) -> None:
        cache = self.library.parent
        cache.mkdir(parents=True, exist_ok=True)
        objs = [cache / "obj" / src.relative_to(self.root / "Source").with_suffix(".o") for src in self.sources]
        # Each file is written under a temporary name, then renamed: builds of
        # the same cache running at once never see a partial object or archive.
        rules = [f"{obj}: {src}\n\t@mkdir -p $(@D)\n\t$(CC) $(CFLAGS) -c $< -o $@.$$$$.tmp && mv -f $@.$$$$.tmp $@\n"
                 for obj, src in zip(objs, self.sources)]
        text = "\n".join([
            f"# Generated by `torchmcu build`: CMSIS-NN ({self.root}) for board {self.board.name}.",
            f"CC := {CROSS}gcc",
            f"AR := {CROSS}ar",
            f"CFLAGS := {' '.join(self.cflags)}",
            f"OBJS := {' '.join(str(o) for o in objs)}",
            "",
            f"{self.library}: $(OBJS)",
            "\t$(AR) rcs $@.$$$$.tmp $(OBJS) && mv -f $@.$$$$.tmp $@",
            "",
            *rules,
        ])
        _write_if_changed(cache / "Makefile", text)


# ---------------------------------------------------------------------------------------------
# The Ethos-U delegate (a program with ETHOS_U ops). Third-party code: never in
# this repository. TORCHMCU_ETHOSU_DRIVER_DIR names the Ethos-U core driver's
# sources (the root of ARM-software/ethos-u-core-driver or of Zephyr's
# hal_ethos_u module: include/, src/). Its C sources for the board's NPU
# (driver, PMU, the U55/U65 or U85 device layer) are built into the firmware
# with the driver's own defines (ETHOSU55, ETHOSU_MACS=..., logging off: no
# stdio) and its own flags, beside our delegate (firmware/delegates/ethos_u/)
# and the board's NPU support (firmware/boards/npu/). The driver includes
# CMSIS-Core's cmsis_compiler.h for two hints (WFE, SEV): from
# TORCHMCU_CMSIS_CORE_DIR when set, else our own firmware/delegates/ethos_u/cmsis/.

ETHOSU_DRIVER_ENV = "TORCHMCU_ETHOSU_DRIVER_DIR"
ETHOSU_OBJ_DIR = "ethos-u-driver"
DELEGATE_SOURCES = ["delegates/ethos_u/blob.cc", "delegates/ethos_u/ethos_u.cc", "boards/npu/ethos_u.cc"]


def ethosu_driver_dir() -> Path:
    value = os.environ.get(ETHOSU_DRIVER_ENV)
    if not value:
        raise BuildError(f"the program runs partitions on the Ethos-U NPU (op ETHOS_U), which needs the Ethos-U core "
                         f"driver: set {ETHOSU_DRIVER_ENV} to its sources (the root of a checkout of "
                         "https://github.com/ARM-software/ethos-u-core-driver or of Zephyr's hal_ethos_u module, "
                         "holding include/ethosu_driver.h and src/ethosu_driver.c); torchmcu does not ship it")
    root = Path(value).expanduser().resolve()
    for need in ("include/ethosu_driver.h", "include/pmu_ethosu.h", "src/ethosu_driver.c", "src/ethosu_pmu.c"):
        if not (root / need).is_file():
            raise BuildError(f"{ETHOSU_DRIVER_ENV}={value} is not the Ethos-U core driver: {root / need} is missing")
    return root


class _EthosU:
    """Where the Ethos-U driver comes from and how it is built for one firmware."""

    def __init__(self, board: Board) -> None:
        if board.npu is None:
            raise BuildError(f"the program has Ethos-U calls but board {board.name} has no NPU ([npu] table)")
        self.root = ethosu_driver_dir()
        arch, macs = board.npu.accelerator.removeprefix("ethos-").split("-")
        device = "ethosu_device_u85.c" if arch == "u85" else "ethosu_device_u55_u65.c"
        self.driver_sources = [self.root / "src" / f for f in ("ethosu_driver.c", "ethosu_pmu.c", device)]
        missing = [p for p in self.driver_sources if not p.is_file()]
        if missing:
            raise BuildError(f"{ETHOSU_DRIVER_ENV}: {missing[0]} is missing (needed for {board.npu.accelerator})")
        core = cmsis_core_include()
        cmsis = core if core else FIRMWARE / "delegates" / "ethos_u" / "cmsis"
        defines = ["-DETHOSU", f"-DETHOSU_ARCH={arch}", f"-DETHOS{arch.upper()}", f"-DETHOSU_MACS={macs}"]
        self.driver_cflags = ["-std=gnu11", "-ffunction-sections", "-fdata-sections", *defines,
                              "-DETHOSU_LOG_ENABLE=0", f"-I{self.root / 'include'}", f"-I{self.root / 'src'}",
                              f"-I{cmsis}"]
        self.cxx_flags = [*defines, f"-isystem{self.root / 'include'}"]
        self.sources = [FIRMWARE / s for s in DELEGATE_SOURCES]
        self.accelerator = board.npu.accelerator

    def describe(self) -> str:
        return f"ethos-u ({self.accelerator}; Ethos-U core driver {self.root})"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def build_host_runner(sanitize: bool = True, cache_dir: str | Path | None = None,
                      ethos_u: Board | None = None, verify: str = "full") -> Path:
    """The host runner `tmcu_host PROGRAM.pte IO.bin`, every kernel linked,
    cached by the hash of its sources and flags. With `ethos_u` (a board with
    an NPU), also the Ethos-U delegate's load-time check for that NPU, whose
    invoke reports that the host has none (firmware/host/ethos_u_host.cc):
    for tests of the delegate's validation. Without, a program with Ethos-U
    calls is refused at load (KernelMissing). `verify` as build_firmware's."""
    if verify not in VERIFY_LEVELS:
        raise BuildError(f"unknown verification {verify!r}; choose one of {', '.join(VERIFY_LEVELS)}")
    cxx = _require("g++")
    sources = [*runtime_sources(), FIRMWARE / "host" / "main_host.cc", FIRMWARE / "host" / "platform_host.cc"]
    flags = ["-std=c++17", "-O1", "-g", "-fno-rtti", "-fno-exceptions", "-Wall", "-Wextra", "-Werror",
             f"-I{FIRMWARE}", f"-I{FIRMWARE / 'include'}"]
    if sanitize:
        flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    if verify == "minimal":
        flags.append("-DTORCHMCU_VERIFY=0")
    codes = None
    if ethos_u is not None:
        if ethos_u.npu is None:
            raise BuildError(f"board {ethos_u.name} has no NPU")
        sources += [FIRMWARE / "delegates" / "ethos_u" / "blob.cc", FIRMWARE / "host" / "ethos_u_host.cc"]
        flags += [f"-D{k}={v}" for k, v in ethos_u.npu.defines.items()]
        codes = [*serialize.available_kernels(), serialize.DELEGATE_CODE]
    table = serialize.kernel_table_source(codes)
    digest = hashlib.sha256()
    for s in sources:
        digest.update(s.read_bytes())
    for h in sorted(FIRMWARE.rglob("*.h")):
        digest.update(h.read_bytes())
    digest.update(table.encode())
    digest.update(" ".join(flags).encode())
    cache = Path(cache_dir) if cache_dir else REPO / "build" / "host"
    variant = ("_ethos_u" if ethos_u is not None else "") + ("_minimal" if verify == "minimal" else "")
    exe = cache / f"tmcu_host{variant}-{digest.hexdigest()[:16]}"
    if exe.exists():
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    table_src = cache / f"kernel_table{variant or '_all'}.cc"
    table_src.write_text(table)
    tmp = exe.with_suffix(".tmp")
    proc = subprocess.run([cxx, *flags, *map(str, sources), str(table_src), "-o", str(tmp)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"host runner build failed:\n{proc.stderr}")
    tmp.rename(exe)
    return exe
