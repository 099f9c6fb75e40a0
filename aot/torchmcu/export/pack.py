"""The CMSIS-Pack of the runtime (`make pack`, or `python -m torchmcu.export.pack -o DIR`).

The pack is a zip named <vendor>.<name>.<version>.pack holding its description
(<vendor>.<name>.pdsc) at the root, the runtime sources under firmware/, one
linker script per board under ld/, and an example under Examples/. The
description comes from cmsis-pack/torchmcu.pdsc.in: the template holds the
metadata, names and dependencies; this module fills in the file lists from the
tree (so the pack follows every file added to or removed from firmware/), one
platform variant and condition per board description, one NPU board-support
variant and condition per board with an Ethos-U, and the version.

Compiled models given (`models=`, `torchmcu export DIR --pack OUT`) go in as
components beside the runtime, one each: Machine Learning:Model:<symbol>, its
program, arenas, kernel table and C API (<symbol>.h) under models/<symbol>/.

Each ``<!-- @files:DIR -->`` placeholder lists the files under firmware/DIR. A
subdirectory of a listed directory must have a placeholder of its own (or be a
test directory), so a new kernel set or module is never silently folded into
another component: `make pack` stops and names it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from .. import __version__
from ..boards import Board, Npu, board_sources, list_boards, load_board
from ..errors import TorchMCUError
from ..linker import linker_script
from ..sources import REPO
from ..toolchain import CROSS

FIRMWARE = REPO / "firmware"
PACK_SRC = REPO / "cmsis-pack"
TEMPLATE = PACK_SRC / "torchmcu.pdsc.in"
EXAMPLE_SRC = PACK_SRC / "examples" / "digits"
EXAMPLE_DIR = "Examples/digits"  # in the pack
EXAMPLE_BOARD = "mps3-an547"

# Files under a listed directory that are not part of the runtime, and why.
EXCLUDED = {
    "app/main_firmware.cc": "the entry point of `torchmcu build`'s firmware; an application brings its own main",
}
# Directories never packed: tests of a module (whatever their parent), and
# those of EXCLUDED_DIRS, for the reason given.
TEST_DIRS = frozenset({"test", "tests"})
EXCLUDED_DIRS = {
    "delegates/ethos_u/cmsis": ("a stand-in for CMSIS-Core's cmsis_compiler.h for builds without CMSIS-Core; "
                                "a pack project has CMSIS-Core, which this header would shadow on the include path"),
}
# Placeholder for the board support: firmware/boards, one variant per board.
PLATFORM_DIR = "boards"
# The board support of an Ethos-U NPU (driver start, interrupt, the driver's
# OS hooks): one variant per board with an [npu] table.
NPU_PLATFORM_SOURCES = ("boards/npu/ethos_u.cc",)
# The Ethos-U core driver's component in ARM::ethos-u-core-driver (see the
# template's <requirements>).
ETHOS_U_DRIVER = {"Cclass": "Machine Learning", "Cgroup": "NPU Support", "Csub": "Ethos-U Driver"}

_SOURCE_LANGUAGES = {".c": "c", ".cc": "cpp", ".cpp": "cpp", ".S": "asm", ".s": "asm"}
_HEADERS = {".h", ".hpp"}
_TEMPLATE_NOTE = re.compile(r"<!--\n  The pack description template.*?-->", re.DOTALL)
_FILES_MARK = re.compile(r"^([ \t]*)<!-- @files:([\w/]+) -->[ \t]*\n", re.MULTILINE)
_CORE_NAMES = {  # GCC -mcpu name -> the pack's Dcore
    "cortex-m0": "Cortex-M0", "cortex-m0plus": "Cortex-M0+", "cortex-m3": "Cortex-M3",
    "cortex-m4": "Cortex-M4", "cortex-m7": "Cortex-M7", "cortex-m23": "Cortex-M23",
    "cortex-m33": "Cortex-M33", "cortex-m35p": "Cortex-M35P", "cortex-m52": "Cortex-M52",
    "cortex-m55": "Cortex-M55", "cortex-m85": "Cortex-M85",
}


class PackError(TorchMCUError):
    """The pack cannot be made from the tree as it is."""


@dataclass(frozen=True)
class Meta:
    vendor: str
    name: str
    version: str

    @property
    def pdsc_name(self) -> str:
        return f"{self.vendor}.{self.name}.pdsc"

    @property
    def pack_name(self) -> str:
        return f"{self.vendor}.{self.name}.{self.version}.pack"


def template_meta(template: str | None = None, version: str = __version__) -> Meta:
    text = TEMPLATE.read_text() if template is None else template
    vendor = re.search(r"<vendor>([^<]+)</vendor>", text)
    name = re.search(r"<name>([^<]+)</name>", text)
    if not vendor or not name:
        raise PackError(f"{TEMPLATE} has no <vendor> or <name>")
    return Meta(vendor.group(1).strip(), name.group(1).strip(), version)


# ---------------------------------------------------------------------------------------------
# File lists


def _is_runtime_file(path: Path) -> bool:
    return path.suffix in _SOURCE_LANGUAGES or path.suffix in _HEADERS


def listed_dirs(template: str | None = None) -> list[str]:
    """The firmware/ directories the template's placeholders list, in order."""
    text = TEMPLATE.read_text() if template is None else template
    return [m.group(2) for m in _FILES_MARK.finditer(text)]


def dir_files(rel_dir: str, claimed: set[str]) -> list[Path]:
    """Runtime files under firmware/REL_DIR, less excluded files, test
    directories and subdirectories that have a placeholder of their own."""
    root = FIRMWARE / rel_dir
    if not root.is_dir():
        raise PackError(f"cmsis-pack/torchmcu.pdsc.in lists firmware/{rel_dir}, which does not exist; "
                        "remove its placeholder")
    files: list[Path] = []
    for path in sorted(root.iterdir()):
        rel = path.relative_to(FIRMWARE).as_posix()
        if path.is_dir():
            if path.name in TEST_DIRS or rel in claimed or rel in EXCLUDED_DIRS:
                continue
            raise PackError(f"firmware/{rel} is not in the pack: add <!-- @files:{rel} --> to the component "
                            f"it belongs to in cmsis-pack/torchmcu.pdsc.in")
        if _is_runtime_file(path) and rel not in EXCLUDED:
            files.append(path)
    return files


def component_files(template: str | None = None) -> dict[str, list[Path]]:
    """firmware/ directory (as the placeholder names it) -> its files."""
    dirs = listed_dirs(template)
    claimed = set(dirs) | {PLATFORM_DIR}
    return {d: dir_files(d, claimed) for d in dirs}


def platform_files() -> list[Path]:
    """The board support every platform variant compiles: the sources
    torchmcu's own builds use (boards.board_sources) and their headers."""
    headers = [p for p in sorted((FIRMWARE / PLATFORM_DIR).iterdir()) if p.suffix in _HEADERS]
    return sorted([*board_sources(), *headers])


def npu_platform_files() -> list[Path]:
    return [FIRMWARE / s for s in NPU_PLATFORM_SOURCES]


def packed_files(template: str | None = None) -> list[Path]:
    """Every firmware file the pack carries."""
    return sorted({*(f for fs in component_files(template).values() for f in fs), *platform_files(),
                   *npu_platform_files()})


def _file_element(path: Path, indent: str) -> str:
    rel = path.relative_to(REPO).as_posix()
    if path.suffix in _HEADERS:
        # The include path the sources expect: "torchmcu/torchmcu.h" from
        # firmware/include, everything else ("core/method.h") from firmware.
        inc = "firmware/include" if rel.startswith("firmware/include/") else "firmware"
        return f'{indent}<file category="header" name="{rel}" path="{inc}"/>\n'
    return f'{indent}<file category="source" language="{_SOURCE_LANGUAGES[path.suffix]}" name="{rel}"/>\n'


# ---------------------------------------------------------------------------------------------
# Platform variants, one per board description


def board_condition_id(board: Board) -> str:
    return f"Board {board.name}"


def _core_filter(board: Board) -> str:
    c = board.core
    if c.cpu not in _CORE_NAMES:
        raise PackError(f"board {board.name}: core {c.cpu!r} has no CMSIS-Pack Dcore name in torchmcu.export.pack")
    attrs = [f'Dcore="{_CORE_NAMES[c.cpu]}"']
    if c.has_fpu:  # "sp" FPUs are single precision; the others (fpv5-d16, M55/M85) double
        attrs.append(f'Dfpu="{"SP_FPU" if "-sp-" in c.fpu else "DP_FPU"}"')
    else:
        attrs.append('Dfpu="NO_FPU"')
    attrs.append(f'Ddsp="{"DSP" if c.dsp else "NO_DSP"}"')
    if c.cpu in ("cortex-m55", "cortex-m85"):
        attrs.append(f'Dmve="{ {"none": "NO_MVE", "int": "MVE", "float": "FP_MVE"}[c.mve] }"')
    return " ".join(attrs)


def platform_conditions(boards: list[Board], indent: str) -> str:
    out = []
    for b in boards:
        out += [f'{indent}<condition id="{board_condition_id(b)}">',
                (f"{indent}  <description>The core of {escape(b.name)} as boards/{escape(b.name)}.toml "
                 "describes it; GCC with newlib, whose hooks the startup provides</description>"),
                f'{indent}  <require Tcompiler="GCC"/>',
                f"{indent}  <require {_core_filter(b)}/>",
                f"{indent}</condition>"]
    return "\n".join(out) + "\n"


def linker_script_path(board: Board) -> str:
    return f"ld/{board.name}.ld"


def board_linker_script(board: Board) -> str:
    """The board's generated linker script with an arena section for every
    memory that may hold arenas, so any model compiled for the board links."""
    from ..program.serialize import ArenaSpec, arena_section

    arenas = {arena_section(ArenaSpec(m.name, 0)): m.name for m in board.memories if "arena" in m.holds}
    return linker_script(board, arenas)


def platform_components(boards: list[Board], indent: str) -> str:
    files = platform_files()
    out = []
    for b in boards:
        defines = "\n".join(f"#define {k} {v}" for k, v in b.defines.items())
        out += [(f'{indent}<component Cgroup="Platform" Csub="Arm MPS" Cvariant="{b.name}" '
                 f'condition="{board_condition_id(b)}">'),
                (f"{indent}  <description>{escape(b.description)}: startup, UART, SysTick tick counter and "
                 "semihosting exit, as torchmcu runs it in QEMU</description>"),
                f"{indent}  <Pre_Include_Local_Component_h>\n{escape(defines)}\n{indent}  </Pre_Include_Local_Component_h>",
                f"{indent}  <files>"]
        out += [_file_element(f, indent + "    ").rstrip("\n") for f in files]
        out += [f'{indent}    <file category="linkerScript" name="{linker_script_path(b)}"/>',
                f"{indent}  </files>",
                f"{indent}</component>"]
    return "\n".join(out) + "\n"


def npu_condition_id(board: Board) -> str:
    return f"NPU of {board.name}"


def _npu_boards(boards: list[Board]) -> list[tuple[Board, Npu]]:
    return [(b, b.npu) for b in boards if b.npu is not None]


def npu_conditions(boards: list[Board], indent: str) -> str:
    driver = " ".join(f'{k}="{v}"' for k, v in ETHOS_U_DRIVER.items())
    out = []
    for b, npu in _npu_boards(boards):
        out += [f'{indent}<condition id="{npu_condition_id(b)}">',
                (f"{indent}  <description>The Ethos-U of {escape(b.name)} ({escape(npu.accelerator)}), "
                 "driven by the Ethos-U core driver, with the board's platform variant</description>"),
                f'{indent}  <require condition="{board_condition_id(b)}"/>',
                f"{indent}  <require {driver}/>",
                f'{indent}  <require Cclass="Machine Learning" Cbundle="torchmcu" Cgroup="Platform" Csub="Arm MPS"/>',
                f"{indent}</condition>"]
    return "\n".join(out) + "\n"


def npu_components(boards: list[Board], indent: str) -> str:
    """One variant per NPU board of the NPU's board support: it starts the
    driver (ethosu_init) at platform init, takes the NPU's interrupt and
    gives the driver heap-free semaphores and cache maintenance."""
    out = []
    for b, npu in _npu_boards(boards):
        # All of the board's macros, as its platform variant has them: the NPU
        # support reads the core's registers through boards/cortex_m.h too.
        defines = "\n".join(f"#define {k} {v}" for k, v in b.defines.items())
        out += [(f'{indent}<component Cgroup="Platform" Csub="Ethos-U NPU" Cvariant="{b.name}" '
                 f'condition="{npu_condition_id(b)}">'),
                (f"{indent}  <description>The {escape(npu.accelerator)} of {escape(b.name)}: the Ethos-U core "
                 "driver started at platform init, its interrupt, its semaphores and cache maintenance without "
                 "a heap, and tmcu_platform_npu_status() for the Ethos-U delegate</description>"),
                f"{indent}  <Pre_Include_Local_Component_h>\n{escape(defines)}\n{indent}  </Pre_Include_Local_Component_h>",
                f"{indent}  <files>"]
        out += [_file_element(f, indent + "    ").rstrip("\n") for f in npu_platform_files()]
        out += [f"{indent}  </files>", f"{indent}</component>"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# The description


# What a compiled model's component carries (besides NAME.h and NAME.cc), from its build directory.
MODEL_FILES = ("model_pte.h", "model_pte.c", "model_arenas.h", "model_arenas.c", "kernel_table.cc")


def _model_meta(model_dir: Path) -> dict:
    import json

    meta_path = Path(model_dir) / "model.json"
    if not meta_path.is_file():
        raise PackError(f"{model_dir} is not a compiled model (no model.json): pass a directory `torchmcu compile` "
                        "wrote")
    return json.loads(meta_path.read_text())


def model_files(model_dir: Path) -> dict[str, Path]:
    """Path in the pack -> the file, for one compiled model; with NAME_stack.h
    (TMCU_NAME_STACK_BYTES, the stack its calls need) when the directory was
    built (`torchmcu build` writes it from the linked image's computed worst case)."""
    sym = _model_meta(model_dir).get("symbol", "model")
    out = {}
    for name in (f"{sym}.h", f"{sym}.cc", *MODEL_FILES):
        f = Path(model_dir) / name
        if not f.is_file():
            raise PackError(f"{f} not found: compile the model again with this torchmcu")
        out[f"models/{sym}/{name}"] = f
    stack = Path(model_dir) / f"{sym}_stack.h"
    if stack.is_file():
        out[f"models/{sym}/{stack.name}"] = stack
    return out


def model_components(models: list[Path], indent: str) -> str:
    """One Model component per compiled model: its files and its C API."""
    out = []
    seen: set[str] = set()
    for m in models:
        meta = _model_meta(m)
        sym = meta.get("symbol", "model")
        if sym in seen:
            raise PackError(f"two models named {sym!r}: compile them with different --symbol names")
        seen.add(sym)
        board = Path(str(meta["board"])).stem
        out += [f'{indent}<component Cgroup="Model" Csub="{escape(sym)}" condition="torchmcu Model">',
                (f"{indent}  <description>The model {escape(sym)} ({escape(str(meta.get('quant')))}, compiled by "
                 f"torchmcu for {escape(board)}): its program in flash, planned arenas, kernel table and C API "
                 f"({escape(sym)}.h: tmcu_{escape(sym)}_init, _input, _invoke, _output, _reset); one kernel table "
                 "per project (several models: `torchmcu kernel-table`)</description>"),
                f"{indent}  <files>"]
        for name, f in model_files(Path(m)).items():
            if f.suffix in _HEADERS:
                out.append(f'{indent}    <file category="header" name="{name}" path="models/{escape(sym)}"/>')
            else:
                out.append(f'{indent}    <file category="source" language="{_SOURCE_LANGUAGES[f.suffix]}" '
                           f'name="{name}"/>')
        out += [f"{indent}  </files>", f"{indent}</component>"]
    return "\n".join(out) + ("\n" if out else "")


def render_pdsc(url: str, version: str = __version__, template: str | None = None,
                models: list[Path] | tuple[Path, ...] = ()) -> str:
    """The filled-in pack description (with a component per compiled model of `models`)."""
    text = TEMPLATE.read_text() if template is None else template
    files = component_files(text)

    def fill_files(m: re.Match) -> str:
        return "".join(_file_element(f, m.group(1)) for f in files[m.group(2)])

    boards = [load_board(n) for n in list_boards()]
    text = _TEMPLATE_NOTE.sub("<!-- Generated by `make pack` from cmsis-pack/torchmcu.pdsc.in: edit that. -->", text, 1)
    text = _FILES_MARK.sub(fill_files, text)
    for mark, make in (("platform-conditions", platform_conditions), ("platform-components", platform_components),
                       ("npu-conditions", npu_conditions), ("npu-components", npu_components)):
        pattern = re.compile(rf"^([ \t]*)<!-- @{mark} -->[ \t]*\n", re.MULTILINE)
        found = pattern.search(text)
        if found is None:
            raise PackError(f"{TEMPLATE} has no <!-- @{mark} --> placeholder")
        text = text[:found.start()] + make(boards, found.group(1)) + text[found.end():]
    found = re.compile(r"^([ \t]*)<!-- @model-components -->[ \t]*\n", re.MULTILINE).search(text)
    if found is None:
        raise PackError(f"{TEMPLATE} has no <!-- @model-components --> placeholder")
    text = text[:found.start()] + model_components(list(models), found.group(1)) + text[found.end():]
    return text.replace("@VERSION@", escape(version)).replace("@URL@", escape(url))


# ---------------------------------------------------------------------------------------------
# The example: the digits MLP compiled for EXAMPLE_BOARD


def build_example(work: Path) -> dict[str, bytes]:
    """Compile the example's model into WORK/model and return the example's
    files (path in the pack -> bytes): the hand-written ones from
    cmsis-pack/examples/digits and the generated model sources."""
    import numpy as np
    import torch

    from ..compiler import compile
    from ..sim import runner

    sys.path.insert(0, str(REPO / "examples"))
    try:
        import digits
    finally:
        sys.path.remove(str(REPO / "examples"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # training this small MLP on several threads only makes them contend
    try:
        model, example = digits.make()
    finally:
        torch.set_num_threads(threads)
    _, labels = digits.test_set()
    model_dir = work / "model"
    compile(model, example, EXAMPLE_BOARD, model_dir, progress=False)
    if shutil.which(CROSS + "g++"):  # the stack figure main.c checks the linked stack against (model_stack.h)
        from ..builder.firmware import build_firmware

        build_firmware(model_dir)
    meta = runner.load_meta(model_dir)
    sample = [np.asarray(example[0].numpy(), dtype=np.float32)]
    blob = runner.io_blob(runner.program_samples(meta, [sample]))
    np.save(work / "digit.npy", sample[0])  # what the example runs, for checks
    rows = [", ".join(f"0x{b:02x}" for b in blob[i:i + 16]) for i in range(0, len(blob), 16)]
    io_header = (
        "/* Generated by torchmcu.export.pack: one held-out digit of scikit-learn's 8x8 digits as a torchmcu\n"
        "   io blob (firmware/app/app.h): a 32-byte header, then the 64 pixels as float32. */\n"
        "#ifndef TORCHMCU_EXAMPLE_DIGIT_IO_H_\n#define TORCHMCU_EXAMPLE_DIGIT_IO_H_\n\n"
        "#include <stdint.h>\n\n"
        f"#define TMCU_DIGIT_LABEL {int(labels[0])}\n\n"
        f"__attribute__((aligned(16))) static const uint8_t tmcu_digit_io[{len(blob)}] = {{\n"
        + "".join(f"  {r},\n" for r in rows) + "};\n\n#endif\n")
    files = {f"{EXAMPLE_DIR}/{p.relative_to(EXAMPLE_SRC).as_posix()}": p.read_bytes()
             for p in sorted(EXAMPLE_SRC.rglob("*")) if p.is_file()}
    for name in ("model_pte.c", "model_pte.h", "model_arenas.c", "model_arenas.h", "kernel_table.cc",
                 "model_stack.h"):
        if name != "model_stack.h" or (model_dir / name).is_file():
            files[f"{EXAMPLE_DIR}/model/{name}"] = (model_dir / name).read_bytes()
    files[f"{EXAMPLE_DIR}/model/digit_io.h"] = io_header.encode()
    return files


# ---------------------------------------------------------------------------------------------
# The pack


def build_pack(out_dir: str | Path, url: str | None = None, version: str = __version__,
               models: list[str | Path] | tuple[str | Path, ...] = ()) -> Path:
    """Write OUT/<vendor>.<name>.<version>.pack and OUT/<vendor>.<name>.pdsc
    (the same description, for a pack index); the example's model is compiled
    into OUT/work/. `models`: compiled model directories, each a Model
    component. Returns the pack's path."""
    model_dirs = [Path(m).resolve() for m in models]
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    template = TEMPLATE.read_text()
    meta = template_meta(template, version)
    pdsc = render_pdsc(url or out.as_uri() + "/", version, template, model_dirs)
    contents: dict[str, bytes] = {meta.pdsc_name: pdsc.encode(), "README.md": (PACK_SRC / "README.md").read_bytes()}
    for f in packed_files(template):
        contents[f.relative_to(REPO).as_posix()] = f.read_bytes()
    for name in list_boards():
        board = load_board(name)
        contents[linker_script_path(board)] = board_linker_script(board).encode()
    contents.update(build_example(out / "work"))
    for m in model_dirs:
        contents.update({name: f.read_bytes() for name, f in model_files(m).items()})
    pack = out / meta.pack_name
    tmp = pack.with_name(f"{pack.name}.{os.getpid()}.tmp")  # two builds into one folder never share it
    # Fixed timestamps and order: the same tree gives the same bytes.
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(contents):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, contents[name])
    tmp.replace(pack)
    (out / meta.pdsc_name).write_text(pdsc)
    return pack


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torchmcu.export.pack", description=__doc__.split("\n\n")[0])
    # No default: the pack is a release artefact, and its folder also gets work/ (the example's compiled model).
    # It goes where the user says, not into the source tree (an installed package may not have one, or may not
    # let us write it) nor into the current directory unasked; `make pack` gives build/pack.
    ap.add_argument("-o", "--output", required=True, help="output folder (created)")
    ap.add_argument("--url", help="where the pack will be published (the pdsc's <url>); default: the output folder")
    ap.add_argument("--model", action="append", default=[], metavar="DIR",
                    help="a compiled model directory to add as a Model component (repeatable)")
    args = ap.parse_args(argv)
    try:
        pack = build_pack(args.output, args.url, models=args.model)
    except TorchMCUError as e:
        print(f"torchmcu.export.pack: error: {e}", file=sys.stderr)
        return 2
    with zipfile.ZipFile(pack) as z:
        n = len(z.namelist())
    print(f"wrote {pack} ({pack.stat().st_size:,} bytes, {n} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
