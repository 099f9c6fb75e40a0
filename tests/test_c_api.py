"""The C API of a compiled model (NAME.h, NAME.cc) from a user's own C code:
the README's example (examples/c_api/main.c) built with `torchmcu build --app`
and run in QEMU, the same code linked against `torchmcu build --lib`, the
header as strict C99, and the API's edges (before init, out of range, a
program that is not the one the header describes) on the host."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu.boards import board_sources, load_board
from torchmcu.compiler import compile
from torchmcu.linker import linker_script
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner
from torchmcu.sources import FIRMWARE, runtime_sources

EXAMPLE = REPO / "examples" / "c_api" / "main.c"
TORCHMCU = [sys.executable, "-m", "torchmcu"]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*TORCHMCU, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "TORCHMCU_PLOT": "0"})
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def example_digit() -> np.ndarray:
    """The hand-drawn digit of examples/c_api/main.c, as the model takes it."""
    body = re.search(r"kDigit\[64\] = \{(.*?)\};", EXAMPLE.read_text(), re.DOTALL).group(1)
    pixels = [int(v) for v in re.findall(r"\b\d+\b", re.sub(r"/\*.*?\*/", "", body))]
    assert len(pixels) == 64
    return (np.asarray(pixels, np.float32) / 16.0).reshape(1, 64)


@pytest.fixture(scope="module")
def digits_float(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits_float")
    cli("compile", "examples/digits.py:make", "--board", "mps2-an505", "-o", str(out))
    return out


@needs_qemu
@needs_arm_gcc
def test_own_main_runs_in_qemu_and_returns_the_class(digits_float: Path) -> None:
    out = digits_float
    build = cli("build", str(out), "--app", str(EXAMPLE)).stdout
    assert re.search(r"^RAM [\d,]+ B = arenas", build, re.MULTILINE) and "stack:" in build
    proc = cli("run", str(out), "--sim", "qemu", check=False)
    ep = torch.export.load(str(out / "model.pt2"))
    with torch.no_grad():
        scores = ep.module()(torch.from_numpy(example_digit()))[0].numpy()
    expected = int(scores.argmax())
    assert proc.returncode == expected, proc.stdout + proc.stderr  # main's return value is the exit status
    assert f"class {expected}\n" in proc.stdout
    printed = [int(v) for v in re.search(r"scores \(x1000\):([- \d]+)", proc.stdout).group(1).split()]
    assert np.allclose(printed, scores * 1000, atol=2), (printed, scores)
    assert re.search(r"stack: \d+ B used \(high-water mark, measured\), [\d,]+ B computed", proc.stderr)
    meta = json.loads((out / "size.json").read_text())
    assert meta["kind"] == "app" and meta["parts"]["app"] > 0


@needs_qemu
@needs_arm_gcc
def test_own_main_with_int8_io(tmp_path: Path) -> None:
    """The same main.c over an int8 model that takes and gives int8: the
    header says so, and the class is the reference interpreter's."""
    cli("compile", "examples/digits.py:make", "--board", "mps3-an547", "-o", str(tmp_path), "--quant", "int8",
        "--io", "int8", "--symbol", "model")
    header = (tmp_path / "model.h").read_text()
    assert "#define TMCU_MODEL_INPUT0_DTYPE TMCU_DTYPE_INT8" in header
    assert "#define TMCU_MODEL_INPUT0_TYPE int8_t" in header
    meta = runner.load_meta(tmp_path)
    assert f"#define TMCU_MODEL_INPUT0_ZERO_POINT {meta['inputs'][0]['zero_point']}" in header
    cli("build", str(tmp_path), "--app", str(EXAMPLE))
    proc = cli("run", str(tmp_path), check=False)
    sample = runner.program_samples(meta, [[example_digit()]])
    expected = int(run_reference((tmp_path / "model.pte").read_bytes(), sample)[0][0].argmax())
    assert proc.returncode == expected and f"class {expected}\n" in proc.stdout, proc.stdout + proc.stderr


@needs_qemu
@needs_arm_gcc
def test_static_library_links_into_ones_own_image(digits_float: Path, tmp_path: Path) -> None:
    """build --lib: the archive and include folder alone (with the board's
    startup and a linker script, as one's own project would have) make a
    working image."""
    out = digits_float
    proc = cli("build", str(out), "--lib")
    archive = out / "lib" / "libtorchmcu_model.a"
    assert archive.is_file() and str(archive) in proc.stdout
    include = out / "lib" / "include"
    assert (include / "model.h").is_file() and (include / "torchmcu" / "torchmcu.h").is_file()
    members = subprocess.run(["arm-none-eabi-ar", "t", str(archive)], capture_output=True, text=True,
                             check=True).stdout.split()
    assert "model.o" in members and "method.o" in members and "main_firmware.o" not in members
    assert not any(m.startswith(("startup", "platform")) for m in members)
    board = load_board("mps2-an505")
    meta = runner.load_meta(out)
    ld = tmp_path / "own.ld"
    ld.write_text(linker_script(board, {a["section"]: a["name"] for a in meta["arenas"]}, stack_size=8192))
    elf = tmp_path / "own.elf"
    flags = [*board.cflags, "-Os", "-ffunction-sections", "-fdata-sections", *board.define_flags]
    subprocess.run(["arm-none-eabi-g++", *flags, "-std=c++17", "-fno-rtti", "-fno-exceptions",
                    f"-I{FIRMWARE / 'boards'}", "-x", "c", str(EXAMPLE), "-x", "none",
                    f"-I{include}", f"-I{FIRMWARE}", *map(str, board_sources()), str(archive),
                    *board.ldflags(ld), "-o", str(elf)], check=True, capture_output=True, text=True)
    from torchmcu.sim.qemu import QemuRunner

    res = QemuRunner().run(board, elf, None, timeout_s=60)
    assert "class " in res.stdout and 0 <= res.exit_code <= 9, res.stdout


@needs_arm_gcc
def test_header_is_strict_c99(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TwoHeads().eval()
    compile(model, (torch.randn(1, 3, 8, 8), torch.randn(1, 5)), "mps3-an547", tmp_path, quant="int8", io="int8",
            io_layout="nhwc", symbol="heads", progress=False)
    src = tmp_path / "use.c"
    src.write_text('#include "heads.h"\n'
                   "static const int dims[] = TMCU_HEADS_INPUT0_DIMS;\n"
                   "int probe(void) { TMCU_HEADS_OUTPUT1_TYPE* o = (TMCU_HEADS_OUTPUT1_TYPE*)tmcu_heads_output(1);\n"
                   "  return dims[3] + (int)sizeof(*o) + tmcu_heads_init() + tmcu_heads_invoke() +\n"
                   "         tmcu_heads_reset() + (tmcu_heads_input(0) != 0) + (tmcu_error_name(0)[0]); }\n")
    for cc in ("arm-none-eabi-gcc", "gcc"):
        subprocess.run([cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", f"-I{tmp_path}",
                        f"-I{FIRMWARE / 'include'}", "-fsyntax-only", str(src)], check=True)
    header = (tmp_path / "heads.h").read_text()
    meta = runner.load_meta(tmp_path)
    x = meta["inputs"][0]
    assert x["layout"] == "NHWC" and x["dims"] == [1, 8, 8, 3] and x["shape"] == [1, 3, 8, 8]
    assert '#define TMCU_HEADS_INPUT0_LAYOUT "NHWC"' in header
    assert "#define TMCU_HEADS_INPUT0_DIMS {1, 8, 8, 3}" in header
    assert f"#define TMCU_HEADS_INPUT0_BYTES {8 * 8 * 3}" in header
    assert "#define TMCU_HEADS_NUM_INPUTS 2" in header and "#define TMCU_HEADS_NUM_OUTPUTS 2" in header
    assert f"#define TMCU_HEADS_INPUT0_SCALE {x['scale']!r}f" in header


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(5, 6)

    def forward(self, x, v):
        return torch.relu(self.conv(x)), self.fc(v)


HOST_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "model.h"

int main(int argc, char** argv) {
  if (tmcu_model_input(0) != NULL || tmcu_model_output(0) != NULL) return 1;  /* before init */
  if (tmcu_model_invoke() != TMCU_ERROR_INVALID_ARGUMENT) return 2;
  if (strcmp(tmcu_error_name(TMCU_ERROR_INVALID_PROGRAM), "InvalidProgram") != 0) return 3;
  if (strcmp(tmcu_error_name(0x7f), "Unknown") != 0 || strcmp(tmcu_error_name(0), "Ok") != 0) return 4;
  int err = tmcu_model_init();
  printf("init %d %s\n", err, tmcu_error_name(err));
  if (err != TMCU_OK) return 0;
  if (tmcu_model_input(-1) != NULL || tmcu_model_input(TMCU_MODEL_NUM_INPUTS) != NULL) return 5;
  if (tmcu_model_output(TMCU_MODEL_NUM_OUTPUTS) != NULL) return 6;
  FILE* f = fopen(argv[1], "rb");
  if (f == NULL || fread(tmcu_model_input(0), 1, TMCU_MODEL_INPUT0_BYTES, f) != TMCU_MODEL_INPUT0_BYTES) return 7;
  fclose(f);
  for (int pass = 0; pass < 2; ++pass) {  /* the second after a reset: the same result */
    if (pass == 1 && tmcu_model_reset() != TMCU_OK) return 8;
    if (pass == 1) {  /* a reset keeps nothing of the inputs' promise: write them again */
      f = fopen(argv[1], "rb");
      if (f == NULL || fread(tmcu_model_input(0), 1, TMCU_MODEL_INPUT0_BYTES, f) != TMCU_MODEL_INPUT0_BYTES) return 9;
      fclose(f);
    }
    err = tmcu_model_invoke();
    if (err != TMCU_OK) return 10;
    const unsigned char* o = (const unsigned char*)tmcu_model_output(0);
    printf("out");
    for (int i = 0; i < TMCU_MODEL_OUTPUT0_BYTES; ++i) printf(" %02x", o[i]);
    printf("\n");
  }
  return 0;
}
"""


HOST_FLAGS = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-I{FIRMWARE}",
              f"-I{FIRMWARE / 'include'}"]


def _compile(src: Path, obj: Path, inc: list[str]) -> Path:
    lang = ["gcc", "-std=c11"] if src.suffix == ".c" else ["g++", "-std=c++17", "-fno-rtti", "-fno-exceptions"]
    subprocess.run([*lang, *HOST_FLAGS, *inc, "-c", str(src), "-o", str(obj)], check=True)
    return obj


def _host_build(runtime: list[Path], model_dir: Path, api_dir: Path, exe: Path, work: Path) -> None:
    """The runtime's objects, the model's arrays (model_dir) and a C API
    (api_dir: its header and source, which reads model_dir's program)."""
    work.mkdir()
    (work / "host_main.c").write_text(HOST_MAIN)
    for name in ("model.h", "model.cc"):  # the API, beside the program it is given
        (work / name).write_text((api_dir / name).read_text())
    for name in ("model_pte.h", "model_pte.c", "model_arenas.h", "model_arenas.c", "kernel_table.cc"):
        (work / name).write_text((model_dir / name).read_text())
    objs = [_compile(work / n, work / (n + ".o"), [f"-I{work}"])
            for n in ("host_main.c", "model.cc", "model_pte.c", "model_arenas.c", "kernel_table.cc")]
    subprocess.run(["g++", *HOST_FLAGS, *map(str, runtime + objs), "-o", str(exe)], check=True)


def test_api_edges_on_the_host(tmp_path: Path) -> None:
    """Before init nothing is handed out; init then runs the model bit for bit
    as the reference does, twice over a reset; a header from another compile
    (other input bytes) makes init refuse the program: InvalidProgram."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).eval()
    x = torch.randn(1, 6)
    a = tmp_path / "a"
    compile(model, (x,), "mps2-an505", a, quant="int8", io="int8", progress=False)
    rt = tmp_path / "runtime"
    rt.mkdir()
    runtime = [_compile(src, rt / f"{src.parent.name}_{src.stem}.o", []) for src in runtime_sources()
               if src.parent.name != "app"]  # the line-protocol app needs a platform: not the API's business
    exe = tmp_path / "api_host"
    _host_build(runtime, a, a, exe, tmp_path / "work_a")
    meta = runner.load_meta(a)
    sample = runner.program_samples(meta, [[x.numpy()]])[0]
    blob = tmp_path / "in.bin"
    blob.write_bytes(sample[0].tobytes())
    proc = subprocess.run([str(exe), str(blob)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "init 0 Ok" in proc.stdout
    expected = run_reference((a / "model.pte").read_bytes(), [sample])[0][0]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("out")]
    assert len(lines) == 2 and lines[0] == lines[1]
    got = np.frombuffer(bytes(int(v, 16) for v in lines[0].split()[1:]), np.int8)
    np.testing.assert_array_equal(got, expected.reshape(-1))

    b = tmp_path / "b"  # another model: 7 inputs, whose program a's header does not describe
    compile(nn.Sequential(nn.Linear(7, 3)).eval(), (torch.randn(1, 7),), "mps2-an505", b, quant="int8", io="int8",
            progress=False)
    _host_build(runtime, b, a, tmp_path / "api_mixed", tmp_path / "work_b")
    proc = subprocess.run([str(tmp_path / "api_mixed"), str(blob)], capture_output=True, text=True)
    assert proc.returncode == 0 and "init 32 InvalidProgram" in proc.stdout, proc.stdout + proc.stderr


def test_reserved_symbols_are_refused(tmp_path: Path) -> None:
    from torchmcu.errors import CompileError

    with pytest.raises(CompileError, match="collide"):
        compile(nn.Linear(2, 2), (torch.randn(1, 2),), "mps2-an505", tmp_path, symbol="platform", progress=False)


def test_version_and_module_entry() -> None:
    from torchmcu import __version__

    proc = cli("--version")
    assert proc.stdout.strip() == f"torchmcu {__version__}"
    assert "compile" in cli("--help").stdout


def test_compile_from_a_saved_exported_program(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh()).eval()
    x = torch.randn(1, 4)
    pt2 = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(model, (x,)), str(pt2))
    out = tmp_path / "out"
    proc = cli("compile", str(pt2), "--board", "mps2-an505", "-o", str(out))
    assert "LINEAR_F32" in (out / "kernels.txt").read_text(), proc.stdout
    res = cli("run", str(out), "--sim", "host", "--check", "--json")
    assert json.loads(res.stdout)["check"]["passed"] is True
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    proc = cli("compile", str(bad), "--board", "mps2-an505", "-o", str(out), check=False)
    assert proc.returncode == 2 and "not a saved ExportedProgram" in proc.stderr and "Traceback" not in proc.stderr
