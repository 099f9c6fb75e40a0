"""`make bench RAY=...`: bench/run.py's cases as Ray tasks give the rows the
process pool gives. Two small cases (the MLPerf Tiny FC autoencoder, int8, on
the Cortex-M55 and the Cortex-M4 in QEMU) measured both ways, on a real local Ray cluster of
one CPU; every figure but the wall-clock seconds must be equal (QEMU -icount
counts are deterministic; PyTorch's float ones to rounding). Skips when ray is not installed (it is not in the
default setup: `pip install ray`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu

pytestmark = [needs_qemu, needs_arm_gcc]

sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "examples"))


def _rows(results):
    return [(case, {k: v for k, v in row.items() if k != "seconds"}) for case, row in results]


def test_ray_tasks_equal_process_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install ray): the Ray path cannot run")
    import run

    def cases(root: Path) -> list[tuple]:
        # measure(name, board, kernels, io, out_root): each path builds in its own directory.
        return [("autoencoder", board, "portable", "int8", str(root)) for board in ("mps3-an547", "mps2-an386")]

    pool = _rows(run.run_cases(cases(tmp_path / "pool"), jobs=1))
    # The Ray path must not fall back on the pool.
    monkeypatch.setattr(run, "ProcessPoolExecutor", lambda **_: pytest.fail("the Ray path used the process pool"))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("CPU") == 1
        on_ray = _rows(run.run_cases(cases(tmp_path / "ray"), jobs=1, ray_address="auto"))
    finally:
        ray.shutdown()
    assert [c[:4] for c, _ in on_ray] == [c[:4] for c, _ in pool]
    assert [r["board"] for _, r in on_ray] == ["mps3-an547", "mps2-an386"]  # in the cases' order
    for (_, a), (_, b) in zip(on_ray, pool):
        assert a["bit_exact"] and a["instructions"] > 0
        assert a.keys() == b.keys()
        # Integer figures (instructions, bytes) exactly; float ones computed by PyTorch on the host (the
        # LSB error against its q/dq model) to rounding: Ray's workers run torch on one thread
        # (OMP_NUM_THREADS=1), which changes the order of its float sums.
        for k in a:
            assert a[k] == (pytest.approx(b[k], rel=1e-6) if isinstance(b[k], float) else b[k]), k
    assert any((tmp_path / "ray").glob("autoencoder-mps2-an386-portable/*"))
