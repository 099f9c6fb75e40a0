"""The firmware build for a HiFi 4 core: Cadence's compiler, nnlib, the ISS's LSP.

Needs, in the environment:
  XTENSA_TOOLCHAIN_PATH  the XtensaTools directory of a Cadence tools release
                         (its bin/ holds xt-clang, xt-clang++ and xt-run; older
                         releases have xt-xcc / xt-xc++ instead of xt-clang)
  XTENSA_CORE            the core configuration to build for (the board's
                         xtensa_core when unset, e.g. nxp_rt600_RI2021_8_newlib)
  XTENSA_SYSTEM          optional: the registry of installed core configurations
  TORCHMCU_NNLIB_DIR     a checkout of github.com/foss-xtensa/nnlib-hifi4 (or its
                         xa_nnlib/ folder): headers in include/, and the library
                         built by its own makefile (build/makefile_nn_lib_hifi4,
                         default double rounding) into lib/; built here when absent
Without them `build_firmware` raises BuildError naming the missing variable. The
commands are plain lists (`commands`), written to OUT/fw-xtensa/build.sh as well,
so a user can read or rerun exactly what ran.

Sources: the runtime core, the app, the portable kernels, the HiFi kernels
(firmware/delegates/hifi/: CONV2D_S8, DEPTHWISE_CONV2D_S8, LINEAR_S8 on nnlib),
the ISS entry and platform, the generated kernel table (kernel set "hifi") and
the model's C arrays. Linked with the core's "sim" linker support package.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...boards import Board, load_board
from ...errors import BuildError
from ...program import serialize
from ...program.kernel_table import table_source
from ...sources import CXXFLAGS, FIRMWARE, runtime_sources

TOOLCHAIN_ENV = "XTENSA_TOOLCHAIN_PATH"
CORE_ENV = "XTENSA_CORE"
SYSTEM_ENV = "XTENSA_SYSTEM"
NNLIB_ENV = "TORCHMCU_NNLIB_DIR"

HIFI_DIR = FIRMWARE / "delegates" / "hifi"
KERNEL_SOURCES = [HIFI_DIR / "conv_s8.cc", HIFI_DIR / "linear_s8.cc"]
ENTRY_SOURCES = [HIFI_DIR / "main_xtensa.cc", HIFI_DIR / "platform_xtensa.cc"]
CFLAGS = ["-std=c11", "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra"]
ELF_NAME = "firmware-xtensa.elf"
BUILD_DIR = "fw-xtensa"  # the build's commands (build.sh), objects and map, in OUT


@dataclass(frozen=True)
class XtensaTools:
    """Cadence's tools for one core configuration."""
    bin: Path
    core: str
    system: str | None = None

    def _pick(self, *names: str) -> Path:
        for n in names:
            if (self.bin / n).is_file():
                return self.bin / n
        return self.bin / names[0]  # the current name, for the error message

    @property
    def cxx(self) -> Path:
        return self._pick("xt-clang++", "xt-xc++")

    @property
    def cc(self) -> Path:
        return self._pick("xt-clang", "xt-xcc")

    @property
    def run(self) -> Path:
        return self.bin / "xt-run"

    @property
    def core_flags(self) -> list[str]:
        """Select the core configuration (every Cadence tool takes these)."""
        return [f"--xtensa-core={self.core}", *([f"--xtensa-system={self.system}"] if self.system else [])]


def xtensa_tools(board: Board | None = None, env: Mapping[str, str] | None = None) -> XtensaTools:
    """The tools the environment names; BuildError naming the variable that is missing."""
    env = os.environ if env is None else env
    root = env.get(TOOLCHAIN_ENV)
    if not root:
        raise BuildError(f"{TOOLCHAIN_ENV} is not set: it names the XtensaTools directory of Cadence's tools "
                         "(bin/xt-clang++, bin/xt-run), needed to build for an Xtensa HiFi core")
    core = env.get(CORE_ENV) or (board.core.xtensa_core if board else "")
    if not core:
        raise BuildError(f"{CORE_ENV} is not set (and board {board.name if board else '?'} names no xtensa_core): "
                         "it names the Xtensa core configuration to build for")
    path = Path(root)
    return XtensaTools(path / "bin" if (path / "bin").is_dir() else path, core, env.get(SYSTEM_ENV) or None)


def nnlib_root(env: Mapping[str, str] | None = None) -> Path:
    """The xa_nnlib folder of the nnlib checkout TORCHMCU_NNLIB_DIR names."""
    env = os.environ if env is None else env
    value = env.get(NNLIB_ENV)
    if not value:
        raise BuildError(f"{NNLIB_ENV} is not set: it names a checkout of Cadence's HiFi 4 NN library "
                         "(https://github.com/foss-xtensa/nnlib-hifi4)")
    root = Path(value)
    if (root / "xa_nnlib").is_dir():
        root = root / "xa_nnlib"
    if not (root / "include" / "nnlib" / "xa_nnlib_api.h").is_file():
        raise BuildError(f"{NNLIB_ENV}={value} is not nnlib: include/nnlib/xa_nnlib_api.h is missing")
    return root


def nnlib_includes(root: Path) -> list[Path]:
    return [root / "include", root / "include" / "nnlib"]


def nnlib_library(root: Path) -> Path:
    """The archive nnlib's makefile installs for HiFi 4 (lib/xa_nnlib_hifi4.a)."""
    return root / "lib" / "xa_nnlib_hifi4.a"


def nnlib_build_command(root: Path, tools: XtensaTools) -> list[str]:
    """nnlib's own build of its HiFi 4 library, default (double) rounding."""
    return ["make", "-C", str(root / "build"), "-f", "makefile_nn_lib_hifi4", "install", "SINGLE_ROUNDING=0",
            f"XTENSA_CORE={tools.core}", *([f"XTENSA_SYSTEM={tools.system}"] if tools.system else [])]


def sources(out: Path) -> list[Path]:
    fw = out / BUILD_DIR
    return [*runtime_sources(), *KERNEL_SOURCES, *ENTRY_SOURCES, fw / "kernel_table_hifi.cc", out / "model_pte.c",
            out / "model_arenas.c"]


def commands(out: Path, board: Board, tools: XtensaTools, nnlib: Path, opt: str = "-O2") -> list[list[str]]:
    """Compile every source, then link: the exact command lines."""
    fw = out / BUILD_DIR
    inc = [f"-I{FIRMWARE}", f"-I{FIRMWARE / 'include'}", f"-I{out}", *(f"-I{p}" for p in nnlib_includes(nnlib))]
    meta = json.loads((out / "model.json").read_text()) if (out / "model.json").is_file() else {}
    symbol = meta.get("symbol", serialize.DEFAULT_SYMBOL)
    defines = [*board.define_flags, *([f"-DTMCU_MODEL_SYMBOL={symbol}"] if symbol != serialize.DEFAULT_SYMBOL else [])]
    cmds, objs = [], []
    for src in sources(out):
        rel = src.relative_to(FIRMWARE.parent) if src.is_relative_to(FIRMWARE.parent) else Path("model") / src.name
        obj = fw / "obj" / rel.with_suffix(".o")
        objs.append(obj)
        if src.suffix == ".c":
            cmds.append([str(tools.cc), *tools.core_flags, *board.cflags, opt, *CFLAGS, *inc, *defines,
                         "-c", str(src), "-o", str(obj)])
        else:
            cmds.append([str(tools.cxx), *tools.core_flags, *board.cflags, opt, *CXXFLAGS, *inc, *defines,
                         "-c", str(src), "-o", str(obj)])
    cmds.append([str(tools.cxx), *tools.core_flags, *map(str, objs), str(nnlib_library(nnlib)),
                 *board.ldflags(""), f"-Wl,-Map={fw / 'firmware.map'}", "-o", str(out / ELF_NAME)])
    return cmds


def build_firmware(out_dir: str | Path, board: str | Board | None = None, opt: str = "-O2",
                   env: Mapping[str, str] | None = None) -> Path:
    """Build OUT/firmware-xtensa.elf for the HiFi board the model was compiled for."""
    out = Path(out_dir).resolve()
    meta_path = out / "model.json"
    if not meta_path.is_file():
        raise BuildError(f"{out} is not a compiled model (no model.json); run `torchmcu compile` first")
    b = board if isinstance(board, Board) else load_board(board or json.loads(meta_path.read_text())["board"])
    if b.core.arch != "xtensa":
        raise BuildError(f"board {b.name} is not an Xtensa core; build it with `torchmcu build`")
    tools = xtensa_tools(b, env)
    for tool in (tools.cxx, tools.cc):
        if not tool.is_file():
            raise BuildError(f"{tool} not found ({TOOLCHAIN_ENV}={tools.bin.parent})")
    nnlib = nnlib_root(env)
    fw = out / BUILD_DIR
    fw.mkdir(exist_ok=True)
    codes = [c.strip() for c in (out / "kernels.txt").read_text().splitlines() if c.strip()]
    (fw / "kernel_table_hifi.cc").write_text(table_source(codes, "delegates/hifi"))
    run_env = {**os.environ, **(env or {}), "PATH": f"{tools.bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    if not nnlib_library(nnlib).is_file():
        _run(nnlib_build_command(nnlib, tools), run_env, "nnlib's library build")
    cmds = commands(out, b, tools, nnlib, opt)
    (fw / "build.sh").write_text("#!/bin/sh\nset -e\n" + "".join(shlex.join(c) + "\n" for c in cmds))
    for c in cmds:
        Path(c[-1]).parent.mkdir(parents=True, exist_ok=True)
        _run(c, run_env, "the Xtensa firmware build")
    return out / ELF_NAME


def _run(cmd: list[str], env: Mapping[str, str], what: str) -> None:
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=dict(env))
    if proc.returncode != 0:
        raise BuildError(f"{what} failed ({shlex.join(cmd)}):\n{proc.stdout}{proc.stderr}")
