"""model_pte.c, the program as C source: a string literal exactly as long as
the array (GCC parses it an order of magnitude faster than an initializer
list of numbers, which took minutes for the model zoo's 16-45 MB float
programs), holding the program's bytes exactly, in the same symbol, section
and alignment."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import needs_arm_gcc
from torchmcu.compiler import compile
from torchmcu.program import serialize
from torchmcu.sources import CFLAGS

# Every byte value; the characters a literal must escape (quote, backslash, trigraphs "??=");
# an escape followed by digits (an octal or hex escape must not take them in); random bytes.
TRICKY = (bytes(range(256)) + b'??=??/??\'"\\\\\x0012\x017\x1f8\xfff\xffF\x07a9' +
          np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())


def _host_dump(tmp_path: Path, data: bytes) -> bytes:
    """What a host C compiler makes of the literal rows, read back."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    src = tmp_path / "dump.c"
    src.write_text("#include <stdint.h>\n#include <stdio.h>\n"
                   f"static const uint8_t data[{len(data)}] =\n" + "\n".join(serialize.c_string_rows(data)) + ";\n"
                   "int main(void) { fwrite(data, 1, sizeof data, stdout); return 0; }\n")
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(tmp_path / "dump")],
                   check=True)
    return subprocess.run([str(tmp_path / "dump")], capture_output=True, check=True).stdout


def test_literal_rows_hold_the_exact_bytes(tmp_path: Path) -> None:
    assert _host_dump(tmp_path, TRICKY) == TRICKY
    for n in (1, 63, 64, 65):  # rows end at the row length, the last shorter
        assert _host_dump(tmp_path, TRICKY[-n:]) == TRICKY[-n:]


def test_literal_rows_are_rows_of_64_bytes() -> None:
    rows = serialize.c_string_rows(TRICKY)
    assert len(rows) == -(-len(TRICKY) // 64)
    escaped = [len(re.findall(r"\\[0-7]{3}|[^\\]", r[1:-1])) for r in rows]
    assert escaped[:-1] == [64] * (len(rows) - 1) and escaped[-1] == len(TRICKY) - 64 * (len(rows) - 1)
    assert serialize.c_string_rows(b"") == ['""']


def test_model_pte_c_is_compact() -> None:
    """About 3 characters a byte of weights (an initializer list took 5, and
    GCC minutes and gigabytes for a 45 MB program)."""
    weights = np.random.default_rng(1).standard_normal(100_000).astype(np.float32).tobytes()
    text = "\n".join(serialize.c_string_rows(weights))
    assert len(text) < 3.2 * len(weights)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("conv")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 36, 5))
    compile(model, (torch.randn(1, 3, 8, 8),), "mps3-an547", out, progress=False)
    return out


@needs_arm_gcc
def test_model_pte_c_links_the_program_in_its_section(compiled: Path, tmp_path: Path) -> None:
    """Compiled with the firmware's C flags and -Werror: the symbol, its size,
    its section's alignment and its bytes are the device image's."""
    image = serialize.device_image((compiled / "model.pte").read_bytes())
    obj = tmp_path / "model_pte.o"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m55", "-mthumb", "-Os", *CFLAGS, "-Werror",
                    f"-I{compiled}", "-c", str(compiled / "model_pte.c"), "-o", str(obj)], check=True)
    symbols = subprocess.run(["arm-none-eabi-nm", "-S", str(obj)], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^0+ 0*{len(image):x} R tmcu_model_pte$", symbols, re.MULTILINE), symbols
    sections = subprocess.run(["arm-none-eabi-readelf", "-SW", str(obj)], capture_output=True, text=True,
                              check=True).stdout
    line = next(ln for ln in sections.splitlines() if " .rodata.tmcu_program " in ln)
    assert line.split()[-1] == "16", line  # Al
    dumped = tmp_path / "program.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "--only-section=.rodata.tmcu_program", str(obj),
                    str(dumped)], check=True)
    assert dumped.read_bytes() == image
    assert f"TMCU_MODEL_PTE_SIZE {len(image)}u" in (compiled / "model_pte.h").read_text()


def test_model_pte_c_compiles_as_cpp_too(compiled: Path, tmp_path: Path) -> None:
    """A user's C++ build may compile model_pte.c as C++ (which wants room
    for the string's NUL): the array is then one byte longer, the program's
    bytes and its size variable the same."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    image = serialize.device_image((compiled / "model.pte").read_bytes())
    main = tmp_path / "main.cc"
    main.write_text('#include "model_pte.h"\n#include <cstdio>\n'
                    "int main() { std::fwrite(tmcu_model_pte, 1, tmcu_model_pte_size, stdout); return 0; }\n")
    subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{compiled}", "-x", "c++",
                    str(compiled / "model_pte.c"), "-x", "none", str(main), "-o", str(tmp_path / "dump")], check=True)
    assert subprocess.run([str(tmp_path / "dump")], capture_output=True, check=True).stdout == image
