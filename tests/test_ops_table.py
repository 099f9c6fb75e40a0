"""The op table (aot/torchmcu/ops/) is the one home of an op's facts: the
files generated from it are current, and what the rest of the compiler
holds per op agrees with it (the lowering's rules and emitters, the
reference's runners, the .tflite exporter, the backends, the firmware's
in-place masks)."""

from __future__ import annotations

import importlib

import pytest
import torch
from conftest import REPO
from torchmcu import ops, ops_table
from torchmcu.backends import all_backends
from torchmcu.compiler import compile
from torchmcu.export.tflite import export as tflite_export
from torchmcu.passes.lowering import ALL, FAMILIES
from torchmcu.passes.lowering import family as lowering_family


def test_generated_files_are_current() -> None:
    stale = [str(p.relative_to(REPO)) for p in ops_table.stale()]
    assert stale == [], f"stale: {stale}: run `python -m torchmcu.ops_table --write`"


def test_docs_read_the_table() -> None:
    rows = {r["aten"]: r for r in ops_table.rows()}
    assert rows["aten.conv2d.default"]["int4"] == "yes" and rows["aten.conv2d.default"]["int8"] == "yes"
    assert rows["aten.slice.Tensor"]["logical"] == ["slice"] and rows["aten.slice.Tensor"]["a16w8"] == "yes"
    assert rows["aten.sigmoid.default"]["logical"] == ["sigmoid"]  # a rule made by a factory
    codes = {r["code"]: r for r in ops_table.code_rows()}
    assert codes["SLICE"]["portable"] == "yes" and codes["SLICE"]["cmsis-nn"] == "-"
    assert codes["CONV2D_S8"]["cmsis-nn"] == "yes" and codes["CONV2D_S8"]["hifi"] == "yes"
    assert codes["PERMUTE"]["ethos-u"] == "yes"


def test_enum_values_are_unique_and_append_only() -> None:
    values = [k.value for k in ops.KERNELS.values()]
    assert len(set(values)) == len(values) and values == sorted(values)
    # Values programs already carry never move (a few anchors across the families).
    assert {c: ops.KERNELS[c].value for c in ("LINEAR_F32", "CONV2D_S8", "ETHOS_U", "SLICE", "LSTM_F32")} == \
        {"LINEAR_F32": 0, "CONV2D_S8": 17, "ETHOS_U": 35, "SLICE": 51, "LSTM_F32": 110}


def test_rows_name_the_schemas_argument_records() -> None:
    """Each row's *Args struct is in kernel_args.fbs and its params table in
    program.fbs's OpParams union (the records the kernel reads)."""
    from torchmcu.program import schema

    s = schema.load()
    for code, k in ops.KERNELS.items():
        assert k.args is None or k.args in s.structs, f"{code}: no struct {k.args}"
        assert k.params is None or k.params in s.unions["OpParams"].members, f"{code}: no params table {k.params}"


def test_every_rule_target_and_logical_op_is_known() -> None:
    targets = {str(t) for f in FAMILIES for t in f.rules}
    listed = {t for op in ops.OPS for t in op.aten}
    assert listed - targets == set(), "Op rows list ATen targets no lowering rule takes"
    logical = set(ALL.emitters) | set(ALL.emitters16)
    # (an op with no program op of its own, batch_norm, is folded away by the passes before the layout)
    unknown = [op.name for op in ops.OPS if op.name not in logical and "q" + op.name not in logical
               and op.f32 + op.i8 + op.i16]
    assert unknown == []
    # Every emitter's logical op has a row (what it becomes is the table's).
    names = {op.name for op in ops.OPS}
    missing = sorted(n for n in logical if n not in names and not (n.startswith("q") and n[1:] in names))
    assert missing == []


def test_reference_runners_match_the_rows() -> None:
    for fam in ops.FAMILIES:
        if fam == "delegates":
            continue
        runners = set(importlib.import_module(f"torchmcu.reference.{fam}").OPS)
        rows = {c for c, k in ops.KERNELS.items() if ops.FAMILY_OF[c] == fam and k.reference}
        assert runners == rows, f"family {fam}: reference runners {sorted(runners ^ rows)} disagree with the table"


def test_tflite_exporters_match_the_rows() -> None:
    exporter = tflite_export._Exporter
    has = {c for c in ops.KERNELS if hasattr(exporter, "op_" + c.lower())}
    assert has == {c for c, k in ops.KERNELS.items() if k.tflite}


def test_backends_match_the_rows() -> None:
    backends = all_backends()
    assert backends["hifi"].op_codes() == set(ops.codes("hifi"))
    assert backends["portable"].op_codes() == set(ops.codes("portable"))
    assert backends["ethos-u"].op_codes() <= set(ops.KERNELS)


def test_firmware_defines_the_tables_inplace_masks() -> None:
    """Each element-wise kernel object takes its in-place mask from the
    generated header (inplace::kX), so the runtime allows what the
    interpreter and the planner assume."""
    text = "\n".join(p.read_text() for p in (REPO / "firmware" / "kernels").rglob("*.cc"))
    for code, k in ops.KERNELS.items():
        if k.inplace and "portable" in k.backends:
            assert f"inplace::{k.symbol}}}" in text.replace(" ", ""), f"{k.symbol} does not use inplace::{k.symbol}"


class _Gelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(torch.nn.functional.relu(x) + 1.0)


def test_the_lowering_is_held_to_the_table(tmp_path, monkeypatch) -> None:
    """With TORCHMCU_CHECK_TABLE (on in the suite), an op that becomes more than
    its row says fails: here the table is made to forget what gelu's rule emits,
    then what add becomes."""
    x = (torch.randn(1, 8),)
    assert lowering_family.checking_table()
    compile(_Gelu(), x, "mps3-an547", tmp_path / "ok")
    emits = dict(ops.EMITS)
    emits["aten.gelu.default"] = frozenset()
    monkeypatch.setattr(ops, "EMITS", emits)
    with pytest.raises(AssertionError, match="aten.gelu.default"):
        compile(_Gelu(), x, "mps3-an547", tmp_path / "rule")
    monkeypatch.undo()
    by_name = dict(ops.BY_NAME)
    by_name["add"] = (ops.Op("add", f32=("SUB_F32",)),)
    monkeypatch.setattr(ops, "BY_NAME", by_name)
    with pytest.raises(AssertionError, match="ADD_F32"):
        compile(_Gelu(), x, "mps3-an547", tmp_path / "emit")
