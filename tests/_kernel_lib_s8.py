"""Builds the int8 portable kernels (firmware/kernels/portable/*_s8.cc) into a
host shared library and wraps them for ctypes. As in _kernel_lib.py, a
throwaway extern "C" shim written next to the library (never into the repo)
flattens the kernels' parameter structs into int32 arrays.

The library is built with UBSan (aborting on the first report), so signed
overflow or a bad shift inside a kernel fails the test that triggers it."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np
from _kernel_lib import ARM_FLAGS, HOST_WARN_FLAGS, KERNEL_DIR, _Buffer  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
FIRMWARE_DIR = REPO / "firmware"
# Named explicitly: each family's folder also holds its executor glue
# (ops_<family>.cc), which is not part of the plain math tested here.
KERNEL_FILES_S8 = [KERNEL_DIR / name for name in (
    "common/requantize.cc", "conv/conv2d_s8.cc", "conv/linear_s8.cc", "elementwise/binary_s8.cc",
    "pool_resize/pool2d_s8.cc", "reduce/softmax_s8.cc", "elementwise/quantize.cc",
    "attention_norm/batch_matmul_s8.cc")]
INCLUDES = [f"-I{FIRMWARE_DIR}"]

_SHIM = r"""
#include <cstddef>
#include <cstring>
#include "kernels/portable/attention_norm/attention_norm.h"
#include "kernels/portable/common/requantize.h"
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/elementwise/elementwise.h"
#include "kernels/portable/pool_resize/pool_resize.h"
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
// Its int32 fields; the scratch operand after them stays null (the generic loop).
template <>
QuantConvParams params(const int32_t* q) {
  QuantConvParams p{};
  std::memcpy(static_cast<void*>(&p), q, offsetof(QuantConvParams, scratch));
  return p;
}
static Shape4 shape(const int32_t* s) { return Shape4{s[0], s[1], s[2], s[3]}; }

X void k_requantize(const int32_t* x, const int32_t* m, const int32_t* s, int32_t* out,
                    int32_t n) {
  for (int32_t i = 0; i < n; ++i) out[i] = requantize(x[i], m[i], s[i]);
}

// q: QuantConvParams fields in order.
X void k_conv(const int8_t* in, const int32_t* is, const int8_t* w, int32_t kh, int32_t kw,
              const int32_t* bias, const int32_t* m, const int32_t* s, int8_t* out,
              const int32_t* os, const int32_t* q) {
  conv2d_s8(in, shape(is), w, kh, kw, bias, m, s, out, shape(os), params<QuantConvParams>(q));
}
X void k_grouped_conv(const int8_t* in, const int32_t* is, const int8_t* w, int32_t kh, int32_t kw,
                      int32_t group_channels, const int32_t* bias, const int32_t* m, const int32_t* s,
                      int8_t* out, const int32_t* os, const int32_t* q) {
  grouped_conv2d_s8(in, shape(is), w, kh, kw, group_channels, bias, m, s, out, shape(os),
                    params<QuantConvParams>(q));
}
X void k_dwconv(const int8_t* in, const int32_t* is, const int8_t* w, int32_t kh, int32_t kw,
                int32_t mult, const int32_t* bias, const int32_t* m, const int32_t* s,
                int8_t* out, const int32_t* os, const int32_t* q) {
  depthwise_conv2d_s8(in, shape(is), w, kh, kw, mult, bias, m, s, out, shape(os),
                      params<QuantConvParams>(q));
}
X void k_linear(const int8_t* in, const int8_t* w, const int32_t* bias, const int32_t* m,
                const int32_t* s, int32_t nreq, int8_t* out, int32_t batch, int32_t in_f,
                int32_t out_f, int32_t out_off, int32_t lo, int32_t hi) {
  linear_s8(in, w, bias, m, s, nreq, out, batch, in_f, out_f, out_off, lo, hi);
}
X void k_add(const int8_t* a, const int32_t* ad, const int8_t* b, const int32_t* bd,
             int8_t* out, const int32_t* od, int32_t rank, const int32_t* q) {
  add_s8(a, ad, b, bd, out, od, rank, params<QuantAddParams>(q));
}
X void k_mul(const int8_t* a, const int32_t* ad, const int8_t* b, const int32_t* bd,
             int8_t* out, const int32_t* od, int32_t rank, const int32_t* q) {
  mul_s8(a, ad, b, bd, out, od, rank, params<QuantMulParams>(q));
}
X void k_maximum(const int8_t* a, const int32_t* ad, const int8_t* b, const int32_t* bd,
                 int8_t* out, const int32_t* od, int32_t rank) {
  maximum_s8(a, ad, b, bd, out, od, rank);
}
X void k_minimum(const int8_t* a, const int32_t* ad, const int8_t* b, const int32_t* bd,
                 int8_t* out, const int32_t* od, int32_t rank) {
  minimum_s8(a, ad, b, bd, out, od, rank);
}
// q: QuantBatchMatmulParams fields in order.
X void k_batch_matmul(const int8_t* a, const int8_t* b, int8_t* out, int32_t batch, int32_t m,
                      int32_t k, int32_t n, const int32_t* q) {
  batch_matmul_s8(a, b, out, batch, m, k, n, params<QuantBatchMatmulParams>(q));
}
X void k_maxpool(const int8_t* in, const int32_t* is, int8_t* out, const int32_t* os,
                 const int32_t* q) {
  max_pool2d_s8(in, shape(is), out, shape(os), params<QuantPoolParams>(q));
}
X void k_avgpool(const int8_t* in, const int32_t* is, int8_t* out, const int32_t* os,
                 const int32_t* q) {
  avg_pool2d_s8(in, shape(is), out, shape(os), params<QuantPoolParams>(q));
}
X void k_softmax(const int8_t* in, int32_t rows, int32_t row_size, int32_t m, int32_t ls,
                 int32_t diff_min, int8_t* out) {
  softmax_s8(in, rows, row_size, m, ls, diff_min, out);
}
X void k_quantize(const float* in, int8_t* out, size_t n, float scale, int32_t zp) {
  quantize_f32_s8(in, out, n, scale, zp);
}
X void k_dequantize(const int8_t* in, float* out, size_t n, float scale, int32_t zp) {
  dequantize_s8_f32(in, out, n, scale, zp);
}
X void k_clamp(const int8_t* in, int8_t* out, size_t n, int32_t lo, int32_t hi) {
  clamp_s8(in, out, n, lo, hi);
}
X void k_lut(const int8_t* in, int8_t* out, size_t n, const int8_t* table) {
  lut_s8(in, out, n, table);
}
"""

_P = _Buffer
_I = ctypes.c_int32
_F = ctypes.c_float
_S = ctypes.c_size_t
_SIGNATURES = {
    "k_requantize": [_P, _P, _P, _P, _I],
    "k_conv": [_P, _P, _P, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_grouped_conv": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_dwconv": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_linear": [_P, _P, _P, _P, _P, _I, _P, _I, _I, _I, _I, _I, _I],
    "k_add": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_mul": [_P, _P, _P, _P, _P, _P, _I, _P],
    "k_maximum": [_P, _P, _P, _P, _P, _P, _I],
    "k_minimum": [_P, _P, _P, _P, _P, _P, _I],
    "k_batch_matmul": [_P, _P, _P, _I, _I, _I, _I, _P],
    "k_maxpool": [_P, _P, _P, _P, _P],
    "k_avgpool": [_P, _P, _P, _P, _P],
    "k_softmax": [_P, _I, _I, _I, _I, _I, _P],
    "k_quantize": [_P, _P, _S, _F, _I],
    "k_dequantize": [_P, _P, _S, _F, _I],
    "k_clamp": [_P, _P, _S, _I, _I],
    "k_lut": [_P, _P, _S, _P],
}

# Field orders of the parameter structs in the family headers (conv.h, elementwise.h, ...).
ADD_FIELDS = ("input1_offset", "input1_multiplier", "input1_shift", "input2_offset",
              "input2_multiplier", "input2_shift", "left_shift", "output_multiplier",
              "output_shift", "output_offset", "act_min", "act_max")
BMM_FIELDS = ("lhs_offset", "rhs_offset", "output_multiplier", "output_shift", "output_offset",
              "act_min", "act_max")
MUL_FIELDS = ("input1_offset", "input2_offset", "output_multiplier", "output_shift",
              "output_offset", "act_min", "act_max")


def build(tmp_dir: Path) -> ctypes.CDLL:
    shim = tmp_dir / "shim_s8.cc"
    shim.write_text(_SHIM)
    lib_path = tmp_dir / "libportable_s8.so"
    cmd = ["g++", *HOST_WARN_FLAGS, "-shared", "-fPIC", "-fsanitize=undefined",
           "-fno-sanitize-recover=all", *INCLUDES, "-o", str(lib_path), str(shim),
           *map(str, KERNEL_FILES_S8)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lib = ctypes.CDLL(str(lib_path))
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = None
    return lib


def i32(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int32)


def i8(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int8)
