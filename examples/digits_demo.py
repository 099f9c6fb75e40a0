"""`make demo`: the digits MLP from PyTorch to firmware running in QEMU.

Trains and compiles the model, builds firmware for the board, runs every
held-out test digit through it in QEMU and prints accuracy in PyTorch vs on
the firmware, whether every output matched the reference, flash and RAM, and
instructions per inference (QEMU -icount: instructions, not cycles).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import digits  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.builder.size import elf_size  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.sim import runner  # noqa: E402


def step(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="mps3-an547")
    ap.add_argument("--out", default=None, help="build directory (default build/digits[-int8])")
    ap.add_argument("--quant", default="float32", choices=["float32", "int8"])
    args = ap.parse_args()
    args.out = args.out or ("build/digits" if args.quant == "float32" else "build/digits-int8")

    t0 = time.monotonic()
    step("training the digits MLP (scikit-learn 8x8 digits, seed 0)")
    model, example = digits.make()
    x_test, y_test = digits.test_set()
    step(f"compiling for {args.board} ({args.quant}) -> {args.out}")
    calibration = [x[None] for x in digits.train_set()[0][:200]] if args.quant == "int8" else None
    c = compile(model, example, args.board, args.out, quant=args.quant, calibration=calibration)
    step("building firmware")
    elf = build_firmware(args.out)
    size = elf_size(elf)
    step(f"running {len(x_test)} test digits in QEMU ({args.board})")
    batch = x_test[:, None, :]  # [N, 1, 64]: one sample per test digit
    res = runner.run(args.out, [batch], sim="qemu", profile=True)
    if res.exit_code != 0:
        print(res.raw[-2000:])
        step(f"firmware failed with status {res.exit_code}")
        return 1

    with torch.no_grad():
        torch_logits = model(torch.from_numpy(x_test)).numpy()
    fw_logits = res.outputs[0][:, 0, :]
    expected, tol = runner.expected(args.out, runner.split_samples(runner.load_meta(args.out), [batch]))
    mismatch, worst = runner.compare(res.outputs, expected, tol)

    acc_torch = float((torch_logits.argmax(1) == y_test).mean())
    acc_fw = float((fw_logits.argmax(1) == y_test).mean())
    same_class = int((torch_logits.argmax(1) == fw_logits.argmax(1)).sum())
    mem = c.report["memory"]["regions"][0]
    instr = res.instructions(res.sample_ticks[0])
    print()
    print(f"  model             digits MLP 64-64-32-10, {args.quant}, board {args.board}")
    print(f"  test digits       {len(x_test)}")
    print(f"  accuracy PyTorch  {acc_torch * 100:.2f} %")
    print(f"  accuracy firmware {acc_fw * 100:.2f} %   (same class as PyTorch on {same_class}/{len(x_test)})")
    how = "PyTorch, rtol 1e-5" if tol else "torchmcu's int8 reference, bit for bit"
    print(f"  outputs matched   {'yes, every one' if mismatch is None else 'NO: ' + str(mismatch)} "
          f"(against {how}; max abs error {worst:.2e})")
    print(f"  flash             {size.text + size.data:,} B firmware (text {size.text:,} B), "
          f"of which program {len(c.pte):,} B")
    print(f"  RAM               {mem['planned_bytes']:,} B activations in {mem['name']} "
          f"(lower bound {mem['lower_bound_bytes']:,} B); static RAM {size.data + size.bss:,} B incl. stack")
    print(f"  instructions      {instr:,} per inference; {res.instructions(res.load_ticks):,} to load "
          "(QEMU -icount shift=0: instructions, not cycles)")
    print(f"  time              {time.monotonic() - t0:.1f} s")
    return 0 if mismatch is None else 1


if __name__ == "__main__":
    sys.exit(main())
