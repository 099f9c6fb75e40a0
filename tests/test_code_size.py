"""The int8 fast paths' flash (issue #27 item 5): a build links only the
fast-path variants its program can take (builder/fast_paths.py), the
size-first build (`torchmcu build --opt size`) leaves out those that cost
more bytes than they save instructions, and the build says the kernels' code
per program op (size.json kernel_code). On the residual keyword-spotting CNN
of the sequence zoo (tcn_kws: four residual blocks of dilated convolutions),
compiled, built and run as separate processes as users run them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from test_c_api import cli  # the command line in a fresh process
from torchmcu.builder import fast_paths
from torchmcu.builder.size import TIERS, elf_size

sys.path.insert(0, str(REPO / "examples"))
import sequence_zoo  # noqa: E402

GOAL = 48 * 1024  # the default build's flash (text + data, weights included) for such a model


@pytest.fixture(scope="module", params=["mps3-an547", "mps2-an386"])
def compiled(request, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp(f"tcn_{request.param}")
    calibration = root / "cal.npz"
    np.savez(calibration, x=np.stack([s[0].numpy()[0] for s in sequence_zoo.calibration("tcn_kws", 16)]))
    out = root / "tcn"
    cli("compile", "examples/sequence_zoo.py:make_tcn_kws", "--board", request.param, "--quant", "int8",
        "--calibration", str(calibration), "-o", str(out))
    return out


def _build(src: Path, dst: Path, *args: str) -> tuple[dict, str]:
    shutil.copytree(src, dst)
    printed = cli("build", str(dst), *args).stdout
    return json.loads((dst / "size.json").read_text()), printed


def _fast(record: dict, code: str) -> int:
    return record["kernel_code"]["ops"][code]["fast"]


@needs_arm_gcc
@needs_qemu
def test_size_first_build_is_smaller_and_bit_exact(compiled: Path, tmp_path: Path) -> None:
    speed, printed = _build(compiled, tmp_path / "speed")
    size, _ = _build(compiled, tmp_path / "size", "--opt", "size")
    assert speed["flash"] <= GOAL, speed["parts"]
    assert size["flash"] < speed["flash"] - 1024, (size["parts"], speed["parts"])
    # The classifier (480 multiply-adds) gives its fast path too little work;
    # the convolutions and the ADDs (4 x 1,960 elements, ~110 instructions
    # saved per element) keep theirs.
    assert _fast(speed, "LINEAR_S8") > 0 and _fast(size, "LINEAR_S8") == 0
    assert _fast(size, "CONV2D_S8") > 0 and _fast(size, "ADD_S8") > 0
    k = speed["kernel_code"]
    line = next(ln for ln in printed.splitlines() if ln.startswith("kernel code"))
    assert f"CONV2D_S8 {sum(k['ops']['CONV2D_S8'].values()):,} B (fast {_fast(speed, 'CONV2D_S8'):,})" in line
    assert f"runtime core {speed['parts']['runtime']:,} B" in line
    for record in (speed, size):
        k = record["kernel_code"]
        assert set(k["ops"]) <= set((compiled / "kernels.txt").read_text().split())
        assert sum(sum(t.values()) for t in k["ops"].values()) + sum(k["shared"].values()) + k["other"] \
            == k["total"] == record["parts"]["kernels"]
        assert all(set(t) == set(TIERS) for t in k["ops"].values())
    x = np.stack([s[0].numpy() for s in sequence_zoo.calibration("tcn_kws", 2, seed=1)])  # [N, 1, 10, 49]
    np.save(tmp_path / "x.npy", x)
    for d in ("speed", "size"):
        cli("run", str(tmp_path / d), "--input", str(tmp_path / "x.npy"), "--check", "--no-cycles")
    assert elf_size(tmp_path / "size" / "firmware.elf").text < elf_size(tmp_path / "speed" / "firmware.elf").text


def test_variants_the_program_can_take(compiled: Path) -> None:
    """The convolutions' patches (3 taps x 40 channels, 10 channels) are
    small (no run_wide; the DSP GEMM of 4 pixels only), the depthwise row
    path has no op, the classifier is per channel with 12 outputs of 40
    inputs, and the table takes every ADD."""
    variants, work = fast_paths.program_needs((compiled / "model.pte").read_bytes())
    assert variants == {"CONV_G4", "FC_PER_CHANNEL"}
    assert work["ADD"] == 4 * 49 * 40 and work["LINEAR"] == 40 * 12 and work["DW"] == 0
    speed = fast_paths.defines(compiled, "speed")
    assert "-DTMCU_FAST_CONV_WIDE=0" in speed and "-DTMCU_FAST_ADD_LANES=0" in speed
    assert not any(f.startswith(("-DTMCU_FAST_CONV=", "-DTMCU_FAST_OS")) for f in speed)
    size = fast_paths.defines(compiled, "size")
    assert {"-DTMCU_FAST_LINEAR=0", "-DTMCU_FAST_OS=1"} <= set(size)
    assert "-DTMCU_FAST_CONV=0" not in size and "-DTMCU_FAST_ADD=0" not in size
