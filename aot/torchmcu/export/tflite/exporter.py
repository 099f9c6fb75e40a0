"""The exporter's core: TFLite tensors for program tensors, fused
activations and clamps, padding, and the dispatch of each program op to its
family's method (ops.py)."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .program import _FLOAT_ACTS, TFL_DTYPE, ExportError, _Program, _tflite_act_range
from .writer import _DTYPES, TFLiteWriter


class ExporterBase:
    def __init__(self, p: _Program) -> None:
        self.p = p
        self.w = TFLiteWriter(description="torchmcu program")
        self.tfl: dict[int, int] = {}  # program tensor -> TFLite tensor
    # -- tensors ------------------------------------------------------------------------------
    def new_tensor(self, tid: int, dims=None, name: str | None = None) -> int:
        """A TFLite tensor shaped and quantized as program tensor tid
        (without data)."""
        t = self.p.tensors[tid]
        scale = zp = None
        if t["dtype"] in ("I8", "I16") and t["scale"]:
            scale, zp = float(t["scale"]), int(t["zero_point"])
        return self.w.add_tensor(name or t["name"], dims or t["dims"], TFL_DTYPE[t["dtype"]], scale, zp)
    def like(self, tid: int, suffix: str) -> int:
        """An intermediate tensor quantized as TFLite tensor tid."""
        t = self.w._tensors[tid]
        quant = t["quant"]
        dtype = self.dtype_of(tid)
        return self.w.add_tensor(f"{t['name']}_{suffix}", t["shape"], dtype,
                                 None if quant is None else quant[0], None if quant is None else quant[1])
    def dtype_of(self, tid: int) -> str:
        code = self.w._tensors[tid]["type"]
        return next(k for k, v in _DTYPES.items() if v[0] == code)
    def const_tensor(self, name: str, data: np.ndarray, dtype: str, scale=None, zp=None, qdim=None) -> int:
        data = np.asarray(data)
        return self.w.add_tensor(name, data.shape or (1,), dtype, scale, zp, data=data, quantized_dimension=qdim)
    def constant(self, tid: int) -> int:
        t = self.p.tensors[tid]
        scale = zp = None
        if t["dtype"] in ("I8", "I16") and t["scale"]:
            scale, zp = float(t["scale"]), int(t["zero_point"])
        return self.const_tensor(t["name"], self.p.const(tid), TFL_DTYPE[t["dtype"]], scale, zp)
    def weights(self, tid: int, values: np.ndarray, scales: np.ndarray, qdim: int, int4: bool = True) -> int:
        """A conv/depthwise/linear weight tensor, per-channel symmetric: int8,
        or TFLite's packed INT4 (the program's own bytes: the same packing)
        for the W4A8 ops when `int4`."""
        t = self.p.tensors[tid]
        zps = [0] * len(scales)
        if t["dtype"] == "I4" and int4:
            return self.w.add_tensor(t["name"], values.shape, "int4", scales, zps, data=self.p.packed(tid),
                                     quantized_dimension=qdim)
        return self.const_tensor(t["name"], values, "int8", scales, zps, qdim)
    def int_vector(self, name: str, values) -> int:
        return self.const_tensor(name, np.asarray(values, np.int32), "int32")
    # -- helpers ------------------------------------------------------------------------------
    def fused_act(self, lo: int, hi: int, out_tid: int, allowed=("NONE", "RELU", "RELU6")) -> tuple[str, tuple]:
        """The fused activation giving int8 bounds [lo, hi] at the output's
        quantization, or NONE and the bounds a MAXIMUM/MINIMUM pair must
        apply afterwards."""
        scale, zp = self.p.qparams(out_tid)
        limits = (-32768, 32767) if self.p.tensors[out_tid]["dtype"] == "I16" else (-128, 127)
        for act in allowed:
            if _tflite_act_range(act, scale, zp, *limits) == (lo, hi):
                return act, ()
        return "NONE", (lo, hi)
    def float_act(self, p: dict, lo_key="act_min", hi_key="act_max") -> tuple[str, tuple]:
        lo, hi = float(p.get(lo_key, -math.inf)), float(p.get(hi_key, math.inf))
        act = _FLOAT_ACTS.get((lo, hi))
        if act in ("NONE", "RELU", "RELU6"):
            return act, ()
        return "NONE", (lo, hi)
    def with_clamp(self, emit: Callable[[int], None], out: int, bounds: tuple, dtype: str) -> None:
        """emit(target) writes the op into target: `out`, or with bounds
        (lo, hi) an intermediate that MAXIMUM/MINIMUM clamp into `out`."""
        if not bounds:
            emit(out)
            return
        mid = self.like(out, "unclamped")
        emit(mid)
        self.clamp(mid, out, bounds, dtype)
    def clamp(self, src: int, out: int, bounds: tuple, dtype: str) -> None:
        """out = min(max(src, lo), hi) on the raw values (int8: no
        requantization, src and out share the quantization); bounds that
        clamp nothing (or none) copy."""
        lo, hi = bounds if bounds else (-math.inf, math.inf)
        quant = self.w._tensors[out]["quant"]
        scale, zp = (None, None) if quant is None else (quant[0], quant[1])
        np_t = {"int8": np.int8, "int16": np.int16}.get(dtype, np.float32)
        floor, ceil = {"int8": (-128, 127), "int16": (-32768, 32767)}.get(dtype, (-math.inf, math.inf))
        cur = src
        if lo > floor:
            nxt = self.like(out, "min_clamped") if hi < ceil else out
            self.w.add_op("MAXIMUM", [cur, self.const_tensor("clamp_min", np.asarray([lo], np_t), dtype, scale, zp)],
                          [nxt])
            cur = nxt
        if hi < ceil:
            self.w.add_op("MINIMUM", [cur, self.const_tensor("clamp_max", np.asarray([hi], np_t), dtype, scale, zp)],
                          [out])
            cur = out
        if cur != out:
            shape = self.w._tensors[out]["shape"]
            self.w.add_op("RESHAPE", [cur, self.int_vector("shape", shape)], [out], {"new_shape": shape})
    @staticmethod
    def padding(in_hw, k, stride, dil, pad, out_hw) -> tuple[str, list[tuple[int, int]] | None]:
        """TFLite padding for a window op: ("SAME" | "VALID", None) when one
        of them gives the program's padding and output size, else ("VALID",
        [(top, bottom), (left, right)]) for an explicit PAD first."""
        valid = all(p == 0 and o == (i - ((kk - 1) * d + 1)) // s + 1
                    for i, kk, s, d, p, o in zip(in_hw, k, stride, dil, pad, out_hw))
        if valid:
            return "VALID", None
        same = True
        for i, kk, s, d, p, o in zip(in_hw, k, stride, dil, pad, out_hw):
            total = max((o - 1) * s + (kk - 1) * d + 1 - i, 0)
            same &= o == (i + s - 1) // s and p == total // 2
        if same:
            return "SAME", None
        pads = []
        for i, kk, s, d, p, o in zip(in_hw, k, stride, dil, pad, out_hw):
            after = max((o - 1) * s + (kk - 1) * d + 1 - i - p, 0)
            if (i + p + after - ((kk - 1) * d + 1)) // s + 1 != o:
                raise ExportError(f"padding {pad} with output {out_hw} has no TFLite form")
            pads.append((p, after))
        return "VALID", pads
    def pad(self, x: int, pads, value=None) -> int:
        """x padded in H and W: PAD (the zero point, i.e. real 0) or PADV2 with `value`."""
        t = self.w._tensors[x]
        n, h, wd, c = t["shape"]
        shape = (n, h + sum(pads[0]), wd + sum(pads[1]), c)
        quant = t["quant"]
        dtype = self.dtype_of(x)
        out = self.w.add_tensor(f"{t['name']}_padded", shape, dtype,
                                None if quant is None else quant[0], None if quant is None else quant[1])
        paddings = self.int_vector("paddings", [[0, 0], list(pads[0]), list(pads[1]), [0, 0]])
        if value is None:
            self.w.add_op("PAD", [x, paddings], [out])
        else:
            v = self.const_tensor("pad_value", np.asarray([value], np.int8 if dtype == "int8" else np.float32),
                                  dtype, None if quant is None else quant[0], None if quant is None else quant[1])
            self.w.add_op("PADV2", [x, paddings, v], [out])
        return out
    # -- ops ----------------------------------------------------------------------------------
    def emit(self, index: int, ins: list[int], out: int) -> None:
        """Program op `index` as TFLite ops reading TFLite tensors `ins`
        (-1 kept for absent operands; constants are ignored there and read
        from the program) into TFLite tensor `out`."""
        op = self.p.ops[index]
        code = op["code"]
        handler = getattr(self, f"op_{code.lower()}", None)
        if handler is None:
            raise ExportError(f"{self.p.describe(index)} has no TFLite counterpart in this exporter")
        params = op["params"][1] if op["params"] else {}
        handler(index, op, params, ins, out)
