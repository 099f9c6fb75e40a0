"""Issue #19 part 2: the portable int8 kernels' fast paths against CMSIS-NN.

    PYTHONPATH=aot .venv/bin/python bench/fast_s8.py [--boards mps3-an547 mps2-an386]
        [--models ds_cnn] [--kernels generic portable cmsis-nn] [--ops]

For each model, board and kernel set: compile (int8, 32 calibration
samples; compiled once per board), build, run one sample in QEMU with the
profile, check the output bit for bit against the reference, and print the
instructions per inference (QEMU -icount shift=0: instructions, not cycles),
per MAC, the ratio to CMSIS-NN, the code size, and with --ops the
instructions of each op kind.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import mlperf_tiny as mt  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.builder.size import elf_size  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.sim import runner  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--boards", nargs="*", default=["mps3-an547", "mps2-an386"])
    ap.add_argument("--models", nargs="*", default=["ds_cnn"])
    ap.add_argument("--kernels", nargs="*", default=["generic", "portable", "cmsis-nn"],
                    help="portable, generic (portable built with -DTMCU_S8_GENERIC: no fast paths), cmsis-nn "
                         "(needs TORCHMCU_CMSIS_NN_DIR)")
    ap.add_argument("--ops", action="store_true", help="instructions per op kind")
    ap.add_argument("--out", default=str(REPO / "build" / "fast_s8"))
    args = ap.parse_args()
    rows = []
    for name in args.models:
        model, example = mt.MODELS[name]()
        calibration = list(mt.CALIBRATION[name](32, 0))
        x = mt.CALIBRATION[name](1, 1)
        for board in args.boards:
            out = Path(args.out) / f"{name}-{board}"
            c = compile(model, example, board, out, quant="int8", calibration=calibration, progress=False)
            macs = c.report["macs"]
            for kernels in args.kernels:
                if kernels == "generic":  # the portable kernels without their fast paths (as before #19)
                    elf = build_firmware(out, opt="-Os -DTMCU_S8_GENERIC")
                else:
                    elf = build_firmware(out, **({} if kernels == "portable" else {"kernels": kernels}))
                size = elf_size(elf)
                parts = json.loads((out / "size.json").read_text())["parts"]
                res = runner.run(out, [x], sim="qemu", profile=True)
                meta = runner.load_meta(out)
                expected, _ = runner.expected(out, runner.split_samples(meta, [x]))
                mismatch, _ = runner.compare(res.outputs, expected, None)
                total = res.inference_instructions()
                row = {"model": name, "board": board, "kernels": kernels, "instructions": total,
                       "per_mac": round(total / macs, 2), "code_bytes": size.text + size.data - parts["model"],
                       "bit_exact": res.exit_code == 0 and mismatch is None}
                report = json.loads((out / "report.json").read_text())
                kinds = defaultdict(int)
                for op, k in zip(report["ops"], res.kernel_instructions()):
                    kinds[op["name"].rstrip("0123456789_")] += k or 0
                row["kinds"] = dict(sorted(kinds.items(), key=lambda e: -e[1]))
                if args.ops:  # op, MACs, instructions
                    row["ops"] = [(op["name"], op.get("macs", 0), k)
                                  for op, k in zip(report["ops"], res.kernel_instructions())]
                rows.append(row)
                print(json.dumps(row), flush=True)
    print()
    print("| model | board | kernels | instructions | instr/MAC | x CMSIS-NN | code B | bit-exact |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        ref = next((q for q in rows if q["model"] == r["model"] and q["board"] == r["board"]
                    and q["kernels"] == "cmsis-nn"), None)
        ratio = f"{r['instructions'] / ref['instructions']:.2f}" if ref else ""
        print(f"| {r['model']} | {r['board']} | {r['kernels']} | {r['instructions']:,} | {r['per_mac']} | "
              f"{ratio} | {r['code_bytes']:,} | {'yes' if r['bit_exact'] else 'NO'} |")
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
