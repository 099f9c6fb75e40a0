"""The sequence zoo's figures (issue #16, `make bench`): each model of
examples/sequence_zoo.py (a dilated causal TCN keyword spotter, torchaudio's
Conformer, nn.TransformerEncoder post- and pre-norm, a keyword-transformer
tiny ViT; seeded random weights) at int8 on the Cortex-M55 (mps3-an547) and
the Cortex-M4 (mps2-an386), with the portable kernels and (when
TORCHMCU_CMSIS_NN_DIR is set) CMSIS-NN: instructions per inference (QEMU
-icount shift=0: instructions, not cycles), flash, planned activation RAM
against the liveness lower bound, SQNR against the float model; every output
checked bit for bit against the reference. The measuring is bench/zoo.py's.

    .venv/bin/python bench/sequence_zoo.py [--models NAME ...] [--boards mps3-an547 ...]

Writes bench/sequence_zoo.json and bench/sequence_zoo.md. (bench/recurrent.py
has the recurrent models; tests/test_zoo_sequence.py also checks float32 and
a16w8.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "examples"))

import sequence_zoo as seq  # noqa: E402
import zoo  # noqa: E402  (bench/zoo.py)

CALIBRATION = 8
ABOUT = ("The sequence zoo (examples/sequence_zoo.py): convolutional and attention models with seeded random "
         "weights, int8.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(seq.MODELS))
    ap.add_argument("--boards", nargs="*", default=["mps3-an547", "mps2-an386"])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench_sequence_zoo")
    args = ap.parse_args()
    kernel_sets = ["portable"] + (["cmsis-nn"] if os.environ.get("TORCHMCU_CMSIS_NN_DIR") else [])
    rows = [r for name in args.models for board in args.boards
            for r in zoo.measure(name, board, kernel_sets, args.out, make=lambda n: seq.MODELS[n](),
                                 calibration=lambda n: seq.calibration(n, CALIBRATION))]
    md = zoo.markdown(rows, "Sequence zoo at int8 in QEMU (bench/sequence_zoo.py)", ABOUT)
    (REPO / "bench" / "sequence_zoo.json").write_text(json.dumps(rows, indent=2) + "\n")
    (REPO / "bench" / "sequence_zoo.md").write_text(md)
    print(md)
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
