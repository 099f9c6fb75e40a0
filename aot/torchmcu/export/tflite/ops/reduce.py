"""The .tflite export of the reduce program ops: their op_<code> methods."""

from __future__ import annotations

from ..exporter import ExporterBase
from ..program import ExportError


class ReduceOps(ExporterBase):
    """Reductions and softmax."""

    def op_softmax_s8(self, index, op, p, ins, out):
        self.w.add_op("SOFTMAX", [ins[0]], [out], dict(beta=float(p.get("beta", 1.0))))
    def op_softmax_s16(self, index, op, p, ins, out):  # TFLM builds its own tables (the program's are the same)
        self.w.add_op("SOFTMAX", [ins[0]], [out], dict(beta=float(p.get("beta", 1.0))))
    def op_softmax_masked_s8(self, index, op, p, ins, out):
        raise ExportError(f"{self.p.describe(index)}: a softmax over the entries a mask leaves has no TFLite "
                          "operator")
    op_softmax_masked_s16 = op_softmax_masked_s8
    def op_log_softmax_s8(self, index, op, p, ins, out):
        self.w.add_op("LOG_SOFTMAX", [ins[0]], [out])
    def op_log_softmax_f32(self, index, op, p, ins, out):
        rank = len(self.p.tensors[op["inputs"][0]]["dims"])
        if p["axis"] != rank - 1:
            raise ExportError(f"{self.p.describe(index)}: log_softmax over axis {p['axis']} of {rank}")
        self.w.add_op("LOG_SOFTMAX", [ins[0]], [out])
    def op_mean_s8(self, index, op, p, ins, out):
        self.op_mean_f32(index, op, p, ins, out)
    op_mean_s16 = op_mean_s8
    def op_softmax_f32(self, index, op, p, ins, out):
        rank = len(self.p.tensors[op["inputs"][0]]["dims"])
        if p["axis"] != rank - 1:
            raise ExportError(f"{self.p.describe(index)}: softmax over axis {p['axis']} of {rank} (TFLite's "
                              "SOFTMAX is over the last axis)")
        self.w.add_op("SOFTMAX", [ins[0]], [out], dict(beta=1.0))
    def op_mean_f32(self, index, op, p, ins, out):
        rank = len(self.p.tensors[op["inputs"][0]]["dims"])
        axes = [d for d in range(rank) if p["axis_mask"] >> d & 1]
        keep = len(self.p.tensors[op["outputs"][0]]["dims"]) == rank
        self.w.add_op("MEAN", [ins[0], self.int_vector("axes", axes)], [out], dict(keep_dims=keep))
