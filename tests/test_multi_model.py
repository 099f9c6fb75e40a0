"""Several models in one firmware (issue #5, selective build).

Two models compiled with their own symbols (`compile --symbol`) link into one
program with one kernel table over the union of their ops (`torchmcu
kernel-table`): each runs bit for bit as it does alone. Models with the same
symbol, or a directory that is not a compiled model, are refused by name.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchmcu import cli
from torchmcu.builder import firmware as build
from torchmcu.builder import kernel_table
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.sim import runner


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(12, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


MAIN = r"""
#include <cstdio>
#include <new>
#include "mlp/model_arenas.h"
#include "mlp/model_pte.h"
#include "conv/model_arenas.h"
#include "conv/model_pte.h"
#include "torchmcu/torchmcu.h"

static int run(const char* io_path, const uint8_t* pte, size_t size, const tmcu_arena* arenas, size_t n) {
  std::FILE* f = std::fopen(io_path, "rb");
  static uint8_t io[1 << 16];
  const size_t io_size = std::fread(io, 1, sizeof io, f);
  std::fclose(f);
  const int status = tmcu_app_run(pte, size, arenas, n, io, io_size);
  std::fflush(stdout);
  return status;
}

int main(int, char** argv) {
  const int a = run(argv[1], tmcu_mlp_pte, tmcu_mlp_pte_size, tmcu_mlp_arenas, TMCU_MLP_NUM_ARENAS);
  const int b = run(argv[2], tmcu_conv_pte, tmcu_conv_pte_size, tmcu_conv_arenas, TMCU_CONV_NUM_ARENAS);
  return a | b;
}
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    compile(Mlp().eval(), (torch.randn(1, 12),), "mps3-an547", root / "mlp", symbol="mlp", progress=False)
    calib = [(torch.randn(1, 3, 8, 8),) for _ in range(8)]
    compile(ConvNet().eval(), calib[0], "mps3-an547", root / "conv", quant="int8", calibration=calib,
            symbol="conv", progress=False)
    return root / "mlp", root / "conv"


def test_two_models_share_one_kernel_table(models: tuple[Path, Path], tmp_path: Path) -> None:
    mlp, conv = models
    table = tmp_path / "kernel_table.cc"
    assert cli.main(["kernel-table", str(mlp), str(conv), "-o", str(table)]) == 0
    codes = {c for d in models for c in (d / "kernels.txt").read_text().split()}
    text = table.read_text()
    assert text.count("&portable::") == len(codes)
    assert "LINEAR_F32" in codes and "CONV2D_S8" in codes

    main = tmp_path / "main.cc"
    main.write_text(MAIN)
    exe = tmp_path / "two_models"
    sources = [*build.runtime_sources(), build.FIRMWARE / "host" / "platform_host.cc", main, table,
               *(d / f for d in models for f in ("model_pte.c", "model_arenas.c"))]
    proc = subprocess.run(["g++", "-std=c++17", "-O1", "-fno-rtti", "-fno-exceptions", "-Wall", "-Werror",
                           "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-x", "c++",
                           f"-I{build.FIRMWARE}", f"-I{build.FIRMWARE / 'include'}", f"-I{mlp.parent}",
                           *map(str, sources), "-o", str(exe)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]

    rng = np.random.default_rng(4)
    xs = {mlp: rng.standard_normal((3, 1, 12)).astype(np.float32),
          conv: rng.standard_normal((3, 1, 3, 8, 8)).astype(np.float32)}
    ios, splits = [], {}
    for d in models:
        meta = runner.load_meta(d)
        splits[d] = runner.split_samples(meta, [xs[d]])
        path = tmp_path / f"{d.name}.io"
        path.write_bytes(runner.io_blob(runner.program_samples(meta, splits[d])))
        ios.append(str(path))
    run = subprocess.run([str(exe), *ios], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stdout[-2000:] + run.stderr[-2000:]
    chunks = run.stdout.split("tmcu: done")
    assert len(chunks) == 3, run.stdout[-2000:]
    for d, chunk in zip(models, chunks):
        _, outs = runner.parse_protocol(chunk + "tmcu: done status=0 samples=3\n", runner.load_meta(d)["outputs"])
        alone = runner.run(d, [xs[d]], sim="host")  # the model on its own, in the host runner
        assert alone.exit_code == 0, alone.raw[-1000:]
        for got, want in zip(outs, alone.outputs):
            np.testing.assert_array_equal(got, want)
        if runner.load_meta(d)["quant"] == "int8":  # and the int8 one bit for bit with the reference
            for got, want in zip(outs, runner.reference(d, splits[d])):
                np.testing.assert_array_equal(got, want)


def test_same_symbol_is_refused(models: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tmcu_mlp_"):
        kernel_table.shared_kernel_table([models[0], models[0]])
    with pytest.raises(ValueError, match="not a compiled model"):
        kernel_table.shared_kernel_table([models[0], tmp_path])


def test_bad_symbol_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="not a C identifier"):
        compile(Mlp().eval(), (torch.randn(1, 12),), "mps3-an547", tmp_path, symbol="9lives", progress=False)
