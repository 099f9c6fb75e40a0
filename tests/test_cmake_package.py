"""The installable CMake package: `cmake --install` of the repository, then a
project outside it that finds it with find_package(torchmcu), adds a compiled
model with torchmcu_add_model() and is built natively and, through the
installed arm-none-eabi.cmake toolchain file, for a Cortex-M55 whose ELF runs
in QEMU. Outputs are compared bit for bit with the project's reference."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu import sources as build
from torchmcu.backends.cmsis_nn.build import CMSIS_NN_ENV
from torchmcu.boards import board_sources, load_board
from torchmcu.builder import kernel_table
from torchmcu.builder.firmware import build_firmware
from torchmcu.builder.size import elf_size
from torchmcu.compiler import compile
from torchmcu.sim import runner

# `make setup` installs cmake and ninja into the venv (PIP_PACKAGES); a system one serves too.
_VENV_BIN = Path(sys.executable).parent
CMAKE = str(_VENV_BIN / "cmake") if (_VENV_BIN / "cmake").is_file() else shutil.which("cmake")
NINJA = str(_VENV_BIN / "ninja") if (_VENV_BIN / "ninja").is_file() else shutil.which("ninja")
pytestmark = pytest.mark.skipif(CMAKE is None, reason="cmake not found (make setup installs it into .venv)")

BOARD = "mps3-an547"

APP_CMAKE = """\
cmake_minimum_required(VERSION 3.21)
project(tmcu_outside C CXX)
find_package(torchmcu 0.1 REQUIRED)
set(MODEL_DIR "" CACHE PATH "a folder `torchmcu compile` wrote")
set(KERNEL_TABLE "" CACHE FILEPATH "another kernel table (optional)")
set(BOARD "" CACHE STRING "one of torchmcu's boards (Cortex-M builds)")
add_executable(app main.c)
if(KERNEL_TABLE)
  torchmcu_add_model(app DIR "${MODEL_DIR}" KERNEL_TABLE "${KERNEL_TABLE}")
else()
  torchmcu_add_model(app DIR "${MODEL_DIR}")
endif()
target_link_libraries(app PRIVATE torchmcu::app)
if(CMAKE_CROSSCOMPILING)
  torchmcu_target_board(app BOARD "${BOARD}" MODEL_DIR "${MODEL_DIR}")
else()
  target_compile_definitions(app PRIVATE APP_HOST=1)
  target_link_libraries(app PRIVATE torchmcu::platform_host)
endif()
"""

APP_MAIN = """\
/* An application outside torchmcu: the compiled model run by tmcu_app_run()
   over an io blob, read from a file on the host, from the board's io window
   (placed by the simulator) on a Cortex-M. */
#include <stddef.h>
#include <stdint.h>

#include "model_arenas.h"
#include "model_pte.h"
#include "torchmcu/torchmcu.h"

#if APP_HOST
#include <stdio.h>

static _Alignas(16) uint8_t io[1 << 16];

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "rb");
  if (f == NULL) return 2;
  size_t n = fread(io, 1, sizeof(io), f);
  fclose(f);
  return tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas, TMCU_MODEL_NUM_ARENAS, io, n);
}
#else
#include "boards/platform.h"

int main(void) {
  tmcu_platform_init();
  return tmcu_app_run(tmcu_model_pte, tmcu_model_pte_size, tmcu_model_arenas, TMCU_MODEL_NUM_ARENAS,
                      tmcu_platform_io_base(), tmcu_platform_io_size());
}
#endif
"""


def _cmake(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([CMAKE, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def _configure(src: Path, build_dir: Path, *defs: str) -> subprocess.CompletedProcess:
    gen = ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={NINJA}"] if NINJA else []
    return _cmake("-S", str(src), "-B", str(build_dir), *gen, "-DCMAKE_BUILD_TYPE=MinSizeRel", *defs)


def _build(build_dir: Path) -> None:
    proc = _cmake("--build", str(build_dir), "-j2")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    """The package configured from the repository and installed into a prefix."""
    tmp = tmp_path_factory.mktemp("cmake")
    prefix = tmp / "prefix"
    proc = _configure(REPO, tmp / "pkg", f"-DCMAKE_INSTALL_PREFIX={prefix}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _cmake("--install", str(tmp / "pkg"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return prefix


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("app")
    (src / "CMakeLists.txt").write_text(APP_CMAKE)
    (src / "main.c").write_text(APP_MAIN)
    return src


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A small int8 MLP: its outputs are checked bit for bit."""
    out = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    compile(m, (torch.randn(1, 8),), BOARD, out, quant="int8",
            calibration={"x": torch.randn(32, 1, 8).numpy()}, progress=False)
    return out


def _samples(model_dir: Path) -> tuple[list[list[np.ndarray]], bytes]:
    meta = runner.load_meta(model_dir)
    samples = runner.split_samples(meta, [np.random.RandomState(1).randn(6, 1, 8).astype(np.float32)])
    return samples, runner.io_blob(runner.program_samples(meta, samples))


def _check_outputs(model_dir: Path, text: str, samples: list[list[np.ndarray]]) -> dict:
    meta = runner.load_meta(model_dir)
    info, outputs = runner.parse_protocol(text, meta["outputs"])
    assert info["load_status"] == 0 and info["done_status"] == 0, text[-2000:]
    expected, tol = runner.expected(model_dir, samples)
    assert tol is None  # int8: bit for bit
    mismatch, worst = runner.compare(outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"
    assert outputs[0].shape[0] == len(samples)
    return info


def test_installed_sources_are_what_torchmcu_builds(prefix: Path) -> None:
    fw = prefix / "share" / "torchmcu" / "firmware"
    rel = lambda p, root: p.relative_to(root).as_posix()
    installed_cc = {rel(p, fw) for p in fw.rglob("*.cc")}
    expected_cc = {rel(p, build.FIRMWARE) for p in build.runtime_sources()}
    expected_cc |= {rel(p, build.FIRMWARE) for p in (build.FIRMWARE / "kernels" / "cmsis_nn").glob("*.cc")}
    expected_cc |= {rel(p, build.FIRMWARE) for p in board_sources()}
    expected_cc.add("host/platform_host.cc")
    assert installed_cc == expected_cc
    for top in ("core", "kernels"):  # every header too
        tree = {rel(p, build.FIRMWARE) for p in (build.FIRMWARE / top).rglob("*.h")}
        assert tree <= {rel(p, fw) for p in fw.rglob("*.h")}
    assert (prefix / "include" / "torchmcu" / "torchmcu.h").read_bytes() == \
        (build.FIRMWARE / "include" / "torchmcu" / "torchmcu.h").read_bytes()
    cmake_dir = prefix / "lib" / "cmake" / "torchmcu"
    assert {p.name for p in cmake_dir.iterdir()} >= {
        "torchmcuConfig.cmake", "torchmcuConfigVersion.cmake", "torchmcuFunctions.cmake", "arm-none-eabi.cmake"}


@pytest.mark.parametrize("verify", ["default", "OFF"])
def test_host_build_through_the_package(prefix: Path, app: Path, model: Path, tmp_path: Path, verify: str) -> None:
    more = [] if verify == "default" else [f"-DTORCHMCU_VERIFY={verify}"]
    proc = _configure(app, tmp_path / "b", f"-DCMAKE_PREFIX_PATH={prefix}", f"-DMODEL_DIR={model}", *more)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _build(tmp_path / "b")
    # OFF: the runtime for trusted programs, and everything built on it, agree.
    flags = "".join(p.read_text() for p in (tmp_path / "b").rglob("*")  # Ninja's or Make's flags
                    if p.name in ("build.ninja", "flags.make"))
    assert ("TORCHMCU_VERIFY=0" in flags) == (verify == "OFF")
    samples, blob = _samples(model)
    (tmp_path / "io.bin").write_bytes(blob)
    run = subprocess.run([str(tmp_path / "b" / "app"), str(tmp_path / "io.bin")], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    _check_outputs(model, run.stdout, samples)


def _arm_defs(prefix: Path, board: str, model_dir: Path, *more: str) -> list[str]:
    flags = " ".join(load_board(board).cflags)
    return [f"-DCMAKE_TOOLCHAIN_FILE={prefix}/lib/cmake/torchmcu/arm-none-eabi.cmake", f"-DTORCHMCU_CPU_FLAGS={flags}",
            f"-DCMAKE_PREFIX_PATH={prefix}", f"-DMODEL_DIR={model_dir}", f"-DBOARD={board}",
            f"-DTORCHMCU_PYTHON={sys.executable}", *more]


@needs_arm_gcc
@needs_qemu
def test_cortex_m_build_through_the_package_runs_in_qemu(prefix: Path, app: Path, model: Path,
                                                         tmp_path: Path) -> None:
    from torchmcu.sim import run_qemu

    proc = _configure(app, tmp_path / "b", *_arm_defs(prefix, BOARD, model))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _build(tmp_path / "b")
    elf = tmp_path / "b" / "app.elf"
    samples, blob = _samples(model)
    res = run_qemu(load_board(BOARD), elf, blob, timeout_s=60)
    assert res.exit_code == 0, res.stdout[-2000:]
    info = _check_outputs(model, res.stdout, samples)
    assert len(info["sample_ticks"]) == len(samples) and min(info["sample_ticks"]) > 0
    # Linked as `torchmcu build` links it: the same sections, within a few percent of its code (the
    # package links every fast-path variant; `torchmcu build` only those the program can take).
    ours, theirs = elf_size(elf), elf_size(build_firmware(model, jobs=2))
    assert abs(ours.text - theirs.text) <= 0.08 * theirs.text, (ours, theirs)


@needs_arm_gcc
def test_board_refuses_other_core_flags(prefix: Path, app: Path, model: Path, tmp_path: Path) -> None:
    defs = [d for d in _arm_defs(prefix, BOARD, model) if not d.startswith("-DTORCHMCU_CPU_FLAGS=")]
    proc = _configure(app, tmp_path / "b", *defs)  # the toolchain's default core: a Cortex-M3
    assert proc.returncode != 0
    wanted = " ".join(load_board(BOARD).cflags)
    assert f'-DTORCHMCU_CPU_FLAGS="{wanted}"' in " ".join(proc.stderr.split()), proc.stderr


def test_a_model_not_compiled_is_named(prefix: Path, app: Path, tmp_path: Path) -> None:
    empty = tmp_path / "not_compiled"
    empty.mkdir()
    proc = _configure(app, tmp_path / "b", f"-DCMAKE_PREFIX_PATH={prefix}", f"-DMODEL_DIR={empty}")
    assert proc.returncode != 0
    message = " ".join(proc.stderr.split())  # CMake wraps its messages
    assert f"{empty}/model_pte.c not found" in message and "torchmcu compile" in message, proc.stderr


@needs_arm_gcc
@needs_qemu
@pytest.mark.skipif(not os.environ.get(CMSIS_NN_ENV),
                    reason=f"{CMSIS_NN_ENV} is not set: point it at a CMSIS-NN checkout to build "
                           "torchmcu::cmsis_nn")
def test_cmsis_nn_kernels_through_the_package(prefix: Path, app: Path, model: Path, tmp_path: Path) -> None:
    codes = [line.strip() for line in (model / "kernels.txt").read_text().splitlines() if line.strip()]
    table = tmp_path / "kernel_table_cmsis_nn.cc"
    table.write_text(kernel_table.kernel_table_source(codes, "cmsis-nn"))
    assert "cmsis_nn::" in table.read_text()
    proc = _configure(app, tmp_path / "b", *_arm_defs(prefix, BOARD, model, f"-DKERNEL_TABLE={table}"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torchmcu: CMSIS-NN from" in proc.stdout
    _build(tmp_path / "b")
    from torchmcu.sim import run_qemu

    samples, blob = _samples(model)
    res = run_qemu(load_board(BOARD), tmp_path / "b" / "app.elf", blob, timeout_s=60)
    assert res.exit_code == 0, res.stdout[-2000:]
    _check_outputs(model, res.stdout, samples)
    nm = subprocess.run(["arm-none-eabi-nm", str(tmp_path / "b" / "app.elf")], capture_output=True, text=True)
    assert "arm_fully_connected_s8" in nm.stdout  # CMSIS-NN ran, not only the portable kernels
