// Fast paths of conv2d_s8 and depthwise_conv2d_s8 (see fast_s8.h), included
// by conv2d_s8.cc only (each kernel file compiles on its own).
//
// The convolution is a GEMM: output pixel p, output channel o gets
// sum_k patch_p[k] * w_o[k] over the K = kernel_h * kernel_w * in_c values of
// the pixel's patch (in the weights' OHWI order). The input offset is folded
// into a per-channel bias once per call: bias_o + input_offset * sum_k w_o[k],
// which is exact because padded taps hold the zero point (value -offset) in
// the patch, so every tap contributes (x + offset) * w as the reference's.
// A 1x1 kernel without padding reads its patch in place (the pixel's
// channels); other kernels copy it into a stack buffer first (im2col, one
// pixel at a time, the padding filled with the zero point).
//
// The sums are computed in wrapping 32-bit arithmetic (the MVE and DSP
// instructions wrap; the C parts use uint32_t): the exact accumulator fits in
// int32 (the glue's requant_in_range guarantees it), so the wrapped sum of
// the same terms in another order is that exact value.
#ifndef TORCHMCU_KERNELS_PORTABLE_CONV2D_S8_FAST_H_
#define TORCHMCU_KERNELS_PORTABLE_CONV2D_S8_FAST_H_

#include "fast_s8.h"

#if TMCU_S8_FAST

#include <cstring>

#include "requantize_s8.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

// The fast paths are compiled for speed whatever the image's -O (-Os by
// default, which neither unrolls the register-blocked loops nor inlines
// the vector helpers): they are a few KB of the kernels' code.
#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// Output channels whose folded biases are kept on the stack at a time.
constexpr int32_t kOcChunk = 64;
// Output channels per GEMM block: 4 x 2 pixels keeps MVE's 8 scalar
// accumulators and 6 pointers in registers; the DSP path's expanded halfword
// pairs take more, and 2 x 2 leaves room for them (4 x 2 spills).
constexpr int kBlockOc = TMCU_S8_MVE ? 4 : 2;
// Largest im2col patch (bytes per pixel; two pixels on the stack): 3x3x64.
constexpr int32_t kMaxPatch = 576;

inline int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// Output of one accumulator, as the generic kernels' (requantize_s8.h).
inline int8_t finish(int32_t acc, int32_t m, int32_t s, const s8::OutQuant& quant) {
  return quant(s8::requantize(acc, m, s));
}

#if TMCU_S8_MVE

// acc[j][i] = sum_k x_i[k] * w_j[k] for NO weight rows K apart and NP
// patches; 16 lanes per step, the tail predicated.
template <int NO, int NP>
inline void dots(const int8_t* const* x, const int8_t* w, int32_t K, int32_t (*acc)[2]) {
  int32_t a[NO][NP];
#pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) a[j][i] = 0;
  }
  const int8_t* xp[NP];
  const int8_t* wp[NO];
#pragma GCC unroll 4
  for (int i = 0; i < NP; ++i) xp[i] = x[i];
#pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) wp[j] = w + j * K;
  int32_t k = K;
  for (; k >= 16; k -= 16) {
    int8x16_t xv[NP];
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) {
      xv[i] = vldrbq_s8(xp[i]);
      xp[i] += 16;
    }
#pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) {
      const int8x16_t wv = vldrbq_s8(wp[j]);
      wp[j] += 16;
#pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) a[j][i] = vmladavaq_s8(a[j][i], xv[i], wv);
    }
  }
  if (k > 0) {
    const mve_pred16_t p = vctp8q(static_cast<uint32_t>(k));
    int8x16_t xv[NP];
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) xv[i] = vldrbq_z_s8(xp[i], p);
#pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) {
      const int8x16_t wv = vldrbq_z_s8(wp[j], p);
#pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) a[j][i] = vmladavaq_s8(a[j][i], xv[i], wv);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) acc[j][i] = a[j][i];
  }
}

inline int32_t weight_sum(const int8_t* w, int32_t K) {
  int32_t s = 0;
  for (int32_t k = 0; k < K; k += 16) {
    s = vaddvaq_s8(s, vldrbq_z_s8(w + k, vctp8q(static_cast<uint32_t>(K - k))));
  }
  return s;
}

#else  // DSP

// Bytes 1 and 3 of v sign-extended to halfwords: SXTB16 with its rotation,
// which GCC does not fold from a rotate and has no ACLE intrinsic for.
inline int16x2_t sxtb16_ror8(int32_t v) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

inline int32_t load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// As the MVE dots: four int8s per step, SMLAD on the even and the odd bytes
// sign-extended to halfword pairs (the same pairing in x and w, so the sum is
// the dot product), the K % 4 tail in C.
template <int NO, int NP>
inline void dots(const int8_t* const* x, const int8_t* w, int32_t K, int32_t (*acc)[2]) {
  int32_t a[NO][NP];
  #pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) {
    #pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) a[j][i] = 0;
  }
  int32_t k = 0;
  for (; k + 4 <= K; k += 4) {
    int16x2_t xe[NP], xo[NP];
    #pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) {
      const int32_t v = load32(x[i] + k);
      xe[i] = __sxtb16(v);
      xo[i] = sxtb16_ror8(v);
    }
    #pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) {
      const int32_t v = load32(w + j * K + k);
      const int16x2_t we = __sxtb16(v);
      const int16x2_t wo = sxtb16_ror8(v);
      #pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) {
        a[j][i] = __smlad(xe[i], we, a[j][i]);
        a[j][i] = __smlad(xo[i], wo, a[j][i]);
      }
    }
  }
  for (; k < K; ++k) {
    #pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) {
      #pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) a[j][i] = wrap_add(a[j][i], x[i][k] * w[j * K + k]);
    }
  }
  #pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) {
    #pragma GCC unroll 4
    for (int i = 0; i < NP; ++i) acc[j][i] = a[j][i];
  }
}

inline int32_t weight_sum(const int8_t* w, int32_t K) {
  int32_t s = 0;
  int32_t k = 0;
  const int32_t ones = 0x00010001;
  for (; k + 4 <= K; k += 4) {
    const int32_t v = load32(w + k);
    s = __smlad(__sxtb16(v), ones, s);
    s = __smlad(sxtb16_ror8(v), ones, s);
  }
  for (; k < K; ++k) s += w[k];
  return s;
}

#endif

// NO output channels [oc, oc + NO) of NP pixels: dots, folded bias,
// requantization, stores. bfull and the output pointers are indexed from oc.
template <int NO, int NP>
inline void block(const int8_t* const* x, const int8_t* w, int32_t K, const int32_t* bfull,
                  const int32_t* multiplier, const int32_t* shift, int8_t* const* o,
                  const s8::OutQuant& quant, bool vector_requant) {
  int32_t acc[NO][2];
  dots<NO, NP>(x, w, K, acc);
#if TMCU_S8_MVE
  if constexpr (NO == 4) {
    if (vector_requant) {
      const int32x4_t b = vldrwq_s32(bfull);
      const int32x4_t m = vldrwq_s32(multiplier);
      const int32x4_t s = vldrwq_s32(shift);
      #pragma GCC unroll 4
      for (int i = 0; i < NP; ++i) {
        int32_t col[4] = {acc[0][i], acc[1][i], acc[2][i], acc[3][i]};
        const int32x4_t v = vaddq_s32(vldrwq_s32(col), b);
        vstrbq_s32(o[i], clamp_v(requant_v(v, m, s), quant));
      }
      return;
    }
  }
#else
  (void)vector_requant;
#endif
  #pragma GCC unroll 4
  for (int i = 0; i < NP; ++i) {
    #pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) {
      o[i][j] = finish(wrap_add(acc[j][i], bfull[j]), multiplier[j], shift[j], quant);
    }
  }
}

inline void copy_bytes(int8_t* dst, const int8_t* src, int32_t n) {
  if (n >= 16) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  for (int32_t i = 0; i < n; ++i) dst[i] = src[i];
}

inline void fill_bytes(int8_t* dst, int8_t v, int32_t n) {
  for (int32_t i = 0; i < n; ++i) dst[i] = v;
}

// The patch of the output pixel whose window starts at (iy0, ix0), in OHWI
// order, taps outside the input filled with pad.
inline void im2col(const int8_t* in_n, Shape4 in_shape, int32_t kernel_h, int32_t kernel_w, int32_t dil_h,
            int32_t dil_w, int32_t iy0, int32_t ix0, int8_t pad, int8_t* patch) {
  const int32_t c = in_shape.c;
  const int32_t row = kernel_w * c;
  for (int32_t ky = 0; ky < kernel_h; ++ky, patch += row) {
    const int32_t iy = iy0 + ky * dil_h;
    if (iy < 0 || iy >= in_shape.h) {
      fill_bytes(patch, pad, row);
      continue;
    }
    const int8_t* x = in_n + iy * in_shape.w * c;
    if (dil_w == 1 && ix0 >= 0 && ix0 + kernel_w <= in_shape.w) {
      copy_bytes(patch, x + ix0 * c, row);
      continue;
    }
    for (int32_t kx = 0; kx < kernel_w; ++kx) {
      const int32_t ix = ix0 + kx * dil_w;
      if (ix < 0 || ix >= in_shape.w) {
        fill_bytes(patch + kx * c, pad, c);
      } else {
        copy_bytes(patch + kx * c, x + ix * c, c);
      }
    }
  }
}

}  // namespace

[[gnu::noinline]] inline bool conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h, int32_t kernel_w,
                      const int32_t* bias, const int32_t* multiplier, const int32_t* shift, int8_t* out,
                      Shape4 out_shape, const QuantConvParams& p) {
  const int32_t in_c = in_shape.c, out_c = out_shape.c;
  const int32_t K = kernel_h * kernel_w * in_c;
  const int32_t stride_h = p.stride_h, stride_w = p.stride_w;
  const int32_t in_off = p.input_offset;
  // In place: each output pixel reads input pixel (oy * stride, ox * stride).
  const bool direct = kernel_h == 1 && kernel_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
                      (out_shape.h - 1) * stride_h < in_shape.h && (out_shape.w - 1) * stride_w < in_shape.w;
  // The pad value -in_off must be an int8 (a zero point) for the patch.
  if (!direct && (K > kMaxPatch || in_off < -127 || in_off > 128)) return false;
  const int8_t pad = static_cast<int8_t>(-in_off);
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
#if TMCU_S8_MVE
  const bool vector_requant = requant_vector_ok(multiplier, shift, out_c);
#else
  const bool vector_requant = false;
#endif
  const int32_t pixels = out_shape.n * out_shape.h * out_shape.w;
  const int32_t image = out_shape.h * out_shape.w;
  int32_t bfull[kOcChunk];
  int8_t patch[2][kMaxPatch];

  for (int32_t oc0 = 0; oc0 < out_c; oc0 += kOcChunk) {
    const int32_t ocn = out_c - oc0 < kOcChunk ? out_c - oc0 : kOcChunk;
    for (int32_t j = 0; j < ocn; ++j) {
      const int32_t b = bias ? bias[oc0 + j] : 0;
      bfull[j] = wrap_add(b, static_cast<int32_t>(static_cast<uint32_t>(in_off) *
                                                   static_cast<uint32_t>(weight_sum(w + (oc0 + j) * K, K))));
    }
    for (int32_t px = 0; px < pixels; px += 2) {
      const int32_t np = pixels - px < 2 ? pixels - px : 2;
      const int8_t* x[2];
      int8_t* o[2];
      for (int32_t i = 0; i < np; ++i) {
        const int32_t q = px + i;
        const int32_t n = q / image;
        const int32_t oy = (q - n * image) / out_shape.w;
        const int32_t ox = q - n * image - oy * out_shape.w;
        const int8_t* in_n = in + n * in_shape.h * in_shape.w * in_c;
        if (direct) {
          x[i] = in_n + (oy * stride_h * in_shape.w + ox * stride_w) * in_c;
        } else {
          im2col(in_n, in_shape, kernel_h, kernel_w, p.dilation_h, p.dilation_w, oy * stride_h - p.pad_top,
                 ox * stride_w - p.pad_left, pad, patch[i]);
          x[i] = patch[i];
        }
        o[i] = out + q * out_c + oc0;
      }
      const int8_t* wc = w + oc0 * K;
      int32_t j = 0;
      if (np == 2) {
        for (; j + kBlockOc <= ocn; j += kBlockOc) {
          int8_t* oj[2] = {o[0] + j, o[1] + j};
          block<kBlockOc, 2>(x, wc + j * K, K, bfull + j, multiplier + oc0 + j, shift + oc0 + j, oj, quant,
                      vector_requant);
        }
        for (; j < ocn; ++j) {
          int8_t* oj[2] = {o[0] + j, o[1] + j};
          block<1, 2>(x, wc + j * K, K, bfull + j, multiplier + oc0 + j, shift + oc0 + j, oj, quant, false);
        }
      } else {
        for (; j + kBlockOc <= ocn; j += kBlockOc) {
          int8_t* oj[1] = {o[0] + j};
          block<kBlockOc, 1>(x, wc + j * K, K, bfull + j, multiplier + oc0 + j, shift + oc0 + j, oj, quant,
                      vector_requant);
        }
        for (; j < ocn; ++j) {
          int8_t* oj[1] = {o[0] + j};
          block<1, 1>(x, wc + j * K, K, bfull + j, multiplier + oc0 + j, shift + oc0 + j, oj, quant, false);
        }
      }
    }
  }
  return true;
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_PORTABLE_CONV2D_S8_FAST_H_
