"""The stack a model's calls need, as a user gets it: `torchmcu build` writes
NAME_stack.h (TMCU_NAME_STACK_BYTES) from the linked image's computed worst
case (builder.stack's model_bytes), a program of one's own that sizes a stack
from it compiles and runs in QEMU within it, `compile` alone writes none; and
an application that calls printf gets one line naming tmcu_platform_write
instead of newlib's raw link errors. Each step a separate process, as users
run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu

pytestmark = [needs_arm_gcc]

from test_c_api import cli  # noqa: E402  the command line in a fresh process, as test_c_api runs it


def defines(header: Path) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^#define (\w+) (\d+)$", header.read_text(), re.M)}


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits_stack")
    cli("compile", "examples/digits.py:make", "--board", "mps2-an505", "-o", str(out), "--symbol", "digits")
    return out


# Sizes an array from the figure (so it must be a constant expression), runs the model, and returns
# 0 only when the figures are the ones the header's comment promises.
APP = r"""
#include "digits.h"
#include "digits_stack.h"
static char stack_for_a_thread[TMCU_DIGITS_STACK_BYTES + 512];
int main(void) {
  if (tmcu_digits_init() != TMCU_OK) return 1;
  float* in = (float*)tmcu_digits_input(0);
  for (int i = 0; i < TMCU_DIGITS_INPUT0_ELEMENTS; ++i) in[i] = (float)(i % 17) / 16.0f;
  if (tmcu_digits_invoke() != TMCU_OK) return 2;
  if (TMCU_DIGITS_STACK_BYTES <= 0 || TMCU_DIGITS_STACK_BYTES > TMCU_DIGITS_FIRMWARE_STACK_BYTES) return 3;
  return sizeof stack_for_a_thread > 512 ? 0 : 4;
}
"""

PRINTF_APP = r"""
#include <stdio.h>
#include "digits.h"
int main(void) { printf("init %d\n", tmcu_digits_init()); return 0; }
"""


def test_compile_alone_writes_no_stack_figure(digits: Path) -> None:
    assert (digits / "digits.h").is_file() and not (digits / "digits_stack.h").exists()
    assert "digits_stack.h" in (digits / "digits.h").read_text()  # the header says where the figure comes from


@needs_qemu
def test_build_writes_the_figure_and_a_program_sized_from_it_runs(digits: Path, tmp_path: Path) -> None:
    cli("build", str(digits))
    stack = json.loads((digits / "size.json").read_text())["stack"]
    figures = defines(digits / "digits_stack.h")
    # The header's figures are the build's: the model's calls, and the whole firmware.
    assert figures["TMCU_DIGITS_STACK_BYTES"] == stack["model_bytes"]
    assert figures["TMCU_DIGITS_FIRMWARE_STACK_BYTES"] == stack["computed_bytes"]
    # The line-protocol firmware does not link the C API: its calls' figure is the runtime's
    # load/execute paths plus the C API's own frame, with the deepest exception on top.
    assert "Method::execute" in stack["model_from"]
    assert stack["handler_bytes"] < stack["model_bytes"] <= stack["computed_bytes"]

    app = tmp_path / "app.c"
    app.write_text(APP)
    built = cli("build", str(digits), "--app", str(app))
    assert "stack:" in built.stdout
    with_api = json.loads((digits / "size.json").read_text())["stack"]
    assert "tmcu_digits_init/invoke/reset" in with_api["model_from"]
    assert any(p["function"].startswith("tmcu_digits_") for p in with_api["model_path"])
    # The figure from the runtime's entries and the C API's largest frame bounds the one from the
    # C API's own calls once they are linked.
    assert 0 < with_api["model_bytes"] <= stack["model_bytes"], (with_api["model_bytes"], stack["model_bytes"])
    assert defines(digits / "digits_stack.h")["TMCU_DIGITS_STACK_BYTES"] == with_api["model_bytes"]
    run = cli("run", str(digits), "--json", check=False)
    result = json.loads(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr
    # What main used, measured (the startup paints the stack), is within the build's bound for the image.
    assert 0 < result["stack_used"] <= with_api["computed_bytes"]


def test_printf_gets_one_line_naming_the_platform_write(digits: Path, tmp_path: Path) -> None:
    app = tmp_path / "hello.c"
    app.write_text(PRINTF_APP)
    proc = cli("build", str(digits), "--app", str(app), check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # the user's error, not an internal one (3)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "tmcu_platform_write" in lines[0] and "_write" in lines[0] and "undefined reference" not in proc.stderr
    log = re.search(r"the linker's messages: (\S+)\)", lines[0]).group(1)
    assert "undefined reference to `_write'" in Path(log).read_text()


def test_arduino_sketch_and_pack_component_carry_the_figure(digits: Path, tmp_path: Path) -> None:
    from test_arduino import FAKE_ARDUINO_H
    from torchmcu.export.pack import model_files

    unbuilt = tmp_path / "unbuilt"
    cli("export", str(digits), "--arduino", str(unbuilt), "--name", "Unbuilt") if (
        not (digits / "digits_stack.h").exists()) else None
    if unbuilt.exists():  # exported before any build: a header that says so, and no figure
        assert "TMCU_DIGITS_STACK_BYTES" not in defines(unbuilt / "src" / "model" / "digits_stack.h")
    if not (digits / "digits_stack.h").exists():
        cli("build", str(digits))
    built = defines(digits / "digits_stack.h")
    lib = tmp_path / "lib"
    cli("export", str(digits), "--arduino", str(lib), "--name", "Digits")
    assert defines(lib / "src" / "model" / "digits_stack.h") == built
    assert model_files(digits)["models/digits/digits_stack.h"] == digits / "digits_stack.h"
    # The sketch sizes its need from the figure: an mbed core's main thread below it does not compile.
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "Arduino.h").write_text(FAKE_ARDUINO_H)
    sketch = lib / "examples" / "Digits" / "Digits.ino"
    need = max(built["TMCU_DIGITS_STACK_BYTES"], built["TMCU_DIGITS_FIRMWARE_STACK_BYTES"]) + 1024
    base = ["arm-none-eabi-g++", "-mcpu=cortex-m4", "-mthumb", "-std=gnu++14", "-fno-rtti", "-fno-exceptions",
            "-fsyntax-only", f"-I{lib / 'src'}", f"-I{fake}", "-x", "c++", "-include", "Arduino.h", str(sketch)]
    fits = subprocess.run([*base, f"-DMBED_CONF_RTOS_MAIN_THREAD_STACK_SIZE={need}"], capture_output=True, text=True)
    assert fits.returncode == 0, fits.stderr
    short = subprocess.run([*base, f"-DMBED_CONF_RTOS_MAIN_THREAD_STACK_SIZE={need - 8}"], capture_output=True,
                           text=True)
    assert short.returncode != 0 and "main thread's stack is smaller" in short.stderr, short.stderr
