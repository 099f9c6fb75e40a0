"""Firmware builds of a compiled model.

`build_firmware(out_dir)` writes OUT/fw/Makefile (so a user can rebuild or
read the exact commands) and runs it: the runtime core, the portable
kernels (only those in the generated kernel table survive --gc-sections),
the board support and the generated model sources, linked with the
board's generated linker script into OUT/firmware.elf. A kernel set other
than the portable one (`kernels="cmsis-nn"`) and the delegates whose op
codes the program has add their part (torchmcu.backends: build_parts); a
backend that owns the board's toolchain (the HiFi DSP's) builds the whole
firmware instead.

`app=[main.c, ...]`: the application's own sources instead of the
line-protocol app's main (the model's C API, NAME.h, is on their include
path; main's return value is the exit status under simulation).
`build_library(out_dir)`: no board support and no main, a static library
OUT/lib/libtorchmcu_NAME.a and OUT/lib/include/ for one's own build system.

The stack: every object is compiled with -fstack-usage; after the link,
torchmcu.builder.stack computes the worst case over the linked call graph,
and the image is linked again with the stack sized to that figure plus a
margin (`stack=` overrides). size.json and the build's output give the
flash and one total-RAM line (arenas + state + runtime + stack + app data),
which report.txt and report.json get too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import backends
from ..backends.base import BuildBackend, BuildParts
from ..boards import Board, board_sources, load_board
from ..errors import BuildError
from ..linker import linker_script
from ..program import c_api, serialize
from ..sources import CFLAGS, CXXFLAGS, FIRMWARE, REPO, runtime_sources
from ..toolchain import CROSS, require, write_if_changed
from .host import VERIFY_LEVELS
from .kernel_table import available_kernels, delegate_codes, kernel_sets, kernel_table_source
from .fast_paths import OPTS
from .fast_paths import defines as fast_defines
from .size import format_kernel_code, format_ram, format_size, kernel_code, ram_breakdown, size_breakdown
from .stack import format_stack, stack_with_margin, worst_case

# -fstack-usage writes OBJ.su, -fcallgraph-info=su OBJ.ci (the .su lines' assembler names): builder.stack.
STACK_FLAGS = ["-fstack-usage", "-fcallgraph-info=su"]
APP_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".S", ".s"}


def _model_sources(out: Path, symbol: str) -> list[Path]:
    return [out / "model_pte.c", out / "model_arenas.c", out / f"{symbol}.cc"]


def object_cache_root() -> Path | None:
    """Where the objects of the runtime, kernels and board support are
    shared between builds: TORCHMCU_CACHE_DIR, else $XDG_CACHE_HOME/torchmcu
    or ~/.cache/torchmcu (objects/<board>-<hash of the compiler and flags>/).
    TORCHMCU_OBJECT_CACHE=0: every build compiles its own, under OUT/fw/obj."""
    if os.environ.get("TORCHMCU_OBJECT_CACHE", "1") == "0":
        return None
    root = os.environ.get("TORCHMCU_CACHE_DIR")
    if root:
        return Path(root) / "objects"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "torchmcu" / "objects"


def _shared_dir(board: Board, flags: list[list[str]]) -> Path | None:
    root = object_cache_root()
    if root is None:
        return None
    digest = hashlib.sha256("\0".join([CROSS, *(" ".join(f) for f in flags)]).encode()).hexdigest()[:16]
    return root / f"{board.name}-{digest}"


# A shared object is compiled under a temporary name and renamed into place with
# its stack-usage, call-graph and dependency files (the object last): builds
# running at once never read a partial one, and the same flags give the same bytes.
_SHARED_RULE = ("\t{compiler} {flags} -MMD -MP -MT $@ -MF $@.$$$$.d -c $< -o $@.$$$$.tmp && "
                "{{ [ ! -f $@.$$$$.su ] || mv -f $@.$$$$.su $(@:.o=.su); }} && "
                "{{ [ ! -f $@.$$$$.ci ] || mv -f $@.$$$$.ci $(@:.o=.ci); }} && "
                "mv -f $@.$$$$.d $(@:.o=.d) && mv -f $@.$$$$.tmp $@\n")


def _makefile(board: Board, out: Path, opt: str, parts: list[BuildParts], verify: str = "full",
              symbol: str = "model", app: list[Path] | None = None, lib: Path | None = None,
              fast: list[str] | None = None) -> tuple[str, list[Path]]:
    """The Makefile of a firmware build (or, with `lib`, of the static
    library at that path) and its objects. `fast`: the -D flags of the fast
    paths the program leaves out (fast_paths.defines)."""
    fw = out / "fw"
    app = list(app or [])
    app_dirs = list(dict.fromkeys(p.parent for p in app))
    inc = [f"-I{FIRMWARE}", f"-I{FIRMWARE / 'include'}", f"-I{out}", *(f"-I{d}" for d in app_dirs)]
    stack = [] if lib else STACK_FLAGS
    cxx = [*board.cflags, opt, *CXXFLAGS, *stack, *inc, *(f for p in parts for f in p.cxx_flags),
           *board.define_flags, *(fast or []), *(["-DTORCHMCU_VERIFY=0"] if verify == "minimal" else []),
           *([f"-DTMCU_MODEL_SYMBOL={symbol}"] if symbol != serialize.DEFAULT_SYMBOL else [])]
    cc = [*board.cflags, opt, *CFLAGS, *stack, *inc, *board.define_flags]
    # The application's own sources: the board's flags, its own language standard, no -Werror.
    app_cc = [*board.cflags, opt, "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra", *stack, *inc,
              *board.define_flags]
    app_cxx = [*app_cc, "-std=c++17", "-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics"]
    table = next((p.kernel_table for p in parts if p.kernel_table), out / "kernel_table.cc")
    entry = [] if lib else (app or [FIRMWARE / "app" / "main_firmware.cc"])
    board_part = [] if lib else board_sources()
    # The runtime, the kernels and the board support read no generated header: their objects are
    # the same for every model built with these flags, and are shared between builds (object_cache_root).
    common = [s for s in (*runtime_sources(), *(s for p in parts for s in p.sources), *board_part)
              if s.is_relative_to(REPO)]
    shared_cxx = [f for f in cxx if f not in inc[2:]]
    shared_cc = [f for f in cc if f not in inc[2:]]
    shared = None if lib else _shared_dir(board, [shared_cxx, shared_cc])
    sources = [*common, *entry, table, *_model_sources(out, symbol)]
    objs = []
    rules = []
    for src in sources:
        if src in app:
            rel = Path("app") / f"{app.index(src)}_{src.name}"  # two app files of one name stay apart
        else:
            rel = src.relative_to(REPO) if src.is_relative_to(REPO) else Path("model") / src.name
        c_like = src.suffix in (".c", ".S", ".s")
        if shared is not None and src in common:
            obj = shared / rel.with_suffix(".o")
            objs.append(obj)
            compiler, flags = ("$(CC)", "$(SHARED_CFLAGS)") if c_like else ("$(CXX)", "$(SHARED_CXXFLAGS)")
            rules.append(f"{obj}: {src}\n\t@mkdir -p $(@D)\n" + _SHARED_RULE.format(compiler=compiler, flags=flags))
            continue
        obj = fw / ("obj-lib" if lib else "obj") / rel.with_suffix(".o")
        objs.append(obj)
        if src in app:
            compiler, flags = ("$(CC)", "$(APP_CFLAGS)") if c_like else ("$(CXX)", "$(APP_CXXFLAGS)")
        else:
            compiler, flags = ("$(CC)", "$(CFLAGS)") if c_like else ("$(CXX)", "$(CXXFLAGS)")
        rules.append(f"{obj}: {src} {fw / ('lib.mk' if lib else 'Makefile')} | $(DIRS)\n\t@mkdir -p $(@D)\n"
                     f"\t{compiler} {flags} -MMD -MP -c $< -o $@\n")
    foreign_flags = []
    for k, p in enumerate(q for q in parts if q.foreign_sources):  # a vendor's C sources: its own flags
        var = f"FOREIGN{k}_CFLAGS"
        foreign_flags.append(f"{var} := {' '.join([*board.cflags, opt, *p.foreign_cflags])}")
        for src in p.foreign_sources:
            obj = fw / "obj" / "third_party" / p.foreign_name / src.with_suffix(".o").name
            objs.append(obj)
            rules.append(f"{obj}: {src} {fw / 'Makefile'}\n\t@mkdir -p $(@D)\n\t$(CC) $({var}) -MMD -MP -c $< -o $@\n")
    libs = [library for p in parts for library in p.libraries]
    for library in libs:  # built once per board and flags into a cache outside OUT, by its own Makefile
        rules.append(f"{library}:\n\t$(MAKE) -f {library.parent / 'Makefile'}\n")
    if lib:
        target = [f"{lib}: $(OBJS) {fw / 'lib.mk'}", "\trm -f $@", "\t$(AR) rcs $@ $(OBJS)"]
    else:
        target = [f"{out / 'firmware.elf'}: $(OBJS) $(LIBS) {fw / 'firmware.ld'} {fw / 'Makefile'}",
                  "\t$(CXX) $(OBJS) $(LIBS) $(LDFLAGS) -o $@"]
    lines = [
        f"# Generated by `torchmcu build{' --lib' if lib else ''}` for board {board.name}.",
        *[f"# {p.describe}." for p in parts],
        *([] if any(p.kernel_table for p in parts) else ["# Kernels: portable."]),
        f"# Program verification at load: {verify}.",
        *([f"# Application: {' '.join(str(a) for a in app)}."] if app else []),
        f"CC := {CROSS}gcc",
        f"CXX := {CROSS}g++",
        f"AR := {CROSS}ar",
        f"CFLAGS := {' '.join(cc)}",
        f"CXXFLAGS := {' '.join(cxx)}",
        *([f"# Shared objects (runtime, kernels, board support): {shared}",
           f"SHARED_CFLAGS := {' '.join(shared_cc)}", f"SHARED_CXXFLAGS := {' '.join(shared_cxx)}"]
          if shared is not None else []),
        f"APP_CFLAGS := {' '.join(app_cc)}",
        f"APP_CXXFLAGS := {' '.join(app_cxx)}",
        *foreign_flags,
        f"LDFLAGS := {' '.join(board.ldflags(fw / 'firmware.ld'))} -Wl,-Map={fw / 'firmware.map'}",
        f"OBJS := {' '.join(str(o) for o in objs)}",
        "DIRS :=",
        "",
        f"LIBS := {' '.join(str(library) for library in libs)}",
        "",
        *target,
        "",
        *rules,
        "-include $(OBJS:.o=.d)",
        "",
    ]
    return "\n".join(lines), objs


def _parts(board: Board, out: Path, kernels: str) -> tuple[list[BuildParts], dict[str, str], list[str]]:
    """The kernel set's and the delegates' parts of the build, which of them
    runs each op code, and the program's op codes."""
    codes = _program_codes(out)
    parts = []
    taken: dict[str, str] = {}  # op code -> the kernel set or delegate that runs it
    if kernels != "portable":
        kset = backends.by_kernel_set(kernels)
        parts.append(kset.build_parts(board, out, codes))  # BuildError without the library
        taken.update({c: kernels for c in available_kernels(kernels)})
    for code in delegate_codes():
        if code in codes:  # BuildError without the delegate's driver
            delegate = backends.by_delegate_code(code)
            parts.append(delegate.build_parts(board, out, codes))
            taken[code] = delegate.name
    for p in parts:
        if p.kernel_table:
            write_if_changed(p.kernel_table, kernel_table_source(codes, kernels))
    return parts, taken, codes


def _check_args(out_dir: str | Path, verify: str, kernels: str, optimize: str = "speed") -> tuple[Path, dict]:
    if optimize not in OPTS:
        raise BuildError(f"unknown optimisation goal {optimize!r}; choose one of {', '.join(OPTS)}")
    if verify not in VERIFY_LEVELS:
        raise BuildError(f"unknown verification {verify!r}; choose one of {', '.join(VERIFY_LEVELS)}")
    if kernels not in kernel_sets():
        raise BuildError(f"unknown kernel set {kernels!r}; choose one of {', '.join(kernel_sets())}")
    out = Path(out_dir).resolve()
    meta_path = out / "model.json"
    if not meta_path.is_file():
        raise BuildError(f"{out} is not a compiled model (no model.json); run `torchmcu compile` first")
    meta = json.loads(meta_path.read_text())
    symbol = meta.get("symbol", serialize.DEFAULT_SYMBOL)
    if not (out / f"{symbol}.cc").is_file():
        raise BuildError(f"{out / (symbol + '.cc')} not found: compiled by an older torchmcu; run `torchmcu compile` "
                         "again")
    return out, meta


# What newlib's stdio and heap need from an OS (the firmware has none) or from the heap wraps
# (boards.HEAP_FUNCTIONS): an application's printf, puts, fopen or malloc ends in these.
_LIBC_SYSCALLS = ("_write", "_read", "_close", "_lseek", "_fstat", "_isatty", "_sbrk", "_kill", "_getpid", "_exit",
                  "_open", "end")
_UNDEFINED = re.compile(r"undefined reference to [`'](\w+)'")


def libc_hint(log: str) -> str | None:
    """One line for a link that failed on the C library's system calls or the
    heap (the application used printf or malloc), naming what to use instead."""
    missing = list(dict.fromkeys(m for m in _UNDEFINED.findall(log)
                                 if m in _LIBC_SYSCALLS or m.startswith("__wrap_")))
    if not missing:
        return None
    return (f"the application uses the C library's stdio or heap (printf, puts, malloc, ...), which this firmware "
            f"does not provide (undefined: {', '.join(missing[:6])}{', ...' if len(missing) > 6 else ''}): print "
            "with tmcu_platform_write(text, bytes) from boards/platform.h (the board's UART) and use static "
            "buffers instead of the heap; see \"Your own main.c\" in the README and examples/c_api/main.c")


def _make(fw: Path, makefile: str, board: Board, meta: dict, jobs: int | None, verbose: bool) -> None:
    cmd = ["make", "-s", "-f", str(fw / makefile), f"-j{jobs or os.cpu_count() or 1}"]
    proc = subprocess.run(cmd, capture_output=not verbose, text=True)
    if proc.returncode != 0:
        log = f"{proc.stdout or ''}{proc.stderr or ''}"
        overflow = re.search(r"region [`'](\w+)' overflowed by (\d+) bytes", log)
        if overflow:
            # Quantizing helps only a model that is not quantized already.
            hint = ("; int8 quantization makes weights and activations 4x smaller (--quant int8)"
                    if meta.get("quant", "float32") == "float32" else "")
            raise BuildError(f"the firmware does not fit board {board.name}: memory {overflow.group(1)} "
                             f"overflowed by {int(overflow.group(2)):,} bytes{hint}\n{log}")
        libc = libc_hint(log)
        if libc:  # one line; the linker's own messages in a file beside the Makefile
            (fw / "link.log").write_text(log)
            raise BuildError(f"{libc} (the linker's messages: {fw / 'link.log'})")
        raise BuildError(f"firmware build failed ({' '.join(cmd)}):\n{log}")


def build_firmware(out_dir: str | Path, board: str | Board | None = None, opt: str = "-Os",
                   jobs: int | None = None, verbose: bool = False, kernels: str = "portable",
                   verify: str = "full", app: list[str | Path] | None = None, stack: int | None = None,
                   optimize: str = "speed") -> Path:
    """Build OUT/firmware.elf for the board the model was compiled for.

    kernels: "portable" (the project's own) or another kernel set, e.g.
    "cmsis-nn": the ops CMSIS-NN has kernels for run on it
    (firmware/kernels/cmsis_nn/), the rest on the portable kernels; CMSIS-NN
    comes from $TORCHMCU_CMSIS_NN_DIR. The kernel of each op is recorded in
    OUT/fw/kernels.txt.

    verify: "full" (default) checks the program completely when it loads (a
    bad one gets an error code); "minimal" builds the runtime for trusted
    programs (TORCHMCU_VERIFY=0, core/program.h Verification::kMinimal): the
    program compiled into this image is loaded without the verifier and the
    kernels' checks, which are left out of the image. Minimal verification
    at load is safe only because the program is the one `torchmcu compile`
    wrote and the build links it in.

    app: the application's sources (C, C++, assembly) instead of the
    line-protocol app; they include NAME.h and call tmcu_NAME_init/invoke.
    stack: the stack in bytes; default the computed worst case plus a margin
    (builder.stack), or the board's stack_size when it cannot be bounded.

    optimize: "speed" (default: every int8 fast path some op of the program
    can take) or "size" (the size-first build: fast paths whose bytes buy
    too few instructions for this program left out, the rest at -Os;
    builder.fast_paths). `opt`: the compiler's -O flag (and any -D)."""
    out, meta = _check_args(out_dir, verify, kernels, optimize)
    board = board if isinstance(board, Board) else load_board(board or meta["board"])
    owner = backends.firmware_builder(board)
    if owner is not None:  # e.g. an Xtensa DSP: Cadence's compiler and nnlib
        if app:
            raise BuildError(f"--app is for Cortex-M boards; board {board.name} is built by its backend {owner.name}")
        return owner.build_firmware(out, board, opt)
    require(CROSS + "g++")
    app_paths = [Path(a).resolve() for a in app or []]
    for a in app_paths:
        if not a.is_file():
            raise BuildError(f"application source {a} not found")
        if a.suffix not in APP_SUFFIXES:
            raise BuildError(f"application source {a}: expected one of {', '.join(sorted(APP_SUFFIXES))}")
    if stack is not None and (stack <= 0 or stack % 8):
        raise BuildError(f"--stack {stack}: a positive number of bytes, a multiple of 8")
    symbol = meta.get("symbol", serialize.DEFAULT_SYMBOL)
    fw = out / "fw"
    fw.mkdir(exist_ok=True)
    arenas = {a["section"]: a["name"] for a in meta["arenas"]}
    parts, taken, codes = _parts(board, out, kernels)
    described = parts[0].describe if kernels != "portable" else "portable"
    write_if_changed(fw / "kernels.txt", f"# kernels: {described}\n" + "".join(
        f"{c} {taken.get(c, 'portable')}\n" for c in codes))
    text, objs = _makefile(board, out, opt, parts, verify, symbol, app=app_paths, fast=fast_defines(out, optimize))
    write_if_changed(fw / "Makefile", text)

    def link(stack_bytes: int) -> None:
        write_if_changed(fw / "firmware.ld", linker_script(board, arenas, meta.get("program_memory"),
                                                          stack_size=stack_bytes))
        _make(fw, "Makefile", board, meta, jobs, verbose)

    first = stack or meta.get("stack") or board.stack_size
    link(first)
    elf = out / "firmware.elf"
    su = [o.with_suffix(".su") for o in objs if o.with_suffix(".su").is_file()]
    try:
        analysis = worst_case(elf, su, board.core.has_fpu or board.core.mve != "none", fw / "firmware.map",
                              symbol=symbol).as_dict()
    except BuildError as e:  # an image the analysis cannot read: the board's stack, and why
        analysis = {"computed_bytes": None, "unbounded": [f"not analysed: {e}"], "path": [], "handler_path": [],
                    "model_bytes": None, "model_from": f"not analysed: {e}"}
    computed = analysis["computed_bytes"]
    given = stack or meta.get("stack")
    reserved = given or (stack_with_margin(computed) if computed is not None else board.stack_size)
    if reserved != first:
        link(reserved)  # the same objects: only the addresses move
    analysis.update(reserved_bytes=reserved, source="--stack" if given else (
        "computed + margin" if computed is not None else f"board {board.name}'s stack_size (not bounded)"))
    api = (f"{symbol}.o",)
    sizes = size_breakdown(elf, fw / "firmware.map", api)
    sizes["kernel_code"] = kernel_code(elf, fw / "firmware.map", api)
    sizes["optimize"] = optimize
    ram = ram_breakdown(elf, fw / "firmware.map", set(arenas), api,
                        state_bytes=sum(a["size"] for a in meta["arenas"] if a.get("persistent")))
    record = {**sizes, "ram": ram, "stack": analysis, "verify": verify, "kind": "app" if app_paths else "firmware",
              "app": [str(a) for a in app_paths]}
    (out / "size.json").write_text(json.dumps(record, indent=2) + "\n")
    _write_atomically(out / c_api.stack_header_name(symbol), c_api.stack_header(symbol, analysis, board.name,
                                                                                described, opt))
    _report_linked(out, record)
    return elf


def _write_atomically(path: Path, text: str) -> None:
    """A reader (another build, an application's compiler) sees the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def firmware_backend(out_dir: str | Path, board: str | Board | None = None) -> BuildBackend | None:
    """The build half of the backend that builds OUT's whole firmware with its
    own toolchain (its describe_image says what build_firmware made), or None
    when this builder does (OUT/firmware.elf, arm-none-eabi)."""
    if not isinstance(board, Board):
        board = load_board(board or json.loads((Path(out_dir) / "model.json").read_text())["board"])
    return backends.firmware_builder(board)


def build_library(out_dir: str | Path, board: str | Board | None = None, opt: str = "-Os", jobs: int | None = None,
                  verbose: bool = False, kernels: str = "portable", verify: str = "full",
                  optimize: str = "speed") -> Path:
    """OUT/lib/libtorchmcu_NAME.a (the runtime, the kernels the model uses,
    the program, its arenas and its C API, compiled with the board's flags)
    and OUT/lib/include/ (NAME.h, torchmcu/torchmcu.h, model_pte.h,
    model_arenas.h). Link with --gc-sections; the arenas are in sections
    .bss.tmcu_arena_<memory> (a `*(.bss.*)` takes them, or place them)."""
    out, meta = _check_args(out_dir, verify, kernels, optimize)
    board = board if isinstance(board, Board) else load_board(board or meta["board"])
    if board.core.arch != "cortex-m":
        raise BuildError(f"--lib builds for Cortex-M boards; board {board.name} is {board.core.arch}")
    require(CROSS + "g++")
    symbol = meta.get("symbol", serialize.DEFAULT_SYMBOL)
    fw = out / "fw"
    fw.mkdir(exist_ok=True)
    parts, _, _ = _parts(board, out, kernels)
    if any(p.libraries or p.foreign_sources for p in parts):
        raise BuildError("--lib packs torchmcu's own sources; a kernel set or delegate with third-party "
                         "libraries (CMSIS-NN, an NPU driver) is linked by your build: use --kernels portable, "
                         "or `torchmcu build` for a whole firmware")
    lib_dir = out / "lib"
    archive = lib_dir / f"libtorchmcu_{symbol}.a"
    lib_dir.mkdir(exist_ok=True)
    text, _ = _makefile(board, out, opt, parts, verify, symbol, lib=archive, fast=fast_defines(out, optimize))
    write_if_changed(fw / "lib.mk", text)
    _make(fw, "lib.mk", board, meta, jobs, verbose)
    include = lib_dir / "include"
    (include / "torchmcu").mkdir(parents=True, exist_ok=True)
    shutil.copy2(FIRMWARE / "include" / "torchmcu" / "torchmcu.h", include / "torchmcu" / "torchmcu.h")
    for name in (f"{symbol}.h", "model_pte.h", "model_arenas.h"):
        shutil.copy2(out / name, include / name)
    return archive


REPORT_MARK = "Linked (torchmcu build):"


def _report_linked(out: Path, record: dict) -> None:
    """report.json "firmware" and the last section of report.txt: the linked
    flash and the one total-RAM line, so the compile's report says what the
    image really takes."""
    lines = linked_lines(record)
    rj = out / "report.json"
    if rj.is_file():
        report = json.loads(rj.read_text())
        report["firmware"] = {"flash": record["flash"], "flash_parts": record["parts"], "ram": record["ram"],
                              "stack": record["stack"], "kind": record["kind"], "lines": lines}
        rj.write_text(json.dumps(report, indent=2) + "\n")
    rt = out / "report.txt"
    if rt.is_file():
        text = rt.read_text()
        text = text.split("\n" + REPORT_MARK)[0].rstrip("\n") + "\n"
        rt.write_text(text + "\n" + REPORT_MARK + "\n" + "".join(f"  {ln}\n" for ln in lines))


def linked_lines(record: dict) -> list[str]:
    s = record["stack"]
    short = s.get("computed_bytes") is not None and s.get("reserved_bytes", 0) < s["computed_bytes"]
    return [format_size(record), *([format_kernel_code(record["kernel_code"], record["parts"]["runtime"])]
                                   if "kernel_code" in record else []), format_ram(record["ram"]),
            format_stack(s, s.get("reserved_bytes")) + f" ({s.get('source', '')})"
            + (": WARNING, less than the computed worst case" if short else "")]


def _program_codes(out: Path) -> list[str]:
    """The op codes of the compiled program (OUT/kernels.txt, written by compile)."""
    listing = out / "kernels.txt"
    if not listing.is_file():
        raise BuildError(f"{listing} not found; run `torchmcu compile` again")
    return [line.strip() for line in listing.read_text().splitlines() if line.strip()]


def kernel_set(out_dir: str | Path) -> dict[str, str]:
    """The kernel set of the last build of OUT: op code -> "portable" | "cmsis-nn" | a delegate."""
    listing = Path(out_dir) / "fw" / "kernels.txt"
    return dict(line.split() for line in listing.read_text().splitlines() if line and not line.startswith("#"))
