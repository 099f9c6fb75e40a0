"""Attention and normalisation: batched matrix products (TFLite's
BATCH_MATMUL at int8 and int16, batch dims broadcast, b optionally given
transposed as CMSIS-NN's arm_batch_matmul takes it) and layer norm (at
int8 and int16 in torchmcu's own integer scheme: TFLite has no layer-norm
operator), and the interpreter's runners for their op codes.

Layer norm at int8/int16 (LAYER_NORM_S8/S16, QuantLayerNormParams), per row
of `cols` values x at zero point zp:

    d = x - zp;  S = sum d;  Q = sum d^2                       (exact, int64)
    V = cols * Q - S^2 + E,  E = round(cols^2 * eps / s_in^2)   (= cols^2 (var + eps) / s_in^2)
    c = cols * d - S                                            (= cols (x - mean) / s_in)
    n = c / sqrt(V) in Q16:  V * 4^k in [2^60, 2^62), r = isqrt(V * 4^k),
        M = round(2^60 / r), n = (c * M + 2^(h - 1)) >> h with h = 44 - k
    out = clamp(requantize(sat32(n * gamma_q + beta_q), multiplier, shift) + zp_out)

n is the normalised value (x - mean) / sqrt(var + eps) times 2^16, exact to
about 2^-29 relative but for the final rounding; gamma is int8 symmetric
per tensor (s_gamma = max |gamma| / 127), beta int32 at 2^-16 * s_gamma,
and (multiplier, shift) = QuantizeMultiplier(2^-16 * s_gamma / s_out). The
bounds: cols <= 4096 keeps |c| < 2^29, V < 2^62, |n| <= sqrt(cols) 2^16 <=
2^22 (the sum of n^2 is at most cols 2^32) and the int32 sum n * gamma +
beta below 2^30 (|beta_q| <= 2^29). 16 fraction bits keep the int16
outputs within one step of the exact layer norm.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ._torch import t
from .quant import _f32, _output, _output_s16, quantize_multiplier, requantize

LN_FRACTION_BITS = 16  # n in Q16
LN_MAX_COLS = 4096
LN_EPS_MAX = (1 << 62) - (1 << 57)  # E saturates here: V stays below 2^62
LN_BETA_MAX = 1 << 29


# ---- batch matmul

def batch_matmul_params(s_a: float, zp_a: int, s_b: float, zp_b: int, s_out: float, zp_out: int,
                        act_min: int = -128, act_max: int = 127, adj_y: bool = False) -> dict:
    """QuantBatchMatmulParams as TFLM's BATCH_MATMUL Prepare
    (GetQuantizedConvolutionMultipler): QuantizeMultiplier(s_a * s_b / s_out)."""
    m, sh = quantize_multiplier(_f32(s_a) * _f32(s_b) / _f32(s_out))
    return dict(lhs_offset=-int(zp_a), rhs_offset=-int(zp_b), output_multiplier=m, output_shift=sh,
                output_offset=int(zp_out), act_min=int(act_min), act_max=int(act_max), adj_y=bool(adj_y))


def _rhs(b: np.ndarray, p: dict) -> np.ndarray:
    return np.swapaxes(b, -1, -2) if p.get("adj_y") else b


def batch_matmul(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """batch_matmul_s8 (TFLite's int8 BATCH_MATMUL, reference kernel): a
    [..., M, K], b [..., K, N] ([..., N, K] when adj_y), batch dims
    broadcast; acc = sum_k (a + lhs_offset) * (b + rhs_offset) in int32,
    then requantized per tensor. p: the batch_matmul_params dict."""
    a = np.asarray(a, dtype=np.int64) + p["lhs_offset"]
    b = _rhs(np.asarray(b, dtype=np.int64), p) + p["rhs_offset"]
    return _output(np.matmul(a, b), p["output_multiplier"], p["output_shift"], p["output_offset"],
                   p["act_min"], p["act_max"])


def batch_matmul_s16(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """batch_matmul_s16 (TFLite's int16 BATCH_MATMUL, CMSIS-NN's
    arm_batch_matmul_s16): offsets 0, int64 sums, requantize_s64."""
    acc = np.matmul(np.asarray(a, np.int64), _rhs(np.asarray(b, np.int64), p))
    return _output_s16(acc, p["output_multiplier"], p["output_shift"], p["act_min"], p["act_max"])


# ---- layer norm

def layer_norm_constants(gamma: np.ndarray | None, beta: np.ndarray | None, cols: int
                         ) -> tuple[np.ndarray, np.ndarray, float]:
    """(gamma_q int8, beta_q int32, s_gamma) for a float gamma and beta (None:
    ones and zeros)."""
    g = np.ones(cols, np.float64) if gamma is None else np.asarray(gamma, np.float64).reshape(-1)
    b = np.zeros(cols, np.float64) if beta is None else np.asarray(beta, np.float64).reshape(-1)
    top = float(np.abs(g).max()) if g.size else 0.0
    s_gamma = float(np.float32(top / 127.0)) if top > 0 else 1.0
    gq = np.clip(np.round(g / s_gamma), -127, 127).astype(np.int8)
    s_beta = s_gamma / (1 << LN_FRACTION_BITS)
    bq = np.clip(np.round(b / s_beta), -LN_BETA_MAX, LN_BETA_MAX).astype(np.int32)
    return gq, bq, s_gamma


def layer_norm_params(s_in: float, zp_in: int, s_gamma: float, s_out: float, zp_out: int, cols: int,
                      eps: float, act_min: int = -128, act_max: int = 127) -> dict:
    """QuantLayerNormParams: eps in input units squared times cols^2 (as
    eps_hi * 2^32 + eps_lo, saturated so that V stays below 2^62), and the
    output requantization 2^-12 * s_gamma / s_out."""
    e = float(cols) * float(cols) * float(eps) / (_f32(s_in) * _f32(s_in))
    eq = int(min(max(round(e), 0), LN_EPS_MAX)) if math.isfinite(e) else LN_EPS_MAX
    m, sh = quantize_multiplier(_f32(s_gamma) / (1 << LN_FRACTION_BITS) / _f32(s_out))
    return dict(input_zero_point=int(zp_in), eps_lo=eq & 0xFFFFFFFF, eps_hi=eq >> 32, output_multiplier=m,
                output_shift=sh, output_zero_point=int(zp_out), act_min=int(act_min), act_max=int(act_max))


def layer_norm_rows(x: np.ndarray, zp: int, eps_term: int) -> np.ndarray:
    """n, the normalised rows of x in Q16 (int64), as the scheme above."""
    x = np.asarray(x, np.int64)
    rows = x.reshape(-1, x.shape[-1])
    cols = rows.shape[1]
    d = rows - zp
    s = d.sum(axis=1)
    q = (d * d).sum(axis=1)
    out = np.zeros(rows.shape, np.int64)
    for i in range(rows.shape[0]):
        v = cols * int(q[i]) - int(s[i]) * int(s[i]) + eps_term
        if v <= 0:
            continue  # a constant row without eps: (x - mean) is 0 throughout
        k = (62 - v.bit_length()) // 2
        r = math.isqrt(v << (2 * k))
        m = ((1 << 60) + r // 2) // r  # in (2^29, 2^30]: c * m is one 32 x 32-bit product
        h = 60 - LN_FRACTION_BITS - k
        c = cols * d[i] - s[i]
        out[i] = (c * m + (1 << (h - 1))) >> h
    return out.reshape(x.shape)


def layer_norm_q(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, p: dict, dtype=np.int8) -> np.ndarray:
    """layer_norm_s8 / layer_norm_s16 over the last axis (the scheme above)."""
    n = layer_norm_rows(x, p["input_zero_point"], (int(p["eps_hi"]) << 32) | int(p["eps_lo"]))
    acc = np.clip(n * np.asarray(gamma, np.int64) + np.asarray(beta, np.int64), -(1 << 31), (1 << 31) - 1)
    v = requantize(acc, p["output_multiplier"], p["output_shift"]) + p["output_zero_point"]
    return np.clip(v, p["act_min"], p["act_max"]).astype(dtype)


def group_norm_q(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, p: dict, dtype=np.int8) -> np.ndarray:
    """group_norm_s8 / group_norm_s16: x [N, positions, C] channels last, in
    p["groups"] groups of C / groups channels; layer norm's scheme over each
    group's positions * C / groups values (the same n), then gamma and beta
    per channel."""
    x = np.asarray(x, np.int64)
    batch, channels, groups = x.shape[0], x.shape[-1], int(p["groups"])
    rows = x.reshape(batch, -1, groups, channels // groups).transpose(0, 2, 1, 3).reshape(batch * groups, -1)
    n = layer_norm_rows(rows, p["input_zero_point"], (int(p["eps_hi"]) << 32) | int(p["eps_lo"]))
    n = n.reshape(batch, groups, -1, channels // groups).transpose(0, 2, 1, 3).reshape(x.shape)
    acc = np.clip(n * np.asarray(gamma, np.int64) + np.asarray(beta, np.int64), -(1 << 31), (1 << 31) - 1)
    v = requantize(acc, p["output_multiplier"], p["output_shift"]) + p["output_zero_point"]
    return np.clip(v, p["act_min"], p["act_max"]).astype(dtype)


# ---- the interpreter's runners

def _layer_norm_f32(a, p, outs):
    import torch.nn.functional as F

    x = t(a[0])
    cols = x.shape[-1]
    w = None if len(a) < 2 or a[1] is None else t(a[1])
    b = None if len(a) < 3 or a[2] is None else t(a[2])
    return F.layer_norm(x, (cols,), w, b, p.get("eps", 1e-5)).numpy()


def _group_norm_f32(a, p, outs):
    import torch.nn.functional as F

    x = t(a[0])  # [N, positions, C]
    w = None if len(a) < 2 or a[1] is None else t(a[1])
    b = None if len(a) < 3 or a[2] is None else t(a[2])
    y = F.group_norm(x.transpose(1, 2), int(p.get("groups", 1)), w, b, p.get("eps", 1e-5))
    return y.transpose(1, 2).contiguous().numpy()


def _bmm_f32(a, p, outs):
    b = t(a[1])
    return (t(a[0]) @ (b.transpose(-1, -2) if p.get("adj_y") else b)).numpy()


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "BATCH_MATMUL_F32": _bmm_f32,
    "BATCH_MATMUL_S8": lambda a, p, outs: batch_matmul(a[0], a[1], p),
    "BATCH_MATMUL_S16": lambda a, p, outs: batch_matmul_s16(a[0], a[1], p),
    "LAYER_NORM_F32": _layer_norm_f32,
    "LAYER_NORM_S8": lambda a, p, outs: layer_norm_q(a[0], a[1], a[2], p),
    "LAYER_NORM_S16": lambda a, p, outs: layer_norm_q(a[0], a[1], a[2], p, np.int16),
    "GROUP_NORM_F32": _group_norm_f32,
    "GROUP_NORM_S8": lambda a, p, outs: group_norm_q(a[0], a[1], a[2], p),
    "GROUP_NORM_S16": lambda a, p, outs: group_norm_q(a[0], a[1], a[2], p, np.int16),
}
