"""Shared fixtures: compiling a module and running it on the host runner
(sanitizers on) or in QEMU, and the reference it must match."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torchmcu.builder.host import build_host_runner
from torchmcu.compiler import compile
from torchmcu.sim import runner

REPO = Path(__file__).resolve().parents[1]

# The memory-plan picture costs a matplotlib import and a render per compile;
# tests/test_memory.py turns it back on where it checks the picture.
os.environ.setdefault("TORCHMCU_PLOT", "0")
# Every compile of the suite (and of the CLI processes it starts) holds the lowering to the op table
# (torchmcu/ops/): an op that becomes something its row does not say fails the test.
os.environ.setdefault("TORCHMCU_CHECK_TABLE", "1")

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None,
                                reason="qemu-system-arm not installed (make setup installs it)")
needs_arm_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-g++") is None,
                                   reason="arm-none-eabi-g++ not installed (make setup installs it)")


@pytest.fixture(scope="session")
def host_runner() -> Path:
    return build_host_runner(sanitize=True)


def run_on_host(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], out_dir: Path,
                board: str = "mps3-an547") -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Compile `model`, run `inputs` (one sample) on the host runner; returns
    (firmware outputs, PyTorch outputs), each without the sample axis."""
    compile(model, inputs, board, out_dir)
    arrays = [x.numpy() for x in inputs]
    res = runner.run(out_dir, arrays, sim="host")
    assert res.exit_code == 0, res.raw
    with torch.no_grad():
        ref = model.eval()(*inputs)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    return [o[0] for o in res.outputs], [r.numpy() for r in refs]


def assert_close(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    mismatch, worst = runner.compare([g[None] for g in got], [e[None] for e in expected],
                                     {"rtol": 1e-5, "atol_scale": 1e-5})
    assert mismatch is None, f"{mismatch} (max abs error {worst})"


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Under `--dist loadgroup` (make test), the tests of a file that share a
    module- or session-scoped fixture of that file (a compiled model, a built
    firmware, a kernel library) run on one worker, so the fixture is made once
    rather than once per worker; the other tests are spread one by one.
    Before xdist's own hook, which reads the group marks; after it, the
    group it appended to each test's id made the id pytest reports (xdist
    3.8 writes `item._nodeid`, which pytest 9 no longer reads: without this
    no test was grouped, `make zoo`'s neither)."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):
            continue
        module = item.nodeid.split("::")[0]
        if any(defs[-1].scope != "function" and defs[-1].baseid == module for defs in info.name2fixturedefs.values()):
            item.add_marker(pytest.mark.xdist_group(f"file:{module}"))
    yield
    for item in items:
        grouped = getattr(item, "_nodeid", None)
        if grouped and grouped != item.nodeid:
            item._id = type(item._id).parse(grouped)
