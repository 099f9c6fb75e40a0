"""The .tflite export of the element-wise program ops: their op_<code> methods."""

from __future__ import annotations

import math

import numpy as np

from .... import reference as ref
from ..exporter import ExporterBase
from ..program import NP, TFL_DTYPE, ExportError


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
    # CompareParams.op: <, <=, >, >=, ==, != (their outputs BOOL: the program's U8 1 or 0)
    _COMPARISONS = ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")
    def op_compare(self, index, op, p, ins, out):
        P = self.p
        opcode = self._COMPARISONS[p["op"]]
        if P.tensors[op["inputs"][0]]["dtype"] == "U8" and opcode not in ("EQUAL", "NOT_EQUAL"):
            raise ExportError(f"{P.describe(index)}: {opcode} of boolean tensors (TFLite Micro's {opcode} has no "
                              "BOOL kernel)")
        ins = [self.constant(t) if P.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        self.w.add_op(opcode, ins[:2], [out])
    def op_masked_fill(self, index, op, p, ins, out):
        """SELECT_V2(mask, value, x): the value a constant of x's type (int8, int16: the program's qvalue, raw,
        at x's quantization, which the output shares: verify_derived)."""
        P = self.p
        xt, mt = op["inputs"][:2]
        x, mask = (self.constant(t) if P.is_const(t) else i for t, i in zip((xt, mt), ins))
        dtype = P.tensors[xt]["dtype"]
        value, (scale, zp) = (p["value"], (None, None)) if dtype == "F32" else (p["qvalue"], P.qparams(xt))
        fill = self.const_tensor("fill_value", np.asarray([value], NP[dtype]), TFL_DTYPE[dtype], scale, zp)
        self.w.add_op("SELECT_V2", [mask, fill, x], [out])
    def op_quantize_s8(self, index, op, p, ins, out):
        self.w.add_op("QUANTIZE", [ins[0]], [out])
    def op_dequantize_s8(self, index, op, p, ins, out):
        self.w.add_op("DEQUANTIZE", [ins[0]], [out])
