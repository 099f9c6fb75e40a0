"""Program verification levels (firmware/core/program.h, Verification).

kFull (the default) checks a program completely when it loads; kMinimal,
the only level of a runtime built with TORCHMCU_VERIFY=0 (`torchmcu build
--verify minimal`), trusts the program compiled into the image and checks
only what a good program can still get wrong with this build: identifier,
version, constant segment, arenas, and a kernel for every op.

- DS-CNN int8 in QEMU: both levels give the same bits; the minimal load
  meets the load target of issue #5 (3,000 instructions + 50 per op; QEMU
  -icount instructions, not cycles) and the image is smaller (no verifier,
  no kernel checks).
- On the host runner built for minimal verification: a good program runs as
  with full verification, a program with an op this build has no kernel for
  gets KernelMissing, one of another format version UnsupportedVersion.
- A TORCHMCU_VERIFY=0 runtime asked for full verification says so
  (VerifierMissing) instead of loading unchecked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from test_runtime_features import add_program, add_samples, run_host
from torchmcu.builder.firmware import build_firmware
from torchmcu.builder.host import build_host_runner
from torchmcu.compiler import compile
from torchmcu.program import serialize
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny as mt

OK, UNSUPPORTED_VERSION, KERNEL_MISSING, VERIFIER_MISSING = 0x00, 0x21, 0x30, 0x33


@pytest.fixture(scope="module")
def ds_cnn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ds_cnn")
    model, example = mt.MODELS["ds_cnn"]()
    compile(model, example, "mps3-an547", out, quant="int8", io="int8",
            calibration={"x": mt.CALIBRATION["ds_cnn"](8, 0)}, progress=False)
    return out


@needs_arm_gcc
@needs_qemu
def test_minimal_verification_in_qemu(ds_cnn: Path, tmp_path: Path) -> None:
    x = np.asarray(mt.CALIBRATION["ds_cnn"](2, 3))
    num_ops = len(json.loads((ds_cnn / "report.json").read_text())["ops"])
    results, flash = {}, {}
    for level in ("full", "minimal"):
        out = tmp_path / level
        shutil.copytree(ds_cnn, out)
        build_firmware(out, verify=level)
        size = json.loads((out / "size.json").read_text())
        assert size["verify"] == level
        flash[level] = size
        res = runner.run(out, [x])
        assert res.exit_code == 0, res.raw[-800:]
        results[level] = res
    full, minimal = results["full"], results["minimal"]
    for a, b in zip(full.outputs, minimal.outputs):
        np.testing.assert_array_equal(a, b)
    expected, _ = runner.expected(ds_cnn, runner.split_samples(runner.load_meta(ds_cnn), [x]))
    assert runner.compare(minimal.outputs, expected, None)[0] is None
    load_full = full.instructions(full.load_ticks)
    load_min = minimal.instructions(minimal.load_ticks)
    print(f"\nDS-CNN int8 portable, mps3-an547, {num_ops} ops: load {load_full:,} instructions with full "
          f"verification, {load_min:,} with minimal (target {3000 + 50 * num_ops:,}); flash "
          f"{flash['full']['flash']:,} B vs {flash['minimal']['flash']:,} B")
    assert load_min <= 3000 + 50 * num_ops
    assert load_min < load_full / 4
    # The verifier and every kernel's check are left out.
    assert flash["minimal"]["parts"]["runtime"] < flash["full"]["parts"]["runtime"]
    assert flash["minimal"]["parts"]["kernels"] < flash["full"]["parts"]["kernels"]


@pytest.fixture(scope="module")
def minimal_runner() -> Path:
    return build_host_runner(verify="minimal")


def test_minimal_host_runner_runs_a_good_program(minimal_runner: Path, host_runner: Path, tmp_path: Path) -> None:
    tree, pte = add_program(out_offset=128)  # in place over x
    samples = add_samples()
    status_min, outs_min, stdout = run_host(minimal_runner, tmp_path, pte, tree, samples)
    status_full, outs_full, _ = run_host(host_runner, tmp_path, pte, tree, samples)
    assert status_min == OK and status_full == OK, stdout[-1000:]
    np.testing.assert_array_equal(outs_min[0], outs_full[0])


def test_minimal_refuses_an_op_without_kernel(minimal_runner: Path, tmp_path: Path) -> None:
    tree, _ = add_program(out_offset=256)
    tree["ops"][1]["code"] = "ETHOS_U"  # no Ethos-U delegate in the host runner
    pte = serialize.to_pte(tree, b"")
    status, _, stdout = run_host(minimal_runner, tmp_path, pte, tree, add_samples(1))
    assert status == KERNEL_MISSING and f"tmcu: load status={KERNEL_MISSING} " in stdout, stdout[-1000:]


def test_minimal_refuses_another_version(minimal_runner: Path, tmp_path: Path) -> None:
    tree, _ = add_program(out_offset=256)
    tree["version"] = serialize.PROGRAM_VERSION + 1
    pte = serialize.to_pte(tree, b"")
    status, _, stdout = run_host(minimal_runner, tmp_path, pte, tree, add_samples(1))
    assert status == UNSUPPORTED_VERSION, stdout[-1000:]


CALLER = r"""
#include <cstdio>
#include <vector>
#include "core/method.h"
using namespace torchmcu;
int main(int argc, char** argv) {
  FILE* f = std::fopen(argv[1], "rb");
  alignas(16) static uint8_t buf[1 << 16];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  const Result<Program> full = Program::load(buf, n, Verification::kFull);
  const Result<Program> minimal = Program::load(buf, n, Verification::kMinimal);
  std::printf("%u %u\n", unsigned(full.error()), unsigned(minimal.error()));
  return 0;
}
"""


@pytest.mark.parametrize("verify", [1, 0])
def test_full_verification_needs_the_verifier(tmp_path: Path, verify: int) -> None:
    src = tmp_path / "caller.cc"
    src.write_text(CALLER)
    exe = tmp_path / "caller"
    subprocess.run(["g++", "-std=c++17", "-fno-rtti", "-fno-exceptions", f"-DTORCHMCU_VERIFY={verify}",
                    f"-I{REPO / 'firmware'}", str(src), str(REPO / "firmware/core/program.cc"), "-o", str(exe)],
                   check=True)
    _, pte = add_program(out_offset=256)
    (tmp_path / "p.pte").write_bytes(pte)
    out = subprocess.run([str(exe), str(tmp_path / "p.pte")], capture_output=True, text=True, check=True).stdout
    full, minimal = map(int, out.split())
    assert minimal == OK
    assert full == (OK if verify else VERIFIER_MISSING)
