"""The program's CRC32 (`torchmcu compile --crc`, compile(crc=True); issue #18).

A CRC program carries zlib's CRC-32 of all its bytes in Program.crc32 (the
field's own 4 bytes counted as zero); Program::load recomputes it over the
exact size it is given and refuses a mismatch with ChecksumMismatch (0x25),
at both verification levels, unless the runtime is built with
TORCHMCU_PROGRAM_CRC=0. Without --crc nothing changes.

- The firmware's crc32() equals zlib.crc32 on a few buffers, whole and chained
  at odd splits (the word loop's unaligned start and tail).
- Every sampled flipped byte of a CRC program (weights, padding, tables, the
  last byte; model.pte and the device image) is refused with ChecksumMismatch
  by Program::load under ASan/UBSan; the bytes that locate the field are
  refused too or only hide it; a half-flashed or truncated program is refused.
- The digits MLP (int8) compiled with --crc runs bit-exact with the one
  compiled without, on the host runner and in QEMU; the flipped one is
  refused at load (status 37) on both.
- Without --crc: no field, and a flipped weight still loads (the gap the CRC
  closes); report.txt and `inspect` show the CRC.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from test_runtime_features import run_host
from torchmcu.builder.firmware import build_firmware
from torchmcu.program import schema, serialize
from torchmcu.program.inspect import describe
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import digits

OK, INVALID_PROGRAM, CHECKSUM_MISMATCH = 0x00, 0x20, 0x25

CALLER = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include "core/program.h"
using namespace torchmcu;

alignas(16) static uint8_t buf[1 << 20];
alignas(16) static uint8_t work[1 << 20];

// Loads an exactly sized copy (ASan sees a read past its end) at both levels.
static void load(const uint8_t* data, size_t n) {
  uint8_t* p = static_cast<uint8_t*>(operator new[](n ? n : 1, std::align_val_t(16)));
  std::memcpy(p, data, n);
  const Result<Program> full = Program::load(p, n, Verification::kFull);
  const Result<Program> minimal = Program::load(p, n, Verification::kMinimal);
  std::printf("%u %u\n", unsigned(full.error()), unsigned(minimal.error()));
  operator delete[](p, std::align_val_t(16));
}

// caller crc FILE K...: crc32 of the file chained at each K.
// caller load FILE [xOFF:MASK | cN | eOFF:VALUE]...: the file as it is, then
// with one byte flipped (xor MASK), cut to N bytes, or erased from OFF on.
int main(int argc, char** argv) {
  if (std::strcmp(argv[1], "name") == 0) {
    std::printf("%s\n", error_name(Error::ChecksumMismatch));
    return 0;
  }
  std::FILE* f = std::fopen(argv[2], "rb");
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  if (std::strcmp(argv[1], "crc") == 0) {
    for (int i = 3; i < argc; ++i) {
      const size_t k = std::strtoul(argv[i], nullptr, 10);
      std::printf("%u\n", unsigned(crc32(buf + k, n - k, crc32(buf, k))));
    }
    return 0;
  }
  load(buf, n);
  for (int i = 3; i < argc; ++i) {
    unsigned a = 0, b = 0;
    std::sscanf(argv[i] + 1, "%u:%u", &a, &b);
    std::memcpy(work, buf, n);
    size_t m = n;
    if (argv[i][0] == 'x') work[a] ^= uint8_t(b);
    if (argv[i][0] == 'c') m = a;
    if (argv[i][0] == 'e') std::memset(work + a, int(b), n - a);
    load(work, m);
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def caller(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The caller, built with the CRC check (1) and without (0)."""
    d = tmp_path_factory.mktemp("crc_caller")
    (d / "caller.cc").write_text(CALLER)
    exes = {}
    for crc in (1, 0):
        exes[crc] = d / f"caller{crc}"
        subprocess.run(["g++", "-std=c++17", "-O1", "-g", "-fno-rtti", "-fno-exceptions", "-Wall", "-Werror",
                        "-fsanitize=address,undefined", "-fno-sanitize-recover=all", f"-DTORCHMCU_PROGRAM_CRC={crc}",
                        f"-I{REPO / 'firmware'}", str(d / "caller.cc"), str(REPO / "firmware/core/program.cc"),
                        "-o", str(exes[crc])], check=True)
    return exes


def loads(exe: Path, tmp_path: Path, pte: bytes, edits: list[str]) -> list[tuple[int, int]]:
    """(full, minimal) load codes of the program as it is, then per edit."""
    path = tmp_path / "p.pte"
    path.write_bytes(pte)
    proc = subprocess.run([str(exe), "load", str(path), *edits], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [tuple(int(v) for v in line.split()) for line in proc.stdout.splitlines()]
    assert len(rows) == 1 + len(edits)
    return rows  # type: ignore[return-value]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The digits MLP at int8, with --crc and without, each compiled by the
    command line in a fresh process (the model trains in the process that
    compiles it: in a test worker whose earlier tests changed torch's state,
    its float sums could differ)."""
    out = {}
    for name, extra in (("crc", ["--crc"]), ("plain", [])):
        out[name] = tmp_path_factory.mktemp(f"digits_{name}")
        proc = subprocess.run([sys.executable, "-m", "torchmcu.cli", "compile", "examples/digits.py:make", "--board",
                               "mps3-an547", "--quant", "int8", "-o", str(out[name]), *extra], capture_output=True,
                              text=True, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def locator_bytes(pte: bytes) -> set[int]:
    """The bytes Program::load reads to find Program.crc32 (root offset,
    identifier, the root table's vtable offset, the vtable's size and the
    field's slot): a flip there may move or hide the field instead of
    changing what it covers."""
    root = int.from_bytes(pte[0:4], "little")
    vt = root - int.from_bytes(pte[root:root + 4], "little", signed=True)
    return {*range(8), *range(root, root + 4), *range(vt, vt + 4), vt + 24, vt + 25}


def sample_offsets(pte: bytes, n: int = 60, seed: int = 18) -> list[int]:
    """n random offsets outside the locator bytes, plus the first weight byte,
    the constant segment's last byte, the padding before it and the last byte."""
    tree = schema.decode(pte)
    seg = tree["constant_offset"]
    skip = locator_bytes(pte)
    rng = random.Random(seed)
    picked = {seg, seg + tree["constant_size"] // 2, seg - 1, len(pte) - 1}
    while len(picked) < n + 4:
        k = rng.randrange(len(pte))
        if k not in skip:
            picked.add(k)
    assert not picked & skip
    return sorted(picked)


def test_firmware_crc32_is_zlibs(caller: dict[int, Path], tmp_path: Path) -> None:
    name = subprocess.run([str(caller[1]), "name"], capture_output=True, text=True, check=True).stdout
    assert name.strip() == "ChecksumMismatch"
    rng = np.random.default_rng(18)
    buffers = [b"", b"123456789", bytes(rng.integers(0, 256, 1, dtype=np.uint8)),
               bytes(rng.integers(0, 256, 1001, dtype=np.uint8)), bytes(4096)]
    assert zlib.crc32(b"123456789") == 0xCBF43926  # the standard check value
    for data in buffers:
        path = tmp_path / "b.bin"
        path.write_bytes(data)
        splits = sorted({0, len(data), len(data) // 2, min(len(data), 3), min(len(data), 5)})
        out = subprocess.run([str(caller[1]), "crc", str(path), *map(str, splits)], capture_output=True,
                             text=True, check=True).stdout.split()
        assert [int(v) for v in out] == [zlib.crc32(data)] * len(splits), (len(data), splits)


@pytest.mark.parametrize("image", ["model.pte", "device"])
def test_every_flipped_byte_is_refused(programs: dict[str, Path], caller: dict[int, Path], tmp_path: Path,
                                       image: str) -> None:
    pte = (programs["crc"] / "model.pte").read_bytes()
    if image == "device":  # what model_pte.c holds: its own CRC
        pte = serialize.device_image(pte)
    assert serialize.program_crc(pte) is not None
    offsets = sample_offsets(pte)
    rng = random.Random(7)
    rows = loads(caller[1], tmp_path, pte, [f"x{k}:{rng.randrange(1, 256)}" for k in offsets])
    assert rows[0] == (OK, OK)  # Python's CRC is the one the firmware computes
    bad = {k: r for k, r in zip(offsets, rows[1:]) if r != (CHECKSUM_MISMATCH, CHECKSUM_MISMATCH)}
    assert not bad, f"{len(pte)} B program: flipped bytes not refused as ChecksumMismatch: {bad}"
    # The bytes that locate the field: refused, or (a flip that only hides the field) loads as the
    # program without its CRC would.
    locators = sorted(locator_bytes(pte))
    for mask in (0x01, 0x80, 0xFF):
        for k, r in zip(locators, loads(caller[1], tmp_path, pte, [f"x{k}:{mask}" for k in locators])[1:]):
            if OK in r:
                flipped = bytearray(pte)
                flipped[k] ^= mask
                assert serialize.crc_field(bytes(flipped)) is None, (k, mask, r)


def test_half_flashed_program_is_refused(programs: dict[str, Path], caller: dict[int, Path], tmp_path: Path) -> None:
    pte = serialize.device_image((programs["crc"] / "model.pte").read_bytes())
    half = len(pte) // 2
    rows = loads(caller[1], tmp_path, pte, [f"e{half}:255", f"e{half}:0", f"e{len(pte) - 16}:255",
                                            f"c{half}", f"c{len(pte) - 1}"])
    assert rows[0] == (OK, OK)
    for r in rows[1:]:
        assert r[0] != OK and r[1] != OK, rows
    assert rows[1:4] == [(CHECKSUM_MISMATCH, CHECKSUM_MISMATCH)] * 3  # the root table is intact: the CRC says it
    # A size larger than the program (a flash partition's) is not the program's: refused too.
    assert loads(caller[1], tmp_path, pte + bytes(16), [])[0] == (CHECKSUM_MISMATCH, CHECKSUM_MISMATCH)


def test_crc_configured_out_loads_as_without(programs: dict[str, Path], caller: dict[int, Path],
                                             tmp_path: Path) -> None:
    pte = (programs["crc"] / "model.pte").read_bytes()
    seg = schema.decode(pte)["constant_offset"]
    assert loads(caller[0], tmp_path, pte, [f"x{seg}:1"]) == [(OK, OK), (OK, OK)]


def test_without_crc_nothing_changes(programs: dict[str, Path], caller: dict[int, Path], tmp_path: Path) -> None:
    crc, plain = ((programs[k] / "model.pte").read_bytes() for k in ("crc", "plain"))
    assert serialize.crc_field(plain) is None and serialize.program_crc(plain) is None
    root = int.from_bytes(plain[0:4], "little")
    vt = root - int.from_bytes(plain[root:root + 4], "little", signed=True)
    assert int.from_bytes(plain[vt:vt + 2], "little") <= 24  # the vtable has no slot for it: the old layout
    # The same program otherwise: the tree but for crc32, and the constants.
    tc, tp = schema.decode(crc, derived=True), schema.decode(plain, derived=True)
    assert tc.pop("crc32") == serialize.program_crc(crc) and tp.pop("crc32") == 0
    tc.pop("constant_offset"), tp.pop("constant_offset")
    assert tc == tp
    assert crc[schema.decode(crc)["constant_offset"]:] == plain[schema.decode(plain)["constant_offset"]:]
    # Re-encoding a decoded tree keeps the CRC valid (tests edit programs this way).
    tree = schema.decode(crc)
    segment = crc[tree["constant_offset"]:]
    assert serialize.to_pte(tree, segment) == crc
    # Without a CRC, a flipped weight still loads: the gap --crc closes.
    seg = schema.decode(plain)["constant_offset"]
    assert loads(caller[1], tmp_path, plain, [f"x{seg}:1"]) == [(OK, OK), (OK, OK)]


def test_report_and_inspect_show_the_crc(programs: dict[str, Path]) -> None:
    pte = (programs["crc"] / "model.pte").read_bytes()
    device = serialize.device_image(pte)
    text = (programs["crc"] / "report.txt").read_text()
    line = (f"program CRC32: 0x{serialize.program_crc(device):08x} (model_pte.c), "
            f"0x{serialize.program_crc(pte):08x} (model.pte), checked at load")
    assert line in text
    assert "program CRC32" not in (programs["plain"] / "report.txt").read_text()
    assert f"CRC32: 0x{serialize.program_crc(pte):08x} (matches, checked at load)" in describe(pte)
    flipped = bytearray(pte)
    flipped[-1] ^= 1
    assert "MISMATCH" in describe(bytes(flipped))
    assert "CRC32: none" in describe((programs["plain"] / "model.pte").read_bytes())
    # model_pte.c holds the device image, its CRC in place.
    assert serialize.program_crc(device) != serialize.program_crc(pte)


def _samples() -> list[list[np.ndarray]]:
    x, _ = digits.test_set()
    return [[x[i:i + 1].astype(np.float32)] for i in range(3)]


def test_host_runner_runs_crc_program_bit_exact(programs: dict[str, Path], host_runner: Path,
                                                tmp_path: Path) -> None:
    crc, plain = ((programs[k] / "model.pte").read_bytes() for k in ("crc", "plain"))
    status_c, outs_c, out = run_host(host_runner, tmp_path, crc, schema.decode(crc), _samples())
    status_p, outs_p, _ = run_host(host_runner, tmp_path, plain, schema.decode(plain), _samples())
    assert status_c == OK and status_p == OK, out[-1000:]
    assert len(outs_c[0]) == 3
    np.testing.assert_array_equal(outs_c[0], outs_p[0])
    flipped = bytearray(crc)
    flipped[schema.decode(crc)["constant_offset"] + 5] ^= 0x10  # a weight
    status, _, out = run_host(host_runner, tmp_path, bytes(flipped), schema.decode(crc), _samples())
    assert status == CHECKSUM_MISMATCH and f"tmcu: load status={CHECKSUM_MISMATCH} " in out, out[-1000:]


@needs_arm_gcc
@needs_qemu
def test_qemu_runs_crc_program_and_refuses_flipped(programs: dict[str, Path], tmp_path: Path) -> None:
    good = tmp_path / "good"
    shutil.copytree(programs["crc"], good)
    build_firmware(good)
    x = np.stack([s[0] for s in _samples()])  # [3, 1, 64]: three samples
    res = runner.run(good, [x])
    assert res.exit_code == 0, res.raw[-800:]
    expected, _ = runner.expected(good, runner.split_samples(runner.load_meta(good), [x]))
    assert runner.compare(res.outputs, expected, None)[0] is None
    # The same firmware with one weight of the flashed image flipped.
    bad = tmp_path / "bad"
    shutil.copytree(programs["crc"], bad)
    device = serialize.device_image((bad / "model.pte").read_bytes())
    flipped = bytearray(device)
    flipped[schema.decode(device)["constant_offset"] + 5] ^= 0x10
    source = (bad / "model_pte.c").read_text()
    rows = "\n".join(serialize.c_string_rows(device))
    assert rows in source
    (bad / "model_pte.c").write_text(source.replace(rows, "\n".join(serialize.c_string_rows(bytes(flipped)))))
    build_firmware(bad)
    res = runner.run(bad, [x])
    assert res.exit_code == CHECKSUM_MISMATCH and re.search(rf"tmcu: load status={CHECKSUM_MISMATCH}\b", res.raw), \
        res.raw[-800:]
