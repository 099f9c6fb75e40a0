"""Activations beyond clamp: element-wise functions as lookup tables (256
int8 entries, TFLite's LUTPopulate<int8_t>; 513 interpolated int16 entries,
TFLite's LUTPopulate<int16_t> and generic_int16_table_lookup), PReLU as
TFLite's int8/int16 PRELU, GLU as LUT then MUL, and the interpreter's
runners for their op codes (ACTIVATION_F32, LUT_S16, PRELU_*, GLU_*).

The float functions are PyTorch's own (the tables tabulate what the float
model computes, in float32): reference/_torch.py imports torch lazily.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._torch import act, t
from .elementwise import gen_lut_s16, lut, lut_table, mul, mul_params, mul_s16
from .quant import INT16_MAX, INT16_MIN, _f32, quantize_multiplier, requantize
from .reduce import _lut_s16

# ActivationParams.fn of ACTIVATION_F32 (program.fbs): one float kernel for all.
ACTIVATION_FN = {"gelu": 0, "gelu_tanh": 1, "silu": 2, "hardsigmoid": 3, "elu": 4, "exp": 5, "rsqrt": 6,
                 "reciprocal": 7, "sqrt": 8}


def _torch_fn(name: str, alpha: float = 1.0) -> Callable[[Any], Any]:
    import torch
    import torch.nn.functional as F

    fns = {
        "gelu": lambda x: F.gelu(x), "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu, "hardsigmoid": F.hardsigmoid, "elu": lambda x: F.elu(x, alpha), "exp": torch.exp,
        "rsqrt": torch.rsqrt, "sqrt": torch.sqrt, "reciprocal": torch.reciprocal, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "hardswish": F.hardswish,
    }
    return fns[name]


def float_fn(name: str, alpha: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """PyTorch's float32 `name` on a float32 array (or scalar), as a float32
    array: what a table tabulates."""
    fn = _torch_fn(name, alpha)

    def apply(x: Any) -> np.ndarray:
        x = np.asarray(x, np.float32)
        return fn(t(x)).numpy().astype(np.float32).reshape(x.shape)
    return apply


def table_s8(name: str, s_in: float, zp_in: int, s_out: float, zp_out: int, alpha: float = 1.0) -> np.ndarray:
    """The int8[256] table of `name` (lut_s8's operand)."""
    return lut_table(float_fn(name, alpha), s_in, zp_in, s_out, zp_out)


def table_s16(name: str, s_in: float, s_out: float, alpha: float = 1.0) -> np.ndarray:
    """The int16[513] table of `name` for symmetric int16 input and output
    (zero points 0), as TFLite's LUTPopulate<int16_t>: gen_lut over the
    input's real range [s_in * -32768, s_in * 32767] (float32 products),
    values scaled by 65536 / (output range)."""
    f = np.float32
    fn = float_fn(name, alpha)

    def finite(x: np.ndarray) -> np.ndarray:
        # Outside the function's domain (rsqrt of a negative: NaN) the table holds 0;
        # poles (+-inf) saturate. gen_lut's float arithmetic then stays defined.
        return np.nan_to_num(fn(x), nan=0.0, posinf=1e30, neginf=-1e30).astype(np.float32)

    return gen_lut_s16(finite, f(f(s_in) * f(INT16_MIN)), f(f(s_in) * f(INT16_MAX)),
                       f(f(s_out) * f(INT16_MIN)), f(f(s_out) * f(INT16_MAX)))


def lut_s16(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """lut_s16: TFLite's generic_int16_table_lookup of every element."""
    return _lut_s16(np.asarray(x, np.int64), table).astype(np.int16)


# ---- PReLU (TFLite's PRELU at int8 and int16; LeakyReLU is a PReLU with one alpha)

def prelu_params(s_in: float, zp_in: int, s_alpha: float, zp_alpha: int, s_out: float, zp_out: int,
                 act_min: int = -128, act_max: int = 127) -> dict:
    """QuantPreluParams as TFLM's CalculatePreluParams: QuantizeMultiplier of
    s_in / s_out and of s_in * s_alpha / s_out (float32 scales in double)."""
    m1, sh1 = quantize_multiplier(_f32(s_in) / _f32(s_out))
    m2, sh2 = quantize_multiplier(_f32(s_in) * _f32(s_alpha) / _f32(s_out))
    return dict(input_offset=-int(zp_in), alpha_offset=-int(zp_alpha), output_offset=int(zp_out),
                output_multiplier_1=m1, output_shift_1=sh1, output_multiplier_2=m2, output_shift_2=sh2,
                act_min=int(act_min), act_max=int(act_max))


def prelu(x: np.ndarray, alpha: np.ndarray, p: dict, dtype=np.int8) -> np.ndarray:
    """prelu_s8 / prelu_s16 (TFLite's BroadcastPrelu4DSlow), numpy
    broadcasting of alpha: v = x + input_offset; v >= 0: requantize(v, m1, s1),
    else requantize(v * (alpha + alpha_offset), m2, s2); + output_offset,
    clamped."""
    v = np.asarray(x, np.int64) + p["input_offset"]
    a = np.asarray(alpha, np.int64) + p["alpha_offset"]
    pos = requantize(v, p["output_multiplier_1"], p["output_shift_1"])
    neg = requantize(v * a, p["output_multiplier_2"], p["output_shift_2"])
    out = np.where(v >= 0, pos, neg) + p["output_offset"]
    return np.clip(out, p["act_min"], p["act_max"]).astype(dtype)


# ---- GLU: the first half times sigmoid of the second, along an axis

def glu_params(s_in: float, zp_in: int, s_out: float, zp_out: int, bits: int = 8,
               act_min: int | None = None, act_max: int | None = None) -> dict:
    """QuantGluParams: MUL_S8's (MUL_S16's) parameters for the first half (at
    the input's quantization) times the sigmoid (at TFLite's fixed
    quantization: 1/256, -128 at int8; 1/32768, 0 at int16)."""
    s_sig, zp_sig = (1.0 / 256, -128) if bits == 8 else (1.0 / 32768, 0)
    lo, hi = (-128, 127) if bits == 8 else (INT16_MIN, INT16_MAX)
    p = mul_params(s_in, zp_in, s_sig, zp_sig, s_out, zp_out, lo if act_min is None else act_min,
                   hi if act_max is None else act_max)
    return p


def glu_table(s_in: float, zp_in: int, bits: int = 8) -> np.ndarray:
    """The sigmoid table of GLU_S8 (int8 [256]) or GLU_S16 (int16 [513])."""
    if bits == 8:
        return table_s8("sigmoid", s_in, zp_in, 1.0 / 256, -128)
    return table_s16("sigmoid", s_in, 1.0 / 32768)


def glu(x: np.ndarray, table: np.ndarray, axis: int, p: dict, bits: int = 8) -> np.ndarray:
    """glu_s8 / glu_s16: x split in halves a, b along `axis`; s = table(b);
    out = mul(a, s) (MUL_S8 / MUL_S16 with p)."""
    a, b = np.split(np.asarray(x), 2, axis=axis)
    if bits == 8:
        return mul(a, lut(b, table), p)
    return mul_s16(a, lut_s16(b, table), p)


# ---- the interpreter's runners

def _activation_f32(a, p, outs):
    names = {v: k for k, v in ACTIVATION_FN.items()}
    return _torch_fn(names[p["fn"]], p.get("alpha", 1.0))(t(a[0])).numpy()


def _prelu_f32(a, p, outs):
    x, w = t(a[0]), t(a[1])
    return act(x.clamp(min=0) + w * x.clamp(max=0), p).numpy()


def _glu_f32(a, p, outs):
    import torch.nn.functional as F

    return F.glu(t(a[0]), p["axis"]).numpy()


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "ACTIVATION_F32": _activation_f32,
    "LUT_S16": lambda a, p, outs: lut_s16(a[0], a[1]),
    "PRELU_F32": _prelu_f32,
    "PRELU_S8": lambda a, p, outs: prelu(a[0], a[1], p),
    "PRELU_S16": lambda a, p, outs: prelu(a[0], a[1], p, np.int16),
    "GLU_F32": _glu_f32,
    "GLU_S8": lambda a, p, outs: glu(a[0], a[1], p["axis"], p),
    "GLU_S16": lambda a, p, outs: glu(a[0], a[1], p["axis"], p, bits=16),
}
