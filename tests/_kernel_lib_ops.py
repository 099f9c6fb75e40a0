"""Builds the element-wise, reduction, normalisation and attention kernels
(firmware/kernels/portable/activations/activations.cc, elementwise/arith.cc,
reduce/reductions.cc, attention_norm/attention_norm.cc, reduce/softmax_s8.cc) into a host shared library for ctypes, as
_kernel_lib_s8.py does: a throwaway extern "C" shim written next to the
library flattens their parameter structs into int32 arrays. Built with UBSan
aborting on the first report, so signed overflow or a bad shift fails the
test that triggers it."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np
from _kernel_lib import HOST_WARN_FLAGS, KERNEL_DIR, _Buffer

REPO = Path(__file__).resolve().parents[1]
KERNEL_FILES = [KERNEL_DIR / name for name in (
    "activations/activations.cc", "elementwise/arith.cc", "reduce/reductions.cc", "attention_norm/attention_norm.cc",
    "reduce/softmax_s8.cc", "common/requantize.cc", "attention_norm/batch_matmul_s8.cc")]
INCLUDES = [f"-I{REPO / 'firmware'}"]

_SHIM = r"""
#include <cstring>
#include "kernels/portable/activations/activations.h"
#include "kernels/portable/attention_norm/attention_norm.h"
#include "kernels/portable/elementwise/elementwise.h"
#include "kernels/portable/reduce/reduce.h"
using namespace torchmcu::portable;
#define X extern "C"

template <typename T>
static T params(const int32_t* q) {
  static_assert(sizeof(T) % sizeof(int32_t) == 0, "int32 fields only");
  T p;
  std::memcpy(&p, q, sizeof(T));
  return p;
}

X void k_activation(const float* in, float* out, size_t n, int32_t fn, float alpha) {
  activation_f32(in, out, n, fn, alpha);
}
X void k_lut_s16(const int16_t* in, int16_t* out, size_t n, const int16_t* table) { lut_s16(in, out, n, table); }
X void k_prelu_s8(const int8_t* x, const int32_t* xd, const int8_t* a, const int32_t* ad, int8_t* out,
                  const int32_t* od, int32_t rank, const int32_t* q) {
  prelu_s8(x, xd, a, ad, out, od, rank, params<QuantPreluParams>(q));
}
X void k_prelu_s16(const int16_t* x, const int32_t* xd, const int8_t* a, const int32_t* ad, int16_t* out,
                   const int32_t* od, int32_t rank, const int32_t* q) {
  prelu_s16(x, xd, a, ad, out, od, rank, params<QuantPreluParams>(q));
}
X void k_glu_s8(const int8_t* in, const int8_t* table, int8_t* out, int32_t o, int32_t h, int32_t i,
                const int32_t* q) {
  glu_s8(in, table, out, o, h, i, params<QuantMulParams>(q));
}
X void k_glu_s16(const int16_t* in, const int16_t* table, int16_t* out, int32_t o, int32_t h, int32_t i,
                 const int32_t* q) {
  glu_s16(in, table, out, o, h, i, params<QuantMulParams>(q));
}
X void k_sub_s8(const int8_t* a, const int32_t* ad, const int8_t* b, const int32_t* bd, int8_t* out,
                const int32_t* od, int32_t rank, const int32_t* q) {
  sub_s8(a, ad, b, bd, out, od, rank, params<QuantAddParams>(q));
}
X void k_sub_s16(const int16_t* a, const int32_t* ad, const int16_t* b, const int32_t* bd, int16_t* out,
                 const int32_t* od, int32_t rank, const int32_t* q) {
  sub_s16(a, ad, b, bd, out, od, rank, params<QuantAddParams>(q));
}
X void k_div_s8(const int8_t* a, const int32_t* ad, const int8_t* b, const int32_t* bd, int8_t* out,
                const int32_t* od, int32_t rank, const int32_t* q) {
  div_s8(a, ad, b, bd, out, od, rank, params<QuantDivParams>(q));
}
X void k_log_softmax_s8(const int8_t* in, int32_t rows, int32_t cols, const int32_t* q, int8_t* out) {
  log_softmax_s8(in, rows, cols, params<QuantLogSoftmaxParams>(q), out);
}
X void k_mean_s8(const int8_t* in, const int32_t* dims, int32_t rank, uint32_t mask, const int32_t* q,
                 int8_t* out) {
  mean_s8(in, dims, rank, mask, params<QuantMeanParams>(q), out);
}
X void k_mean_s16(const int16_t* in, const int32_t* dims, int32_t rank, uint32_t mask, const int32_t* q,
                  int16_t* out) {
  mean_s16(in, dims, rank, mask, params<QuantMeanParams>(q), out);
}
X void k_softmax_rows_s8(const int8_t* in, int32_t rows, int32_t cols, int32_t m, int32_t ls, int32_t dmin,
                         const uint8_t* mask, int32_t mask_rows, int8_t* out, const int32_t* table) {
  softmax_rows_s8(in, rows, cols, m, ls, dmin, mask, mask_rows, out, table);
}
X void k_softmax_rows_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t m, int32_t s,
                          const int16_t* exp_lut, const int16_t* one_lut, const uint8_t* mask, int32_t mask_rows,
                          int16_t* out) {
  softmax_rows_s16(in, rows, cols, m, s, exp_lut, one_lut, mask, mask_rows, out);
}
// q: input_zero_point, eps_lo, eps_hi, output_multiplier, output_shift, output_zero_point, act_min, act_max
static QuantLayerNormParams ln(const int32_t* q) {
  return QuantLayerNormParams{q[0], int64_t(q[2]) * (int64_t{1} << 32) + uint32_t(q[1]), q[3], q[4], q[5], q[6],
                              q[7]};
}
X void k_layer_norm_s8(const int8_t* in, const int8_t* g, const int32_t* b, int8_t* out, int32_t rows,
                       int32_t cols, const int32_t* q) {
  layer_norm_s8(in, g, b, out, rows, cols, ln(q));
}
X void k_layer_norm_s16(const int16_t* in, const int8_t* g, const int32_t* b, int16_t* out, int32_t rows,
                        int32_t cols, const int32_t* q) {
  layer_norm_s16(in, g, b, out, rows, cols, ln(q));
}
X void k_matmul_t_s8(const int8_t* a, const int8_t* bt, int8_t* out, int32_t m, int32_t k, int32_t n,
                     const int32_t* q) {
  matmul_t_s8(a, bt, out, m, k, n, params<QuantBatchMatmulParams>(q));
}
X void k_matmul_s16(const int16_t* a, const int16_t* b, int16_t* out, int32_t m, int32_t k, int32_t n,
                    int32_t transposed, int32_t mult, int32_t shift, int32_t lo, int32_t hi) {
  matmul_s16(a, b, out, m, k, n, transposed != 0, mult, shift, lo, hi);
}
"""

_P = _Buffer
_I = ctypes.c_int32
_U = ctypes.c_uint32
_F = ctypes.c_float
_S = ctypes.c_size_t
_SIGNATURES = {
    "k_activation": [_P, _P, _S, _I, _F],
    "k_lut_s16": [_P, _P, _S, _P],
    "k_prelu_s8": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_prelu_s16": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_glu_s8": [_P, _P, _P, _I, _I, _I, _P],
    "k_glu_s16": [_P, _P, _P, _I, _I, _I, _P],
    "k_sub_s8": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_sub_s16": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_div_s8": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_log_softmax_s8": [_P, _I, _I, _P, _P],
    "k_mean_s8": [_P, _P, _I, _U, _P, _P],
    "k_mean_s16": [_P, _P, _I, _U, _P, _P],
    "k_softmax_rows_s8": [_P, _I, _I, _I, _I, _I, _P, _I, _P, _P],
    "k_softmax_rows_s16": [_P, _I, _I, _I, _I, _P, _P, _P, _I, _P],
    "k_layer_norm_s8": [_P, _P, _P, _P, _I, _I, _P],
    "k_layer_norm_s16": [_P, _P, _P, _P, _I, _I, _P],
    "k_matmul_t_s8": [_P, _P, _P, _I, _I, _I, _P],
    "k_matmul_s16": [_P, _P, _P, _I, _I, _I, _I, _I, _I, _I, _I],
}

# Field orders of the parameter structs.
PRELU_FIELDS = ("input_offset", "alpha_offset", "output_offset", "output_multiplier_1", "output_shift_1",
                "output_multiplier_2", "output_shift_2", "act_min", "act_max")
MUL_FIELDS = ("input1_offset", "input2_offset", "output_multiplier", "output_shift", "output_offset", "act_min",
              "act_max")
ADD_FIELDS = ("input1_offset", "input1_multiplier", "input1_shift", "input2_offset", "input2_multiplier",
              "input2_shift", "left_shift", "output_multiplier", "output_shift", "output_offset", "act_min",
              "act_max")
DIV_FIELDS = ("input1_offset", "input2_offset", "output_multiplier", "output_shift", "output_offset", "act_min",
              "act_max")
LOG_SOFTMAX_FIELDS = ("input_multiplier", "input_left_shift", "reverse_scaling_divisor",
                      "reverse_scaling_right_shift", "diff_min")
MEAN_FIELDS = ("input_zero_point", "output_zero_point", "multiplier", "shift", "act_min", "act_max")
LAYER_NORM_FIELDS = ("input_zero_point", "eps_lo", "eps_hi", "output_multiplier", "output_shift",
                     "output_zero_point", "act_min", "act_max")
BMM_FIELDS = ("lhs_offset", "rhs_offset", "output_multiplier", "output_shift", "output_offset", "act_min",
              "act_max")


def fields(p: dict, names: tuple[str, ...]) -> np.ndarray:
    """A parameter dict as the shim's int32 array (uint32 fields wrap)."""
    return np.array([np.int64(int(p[k])).astype(np.uint32).view(np.int32) if k == "eps_lo" else int(p[k])
                     for k in names], dtype=np.int32)


def build(tmp_dir: Path) -> ctypes.CDLL:
    shim = tmp_dir / "shim_ops.cc"
    shim.write_text(_SHIM)
    lib_path = tmp_dir / "libportable_ops.so"
    cmd = ["g++", *HOST_WARN_FLAGS, "-shared", "-fPIC", "-fsanitize=undefined", "-fno-sanitize-recover=all",
           *INCLUDES, "-o", str(lib_path), str(shim), *map(str, KERNEL_FILES)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lib = ctypes.CDLL(str(lib_path))
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = None
    return lib
