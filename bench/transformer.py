"""One nn.TransformerEncoderLayer inference (d_model 64, 4 heads, FFN 128,
sequence 32, batch_first), or torchaudio's Conformer (input_dim 80, 4 heads,
ffn_dim 128, 2 layers, depthwise kernel 31, 32 frames), on the Cortex-M55
board in QEMU: the figures of issue 16's report.

    .venv/bin/python bench/transformer.py [--model encoder|conformer] [--board mps3-an547]
                                          [--kernels portable cmsis-nn] [--quant int8 a16w8]

For int8 and a16w8: compile (32 calibration samples), build, run 4 samples in
QEMU, check them bit for bit against the NumPy reference, and print
instructions per inference (QEMU -icount: instructions, not cycles), the
instructions of each op kind, RAM (activations planned, the liveness lower
bound) and flash, and SQNR against the float model. CMSIS-NN needs
TORCHMCU_CMSIS_NN_DIR. Writes bench/<model>-<board>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]

from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.builder.size import elf_size  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.sim import runner  # noqa: E402


class Conformer(nn.Module):
    """torchaudio's Conformer on full-length sequences: its forward with the
    padding mask all False, which is no mask (the mask's .item() on the
    lengths cannot be exported)."""

    def __init__(self) -> None:
        super().__init__()
        from torchmcu.frontend.compat import import_torchaudio

        import_torchaudio()
        from torchaudio.models import Conformer as TAConformer

        self.c = TAConformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2, depthwise_conv_kernel_size=31)

    def forward(self, x):
        x = x.transpose(0, 1)
        for layer in self.c.conformer_layers:
            x = layer(x, None)
        return x.transpose(0, 1)


def model(name: str, norm_first: bool = False) -> nn.Module:
    torch.manual_seed(0)
    if name == "conformer":
        return Conformer().eval()
    return nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=norm_first).eval()


def data(name: str, n: int, seed: int) -> list[np.ndarray]:
    rs = np.random.RandomState(seed)
    return [rs.randn(1, 32, 80 if name == "conformer" else 64).astype(np.float32) for _ in range(n)]


def sqnr_db(signal: np.ndarray, approx: np.ndarray) -> float:
    noise = float(np.sum((signal.astype(np.float64) - approx) ** 2))
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(signal.astype(np.float64) ** 2) / noise))


def measure(name: str, quant: str, board: str, kernels: str, norm_first: bool, out_root: Path) -> dict:
    m = model(name, norm_first)
    out = out_root / f"{name}-{quant}-{kernels}-{'pre' if norm_first else 'post'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compile(m, (torch.from_numpy(data(name, 1, 0)[0]),), board, out, quant=quant,
                    calibration=[(x,) for x in data(name, 32, 0)], progress=False)
    elf = build_firmware(out, **({} if kernels == "portable" else {"kernels": kernels}))
    size = elf_size(elf)
    xs = np.stack(data(name, 4, 1))
    res = runner.run(out, [xs], sim="qemu", profile=True)
    if res.exit_code != 0:
        raise RuntimeError(f"status {res.exit_code}\n{res.raw[-1000:]}")
    samples = [[x] for x in xs]
    expected, _ = runner.expected(out, samples)
    mismatch, _ = runner.compare(res.outputs, expected, None)
    with torch.no_grad():
        fl = np.stack([m(torch.from_numpy(x)).numpy() for x in xs])
    per_kind: dict[str, int] = defaultdict(int)
    for op, n in zip(c.graph.ops, res.kernel_instructions()):
        per_kind[op.code] += n or 0
    memory = c.report["memory"]
    parts = json.loads((out / "size.json").read_text())["parts"]
    return {
        "model": name, "quant": quant, "kernels": kernels, "norm_first": norm_first, "board": board,
        "instructions": res.inference_instructions(), "per_op_code": dict(sorted(per_kind.items(), key=lambda kv: -kv[1])),
        "float_ops": sorted({op.code for op in c.graph.ops if op.code.endswith("_F32")}),
        "arena_bytes": memory["activation_bytes"], "lower_bound_bytes": memory["classic_lower_bound_bytes"],
        "program_bytes": parts["model"], "code_bytes": size.text + size.data - parts["model"],
        "macs": c.report["macs"], "bit_exact": mismatch is None, "sqnr_db": round(sqnr_db(fl, res.outputs[0]), 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="encoder", choices=["encoder", "conformer"])
    ap.add_argument("--board", default="mps3-an547")
    ap.add_argument("--kernels", nargs="+", default=["portable", "cmsis-nn"])
    ap.add_argument("--quant", nargs="+", default=["int8", "a16w8"])
    ap.add_argument("--norm-first", action="store_true")
    args = ap.parse_args()
    rows = []
    for quant in args.quant:
        for kernels in args.kernels:
            r = measure(args.model, quant, args.board, kernels, args.norm_first, REPO / "build" / "bench")
            rows.append(r)
            print(f"{quant:6} {kernels:9} {r['instructions']:>11,} instr  arena {r['arena_bytes']:,} B "
                  f"(lower bound {r['lower_bound_bytes']:,})  program {r['program_bytes']:,} B  code "
                  f"{r['code_bytes']:,} B  SQNR {r['sqnr_db']} dB  bit-exact {r['bit_exact']}  float ops "
                  f"{r['float_ops']}", flush=True)
            print("        " + ", ".join(f"{k} {v:,}" for k, v in r["per_op_code"].items()), flush=True)
    (REPO / "bench" / f"{args.model}-{args.board}.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
