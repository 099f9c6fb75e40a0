"""Instructions per layer of the conv1d, transposed-convolution and resizing
kernels on Cortex-M55 (mps3-an547), portable against CMSIS-NN, at int8.

    TORCHMCU_CMSIS_NN_DIR=... .venv/bin/python bench/conv_pool_layers.py [--board mps3-an547]

One int8 program holds each layer on its own input; it is built twice
(--kernels portable, cmsis-nn), run in QEMU with the profiler (QEMU -icount
shift=0: instructions, not cycles), checked bit for bit against the project's
reference, and each layer's kernel instructions are printed (and written to
bench/conv_pool_layers-<board>.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[1]

from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.sim import runner


class Layers(nn.Module):
    """Each layer on its own input (MCU-sized: 32 channels)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1d = nn.Conv1d(32, 32, 3, padding=1)         # CMSIS-NN: arm_convolve_1_x_n_s8
        self.causal = nn.Conv1d(32, 32, 3, dilation=2)        # left-padded: arm_convolve_s8
        self.up = nn.ConvTranspose2d(32, 16, 3, 2, 1, output_padding=1)  # convolution of the upscaled input
        self.up_narrow = nn.ConvTranspose2d(8, 8, 4, 2, 1)    # 8 input channels: the scatter kernel

    def forward(self, a, b, c, d):
        return (self.conv1d(a), self.causal(F.pad(a, (4, 0))), self.up(b), self.up_narrow(c),
                F.interpolate(d, scale_factor=2, mode="bilinear"))


LAYERS = {  # op name in the program -> what the report calls it
    "conv1d": "conv1d 32->32 k3, L 64 (1xN)",
    "conv1d_1": "causal conv1d 32->32 k3 d2, L 64",
    "conv_transpose2d": "ConvTranspose2d 32->16 k3 s2, 8x8 -> 16x16",
    "conv_transpose2d_1": "ConvTranspose2d 8->8 k4 s2, 16x16 -> 32x32",
    "upsample_bilinear2d": "bilinear x2, 16 ch, 16x16 -> 32x32",
}
SHAPES = [(1, 32, 64), (1, 32, 8, 8), (1, 8, 16, 16), (1, 16, 16, 16)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="mps3-an547")
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    calibration = [tuple(rng.randn(*s).astype(np.float32) for s in SHAPES) for _ in range(8)]
    sample = [rng.randn(*s).astype(np.float32) for s in SHAPES]
    results: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "prog"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = compile(Layers().eval(), tuple(torch.randn(*s) for s in SHAPES), args.board, out, quant="int8",
                        calibration=calibration, progress=False)
        ops = [(op.name, op.code) for op in c.graph.ops]
        expected, _ = runner.expected(out, [sample])
        for kernels in ("portable", "cmsis-nn"):
            build_firmware(out, kernels=kernels)
            res = runner.run(out, [x[None] for x in sample], sim="qemu", profile=True)
            if res.exit_code != 0:
                sys.exit(res.raw[-2000:])
            mismatch, _ = runner.compare(res.outputs, expected, None)
            if mismatch is not None:
                sys.exit(f"{kernels}: not bit-exact: {mismatch}")
            for (name, code), n in zip(ops, res.kernel_instructions()):
                if name in LAYERS and code != "PERMUTE":  # the layer itself, not its layout changes
                    results.setdefault(name, {"code": code})[kernels] = n
    print(f"{'layer':48} {'op':22} {'portable':>10} {'cmsis-nn':>10}  (QEMU -icount instructions, {args.board})")
    for name, r in results.items():
        print(f"{LAYERS[name]:48} {r['code']:22} {r['portable']:>10,} {r['cmsis-nn']:>10,}")
    (REPO / "bench" / f"conv_pool_layers-{args.board}.json").write_text(
        json.dumps({LAYERS[k]: v for k, v in results.items()}, indent=2) + "\n")


if __name__ == "__main__":
    main()
