"""The Ethos-U delegate in a firmware build (a program with ETHOS_U ops).
Third-party code: never in this repository. TORCHMCU_ETHOSU_DRIVER_DIR names
the Ethos-U core driver's sources (the root of ARM-software/ethos-u-core-driver
or of Zephyr's hal_ethos_u module: include/, src/). Its C sources for the
board's NPU (driver, PMU, the U55/U65 or U85 device layer) are built into the
firmware with the driver's own defines (ETHOSU55, ETHOSU_MACS=..., logging
off: no stdio) and its own flags, beside our delegate
(firmware/delegates/ethos_u/) and the board's NPU support
(firmware/boards/npu/). The driver includes CMSIS-Core's cmsis_compiler.h for
two hints (WFE, SEV): from TORCHMCU_CMSIS_CORE_DIR when set, else our own
firmware/delegates/ethos_u/cmsis/."""

from __future__ import annotations

import os
from pathlib import Path

from ...boards import Board
from ...errors import BuildError
from ...sources import FIRMWARE
from ...toolchain import cmsis_core_include
from ..base import BuildParts

ETHOSU_DRIVER_ENV = "TORCHMCU_ETHOSU_DRIVER_DIR"
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


class EthosUBuild:
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

    def parts(self) -> BuildParts:
        return BuildParts(f"Delegate: {self.describe()}", cxx_flags=self.cxx_flags, sources=self.sources,
                          foreign_name="ethos-u-driver", foreign_sources=self.driver_sources,
                          foreign_cflags=self.driver_cflags)
