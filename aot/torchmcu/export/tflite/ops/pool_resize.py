"""The .tflite export of the pooling and resizing program ops: their op_<code> methods."""

from __future__ import annotations

import numpy as np

from ..exporter import ExporterBase
from ..program import ExportError


class PoolResizeOps(ExporterBase):
    """Pooling and resizing."""

    def _pool(self, index, op, p, ins, out, opcode, quant):
        P = self.p
        x_dims, o_dims = P.tensors[op["inputs"][0]]["dims"], P.tensors[op["outputs"][0]]["dims"]
        if p.get("dilation_h", 1) != 1 or p.get("dilation_w", 1) != 1:
            raise ExportError(f"{P.describe(index)}: dilated pooling has no TFLite form")
        if p.get("divisor_override"):
            raise ExportError(f"{P.describe(index)}: divisor_override has no TFLite form")
        if p.get("round_half_even"):
            raise ExportError(f"{P.describe(index)}: rounds the mean half to even as PyTorch (TFLite's "
                              "AVERAGE_POOL_2D rounds the raw sum half away from zero): compile with "
                              "--avg-pool-rounding tflite (compile(..., avg_pool_rounding='tflite'))")
        k, s = (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"])
        pad = (p["pad_top"], p["pad_left"])
        include = opcode == "AVERAGE_POOL_2D" and p.get("count_include_pad", not quant) and pad != (0, 0)
        x = ins[0]
        if include:  # PyTorch's divisor counts the padding: pad (zeros, the zero point), then VALID
            pads = [(pp, (o - 1) * ss + kk - i - pp) for i, o, kk, ss, pp in zip(x_dims[1:3], o_dims[1:3], k, s, pad)]
            if any(after > pp or after < 0 for pp, after in pads):
                raise ExportError(f"{P.describe(index)}: count_include_pad average pooling with ceil_mode windows "
                                  "(PyTorch clips their divisor at the padding) has no TFLite form")
            padding, x = "VALID", self.pad(x, pads)
        else:
            padding, pads = self.padding(x_dims[1:3], k, s, (1, 1), pad, o_dims[1:3])
            if pads is not None:
                if opcode == "MAX_POOL_2D":  # padded taps never win: the lowest value
                    x = self.pad(x, pads, (-32768 if self._int_dtype(op) == "int16" else -128) if quant else -np.inf)
                else:
                    raise ExportError(f"{P.describe(index)}: average pooling with padding {pads} that TFLite's "
                                      "SAME/VALID cannot express (TFLite divides by the in-bounds taps)")
        if quant:
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        else:
            act, bounds = self.float_act(p)
        opts = dict(padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0], filter_width=k[1],
                    fused_activation_function=act)
        self.with_clamp(lambda o: self.w.add_op(opcode, [x], [o], opts), out, bounds,
                        self._int_dtype(op) if quant else "float32")
    def op_max_pool2d_s8(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "MAX_POOL_2D", True)
    def op_avg_pool2d_s8(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "AVERAGE_POOL_2D", True)
    op_max_pool2d_s16 = op_max_pool2d_s8
    op_avg_pool2d_s16 = op_avg_pool2d_s8
    def op_max_pool2d_f32(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "MAX_POOL_2D", False)
    def op_avg_pool2d_f32(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "AVERAGE_POOL_2D", False)
    def _resize(self, op, p, ins, out, opcode) -> None:
        dims = self.p.tensors[op["outputs"][0]]["dims"]
        self.w.add_op(opcode, [ins[0], self.int_vector("size", dims[1:3])], [out],
                      dict(align_corners=bool(p.get("align_corners")),
                           half_pixel_centers=bool(p.get("half_pixel_centers"))))
    def op_resize_nearest(self, index, op, p, ins, out):  # F32, I8 and I16: the same gather
        self._resize(op, p, ins, out, "RESIZE_NEAREST_NEIGHBOR")
    def op_resize_bilinear_s8(self, index, op, p, ins, out):
        self._resize(op, p, ins, out, "RESIZE_BILINEAR")
    def op_resize_bilinear_f32(self, index, op, p, ins, out):
        self._resize(op, p, ins, out, "RESIZE_BILINEAR")
    def op_resize_bilinear_s16(self, index, op, p, ins, out):
        raise ExportError(f"{self.p.describe(index)}: TFLite Micro has no int16 RESIZE_BILINEAR, and TFLite's "
                          "positions in 1/1024 (which the int8 op keeps) are not this op's exact ones")
