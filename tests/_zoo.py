"""What the zoo tests (tests/test_zoo_*.py) share: the SQNR they print and
bound, and the figures of their `zoo:` lines (instructions are QEMU -icount
instructions, not cycles; flash is the program's bytes; RAM the planned
activations against their lower bound, and the state if any)."""

from __future__ import annotations

from typing import Any

import numpy as np


def sqnr_db(got: np.ndarray, ref: np.ndarray) -> float:
    """10 log10(sum ref^2 / sum (got - ref)^2) in float64; inf when exact."""
    noise = float(np.sum((got.astype(np.float64) - ref) ** 2))
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(np.asarray(ref, np.float64) ** 2) / noise))


def figures(report: dict[str, Any], instructions: int) -> str:
    """A `zoo:` line's figures from compile's report (report.json) and the
    instructions of one inference."""
    memory = report["memory"]
    state = memory.get("state") or {}
    return (f"instructions {instructions:,}, flash {report['flash']['program_bytes']:,} B, "
            f"activations {memory['activation_bytes']:,} B (lower bound {memory['lower_bound_bytes']:,} B)"
            + (f", state {state['bytes']:,} B" if state.get("bytes") else ""))
