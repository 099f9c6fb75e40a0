"""Builds the float32 portable kernels into a host shared library and wraps
them for ctypes. The kernels are namespaced C++; a throwaway extern "C" shim,
written next to the library (never into the repo), flattens their structs
into plain scalar arguments."""

import ctypes
import subprocess
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KERNEL_DIR = REPO / "firmware" / "kernels" / "portable"
# Named explicitly: each family's folder also holds its executor glue
# (ops_<family>.cc: program format, op checks), not part of the plain math
# tested here.
KERNEL_FILES = [KERNEL_DIR / name for name in (
    "attention_norm/batch_matmul_f32.cc", "elementwise/binary_f32.cc", "shape_views/concat.cc",
    "conv/conv2d_f32.cc", "conv/linear_f32.cc", "reduce/mean_f32.cc", "shape_views/pad.cc",
    "shape_views/permute.cc", "pool_resize/pool2d_f32.cc", "reduce/softmax_f32.cc", "elementwise/unary_f32.cc")]

HOST_WARN_FLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror",
                   "-fno-rtti", "-fno-exceptions"]
ARM_FLAGS = ["-std=c++17", "-mcpu=cortex-m55", "-mfloat-abi=hard", "-mthumb",
             "-Os", "-Wall", "-Wextra", "-Werror", "-fno-rtti",
             "-fno-exceptions", "-ffunction-sections", "-fdata-sections"]

_SHIM = r"""
#include "kernels/portable/attention_norm/attention_norm.h"
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/elementwise/elementwise.h"
#include "kernels/portable/pool_resize/pool_resize.h"
#include "kernels/portable/reduce/reduce.h"
#include "kernels/portable/shape_views/shape_views.h"
using namespace torchmcu::portable;
#define X extern "C"

X void k_linear(const float* in, const float* w, const float* b, float* out,
                int32_t batch, int32_t in_f, int32_t out_f, float lo, float hi) {
  linear_f32(in, w, b, out, batch, in_f, out_f, ActRange{lo, hi});
}

static Conv2dParams conv_params(const int32_t* q, float lo, float hi) {
  return Conv2dParams{q[0], q[1], q[2], q[3], q[4], q[5], q[6], ActRange{lo, hi}};
}

// q = {stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w, groups}
X void k_conv2d(const float* in, const int32_t* is, const float* w, int32_t kh,
                int32_t kw, const float* b, float* out, const int32_t* os,
                const int32_t* q, float lo, float hi) {
  conv2d_f32(in, Shape4{is[0], is[1], is[2], is[3]}, w, kh, kw, b, out,
             Shape4{os[0], os[1], os[2], os[3]}, conv_params(q, lo, hi));
}

X void k_dwconv(const float* in, const int32_t* is, const float* w, int32_t kh,
                int32_t kw, int32_t mult, const float* b, float* out,
                const int32_t* os, const int32_t* q, float lo, float hi) {
  depthwise_conv2d_f32(in, Shape4{is[0], is[1], is[2], is[3]}, w, kh, kw, mult,
                       b, out, Shape4{os[0], os[1], os[2], os[3]},
                       conv_params(q, lo, hi));
}

X void k_clamp(const float* in, float* out, size_t n, float lo, float hi) {
  clamp_f32(in, out, n, lo, hi);
}
X void k_sigmoid(const float* in, float* out, size_t n) { sigmoid_f32(in, out, n); }
X void k_tanh(const float* in, float* out, size_t n) { tanh_f32(in, out, n); }

X void k_add(const float* a, const int32_t* ad, const float* b, const int32_t* bd,
             float* out, const int32_t* od, int32_t rank, float lo, float hi) {
  add_f32(a, ad, b, bd, out, od, rank, ActRange{lo, hi});
}
X void k_mul(const float* a, const int32_t* ad, const float* b, const int32_t* bd,
             float* out, const int32_t* od, int32_t rank, float lo, float hi) {
  mul_f32(a, ad, b, bd, out, od, rank, ActRange{lo, hi});
}

// q = {kh, kw, sh, sw, pad_top, pad_left, dh, dw, count_include_pad, divisor}
static Pool2dParams pool_params(const int32_t* q, float lo, float hi) {
  return Pool2dParams{q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7],
                      q[8] != 0, q[9], ActRange{lo, hi}};
}
X void k_maxpool(const float* in, const int32_t* is, float* out,
                 const int32_t* os, const int32_t* q, float lo, float hi) {
  max_pool2d_f32(in, Shape4{is[0], is[1], is[2], is[3]}, out,
                 Shape4{os[0], os[1], os[2], os[3]}, pool_params(q, lo, hi));
}
X void k_avgpool(const float* in, const int32_t* is, float* out,
                 const int32_t* os, const int32_t* q, float lo, float hi) {
  avg_pool2d_f32(in, Shape4{is[0], is[1], is[2], is[3]}, out,
                 Shape4{os[0], os[1], os[2], os[3]}, pool_params(q, lo, hi));
}

X void k_mean(const float* in, const int32_t* dims, int32_t rank, uint32_t mask,
              float* out) {
  mean_f32(in, dims, rank, mask, out);
}
X void k_softmax(const float* in, float* out, int32_t outer, int32_t axis,
                 int32_t inner) {
  softmax_f32(in, out, outer, axis, inner);
}
X void k_permute(const void* in, const int32_t* dims, int32_t rank,
                 const int32_t* perm, void* out, size_t elem) {
  permute(in, dims, rank, perm, out, elem);
}
X void k_concat(const void* const* inputs, const size_t* inner_bytes, int32_t n,
                int32_t outer, void* out) {
  concat(inputs, inner_bytes, n, outer, out);
}
X void k_maximum(const float* a, const int32_t* ad, const float* b, const int32_t* bd,
                 float* out, const int32_t* od, int32_t rank, float lo, float hi) {
  maximum_f32(a, ad, b, bd, out, od, rank, ActRange{lo, hi});
}
X void k_minimum(const float* a, const int32_t* ad, const float* b, const int32_t* bd,
                 float* out, const int32_t* od, int32_t rank, float lo, float hi) {
  minimum_f32(a, ad, b, bd, out, od, rank, ActRange{lo, hi});
}
X void k_hardswish(const float* in, float* out, size_t n) { hardswish_f32(in, out, n); }
X void k_batch_matmul(const float* a, const float* b, float* out, int32_t batch,
                      int32_t m, int32_t k, int32_t n) {
  batch_matmul_f32(a, b, out, batch, m, k, n);
}
X void k_pad(const void* in, const int32_t* dims, int32_t rank, const int32_t* before,
             const int32_t* after, const void* value, void* out, size_t elem) {
  pad(in, dims, rank, before, after, value, out, elem);
}
"""

class _Buffer:
    """Pointer argument: a C-contiguous numpy array, a ctypes pointer or None.
    Arrays are passed themselves (not their address), so temporaries built in
    the call expression stay alive for the duration of the call."""

    @classmethod
    def from_param(cls, obj):
        if obj is None:
            return None
        if isinstance(obj, np.ndarray):
            if not obj.flags.c_contiguous:
                raise TypeError("kernel buffers must be C-contiguous")
            return ctypes.c_void_p(obj.ctypes.data)
        return ctypes.c_void_p.from_param(obj)


_P = _Buffer
_I = ctypes.c_int32
_F = ctypes.c_float
_S = ctypes.c_size_t
_SIGNATURES = {
    "k_linear": [_P, _P, _P, _P, _I, _I, _I, _F, _F],
    "k_conv2d": [_P, _P, _P, _I, _I, _P, _P, _P, _P, _F, _F],
    "k_dwconv": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _F, _F],
    "k_clamp": [_P, _P, _S, _F, _F],
    "k_sigmoid": [_P, _P, _S],
    "k_tanh": [_P, _P, _S],
    "k_add": [_P, _P, _P, _P, _P, _P, _I, _F, _F],
    "k_mul": [_P, _P, _P, _P, _P, _P, _I, _F, _F],
    "k_maxpool": [_P, _P, _P, _P, _P, _F, _F],
    "k_avgpool": [_P, _P, _P, _P, _P, _F, _F],
    "k_mean": [_P, _P, _I, ctypes.c_uint32, _P],
    "k_softmax": [_P, _P, _I, _I, _I],
    "k_permute": [_P, _P, _I, _P, _P, _S],
    "k_concat": [_P, _P, _I, _I, _P],
    "k_maximum": [_P, _P, _P, _P, _P, _P, _I, _F, _F],
    "k_minimum": [_P, _P, _P, _P, _P, _P, _I, _F, _F],
    "k_hardswish": [_P, _P, _S],
    "k_batch_matmul": [_P, _P, _P, _I, _I, _I, _I],
    "k_pad": [_P, _P, _I, _P, _P, _P, _P, _S],
}


def build(tmp_dir: Path) -> ctypes.CDLL:
    shim = tmp_dir / "shim.cc"
    shim.write_text(_SHIM)
    lib_path = tmp_dir / "libportable_f32.so"
    cmd = ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-fno-rtti",
           "-fno-exceptions", f"-I{KERNEL_DIR.parents[1]}", "-o", str(lib_path),
           str(shim), *map(str, KERNEL_FILES)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(lib_path))
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = None
    return lib


def i32(values) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int32)


def f32(a) -> np.ndarray:
    """A private float32 copy: kernels may write it without touching `a`."""
    if hasattr(a, "detach"):
        a = a.detach().numpy()
    return np.array(a, dtype=np.float32, order="C", copy=True)
