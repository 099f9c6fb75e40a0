"""docs/ops.md is the table `python -m torchmcu.ops_table` generates from
the code (the lowering families, kernels.h, the backends)."""

from __future__ import annotations

from conftest import REPO
from torchmcu import ops_table


def test_docs_ops_md_is_current() -> None:
    assert (REPO / "docs" / "ops.md").read_text() == ops_table.markdown(), \
        "docs/ops.md is stale: run `python -m torchmcu.ops_table --write`"


def test_table_reads_the_registries() -> None:
    rows = {r["aten"]: r for r in ops_table.rows()}
    assert rows["aten.conv2d.default"]["int4"] == "yes" and rows["aten.conv2d.default"]["int8"] == "yes"
    assert rows["aten.slice.Tensor"]["logical"] == ["slice"] and rows["aten.slice.Tensor"]["a16w8"] == "yes"
    assert rows["aten.sigmoid.default"]["logical"] == ["sigmoid"]  # a rule made by a factory
    codes = {r["code"]: r for r in ops_table.code_rows()}
    assert codes["SLICE"]["portable"] == "yes" and codes["SLICE"]["cmsis-nn"] == "-"
    assert codes["CONV2D_S8"]["cmsis-nn"] == "yes" and codes["CONV2D_S8"]["hifi"] == "yes"
    assert codes["PERMUTE"]["ethos-u"] == "yes"
