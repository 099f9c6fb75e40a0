"""The runtime core (program reader + verifier, method loader + executor; no
kernels, no application) stays within its flash budget on Cortex-M33 at -Os.
The figure is printed; the test fails when the core grows past the budget.
The core prints nothing (no log strings to strip); the full verification,
which only trusted programs may go without (TORCHMCU_VERIFY=0: they load
with Verification::kMinimal), compiles out."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import REPO, needs_arm_gcc

BUDGET = 8 * 1024  # bytes of .text + .rodata (+ .data), Cortex-M33, -Os
CORE = ["firmware/core/program.cc", "firmware/core/method.cc"]


def core_bytes(tmp_path: Path, cpu: str, extra: list[str] | None = None) -> int:
    total = 0
    for src in CORE:
        obj = tmp_path / (Path(src).stem + ".o")
        subprocess.run(["arm-none-eabi-g++", f"-mcpu={cpu}", "-mthumb", "-mfloat-abi=hard", "-Os", "-std=c++17",
                        "-fno-rtti", "-fno-exceptions", "-ffunction-sections", "-fdata-sections",
                        f"-I{REPO / 'firmware'}", *(extra or []), "-c", str(REPO / src), "-o", str(obj)],
                       check=True)
        out = subprocess.run(["arm-none-eabi-size", "-B", str(obj)], capture_output=True, text=True,
                             check=True).stdout.splitlines()[1].split()
        total += int(out[0]) + int(out[1])
    return total


@needs_arm_gcc
def test_runtime_core_within_budget_on_m33(tmp_path: Path) -> None:
    size = core_bytes(tmp_path, "cortex-m33")
    print(f"\nruntime core on Cortex-M33 -Os: {size} B (budget {BUDGET} B)")
    assert size <= BUDGET


@needs_arm_gcc
def test_verifier_can_be_compiled_out(tmp_path: Path) -> None:
    with_verifier = core_bytes(tmp_path, "cortex-m33")
    without = core_bytes(tmp_path, "cortex-m33", ["-DTORCHMCU_VERIFY=0"])
    print(f"\nruntime core on Cortex-M33 -Os: {with_verifier} B with the verifier, {without} B without")
    # The verifier of the runtime's fields (root, arenas, init copies, the
    # executable section) is a few hundred bytes of the core.
    assert without <= with_verifier - 512


LOG_CALLER = r"""
#include "core/error.h"
extern "C" const char* name_of(unsigned e) { return torchmcu::error_name(torchmcu::Error(e)); }
"""


@needs_arm_gcc
def test_error_strings_can_be_stripped(tmp_path: Path) -> None:
    """The runtime's only log strings, its error names (error_name(), for an
    application's log), are left out with TORCHMCU_STRIP_ERROR_STRINGS=1."""
    src = tmp_path / "names.cc"
    src.write_text(LOG_CALLER)
    sizes = {}
    for strip in (0, 1):
        obj = tmp_path / f"names{strip}.o"
        subprocess.run(["arm-none-eabi-g++", "-mcpu=cortex-m33", "-mthumb", "-Os", "-std=c++17", "-fno-rtti",
                        "-fno-exceptions", f"-DTORCHMCU_STRIP_ERROR_STRINGS={strip}", f"-I{REPO / 'firmware'}",
                        "-c", str(src), "-o", str(obj)], check=True)
        out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], capture_output=True, text=True,
                             check=True).stdout
        sizes[strip] = sum(int(line.split()[1]) for line in out.splitlines()
                           if line.startswith((".text", ".rodata")))
        strings = subprocess.run(["arm-none-eabi-strings", str(obj)], capture_output=True, text=True,
                                 check=True).stdout
        assert ("InvalidProgram" in strings) == (strip == 0)
    print(f"\nerror names on Cortex-M33 -Os: {sizes[0]} B with, {sizes[1]} B stripped")
    assert sizes[1] < sizes[0]
