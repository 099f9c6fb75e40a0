"""`torchmcu export --arduino`: the library's layout and metadata, only the
kernels the model uses, a warning-free compile for Cortex-M0+ and Cortex-M4,
and the exported runtime built for mps2-an386 (Cortex-M4F) and run in QEMU
against the reference.

Compile-only checks: the Arduino platform layer and the sketch include
<Arduino.h>, which no Arduino core provides here. Those files are compiled
against a tiny Arduino.h this test writes into its tmp dir (FAKE_ARDUINO_H:
declarations only, of exactly what they use); nothing is linked against it.
A real sketch build needs arduino-cli and a Cortex-M core and runs where
they are installed.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu import cli
from torchmcu.boards import board_sources, load_board
from torchmcu.compiler import compile
from torchmcu.export.arduino import ArduinoExportError, export_arduino
from torchmcu.linker import linker_script
from torchmcu.program.kernel_table import kernel_symbol
from torchmcu.sim import run_qemu, runner
from torchmcu.sources import CFLAGS, CXXFLAGS, FIRMWARE

BOARD = "mps2-an386"
M0PLUS = ["-mcpu=cortex-m0plus", "-mthumb"]
M4F = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
WARNINGS = ["-Wall", "-Wextra", "-Werror"]
# Every field the 1.5 library format requires (category and architectures
# have defaults, but a library should state them), and `includes`.
REQUIRED_PROPERTIES = ("name", "version", "author", "maintainer", "sentence", "paragraph", "category",
                       "url", "architectures")
CATEGORIES = {"Display", "Communication", "Signal Input/Output", "Sensors", "Device Control", "Timing",
              "Data Storage", "Data Processing", "Other", "Uncategorized"}
# The implementation file of each op code these models use, under
# src/kernels/portable/ (a kernel object lives in its family's
# ops_<family>.cpp; None: no file beyond it).
IMPLEMENTATION = {
    "CONV2D_F32": "conv/conv2d_f32.cpp", "MAX_POOL2D_F32": "pool_resize/pool2d_f32.cpp",
    "LINEAR_F32": "conv/linear_f32.cpp", "PERMUTE": "shape_views/permute.cpp", "COPY": None,
    "CLAMP_F32": "elementwise/unary_f32.cpp", "QUANTIZE_S8": "elementwise/quantize.cpp",
    "DEQUANTIZE_S8": "elementwise/quantize.cpp", "CONV2D_S8": "conv/conv2d_s8.cpp",
    "MAX_POOL2D_S8": "pool_resize/pool2d_s8.cpp", "LINEAR_S8": "conv/linear_s8.cpp",
    "CLAMP_S8": "elementwise/quantize.cpp",
}
# The family of each (its folder, and its kernel objects' ops_<family>.cpp).
FAMILY = {
    "CONV2D_F32": "conv", "MAX_POOL2D_F32": "pool_resize", "LINEAR_F32": "conv", "PERMUTE": "shape_views",
    "COPY": "shape_views", "CLAMP_F32": "elementwise", "QUANTIZE_S8": "elementwise",
    "DEQUANTIZE_S8": "elementwise", "CONV2D_S8": "conv", "MAX_POOL2D_S8": "pool_resize", "LINEAR_S8": "conv",
    "CLAMP_S8": "elementwise",
}

# Declarations only: what platform_arduino.cpp, serial_io.cpp and the sketch
# use of the Arduino core. Compile-only; never linked.
FAKE_ARDUINO_H = """\
// Test stand-in for an Arduino core's Arduino.h: declarations only.
#pragma once
#include <stddef.h>
#include <stdint.h>
class FakeSerial {
 public:
  void begin(unsigned long baud);
  explicit operator bool() const;
  int available();
  size_t readBytes(char* buffer, size_t length);
  size_t write(const uint8_t* buffer, size_t size);
  void flush();
  size_t print(const char* s);
  size_t print(char c);
  size_t print(int n);
  size_t print(unsigned n);
  size_t print(long n);
  size_t print(unsigned long n);
  size_t print(double x, int digits);
  size_t println(const char* s);
  size_t println();
};
extern FakeSerial Serial;
unsigned long micros();
unsigned long millis();
void delay(unsigned long ms);
"""


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    model = SmallCNN().eval()
    x = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    root = tmp_path_factory.mktemp("arduino-models")
    out = {}
    for quant in ("float32", "int8"):
        out[quant] = compile(model, (x,), BOARD, root / f"cnn-{quant}", quant=quant, progress=False).out_dir
    return out


@pytest.fixture(scope="module")
def libraries(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("arduino-libs")
    out = {}
    for quant, mdir in models.items():
        lib = root / f"lib-{quant}"
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = cli.main(["export", str(mdir), "--arduino", str(lib), "--name", f"SmallCnn_{quant}"])
        assert status == 0, err.getvalue()
        out[quant] = lib
    return out


def _properties(lib: Path) -> dict[str, str]:
    props = {}
    for line in (lib / "library.properties").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not key=value: {line!r}"
            props[key] = value
    return props


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_layout_and_metadata(models: dict[str, Path], libraries: dict[str, Path], quant: str) -> None:
    lib = libraries[quant]
    name = f"SmallCnn_{quant}"
    props = _properties(lib)
    for key in REQUIRED_PROPERTIES:
        assert props.get(key), f"library.properties lacks {key}"
    assert props["name"] == name
    assert re.fullmatch(r"\d+\.\d+\.\d+", props["version"])  # semver
    assert props["category"] in CATEGORIES
    assert props["url"].startswith("https://")
    assert "avr" not in props["architectures"].split(",")
    assert props["includes"] == f"{name}.h" and (lib / "src" / f"{name}.h").is_file()
    sketch = lib / "examples" / name / f"{name}.ino"  # a sketch's folder and .ino share a name
    assert sketch.is_file()
    text = sketch.read_text()
    assert f"#include <{name}.h>" in text and "void setup()" in text and "void loop()" in text
    assert "Serial.begin" in text and "tmcu_arduino_serve" in text
    files = [p.relative_to(lib).as_posix() for p in lib.rglob("*") if p.is_file()]
    # Arduino compiles .c/.cpp/.S (recursively) under src/ only: no .cc left.
    assert not [f for f in files if f.endswith((".cc", ".cxx"))]
    assert {f.split("/")[0] for f in files} == {"library.properties", "src", "examples", "extras"}
    # The only header at the root of src/ is the library's interface.
    assert [f for f in files if re.fullmatch(r"src/[^/]+\.h", f)] == [f"src/{name}.h"]
    # Quoted includes are relative to the including file and name files of the library.
    for f in files:
        if f.endswith((".h", ".c", ".cpp", ".ino")):
            for inc in re.findall(r'#\s*include\s*"([^"]+)"', (lib / f).read_text()):
                assert ((lib / f).parent / inc).resolve().is_file(), f"{f}: {inc}"
    # The embedded example input is the compile's, in the program's input dtype.
    meta = runner.load_meta(models[quant])
    with np.load(models[quant] / "example_inputs.npz") as z:
        sample = runner.program_samples(meta, runner.split_samples(meta, [z[k] for k in z.files]))[0]
    embedded = re.search(r"input_0\[\d+\] = \{(.*?)\};", (lib / "src/model/example_input.c").read_text(), re.DOTALL)
    assert embedded is not None
    assert bytes(int(v, 16) for v in re.findall(r"0x([0-9a-f]{2})", embedded.group(1))) == sample[0].tobytes()


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_src_has_exactly_the_kernels_the_model_uses(models: dict[str, Path], libraries: dict[str, Path],
                                                    quant: str) -> None:
    lib = libraries[quant]
    codes = [c for c in (models[quant] / "kernels.txt").read_text().split()]
    unknown = sorted(set(codes) - set(IMPLEMENTATION))
    assert not unknown, f"the model now uses {unknown}: add them to IMPLEMENTATION"
    kernels_dir = lib / "src" / "kernels" / "portable"
    sources = sorted(p.relative_to(kernels_dir).as_posix() for p in kernels_dir.rglob("*.cpp"))
    holders = {f"{FAMILY[c]}/ops_{FAMILY[c]}.cpp" for c in codes}
    expected = sorted(holders | {IMPLEMENTATION[c] for c in codes if IMPLEMENTATION[c]})
    assert sources == expected
    # The kernel objects defined are exactly the model's op codes.
    defined = set()
    for p in kernels_dir.rglob("*.cpp"):
        defined |= set(re.findall(r"^const Kernel (k\w+) =", p.read_text(), re.MULTILINE))
    assert defined == {kernel_symbol(c) for c in codes}
    table = (lib / "src" / "model" / "kernel_table.cpp").read_text()
    assert sorted(re.findall(r"&portable::(k\w+),", table)) == sorted(kernel_symbol(c) for c in codes)
    manifest = json.loads((lib / "extras" / "torchmcu.json").read_text())
    assert manifest["kernel_files"] == sources and manifest["op_codes"] == codes


def _compile_all(jobs: list[list[str]]) -> None:
    def one(cmd: list[str]) -> str | None:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        return None if proc.returncode == 0 else f"{' '.join(cmd)}\n{proc.stderr}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = [e for e in pool.map(one, jobs) if e]
    assert not errors, "\n".join(errors)


def _compile_library(lib: Path, cpu: list[str], std: str, tmp: Path) -> None:
    """Every source under src/ and the sketch, as an Arduino core would
    compile them (only src/ on the include path; the sketch gets
    `#include <Arduino.h>` prepended)."""
    fake = tmp / "fake-arduino"
    fake.mkdir(exist_ok=True)
    (fake / "Arduino.h").write_text(FAKE_ARDUINO_H)
    obj = tmp / "obj"
    obj.mkdir(exist_ok=True)
    cxx = ["arm-none-eabi-g++", *cpu, "-Os", std, "-fno-rtti", "-fno-exceptions", "-ffunction-sections",
           "-fdata-sections", *WARNINGS, f"-I{lib / 'src'}", f"-I{fake}"]
    cc = ["arm-none-eabi-gcc", *cpu, "-Os", "-std=gnu11", "-ffunction-sections", "-fdata-sections", *WARNINGS,
          f"-I{lib / 'src'}"]
    jobs = []
    for i, src in enumerate(sorted((lib / "src").rglob("*"))):
        if src.suffix in (".c", ".cpp"):
            jobs.append([*(cc if src.suffix == ".c" else cxx), "-c", str(src), "-o", str(obj / f"{i}.o")])
    assert len(jobs) >= 8
    for sketch in (lib / "examples").glob("*/*.ino"):
        jobs.append([*cxx, "-x", "c++", "-include", "Arduino.h", "-c", str(sketch), "-o", str(obj / "sketch.o")])
    _compile_all(jobs)


@needs_arm_gcc
@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_src_compiles_for_cortex_m0plus(libraries: dict[str, Path], quant: str, tmp_path: Path) -> None:
    # As the RP2040 core does: C++17 for a Cortex-M0+.
    _compile_library(libraries[quant], M0PLUS, "-std=gnu++17", tmp_path)


@needs_arm_gcc
def test_src_compiles_for_cortex_m4(libraries: dict[str, Path], tmp_path: Path) -> None:
    # As the mbed core of the Nano 33 BLE does: C++14 for a Cortex-M4F.
    _compile_library(libraries["float32"], M4F, "-std=gnu++14", tmp_path)


@needs_arm_gcc
@needs_qemu
@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_exported_runtime_runs_in_qemu(models: dict[str, Path], libraries: dict[str, Path], quant: str,
                                       tmp_path: Path) -> None:
    """The library's src/ (all but its Arduino layer) is complete: with our
    own startup, platform and main for mps2-an386 it builds and gives the
    reference's outputs (PyTorch's within tolerance, or the int8 reference
    bit for bit)."""
    lib, mdir = libraries[quant], models[quant]
    board = load_board(BOARD)
    meta = runner.load_meta(mdir)
    src = lib / "src"
    sources = [p for p in sorted(src.rglob("*")) if p.suffix in (".c", ".cpp")
               and "arduino" not in p.relative_to(src).parts]
    sources += [FIRMWARE / "app" / "main_firmware.cc", *board_sources()]
    inc = [f"-I{src}", f"-I{src / 'model'}"]  # main_firmware.cc includes "model_pte.h"
    jobs, objs = [], []
    for i, s in enumerate(sources):
        o = tmp_path / f"{i}.o"
        objs.append(str(o))
        if s.suffix == ".c":
            jobs.append(["arm-none-eabi-gcc", *board.cflags, "-Os", *CFLAGS, *inc, *board.define_flags,
                         "-c", str(s), "-o", str(o)])
        else:
            jobs.append(["arm-none-eabi-g++", *board.cflags, "-Os", *CXXFLAGS, *inc, *board.define_flags,
                         "-c", str(s), "-o", str(o)])
    _compile_all(jobs)
    ld = tmp_path / "firmware.ld"
    ld.write_text(linker_script(board, {a["section"]: a["name"] for a in meta["arenas"]}, meta.get("program_memory")))
    elf = tmp_path / "firmware.elf"
    subprocess.run(["arm-none-eabi-g++", *objs, *board.ldflags(ld), "-o", str(elf)], check=True)

    with np.load(mdir / "example_inputs.npz") as z:
        inputs = [z[k] for k in z.files]
    samples = runner.split_samples(meta, inputs)
    res = run_qemu(board, elf, runner.io_blob(runner.program_samples(meta, samples)), timeout_s=60)
    info, outputs = runner.parse_protocol(res.stdout, meta["outputs"])
    assert res.exit_code == 0 and info["done_status"] == 0, res.stdout
    expected, tol = runner.expected(mdir, samples)
    mismatch, worst = runner.compare(outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"


# A host stand-in for an Arduino core, to run the sketch as a process: Serial
# is the process's stdin/stdout (a pty in the test), micros() the monotonic
# clock, main() calls setup() then loop() until the host side hangs up. It
# implements only what FAKE_ARDUINO_H declares.
HOST_ARDUINO_CORE = """\
#include <Arduino.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

FakeSerial Serial;
namespace {
void out(const char* s, size_t n) {
  while (n > 0) { const ssize_t w = ::write(1, s, n); if (w <= 0) _exit(3); s += w; n -= size_t(w); }
}
size_t outf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
size_t outf(const char* fmt, ...) {
  char buf[64]; va_list ap; va_start(ap, fmt); const int n = vsnprintf(buf, sizeof buf, fmt, ap); va_end(ap);
  out(buf, size_t(n)); return size_t(n);
}
}  // namespace
void FakeSerial::begin(unsigned long) {}
FakeSerial::operator bool() const { return true; }
int FakeSerial::available() {
  pollfd p{0, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return 0;
  if ((p.revents & POLLIN) == 0) _exit(0);  // the host hung up
  return 1;
}
size_t FakeSerial::readBytes(char* buffer, size_t length) {  // Stream's 1 s timeout
  size_t got = 0;
  const unsigned long start = millis();
  while (got < length && millis() - start < 1000) {
    pollfd p{0, POLLIN, 50};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t r = ::read(0, buffer + got, length - got);
    if (r <= 0) _exit(0);
    got += size_t(r);
  }
  return got;
}
size_t FakeSerial::write(const uint8_t* b, size_t n) { out(reinterpret_cast<const char*>(b), n); return n; }
void FakeSerial::flush() {}
size_t FakeSerial::print(const char* s) { return outf("%s", s); }
size_t FakeSerial::print(char c) { return outf("%c", c); }
size_t FakeSerial::print(int n) { return outf("%d", n); }
size_t FakeSerial::print(unsigned n) { return outf("%u", n); }
size_t FakeSerial::print(long n) { return outf("%ld", n); }
size_t FakeSerial::print(unsigned long n) { return outf("%lu", n); }
size_t FakeSerial::print(double x, int digits) { return outf("%.*f", digits, x); }
size_t FakeSerial::println(const char* s) { return outf("%s\\r\\n", s); }
size_t FakeSerial::println() { return outf("\\r\\n"); }
unsigned long micros() {
  timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long)(t.tv_sec * 1000000ull + t.tv_nsec / 1000);
}
unsigned long millis() { return micros() / 1000; }
void delay(unsigned long ms) { usleep(useconds_t(ms * 1000)); }
void setup();
void loop();
int main() { setup(); for (;;) loop(); }
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed (make setup installs it)")
def test_sketch_serves_run_device(models: dict[str, Path], libraries: dict[str, Path], tmp_path: Path) -> None:
    """The sketch and the library's Arduino layer, built for the host against
    HOST_ARDUINO_CORE and run as the board behind a pty: it prints the
    example's outputs at boot, then `torchmcu run --device` gets the
    reference's outputs from it."""
    import os
    import tty

    pytest.importorskip("serial", reason="pyserial not installed (make setup installs it)")
    from torchmcu.sim.serial import run_device

    lib, mdir = libraries["float32"], models["float32"]
    fake = tmp_path / "core"
    fake.mkdir()
    (fake / "Arduino.h").write_text(FAKE_ARDUINO_H)
    (fake / "core.cpp").write_text(HOST_ARDUINO_CORE)
    sketch = next((lib / "examples").glob("*/*.ino"))
    common = ["-Og", "-ffunction-sections", "-fdata-sections", f"-I{lib / 'src'}", f"-I{fake}"]
    jobs, objs = [], []
    units = [p for p in sorted((lib / "src").rglob("*")) if p.suffix in (".c", ".cpp")] + [fake / "core.cpp", sketch]
    for i, src in enumerate(units):
        obj = tmp_path / f"{i}.o"
        objs.append(str(obj))
        if src.suffix == ".c":
            jobs.append(["gcc", *common, "-std=gnu11", "-c", str(src), "-o", str(obj)])
        else:
            jobs.append(["g++", *common, "-std=gnu++17", "-fno-rtti", "-fno-exceptions", "-x", "c++",
                         "-include", "Arduino.h", "-c", str(src), "-o", str(obj)])
    _compile_all(jobs)
    exe = tmp_path / "board"
    subprocess.run(["g++", *objs, "-Wl,--gc-sections", "-o", str(exe)], check=True)

    meta = runner.load_meta(mdir)
    with np.load(mdir / "example_inputs.npz") as z:
        inputs = [z[k] for k in z.files]
    expected, tol = runner.expected(mdir, runner.split_samples(meta, inputs))
    master, slave = os.openpty()
    tty.setraw(slave)
    board = subprocess.Popen([str(exe)], stdin=master, stdout=master, stderr=subprocess.PIPE)
    try:
        boot = b""
        while b"tmcu: ready" not in boot:  # the sketch's own report of the example input
            assert select_readable(slave, 10), f"no boot output from the sketch: {boot!r}"
            boot += os.read(slave, 4096)
        printed = re.search(rb"output 0:([^\r\n]*)", boot)
        assert printed is not None, boot
        values = np.array([float(v) for v in printed.group(1).split()], np.float32)
        np.testing.assert_allclose(values, expected[0].ravel(), atol=2e-6)  # printed with 6 decimals
        # Noise, then a blob of two samples where the sketch has room for one:
        # answered with bad io (80), drained, and the board stays in step.
        sample = runner.program_samples(meta, runner.split_samples(meta, inputs))[0]
        os.write(slave, b"hello\n" + runner.io_blob([sample, sample]))
        answer = b""
        while not re.search(rb"done status=80 samples=0\r?\n(.|\n)*tmcu: ready", answer):
            assert select_readable(slave, 10), f"no answer to the oversized request: {answer!r}"
            answer += os.read(slave, 4096)
        res = run_device(mdir, inputs, os.ttyname(slave), profile=True, timeout_s=10, settle_s=0.3)
    finally:
        board.kill()
        board.wait()
        os.close(slave)
        os.close(master)
    assert res.exit_code == 0, res.raw
    assert len(res.op_ticks) == len(json.loads((mdir / "report.json").read_text())["ops"])
    mismatch, worst = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"


def select_readable(fd: int, timeout_s: float) -> bool:
    import select

    return bool(select.select([fd], [], [], timeout_s)[0])


def test_refuses_a_directory_it_did_not_write(models: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ArduinoExportError, match="not a library torchmcu exported"):
        export_arduino(models["float32"], tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    with pytest.raises(ArduinoExportError, match="library name"):
        export_arduino(models["float32"], tmp_path / "lib", name="9 bad name")


ARDUINO_FQBNS = ("arduino:mbed_nano:nano33ble", "rp2040:rp2040:rpipico", "arduino:renesas_uno:minima",
                 "arduino:mbed_rp2040:pico")


def _installed_fqbn() -> str | None:
    if shutil.which("arduino-cli") is None:
        return None
    proc = subprocess.run(["arduino-cli", "core", "list", "--format", "json"], check=False, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        return None
    listing = json.loads(proc.stdout or "{}")
    cores = listing.get("platforms", listing) if isinstance(listing, dict) else listing
    ids = {c.get("id") for c in cores if isinstance(c, dict)}
    return next((f for f in ARDUINO_FQBNS if f.rsplit(":", 1)[0] in ids), None)


def test_sketch_builds_with_arduino_cli(libraries: dict[str, Path], tmp_path: Path) -> None:
    fqbn = _installed_fqbn()
    if fqbn is None:
        pytest.skip("arduino-cli with a Cortex-M core (one of " + ", ".join(ARDUINO_FQBNS) + ") is not installed")
    lib = libraries["int8"]
    sketch = next((lib / "examples").glob("*/*.ino")).parent
    proc = subprocess.run(["arduino-cli", "compile", "--fqbn", fqbn, "--library", str(lib),
                           "--build-path", str(tmp_path / "build"), str(sketch)], check=False, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
