"""The cross toolchain, and third-party headers several builds look for."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .errors import BuildError

CROSS = "arm-none-eabi-"
CMSIS_CORE_ENV = "TORCHMCU_CMSIS_CORE_DIR"


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BuildError(f"{tool} not found on PATH; install it (Debian: gcc-arm-none-eabi "
                         "libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib), or run `make setup`")
    return path


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def cmsis_core_include() -> Path | None:
    """CMSIS-Core's include directory from TORCHMCU_CMSIS_CORE_DIR (a CMSIS-Core
    include directory, or the root of a CMSIS_5 / CMSIS_6 checkout); None when unset."""
    value = os.environ.get(CMSIS_CORE_ENV)
    if not value:
        return None
    root = Path(value).expanduser().resolve()
    for inc in (root, root / "Include", root / "CMSIS" / "Core" / "Include"):
        if (inc / "cmsis_compiler.h").is_file():
            return inc
    raise BuildError(f"{CMSIS_CORE_ENV}={value} holds no cmsis_compiler.h (give a CMSIS-Core include "
                     "directory, or the root of a CMSIS_5 / CMSIS_6 checkout)")
