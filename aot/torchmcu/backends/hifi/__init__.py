"""The Cadence HiFi backend: int8 ops on Cadence's HiFi 4 NN library (nnlib).

- nnlib.py: a NumPy model of the nnlib functions the backend calls, with
  nnlib's own arithmetic, and ports of its scratch-size functions.
- partition.py: which ops are claimed (op.backend = "hifi"), the exact call
  and arguments for each, their planned scratch, and the cost estimate that
  goes into the compile report.
- build.py: the firmware build for an Xtensa core with Cadence's compiler
  (XTENSA_TOOLCHAIN_PATH, XTENSA_CORE) against nnlib (TORCHMCU_NNLIB_DIR).

The firmware side is firmware/delegates/hifi/; the ISS runner torchmcu.sim.xtrun.
"""

from __future__ import annotations

from . import nnlib
from .partition import BACKEND, CODES, Claim, HifiPlan, claim, format_report, report

__all__ = ["BACKEND", "CODES", "Claim", "HifiPlan", "claim", "format_report", "nnlib", "report"]
