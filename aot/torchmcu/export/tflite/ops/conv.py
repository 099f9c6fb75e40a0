"""The .tflite export of the conv program ops: their op_<code> methods."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .... import reference as ref
from ..exporter import ExporterBase
from ..program import ExportError, _f32, weight_scales


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
