"""Each program op as TFLite operators, by op family (the families of
torchmcu.passes.lowering): one mixin class each, combined with the core in
export.py. A method op_<code> exports the op code <CODE>."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import reference as ref
from .exporter import ExporterBase
from .program import ExportError, _f32, weight_scales


class ConvOps(ExporterBase):
    """Convolution, fully connected and matrix products."""

    def _conv(self, index, op, p, ins, out, depthwise: bool, quant: bool) -> None:
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        x_dims, o_dims = P.tensors[xt]["dims"], P.tensors[op["outputs"][0]]["dims"]
        w = P.const(wt)
        kh, kw = w.shape[1], w.shape[2]
        if not depthwise and not quant and p.get("groups", 1) != 1:
            raise ExportError(f"{P.describe(index)}: grouped convolution (groups {p['groups']}) has no TFLite "
                              "CONV_2D form that TFLite Micro runs")
        if not depthwise and w.shape[3] != x_dims[3]:
            if quant and x_dims[3] % w.shape[3] == 0:
                self._grouped_conv(index, op, p, ins, out, x_dims[3] // w.shape[3])
                return
            raise ExportError(f"{P.describe(index)}: weight input channels {w.shape[3]} != {x_dims[3]}")
        padding, pads = self.padding(x_dims[1:3], (kh, kw), (p["stride_h"], p["stride_w"]),
                                     (p["dilation_h"], p["dilation_w"]), (p["pad_top"], p["pad_left"]),
                                     o_dims[1:3])
        x = ins[0] if pads is None else self.pad(ins[0], pads)
        name = P.tensors[wt]["name"]
        if quant:
            s_in, zp_in = P.qparams(xt)
            s_w = weight_scales(P, index)
            wq = self.weights(wt, w, s_w, 3 if depthwise else 0)
            bias = None
            wide = op["code"].endswith("_S16")  # int16x8: int64 bias
            if bt >= 0:
                bias = self.const_tensor(P.tensors[bt]["name"], P.const(bt).astype(np.int64 if wide else np.int32),
                                         "int64" if wide else "int32", _f32(s_in) * s_w.astype(np.float64),
                                         [0] * len(s_w), 0)
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
            dtype = "int16" if wide else "int8"
        else:
            wq = self.const_tensor(name, w, "float32")
            bias = None if bt < 0 else self.const_tensor(P.tensors[bt]["name"], P.const(bt), "float32")
            act, bounds = self.float_act(p)
            dtype = "float32"
        opts: dict[str, Any] = dict(padding=padding, stride_h=p["stride_h"], stride_w=p["stride_w"],
                                    dilation_h_factor=p["dilation_h"], dilation_w_factor=p["dilation_w"],
                                    fused_activation_function=act)
        if depthwise:
            opts["depth_multiplier"] = p["multiplier"]
        opcode = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
        self.with_clamp(lambda o: self.w.add_op(opcode, [x, wq, -1 if bias is None else bias], [o], opts),
                        out, bounds, dtype)
    def _grouped_conv(self, index, op, p, ins, out, groups: int) -> None:
        """A grouped integer convolution as TFLite Micro runs it: SPLIT along
        the channels, one CONV_2D per group (its slice of the weights, bias
        and scales), CONCATENATION. Each output channel's arithmetic is the
        grouped kernel's."""
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        w, wide = P.const(wt), op["code"].endswith("_S16")
        s_in, _ = P.qparams(xt)
        s_w = weight_scales(P, index)
        per = w.shape[0] // groups
        dtype = "int16" if wide else "int8"
        parts = [self.like(ins[0], f"group{g}") for g in range(groups)]
        for g, part in enumerate(parts):  # the groups' input shapes: channels / groups
            self.w._tensors[part]["shape"] = [*self.w._tensors[ins[0]]["shape"][:3], w.shape[3]]
        self.w.add_op("SPLIT", [self.int_vector("axis", [3]), ins[0]], parts, dict(num_splits=groups))
        x_dims, o_dims = P.tensors[xt]["dims"], P.tensors[op["outputs"][0]]["dims"]
        padding, pads = self.padding(x_dims[1:3], w.shape[1:3], (p["stride_h"], p["stride_w"]),
                                     (p["dilation_h"], p["dilation_w"]), (p["pad_top"], p["pad_left"]), o_dims[1:3])
        act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        opts = dict(padding=padding, stride_h=p["stride_h"], stride_w=p["stride_w"],
                    dilation_h_factor=p["dilation_h"], dilation_w_factor=p["dilation_w"], fused_activation_function=act)
        outs = []
        name = P.tensors[wt]["name"]
        for g, part in enumerate(parts):
            sl = slice(g * per, (g + 1) * per)
            wq = self.const_tensor(f"{name}_g{g}", w[sl], "int8", s_w[sl], [0] * per, 0)
            b = -1
            if bt >= 0:
                bias = P.const(bt)[sl].astype(np.int64 if wide else np.int32)
                b = self.const_tensor(f"{name}_bias_g{g}", bias, "int64" if wide else "int32",
                                      _f32(s_in) * s_w[sl].astype(np.float64), [0] * per, 0)
            y = self.like(out, f"group{g}")
            self.w._tensors[y]["shape"] = [*o_dims[:3], per]
            x = part if pads is None else self.pad(part, pads)
            self.w.add_op("CONV_2D", [x, wq, b], [y], opts)
            outs.append(y)
        self.with_clamp(lambda o: self.w.add_op("CONCATENATION", outs, [o], dict(axis=3, fused_activation_function="NONE")),
                        out, bounds, dtype)
    def _transpose_conv(self, index, op, p, ins, out, kind: str) -> None:
        """TRANSPOSE_CONV, which derives its padding from the output's size:
        VALID (none) or SAME where that gives the program's; otherwise a
        VALID result pad_top / pad_left larger, then a SLICE."""
        P = self.p
        xt, wt = op["inputs"][:2]
        bt = op["inputs"][2] if len(op["inputs"]) > 2 else -1
        o_dims = list(P.tensors[op["outputs"][0]]["dims"])
        w = P.const(wt)
        k, st, pad = w.shape[1:3], (p["stride_h"], p["stride_w"]), (p["pad_top"], p["pad_left"])
        same = [max(((o + s - 1) // s - 1) * s + kk - o, 0) // 2 for o, kk, s in zip(o_dims[1:3], k, st)]
        padding, full = ("VALID", o_dims) if pad == (0, 0) else ("SAME", o_dims) if list(pad) == same else \
            ("VALID", [o_dims[0], o_dims[1] + pad[0], o_dims[2] + pad[1], o_dims[3]])
        if kind == "f32":
            wq = self.const_tensor(P.tensors[wt]["name"], w, "float32")
            bias = -1 if bt < 0 else self.const_tensor(P.tensors[bt]["name"], P.const(bt), "float32")
            # TFLite Micro reads a float TRANSPOSE_CONV's activation from the wrong
            # params struct: none fused, a clamp after.
            act, bounds, dtype = "NONE", self._float_bounds(p), "float32"
        else:
            s_in, _ = P.qparams(xt)
            s_w = weight_scales(P, index)
            wq = self.weights(wt, w, s_w, 0)
            wide = kind == "s16"
            bias = -1 if bt < 0 else self.const_tensor(P.tensors[bt]["name"], P.const(bt).astype(
                np.int64 if wide else np.int32), "int64" if wide else "int32", _f32(s_in) * s_w.astype(np.float64),
                [0] * len(s_w), 0)
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
            dtype = "int16" if wide else "int8"

        def one(x: int, wq: int, bias: int, target: int, channels: int) -> None:
            shape, sized = [*full[:3], channels], [*o_dims[:3], channels]
            y = target
            if full != o_dims:
                y = self.like(target, "uncropped")
                self.w._tensors[y]["shape"] = shape
            self.w.add_op("TRANSPOSE_CONV", [self.int_vector("output_shape", shape), wq, x, bias], [y],
                          dict(padding=padding, stride_h=st[0], stride_w=st[1], fused_activation_function=act))
            if full != o_dims:
                self.w.add_op("SLICE", [y, self.int_vector("begin", [0, pad[0], pad[1], 0]),
                                        self.int_vector("size", sized)], [target])

        groups = P.tensors[xt]["dims"][3] // w.shape[3]
        if groups == 1:
            self.with_clamp(lambda target: one(ins[0], wq, bias, target, o_dims[3]), out, bounds, dtype)
            return
        # Grouped: SPLIT the channels, a TRANSPOSE_CONV per group (its weights, bias, scales), CONCATENATION.
        per, name = w.shape[0] // groups, P.tensors[wt]["name"]
        part_shape = [*self.w._tensors[ins[0]]["shape"][:3], w.shape[3]]
        parts = [self.like(ins[0], f"group{g}") for g in range(groups)]
        self.w.add_op("SPLIT", [self.int_vector("axis", [3]), ins[0]], parts, dict(num_splits=groups))
        outs = []
        for g, part in enumerate(parts):
            self.w._tensors[part]["shape"], sl = part_shape, slice(g * per, (g + 1) * per)
            if kind == "f32":
                wg = self.const_tensor(f"{name}_g{g}", w[sl], "float32")
                bg = -1 if bt < 0 else self.const_tensor(f"{name}_bias_g{g}", P.const(bt)[sl], "float32")
            else:
                wg = self.const_tensor(f"{name}_g{g}", w[sl], "int8", s_w[sl], [0] * per, 0)
                bg = -1 if bt < 0 else self.const_tensor(
                    f"{name}_bias_g{g}", P.const(bt)[sl].astype(np.int64 if wide else np.int32),
                    "int64" if wide else "int32", _f32(s_in) * s_w[sl].astype(np.float64), [0] * per, 0)
            y = self.like(out, f"group{g}")
            self.w._tensors[y]["shape"] = [*o_dims[:3], per]
            one(part, wg, bg, y, per)
            outs.append(y)
        concat = dict(axis=3, fused_activation_function="NONE")
        self.with_clamp(lambda o: self.w.add_op("CONCATENATION", outs, [o], concat), out, bounds, dtype)

    @staticmethod
    def _float_bounds(p: dict) -> tuple:
        lo, hi = float(p.get("act_min", -math.inf)), float(p.get("act_max", math.inf))
        return () if (lo, hi) == (-math.inf, math.inf) else (lo, hi)
    def op_transpose_conv2d_s8(self, index, op, p, ins, out):
        self._transpose_conv(index, op, p, ins, out, "s8")
    def op_transpose_conv2d_s16(self, index, op, p, ins, out):
        self._transpose_conv(index, op, p, ins, out, "s16")
    def op_transpose_conv2d_f32(self, index, op, p, ins, out):
        self._transpose_conv(index, op, p, ins, out, "f32")
    def op_conv2d_s8(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=False, quant=True)
    def op_depthwise_conv2d_s8(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=True, quant=True)
    op_conv2d_s16 = op_conv2d_s8
    op_depthwise_conv2d_s16 = op_depthwise_conv2d_s8
    # W4A8: the int8 ops with TFLite INT4 weights (TFLite Micro unpacks them).
    op_conv2d_s4 = op_conv2d_s8
    op_depthwise_conv2d_s4 = op_depthwise_conv2d_s8
    def op_linear_s16(self, index, op, p, ins, out):
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        w = P.const(wt)
        s_in, _ = P.qparams(xt)
        s_w = weight_scales(P, index)
        wq = self.const_tensor(P.tensors[wt]["name"], w, "int8", s_w, [0] * len(s_w), 0)
        bias = np.zeros(w.shape[0], np.int64) if bt < 0 else P.const(bt).astype(np.int64)
        b = self.const_tensor(P.tensors[bt]["name"] if bt >= 0 else f"{op['name']}_bias", bias, "int64",
                              _f32(s_in) * s_w.astype(np.float64), [0] * len(s_w), 0)
        act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        self.with_clamp(lambda o: self.w.add_op("FULLY_CONNECTED", [ins[0], wq, b], [o], self._fc_opts(op, act)),
                        out, bounds, "int16")
    def op_conv2d_f32(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=False, quant=False)
    def op_depthwise_conv2d_f32(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=True, quant=False)
    def _fc_opts(self, op, act) -> dict:
        keep = len(self.p.tensors[op["outputs"][0]]["dims"]) > 2
        return dict(fused_activation_function=act, keep_num_dims=keep)
    def op_linear_s8(self, index, op, p, ins, out):
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        w = P.const(wt)
        s_in, _ = P.qparams(xt)
        s_w = weight_scales(P, index)
        # TFLite Micro refuses INT4 filters in a per-channel FULLY_CONNECTED
        # (fully_connected_common.cc): LINEAR_S4's values go in widened to
        # int8, the same products.
        wq = self.weights(wt, w, s_w, 0, int4=False)
        folded = np.zeros(w.shape[0], np.int64) if bt < 0 else P.const(bt).astype(np.int64)
        # LINEAR_S8's bias has input_offset * sum(w) folded in; FULLY_CONNECTED adds the offset itself.
        bias = folded - int(p["input_offset"]) * w.astype(np.int64).sum(1)
        if bias.min() < ref.INT32_MIN or bias.max() > ref.INT32_MAX:
            raise ExportError(f"{P.describe(index)}: the unfolded bias does not fit int32")
        b = self.const_tensor(P.tensors[bt]["name"] if bt >= 0 else f"{op['name']}_bias", bias.astype(np.int32),
                              "int32", _f32(s_in) * s_w.astype(np.float64), [0] * len(s_w), 0)
        act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        self.with_clamp(lambda o: self.w.add_op("FULLY_CONNECTED", [ins[0], wq, b], [o], self._fc_opts(op, act)),
                        out, bounds, "int8")
    def op_linear_s4(self, index, op, p, ins, out):
        self.op_linear_s8(index, op, p, ins, out)
    def op_linear_f32(self, index, op, p, ins, out):
        P = self.p
        wt, bt = op["inputs"][1], op["inputs"][2] if len(op["inputs"]) > 2 else -1
        wq = self.const_tensor(P.tensors[wt]["name"], P.const(wt), "float32")
        b = -1 if bt < 0 else self.const_tensor(P.tensors[bt]["name"], P.const(bt), "float32")
        act, bounds = self.float_act(p)
        self.with_clamp(lambda o: self.w.add_op("FULLY_CONNECTED", [ins[0], wq, b], [o], self._fc_opts(op, act)),
                        out, bounds, "float32")


class PoolResizeOps(ExporterBase):
    """Pooling and resizing."""

    def _pool(self, index, op, p, ins, out, opcode, quant):
        P = self.p
        x_dims, o_dims = P.tensors[op["inputs"][0]]["dims"], P.tensors[op["outputs"][0]]["dims"]
        if p.get("dilation_h", 1) != 1 or p.get("dilation_w", 1) != 1:
            raise ExportError(f"{P.describe(index)}: dilated pooling has no TFLite form")
        if p.get("divisor_override"):
            raise ExportError(f"{P.describe(index)}: divisor_override has no TFLite form")
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


class ElementwiseOps(ExporterBase):
    """Element-wise ops, activations and conversions."""

    def op_quantize_s16(self, index, op, p, ins, out):
        self.w.add_op("QUANTIZE", [ins[0]], [out])
    def op_dequantize_s16(self, index, op, p, ins, out):
        self.w.add_op("DEQUANTIZE", [ins[0]], [out])
    def _binary(self, index, op, p, ins, out, opcode, quant):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        if quant:
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        else:
            act, bounds = self.float_act(p)
        self.with_clamp(lambda o: self.w.add_op(opcode, ins[:2], [o], dict(fused_activation_function=act)),
                        out, bounds, self._int_dtype(op) if quant else "float32")
    def _int_dtype(self, op) -> str:
        return "int16" if self.p.tensors[op["outputs"][0]]["dtype"] == "I16" else "int8"
    def op_add_s8(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "ADD", True)
    def op_mul_s8(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "MUL", True)
    def op_add_f32(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "ADD", False)
    def op_mul_f32(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "MUL", False)
    # int16x8: the same TFLite ops on int16 tensors (_int_dtype, the pools' quantization).
    op_add_s16 = op_add_s8
    op_mul_s16 = op_mul_s8
    def op_sub_s8(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "SUB", True)
    op_sub_s16 = op_sub_s8
    def op_sub_f32(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "SUB", False)
    def op_div_s8(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "DIV", True)
    def op_div_f32(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "DIV", False)
    def op_prelu_s8(self, index, op, p, ins, out):  # TFLite's PRELU: no fused activation
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        self.w.add_op("PRELU", ins[:2], [out])
    op_prelu_s16 = op_prelu_s8
    op_prelu_f32 = op_prelu_s8
    def op_activation_f32(self, index, op, p, ins, out):
        opcode = {4: "ELU", 5: "EXP", 6: "RSQRT", 8: "SQRT"}.get(p["fn"])
        if opcode is None or (opcode == "ELU" and p.get("alpha", 1.0) != 1.0):
            raise ExportError(f"{self.p.describe(index)}: no TFLite Micro operator computes activation {p['fn']}")
        self.w.add_op(opcode, [ins[0]], [out])
    def op_lut_s16(self, index, op, p, ins, out):
        raise ExportError(f"{self.p.describe(index)}: an interpolated int16 table has no TFLite counterpart "
                          "(TFLite's int16 activations use their own fixed-point arithmetic)")
    def _glu(self, index, op, p, ins, out, quant: bool):
        P = self.p
        xt = op["inputs"][0]
        dims = list(P.tensors[xt]["dims"])
        dims[p["axis"]] //= 2
        dtype = self._int_dtype(op) if quant else "float32"
        s_in, zp_in = P.qparams(xt) if quant else (None, None)
        half = [self.w.add_tensor(f"{op['name']}_half{k}", dims, dtype, s_in, zp_in) for k in range(2)]
        self.w.add_op("SPLIT", [self.int_vector("axis", [p["axis"]]), ins[0]], half, dict(num_splits=2))
        sig_q = ((1 / 256, -128) if dtype == "int8" else (1 / 32768, 0)) if quant else (None, None)
        sig = self.w.add_tensor(f"{op['name']}_sigmoid", dims, dtype, *sig_q)
        self.w.add_op("LOGISTIC", [half[1]], [sig])
        self.w.add_op("MUL", [half[0], sig], [out], dict(fused_activation_function="NONE"))
    def op_glu_s8(self, index, op, p, ins, out):
        self._glu(index, op, p, ins, out, True)
    def op_glu_f32(self, index, op, p, ins, out):
        self._glu(index, op, p, ins, out, False)
    def op_requantize(self, index, op, p, ins, out):  # TFLite's QUANTIZE from an integer input
        self.w.add_op("QUANTIZE", [ins[0]], [out])
    def op_clamp_s8(self, index, op, p, ins, out):
        # TFLM's int8 RELU requantizes input -> output scale (exact when they are equal, as verify_derived
        # checks) and clamps at [max(-128, zp), 127]; RELU6 at [zp, zp + round(6 / scale)].
        act, bounds = self.fused_act(p["min"], p["max"], op["outputs"][0])
        if act == "NONE":
            self.clamp(ins[0], out, bounds, "int8")
        else:
            self.w.add_op(act, [ins[0]], [out])
    def op_clamp_f32(self, index, op, p, ins, out):
        act, bounds = self.float_act(p, "min", "max")
        if act == "NONE":
            self.clamp(ins[0], out, bounds, "float32")
        else:
            self.w.add_op(act, [ins[0]], [out])
    def op_lut_s8(self, index, op, p, ins, out):
        P = self.p
        table = P.const(op["inputs"][1]).ravel()
        s_in, zp_in = P.qparams(op["inputs"][0])
        s_out, zp_out = P.qparams(op["outputs"][0])
        # TFLite's int8 LOGISTIC and TANH have fixed output quantizations (TFLM refuses other
        # LOGISTIC outputs and silently assumes TANH's).
        fns = {"LOGISTIC": (lambda v: 1.0 / (1.0 + np.exp(-v)), (1.0 / 256, -128)),
               "TANH": (np.tanh, (1.0 / 128, 0))}
        for opcode, (fn, qout) in fns.items():
            if np.array_equal(table, ref.lut_table(fn, s_in, zp_in, s_out, zp_out)):
                if (s_out, zp_out) != qout:
                    raise ExportError(f"{P.describe(index)}: a {opcode.lower()} table with output quantization "
                                      f"({s_out:g}, {zp_out}); TFLite's int8 {opcode} requires "
                                      f"({qout[0]:g}, {qout[1]})")
                self.w.add_op(opcode, [ins[0]], [out])
                return
        # TFLM's int8 ELU tabulates exp(x) - 1 (its own float32 formula) as LUTPopulate does.
        if np.array_equal(table, ref.lut_table(lambda v: np.where(v < 0, np.exp(v) - np.float32(1), v),
                                               s_in, zp_in, s_out, zp_out)):
            self.w.add_op("ELU", [ins[0]], [out])
            return
        if np.array_equal(table, ref.lut_table(ref.hardswish, s_in, zp_in, s_out, zp_out)):
            raise ExportError(f"{P.describe(index)}: a hardswish table: TFLite's int8 HARD_SWISH is a "
                              "fixed-point approximation that differs from it by 1 LSB on some inputs, so no "
                              "TFLite op computes it exactly")
        raise ExportError(f"{P.describe(index)}: the table is neither the sigmoid's nor tanh's at its "
                          "quantization: no TFLite op computes it")
    def op_hardswish_f32(self, index, op, p, ins, out):
        self.w.add_op("HARD_SWISH", [ins[0]], [out])
    def op_maximum_s8(self, index, op, p, ins, out):
        self.w.add_op("MAXIMUM", ins[:2], [out])
    def op_minimum_s8(self, index, op, p, ins, out):
        self.w.add_op("MINIMUM", ins[:2], [out])
    def _max_min_f32(self, op, p, ins, out, opcode):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        act, bounds = self.float_act(p)
        if act != "NONE":  # MAXIMUM/MINIMUM have no fused activation
            bounds = (float(p.get("act_min", -math.inf)), float(p.get("act_max", math.inf)))
        self.with_clamp(lambda o: self.w.add_op(opcode, ins[:2], [o]), out, bounds, "float32")
    def op_maximum_f32(self, index, op, p, ins, out):
        self._max_min_f32(op, p, ins, out, "MAXIMUM")
    def op_minimum_f32(self, index, op, p, ins, out):
        self._max_min_f32(op, p, ins, out, "MINIMUM")
    def op_sigmoid_f32(self, index, op, p, ins, out):
        self.w.add_op("LOGISTIC", [ins[0]], [out])
    def op_tanh_f32(self, index, op, p, ins, out):
        self.w.add_op("TANH", [ins[0]], [out])
    def op_quantize_s8(self, index, op, p, ins, out):
        self.w.add_op("QUANTIZE", [ins[0]], [out])
    def op_dequantize_s8(self, index, op, p, ins, out):
        self.w.add_op("DEQUANTIZE", [ins[0]], [out])


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
    def op_copy(self, index, op, p, ins, out):
        src = self.constant(op["inputs"][0]) if self.p.is_const(op["inputs"][0]) else ins[0]
        shape = self.w._tensors[out]["shape"]
        self.w.add_op("RESHAPE", [src, self.int_vector("shape", shape)], [out], {"new_shape": shape})


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


class RecurrentOps(ExporterBase):
    """Recurrent layers: LSTM_S8 / LSTM_S16 as UNIDIRECTIONAL_SEQUENCE_LSTM
    (time-major, TFLite's integer LSTM). The hidden and cell states are the
    op's variable tensors, which TFLite Micro starts at zero and keeps from
    one invocation to the next: the program op must start at zero too (no
    h0, c0), and only its output y has a TFLite counterpart."""

    def op_lstm_s8(self, index, op, p, ins, out):
        P = self.p
        x, w_ih, w_hh, bias, h0, c0 = op["inputs"][:6]
        if h0 >= 0 or c0 >= 0:
            raise ExportError(f"{P.describe(index)}: an initial state from a tensor (TFLite's LSTM starts from "
                              "its variable tensors, at zero)")
        if p.get("reverse"):
            raise ExportError(f"{P.describe(index)}: a reversed direction (TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM "
                              "runs forward)")
        if len(op["inputs"]) > 7 and op["inputs"][7] >= 0:  # torchmcu's integer LSTM
            raise ExportError(f"{P.describe(index)}: per-channel weights: compile with --recurrent-weights per-gate")
        wide = op["code"] == "LSTM_S16"
        yt = op["outputs"][0]
        T, B, H = P.tensors[yt]["dims"]
        s_x, zp_x = P.qparams(x)
        s_h, zp_h = P.qparams(yt)
        wi, wh, b = P.const(w_ih), P.const(w_hh), P.const(bias).astype(np.int64)
        si = np.asarray(P.tensors[w_ih]["channel_scales"], np.float32)[::H]
        sh = np.asarray(P.tensors[w_hh]["channel_scales"], np.float32)[::H]
        if not np.array_equal(b[1], -zp_h * wh.astype(np.int64).sum(1)):
            raise ExportError(f"{P.describe(index)}: a hidden-side bias (TFLite's LSTM has none)")
        gate_bias = b[0] + zp_x * wi.astype(np.int64).sum(1)  # the input offset's kernel sums unfolded
        adt, bdt = ("int16", "int64") if wide else ("int8", "int32")
        name = op["name"]
        tensors = [ins[0]]
        for w, s, kind in ((wi, si, "input"), (wh, sh, "recurrent")):
            for g, gate in enumerate(("input", "forget", "cell", "output")):
                tensors.append(self.const_tensor(f"{name}_{kind}_to_{gate}", w[g * H:(g + 1) * H], "int8",
                                                 float(s[g]), 0))
        tensors += [-1, -1, -1]  # no peepholes
        for g, gate in enumerate(("input", "forget", "cell", "output")):
            tensors.append(self.const_tensor(f"{name}_{gate}_bias", gate_bias[g * H:(g + 1) * H], bdt,
                                             _f32(s_x) * float(si[g]), 0))
        tensors += [-1, -1]  # no projection
        tensors.append(self.w.add_tensor(f"{name}_h", (B, H), adt, s_h, zp_h, variable=True))
        tensors.append(self.w.add_tensor(f"{name}_c", (B, H), "int16", 2.0 ** p["cell_scale_power"], 0,
                                         variable=True))
        tensors += [-1, -1, -1, -1]  # no layer norm
        cell_clip = p.get("cell_clip", 0) * 2.0 ** p["cell_scale_power"]
        self.w.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", tensors, [out],
                      dict(fused_activation_function="TANH", cell_clip=float(cell_clip), proj_clip=0.0,
                           time_major=True))
    op_lstm_s16 = op_lstm_s8
