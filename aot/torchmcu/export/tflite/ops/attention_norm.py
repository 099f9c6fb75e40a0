"""The .tflite export of the attention and normalisation program ops: their op_<code> methods."""

from __future__ import annotations

from ..exporter import ExporterBase
from ..program import ExportError


class AttentionNormOps(ExporterBase):
    """Matrix products, attention and normalisation."""

    def op_batch_matmul_s8(self, index, op, p, ins, out):
        # TFLite's BATCH_MATMUL has no fused activation: a narrower range clamps afterwards.
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"][:2], ins)]
        dtype = self._int_dtype(op)
        full = (-128, 127) if dtype == "int8" else (-32768, 32767)
        bounds = () if (p["act_min"], p["act_max"]) == full else (p["act_min"], p["act_max"])
        opts = dict(adj_x=False, adj_y=bool(p.get("adj_y", False)))
        self.with_clamp(lambda o: self.w.add_op("BATCH_MATMUL", ins[:2], [o], opts), out, bounds, dtype)
    op_batch_matmul_s16 = op_batch_matmul_s8
    def op_batch_matmul_f32(self, index, op, p, ins, out):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"][:2], ins)]
        self.w.add_op("BATCH_MATMUL", ins[:2], [out], dict(adj_x=False, adj_y=bool(p.get("adj_y", False))))
    def _int_dtype(self, op) -> str:
        return "int16" if self.p.tensors[op["outputs"][0]]["dtype"] == "I16" else "int8"
    def op_layer_norm_s8(self, index, op, p, ins, out):
        raise ExportError(f"{self.p.describe(index)}: TFLite has no layer-norm operator (torchmcu's integer "
                          "scheme: reference/attention_norm.py)")
    op_layer_norm_s16 = op_layer_norm_s8
    op_layer_norm_f32 = op_layer_norm_s8
