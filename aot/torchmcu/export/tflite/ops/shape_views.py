"""The .tflite export of the shape and data-movement program ops: their op_<code> methods."""

from __future__ import annotations

import numpy as np

from ..exporter import ExporterBase
from ..program import ExportError


class ShapeViewsOps(ExporterBase):
    """Shape and data movement."""

    def op_pad(self, index, op, p, ins, out):
        P = self.p
        t = P.tensors[op["outputs"][0]]
        src = self.constant(op["inputs"][0]) if P.is_const(op["inputs"][0]) else ins[0]
        paddings = self.int_vector("paddings", [[b, a] for b, a in zip(p["before"], p["after"])])
        if t["dtype"] == "I8":
            value, default = p.get("qvalue", 0), int(t["zero_point"])  # TFLite's PAD pads int8 with the zero point
        elif t["dtype"] == "F32":
            value, default = p.get("value", 0.0), 0.0
        else:
            raise ExportError(f"{P.describe(index)}: padding a {t['dtype']} tensor")
        if value == default:
            self.w.add_op("PAD", [src, paddings], [out])
        else:
            if t["dtype"] == "I8":
                v = self.const_tensor("pad_value", np.asarray([value], np.int8), "int8", float(t["scale"]),
                                      int(t["zero_point"]))
            else:
                v = self.const_tensor("pad_value", np.asarray([value], np.float32), "float32")
            self.w.add_op("PADV2", [src, paddings, v], [out])
    def op_permute(self, index, op, p, ins, out):
        self.w.add_op("TRANSPOSE", [ins[0], self.int_vector("perm", p["perm"])], [out])
    def op_concat(self, index, op, p, ins, out):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        self.w.add_op("CONCATENATION", ins, [out], dict(axis=p["axis"], fused_activation_function="NONE"))
    def op_slice(self, index, op, p, ins, out):
        """STRIDED_SLICE (steps >= 1), or BROADCAST_TO (steps of 0 on dims of
        size 1, whole dims elsewhere); a slice that also broadcasts has no one op."""
        P = self.p
        x_dims = P.tensors[op["inputs"][0]]["dims"]
        y_dims = P.tensors[op["outputs"][0]]["dims"]
        begin, step = list(p["begin"]), list(p["step"])
        if all(s >= 1 for s in step):
            end = [b + (n - 1) * s + 1 for b, n, s in zip(begin, y_dims, step)]
            self.w.add_op("STRIDED_SLICE", [ins[0], self.int_vector("begin", begin), self.int_vector("end", end),
                                            self.int_vector("strides", step)], [out],
                          dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0))
        elif all((s == 0 and i == 1) or (s == 1 and b == 0 and i == n)
                 for i, n, b, s in zip(x_dims, y_dims, begin, step)):
            self.w.add_op("BROADCAST_TO", [ins[0], self.int_vector("shape", list(y_dims))], [out])
        else:
            raise ExportError(f"{P.describe(index)}: a slice that also broadcasts has no single TFLite op")
    def op_gather(self, index, op, p, ins, out):
        """GATHER along axis 0: nn.Embedding's rows. An id outside the table gives zeros in the kernel; TFLite
        Micro's GATHER fails the invocation instead."""
        table = self.constant(op["inputs"][0]) if self.p.is_const(op["inputs"][0]) else ins[0]
        self.w.add_op("GATHER", [table, ins[1]], [out], dict(axis=0))
    def op_copy(self, index, op, p, ins, out):
        src = self.constant(op["inputs"][0]) if self.p.is_const(op["inputs"][0]) else ins[0]
        shape = self.w._tensors[out]["shape"]
        self.w.add_op("RESHAPE", [src, self.int_vector("shape", shape)], [out], {"new_shape": shape})
