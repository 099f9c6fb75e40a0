"""What the zoo tests (tests/test_zoo_*.py) share: the SQNR they print and
bound, and the figures of their `zoo:` lines (instructions are QEMU -icount
instructions, not cycles; flash is the program's bytes; RAM the planned
activations against their lower bound, and the state if any); and the
comparison of a model's default build with its `--kernels cmsis-nn` build."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from torchmcu.backends.cmsis_nn.build import CMSIS_NN_ENV
from torchmcu.builder.firmware import build_firmware
from torchmcu.sim import runner
from torchmcu.sim.base import SimResult

needs_cmsis_nn = pytest.mark.skipif(
    not os.environ.get(CMSIS_NN_ENV),
    reason=f"{CMSIS_NN_ENV} is not set: the default build is compared with the CMSIS-NN build of a CMSIS-NN "
           "checkout there (torchmcu does not ship CMSIS-NN)")


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


def run_checked(out: Path, xs: list[np.ndarray], timeout_s: int = 1800) -> tuple[SimResult, float]:
    """The build in `out` run in QEMU on `xs`, its outputs checked against the
    reference (bit for bit for integer programs); with the largest error."""
    res = runner.run(out, xs, sim="qemu", timeout_s=timeout_s)
    assert res.exit_code == 0, res.raw[-3000:]
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), xs))
    mismatch, worst = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"
    return res, worst


def cmsis_nn_instructions(out: Path, xs: list[np.ndarray]) -> int:
    """The compiled program in `out` built with `--kernels cmsis-nn`, run and
    checked: its instructions per inference."""
    build_firmware(out, kernels="cmsis-nn")
    return run_checked(out, xs)[0].inference_instructions()


def assert_not_slower(case: str, default: int, cmsis_nn: int) -> None:
    """The default build (the portable kernels and their fast paths) takes no
    more QEMU instructions per inference than the CMSIS-NN build."""
    print(f"\nzoo vs cmsis-nn: {case}: default {default:,}, cmsis-nn {cmsis_nn:,} instructions, "
          f"default/cmsis-nn {default / cmsis_nn:.2f}")
    assert default <= cmsis_nn, (f"{case}: the default build takes {default:,} instructions, "
                                 f"--kernels cmsis-nn {cmsis_nn:,} ({default / cmsis_nn:.2f}x)")


def known_slow(cases: list[tuple], slow: dict[tuple, str], group: str) -> list:
    """`cases` (model name first) as pytest params on the xdist group of
    their model (f"{group}_{name}": on the worker that built it), those in
    `slow` strict expected failures (the reason names the issue): passing
    turns them red, to be taken off the list."""
    def marks(c: tuple) -> list:
        xfail = [pytest.mark.xfail(strict=True, reason=slow[c])] if c in slow else []
        return [pytest.mark.xdist_group(f"{group}_{c[0]}"), *xfail]

    return [pytest.param(*c, marks=marks(c)) for c in cases]
