"""`make bench RAY=...`: bench/run.py's cases as Ray tasks give the rows the
process pool gives. One small case (the MLPerf Tiny FC autoencoder, int8, on
the Cortex-M55 in QEMU) measured both ways, on a real local Ray cluster of
one CPU; everything but the wall-clock seconds must be equal (QEMU -icount
counts are deterministic). Skips when ray is not installed (it is not in the
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
        return [("autoencoder", "mps3-an547", "portable", "int8", str(root))]

    pool = _rows(run.run_cases(cases(tmp_path / "pool"), jobs=1))
    # The Ray path must not fall back on the pool.
    monkeypatch.setattr(run, "ProcessPoolExecutor", lambda **_: pytest.fail("the Ray path used the process pool"))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("CPU") == 1
        on_ray = _rows(run.run_cases(cases(tmp_path / "ray"), jobs=1, ray_address="auto"))
    finally:
        ray.shutdown()
    assert [c for c, _ in on_ray] == [c for c, _ in pool]
    for (_, a), (_, b) in zip(on_ray, pool):
        assert a["bit_exact"] and a["instructions"] > 0
        assert a == b
    assert any((tmp_path / "ray").glob("autoencoder-mps3-an547-portable/*"))
