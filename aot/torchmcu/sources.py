"""Where the project's non-Python parts are, and which firmware files and
flags make the runtime: what the builders (torchmcu.builder, the HiFi
backend's Xtensa build) and the simulator runners share."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIRMWARE = REPO / "firmware"
SIM_DIR = REPO / "sim"  # simulator platform files

CORE_SOURCES = ["core/program.cc", "core/method.cc", "core/c_api.cc"]
APP_SOURCES = ["app/app.cc"]
CXXFLAGS = ["-std=c++17", "-fno-rtti", "-fno-exceptions", "-fno-threadsafe-statics",
            "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra", "-Werror"]
CFLAGS = ["-std=c11", "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra"]


def kernel_sources() -> list[Path]:
    """The portable kernels: one folder per family (kernels/portable/<family>/,
    and common/); their fast paths (kernels/fast/) are headers they include."""
    return sorted((FIRMWARE / "kernels" / "portable").rglob("*.cc"))


def runtime_sources() -> list[Path]:
    return [FIRMWARE / s for s in CORE_SOURCES + APP_SOURCES] + kernel_sources()

