// Fast path of conv2d_s8 (see fast.h), included by portable/conv/conv2d_s8.cc only
// (each kernel file compiles on its own); conv/dwconv_s8.h uses its helpers.
// The helpers both targets share are here, the GEMM per target in
// conv/conv2d_s8_mve.h and conv/conv2d_s8_dsp.h, included below.
//
// The convolution is a GEMM: output pixel p, output channel o gets
// sum_k patch_p[k] * w_o[k] over the K = kernel_h * kernel_w * in_c values of
// the pixel's patch (in the weights' OHWI order). The patches of G
// consecutive output pixels (G = 4 while they fit the buffer) are gathered
// into a stack buffer, interleaved chunk by chunk so that one pointer with
// constant offsets reads all G of them; then every output channel (two at a
// time on MVE) runs over that buffer, G accumulators per channel. 1x1
// kernels are gathered too (a copy of the pixel's channels): it costs little
// next to out_c channels' dot products, and the interleaving is what keeps
// the inner loop's pointers in registers.
//
// MVE: chunks of 16 bytes, VMLADAVA.S8 per channel and pixel. The input
// offset is folded into a per-channel bias once per call: bias_o +
// input_offset * sum_k w_o[k], exact because padded taps hold the zero point
// (value -offset), so every tap contributes (x + offset) * w as the
// reference's. K is padded in FRONT to a multiple of 16 (lead zero bytes in
// each patch); the first step loads the weights from lead bytes before the
// row predicated off in those lanes (inactive lanes read no memory), so every
// step is a whole vector and the first one initialises the accumulators. The
// four pixels' accumulators of one channel are requantized as one vector
// (multiplier, shift and bias are scalars) and scattered to the four pixels.
//
// DSP: chunks of 4 taps, stored as the halfword pairs (x0, x2), (x1, x3) with
// the input offset already added (x + offset is within +-255), which SMLAD
// multiplies by SXTB16 of the weights' word and of its bytes rotated by 8:
// per channel and chunk one weight load and two extends serve G pixels of two
// SMLADs each. Padded taps and the taps beyond K hold 0 (the zero point plus
// the offset); the weights' last partial word is the row's last whole word
// shifted right (no read past the row), so no weight sums are needed.
//
// The sums are computed in wrapping 32-bit arithmetic (the MVE and DSP
// instructions wrap; the C parts use uint32_t): the exact accumulator fits in
// int32 (the glue's requant_in_range guarantees it), so the wrapped sum of
// the same terms in another order is that exact value.
#ifndef TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_H_
#define TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include <cstddef>
#include <cstring>

#include "kernels/portable/common/requantize.h"
#include "kernels/portable/conv/conv.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

// The fast paths are compiled for speed whatever the image's -O (-Os by
// default, which neither unrolls the register-blocked loops nor inlines
// the vector helpers): they are a few KB of the kernels' code.
// (At -O2 in the size-first build too: the MVE GEMM's inline assembly
// needs -O2's register allocation.)
#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// Output channels whose folded biases are kept on the stack at a time.
constexpr int32_t kOcChunk = 64;
// Largest patch (K, bytes per pixel) of the fast path: 3x3x64.
constexpr int32_t kMaxPatch = 576;
// The interleaved patch buffer: 4 pixels of kMaxPatch int8s (MVE) or 4 of
// 288 / 2 of 576 expanded to int16 (DSP).
constexpr int32_t kPatchBuffer = 4 * kMaxPatch;

inline int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// Output of one accumulator, as the generic kernels' (common/requantize.h).
inline int8_t finish(int32_t acc, int32_t m, int32_t s, const s8::OutQuant& quant) {
  return quant(s8::requantize(acc, m, s));
}

#if !TMCU_S8_MVE
// Bytes 1 and 3 of v sign-extended to halfwords: SXTB16 with its rotation,
// which GCC does not fold from a rotate and has no ACLE intrinsic for.
inline int16x2_t sxtb16_ror8(int32_t v) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
#endif

inline int32_t load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Output pixels in memory order (n, oy, ox) and where their windows start.
struct PixelWalk {
  Shape4 out;
  int32_t stride_h, stride_w, pad_top, pad_left;
  int32_t n = 0, oy = 0, ox = 0;
  void next() {
    if (++ox == out.w) {
      ox = 0;
      if (++oy == out.h) {
        oy = 0;
        ++n;
      }
    }
  }
  int32_t iy0() const { return oy * stride_h - pad_top; }
  int32_t ix0() const { return ox * stride_w - pad_left; }
};

// The patch of the pixel whose window starts at (iy0, ix0), in OHWI order,
// into sink (put: copy n bytes to patch index k; fill: n bytes of v), the
// taps outside the input filled with pad. With dilation_w 1 a kernel row is
// one run of kernel_w * C bytes in the input, cut where it leaves the input.
template <class Sink>
inline void gather(Sink& sink, const int8_t* in_n, Shape4 in_shape, int32_t kernel_h, int32_t kernel_w,
                   int32_t dil_h, int32_t dil_w, int32_t iy0, int32_t ix0, int8_t pad) {
  const int32_t c = in_shape.c;
  const int32_t row = kernel_w * c;
  int32_t kx0, kx1;
  s8::tap_range(ix0, in_shape.w, kernel_w, dil_w, &kx0, &kx1);
  int32_t k = 0;
  for (int32_t ky = 0; ky < kernel_h; ++ky, k += row) {
    const int32_t iy = iy0 + ky * dil_h;
    if (iy < 0 || iy >= in_shape.h || kx0 >= kx1) {
      sink.fill(k, pad, row);
      continue;
    }
    const int8_t* x = in_n + (iy * in_shape.w + ix0) * c;
    if (dil_w == 1) {
      if (kx0 > 0) sink.fill(k, pad, kx0 * c);
      sink.put(k + kx0 * c, x + kx0 * c, (kx1 - kx0) * c);
      if (kx1 < kernel_w) sink.fill(k + kx1 * c, pad, (kernel_w - kx1) * c);
      continue;
    }
    for (int32_t kx = 0; kx < kernel_w; ++kx) {
      if (kx < kx0 || kx >= kx1) {
        sink.fill(k + kx * c, pad, c);
      } else {
        sink.put(k + kx * c, x + kx * dil_w * c, c);
      }
    }
  }
}

// A sink (gather()'s) that keeps the patch indexes [k0, k1) of another,
// moved to start at 0: one K chunk of a patch (the K-tiled paths).
template <class Sink>
struct KWindow {
  Sink sink;
  int32_t k0, k1;
  void put(int32_t k, const int8_t* src, int32_t n) const {
    const int32_t lo = k > k0 ? k : k0, hi = k + n < k1 ? k + n : k1;
    if (lo < hi) sink.put(lo - k0, src + (lo - k), hi - lo);
  }
  void fill(int32_t k, int8_t v, int32_t n) const {
    const int32_t lo = k > k0 ? k : k0, hi = k + n < k1 ? k + n : k1;
    if (lo < hi) sink.fill(lo - k0, v, hi - lo);
  }
};

// The arguments every block needs.
struct Conv {
  const int8_t* in;
  Shape4 in_shape, out_shape;
  const int8_t* w;
  int32_t kernel_h, kernel_w, K;
  const int32_t *bias, *multiplier, *shift;
  int8_t* out;
  const QuantConvParams* p;
  bool direct;  // 1x1, no padding: the patch is the pixel's channels
  int8_t pad;
};

// Fills slot (one pixel of the buffer) from the pixel at walk.
template <class Sink>
inline void gather_pixel(const Conv& cv, const PixelWalk& at, Sink& sink) {
  const Shape4 s = cv.in_shape;
  const int8_t* in_n = cv.in + at.n * s.h * s.w * s.c;
  if (cv.direct) {
    sink.put(0, in_n + (at.oy * cv.p->stride_h * s.w + at.ox * cv.p->stride_w) * s.c, s.c);
  } else {
    gather(sink, in_n, s, cv.kernel_h, cv.kernel_w, cv.p->dilation_h, cv.p->dilation_w, at.iy0(), at.ix0(),
           cv.pad);
  }
}

}  // namespace
}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

// The GEMM itself, per target (still under this file's optimize pragma).
#if TMCU_S8_MVE
#include "kernels/fast/conv/conv2d_s8_mve.h"
#else
#include "kernels/fast/conv/conv2d_s8_dsp.h"
#endif

namespace torchmcu {
namespace portable {
namespace fast {

// Whether the op's scratch operand holds `bytes`, 16-byte aligned (the
// fast paths' check; without it they return false: the generic kernel).
inline bool scratch_fits(const QuantConvParams& p, int32_t bytes) {
  return p.scratch != nullptr && p.scratch_bytes >= bytes && (reinterpret_cast<uintptr_t>(p.scratch) & 15u) == 0;
}

// The fast path's scratch for patches of K taps: the interleaved patch
// buffer (`buf` bytes, a multiple of 16), then (MVE) run()'s per-channel
// table of kOcChunk x 3 words or run_wide()'s kWideOc folded biases and
// 4 x kWideOc accumulators, or (DSP) the linear patch; 16 bytes of slack.
// The compiler plans it as the op's scratch operand, for the larger of the
// two ISAs: aot/torchmcu/backends/portable/scratch.py computes the same.
struct ConvScratch {
  int32_t buf, total;
};

constexpr ConvScratch conv_scratch(int32_t K) {
#if TMCU_S8_MVE
  return K <= kMaxPatch
             ? ConvScratch{64 * ((K + 15) >> 4), 64 * ((K + 15) >> 4) + 3 * kOcChunk * 4 + 16}
             : ConvScratch{4 * kWideK(K), 4 * kWideK(K) + 5 * kWideOc * 4 + 16};
#else
  return K <= kMaxPatch ? ConvScratch{dsp_buf_bytes((K + 3) & ~3), dsp_buf_bytes((K + 3) & ~3) + ((K + 3) & ~3) + 16}
                        : ConvScratch{kPatchBuffer, kPatchBuffer + kWideChunk + 16};
#endif
}

[[gnu::noinline]] inline bool conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                                        int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
                                        const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p) {
  const int32_t K = kernel_h * kernel_w * in_shape.c;
  // In place: each output pixel reads input pixel (oy * stride, ox * stride).
  const bool direct = kernel_h == 1 && kernel_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
                      (out_shape.h - 1) * p.stride_h < in_shape.h && (out_shape.w - 1) * p.stride_w < in_shape.w;
  // The pad value -input_offset must be an int8 (a zero point).
  if (p.input_offset < -127 || p.input_offset > 128) return false;
  const Conv cv{in, in_shape, out_shape, w, kernel_h, kernel_w, K, bias, multiplier, shift, out, &p, direct,
                static_cast<int8_t>(-p.input_offset)};
  // The buffers are the op's planned scratch (conv_scratch), never the
  // stack: without enough of it, the generic kernel.
  const ConvScratch need = conv_scratch(K);
  if (!scratch_fits(p, need.total)) return false;
  int8_t* const buf = p.scratch;
#if TMCU_S8_MVE
  // Every channel requantized by requant_v (the compiler's multipliers
  // always are); others take the generic kernel.
  if (!requant_vector_ok(multiplier, shift, out_shape.c)) return false;
  int32_t* const words = reinterpret_cast<int32_t*>(buf + need.buf);
  if (K > kMaxPatch) {
    if (!TMCU_FAST_CONV_WIDE) return false;
    run_wide(cv, buf, words);
  } else {
    run(cv, buf, words);
  }
#else
  int8_t* const linear = buf + need.buf;
  // Expanded patches take 2 bytes per tap: 4 pixels up to K = 288 (2 pixels
  // take those too, where the image leaves run<4> out).
  const bool four = ((K + 3) & ~3) * 2 * 4 <= kPatchBuffer;
  if (K > kMaxPatch) {
    if (!TMCU_FAST_CONV_WIDE) return false;
    run_wide(cv, buf, linear);
  } else if (four && TMCU_FAST_CONV_G4) {
    run<4>(cv, buf, linear);
  } else {
    if (!TMCU_FAST_CONV_G2) return false;
    run<2>(cv, buf, linear);
  }
#endif
  return true;
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_H_
