// Fast path of conv2d_s8 (see fast_s8.h), included by conv2d_s8.cc only
// (each kernel file compiles on its own); dwconv_s8_fast.h uses its helpers.
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
#ifndef TORCHMCU_KERNELS_PORTABLE_CONV2D_S8_FAST_H_
#define TORCHMCU_KERNELS_PORTABLE_CONV2D_S8_FAST_H_

#include "fast_s8.h"

#if TMCU_S8_FAST

#include <cstddef>
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
// Largest patch (K, bytes per pixel) of the fast path: 3x3x64.
constexpr int32_t kMaxPatch = 576;
// The interleaved patch buffer: 4 pixels of kMaxPatch int8s (MVE) or 4 of
// 288 / 2 of 576 expanded to int16 (DSP).
constexpr int32_t kPatchBuffer = 4 * kMaxPatch;

inline int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// Output of one accumulator, as the generic kernels' (requantize_s8.h).
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

#if TMCU_S8_MVE

// One pixel's slot of the interleaved buffer: patch index k is at byte
// (k + lead) % 16 of chunk (k + lead) / 16, chunks stride bytes apart.
struct MveSlot {
  int8_t* base;
  int32_t stride, lead;
  // Copies a head up to the next chunk and a tail predicated to their
  // lengths, whole chunks between them.
  void put(int32_t k, const int8_t* src, int32_t n) const {
    const int32_t kp = k + lead;
    const int32_t off = kp & 15;
    int8_t* dst = base + (kp >> 4) * stride + off;
    if (off != 0) {
      const int32_t m = 16 - off < n ? 16 - off : n;
      const mve_pred16_t pr = vctp8q(static_cast<uint32_t>(m));
      vstrbq_p_s8(dst, vldrbq_z_s8(src, pr), pr);
      src += m;
      n -= m;
      dst += stride - off;
    }
    for (; n >= 16; n -= 16, src += 16, dst += stride) vstrbq_s8(dst, vldrbq_s8(src));
    if (n > 0) {
      const mve_pred16_t pr = vctp8q(static_cast<uint32_t>(n));
      vstrbq_p_s8(dst, vldrbq_z_s8(src, pr), pr);
    }
  }
  void fill(int32_t k, int8_t v, int32_t n) const {
    const int8x16_t vv = vdupq_n_s8(v);
    int32_t kp = k + lead;
    while (n > 0) {
      const int32_t off = kp & 15;
      const int32_t m = 16 - off < n ? 16 - off : n;
      vstrbq_p_s8(base + (kp >> 4) * stride + off, vv, vctp8q(static_cast<uint32_t>(m)));
      kp += m;
      n -= m;
    }
  }
};

// sum_k w[k] of a row (w minus lead bytes, steps chunks, as dots1).
inline int32_t weight_sum(const int8_t* w, mve_pred16_t first, int32_t steps) {
  int32_t s = vaddvq_s8(vldrbq_z_s8(w, first));
  for (int32_t t = 1; t < steps; ++t) {
    w += 16;
    s = vaddvaq_s8(s, vldrbq_s8(w));
  }
  return s;
}

// acc[i] = sum_k x_i[k] * w[k] for the 4 interleaved patches at x and the
// weight row at w (minus lead bytes), over steps chunks.
[[gnu::always_inline]] inline int32x4_t dots1(const int8_t* x, const int8_t* w, mve_pred16_t first, int32_t steps) {
  int32_t a[4];
  {
    const int8x16_t wv = vldrbq_z_s8(w, first);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) a[i] = vmladavq_s8(vldrbq_s8(x + 16 * i), wv);
  }
  for (int32_t s = 1; s < steps; ++s) {
    x += 64;
    w += 16;
    const int8x16_t wv = vldrbq_s8(w);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) a[i] = vmladavaq_s8(a[i], vldrbq_s8(x + 16 * i), wv);
  }
  return vldrwq_s32(a);
}

// Single pixels (the last 1 to 3 of the image): acc[j] = sum_k x[k] * w_j[k]
// for the pixel's slot at x and 4 weight rows K apart (minus lead bytes);
// in asm for the even registers VMLADAVA takes (as pairs()). With sums, also
// the rows' weight sums (VADDVA of the weights loaded anyway; the lead
// lanes load as 0), which the first pixel of a call computes for the rest.
#define TMCU_MVE_ROW(w, acc, sum, mla, add) \
  "vldrb" w "\n\t"                          \
  "vmladav" mla ".s8 %[" acc "], q0, q1\n\t" add
#define TMCU_MVE_DOTS4(first_add, add0, add1, add2, add3, next_add0, next_add1, next_add2, next_add3) \
  "vmsr p0, %[n]\n\t"                                                           \
  "vldrb.8 q0, [%[x]], #64\n\t"                                                 \
  "vpst\n\t" TMCU_MVE_ROW("t.8 q1, [%[w0]], #16", "a0", "s0", "", add0)        \
  "vpst\n\t" TMCU_MVE_ROW("t.8 q1, [%[w1]], #16", "a1", "s1", "", add1)        \
  "vpst\n\t" TMCU_MVE_ROW("t.8 q1, [%[w2]], #16", "a2", "s2", "", add2)        \
  "vpst\n\t" TMCU_MVE_ROW("t.8 q1, [%[w3]], #16", "a3", "s3", "", add3)        \
  "lsrs %[n], %[n], #16\n\t"                                                    \
  "beq 2f\n"                                                                    \
  "1:\n\t"                                                                      \
  "vldrb.8 q0, [%[x]], #64\n\t"                                                 \
  TMCU_MVE_ROW(".8 q1, [%[w0]], #16", "a0", "s0", "a", next_add0)              \
  TMCU_MVE_ROW(".8 q1, [%[w1]], #16", "a1", "s1", "a", next_add1)              \
  TMCU_MVE_ROW(".8 q1, [%[w2]], #16", "a2", "s2", "a", next_add2)              \
  TMCU_MVE_ROW(".8 q1, [%[w3]], #16", "a3", "s3", "a", next_add3)              \
  "subs %[n], %[n], #1\n\t"                                                     \
  "bne 1b\n"                                                                    \
  "2:\n"

// With the sums: all 14 allocatable registers, so a function of its own
// (nothing else live around the asm); acc and sums to out[0..3], out[4..7].
[[gnu::noinline]] void dots4oc_sums(const int8_t* x, const int8_t* w0, int32_t K, uint32_t n, int32_t* out) {
  register int32_t a0 __asm__("r0");
  register int32_t a1 __asm__("r2");
  register int32_t a2 __asm__("r4");
  register int32_t a3 __asm__("r6");
  register int32_t s0 __asm__("r8");
  register int32_t s1 __asm__("r10");
  register int32_t s2 __asm__("r12");
  register int32_t s3 __asm__("lr");
  const int8_t* w1 = w0 + K;
  const int8_t* w2 = w0 + 2 * K;
  const int8_t* w3 = w0 + 3 * K;
  __asm__ volatile(TMCU_MVE_DOTS4("", "vaddv.s8 %[s0], q1\n\t", "vaddv.s8 %[s1], q1\n\t", "vaddv.s8 %[s2], q1\n\t",
                                  "vaddv.s8 %[s3], q1\n\t", "vaddva.s8 %[s0], q1\n\t", "vaddva.s8 %[s1], q1\n\t",
                                  "vaddva.s8 %[s2], q1\n\t", "vaddva.s8 %[s3], q1\n\t")
                   : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [s0] "=&r"(s0), [s1] "=&r"(s1),
                     [s2] "=&r"(s2), [s3] "=&r"(s3), [x] "+r"(x), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2),
                     [w3] "+r"(w3), [n] "+r"(n)
                   :
                   : "d0", "d1", "d2", "d3", "p0", "memory", "cc");
  out[0] = a0;
  out[1] = a1;
  out[2] = a2;
  out[3] = a3;
  out[4] = s0;
  out[5] = s1;
  out[6] = s2;
  out[7] = s3;
}

template <bool kSums>
[[gnu::always_inline]] inline int32x4_t dots4oc(const int8_t* x, const int8_t* w, int32_t K, mve_pred16_t first,
                                                int32_t steps, int32_t* sums = nullptr) {
  uint32_t n = (static_cast<uint32_t>(steps - 1) << 16) | first;
  if constexpr (kSums) {
    int32_t out[8];
    dots4oc_sums(x, w, K, n, out);
    sums[0] = out[4];
    sums[1] = out[5];
    sums[2] = out[6];
    sums[3] = out[7];
    return vldrwq_s32(out);
  } else {
    (void)sums;
    register int32_t a0 __asm__("r0");
    register int32_t a1 __asm__("r2");
    register int32_t a2 __asm__("r4");
    register int32_t a3 __asm__("r6");
    const int8_t* w0 = w;
    const int8_t* w1 = w + K;
    const int8_t* w2 = w + 2 * K;
    const int8_t* w3 = w + 3 * K;
    __asm__ volatile(TMCU_MVE_DOTS4("", "", "", "", "", "", "", "", "")
                     : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [x] "+r"(x), [w0] "+r"(w0),
                       [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3), [n] "+r"(n)
                     :
                     : "d0", "d1", "d2", "d3", "p0", "memory", "cc");
    const int32_t t[4] = {a0, a1, a2, a3};
    return vldrwq_s32(t);
  }
}

#undef TMCU_MVE_ROW
#undef TMCU_MVE_DOTS4

// The GEMM of one group of 4 pixels against count pairs of output channels,
// each pair's dot products followed by their requantization, in one asm
// loop. The 8 accumulators must be even registers (VMLADAVA takes no
// others): r0, r2, ..., r12 and lr, which leaves GCC nothing for the loop
// state around a block (it reloaded it from the stack, some 50 instructions
// a pair); the loop counts with SUBS. The first step's weight loads are
// predicated by the lead lanes. The 8 sums go to two vectors of 4 pixels
// (VMOV of single lanes: the two-lane VMOV's lane order differs between
// the assembler and QEMU), then
// per channel requant_v with its scalar bias, multiplier and shift (from
// tbl: 3 words a channel), the clamp and a scatter of 4 bytes out_c apart;
// the output pointer stays in a register the MAC loop leaves alone.
struct PairArgs {
  uint32_t n_first;     // 0: (steps - 1) << 16 | the first step's predicate
  const int8_t* buf;    // 4: the 4 interleaved patches
  const int8_t* w;      // 8: the first pair's first row, minus lead
  int32_t K;            // 12
  const int32_t* tbl;   // 16: bias (folded), multiplier, shift per channel
  int32_t lo, hi, off;  // 20, 24, 28: the clamp (OutQuant)
  int8_t* o;            // 32: the first pixel's output at the first channel
  int32_t lead;         // 36
  int32_t count;        // 40: channel pairs
  int32_t unused;       // 44
  uint32_t offsets[4];  // 48: the 4 pixels' output offsets (i * out_c)
};
static_assert(offsetof(PairArgs, o) == 32 && offsetof(PairArgs, count) == 40 && offsetof(PairArgs, offsets) == 48,
              "the asm's offsets");

// One channel's requantization: q (sums + bias) by multiplier and shift,
// as requant_v; flags from the shift's comparison with 0 survive the MVE
// instructions (they set none).
#define TMCU_MVE_REQUANT(q, l1, l2)                  \
  "ldm r6!, {r0, r2, r4}\n\t"                        \
  "vadd.i32 " q ", " q ", r0\n\t"                    \
  "cmp r4, #0\n\t"                                   \
  "ble " l1 "f\n\t"                                  \
  "vqshl.s32 " q ", r4\n"                            \
  l1 ":\n\t"                                         \
  "vqrdmulh.s32 " q ", " q ", r2\n\t"                \
  "bge " l2 "f\n\t"                                  \
  "vshr.s32 q3, " q ", #31\n\t"                      \
  "vadd.i32 " q ", " q ", q3\n\t"                    \
  "vrshl.s32 " q ", r4\n"                            \
  l2 ":\n\t"                                         \
  "vmax.s32 " q ", " q ", q4\n\t"                    \
  "vmin.s32 " q ", " q ", q5\n\t"                    \
  "vadd.i32 " q ", " q ", q6\n\t"

[[gnu::noinline]] void pairs(PairArgs* a) {
  const int8_t *x, *w0, *w1, *t;
  uint32_t n;
  __asm__ volatile(
      "ldr r0, [%[a], #20]\n\t"
      "vdup.32 q4, r0\n\t"
      "ldr r0, [%[a], #24]\n\t"
      "vdup.32 q5, r0\n\t"
      "ldr r0, [%[a], #28]\n\t"
      "vdup.32 q6, r0\n\t"
      "add r0, %[a], #48\n\t"
      "vldrw.32 q7, [r0]\n\t"
      "ldr %[w1], [%[a], #8]\n\t"
      "ldr %[t], [%[a], #32]\n"
      "5:\n\t"
      "ldr %[x], [%[a], #12]\n\t"
      "mov %[w0], %[w1]\n\t"
      "add %[w1], %[w1], %[x]\n\t"
      "ldr %[x], [%[a], #4]\n\t"
      "ldr %[n], [%[a], #0]\n\t"
      "vmsr p0, %[n]\n\t"
      "vpstt\n\t"
      "vldrbt.8 q0, [%[w0]], #16\n\t"
      "vldrbt.8 q1, [%[w1]], #16\n\t"
      "vldrb.8 q2, [%[x], #16]\n\t"
      "vmladav.s8 r2, q2, q0\n\t"
      "vmladav.s8 r10, q2, q1\n\t"
      "vldrb.8 q2, [%[x], #32]\n\t"
      "vmladav.s8 r4, q2, q0\n\t"
      "vmladav.s8 r12, q2, q1\n\t"
      "vldrb.8 q2, [%[x], #48]\n\t"
      "vmladav.s8 r6, q2, q0\n\t"
      "vmladav.s8 lr, q2, q1\n\t"
      "vldrb.8 q2, [%[x]], #64\n\t"
      "vmladav.s8 r0, q2, q0\n\t"
      "vmladav.s8 r8, q2, q1\n\t"
      "lsrs %[n], %[n], #16\n\t"
      "beq 2f\n"
      "1:\n\t"
      "vldrb.8 q0, [%[w0]], #16\n\t"
      "vldrb.8 q1, [%[w1]], #16\n\t"
      "vldrb.8 q2, [%[x], #16]\n\t"
      "vmladava.s8 r2, q2, q0\n\t"
      "vmladava.s8 r10, q2, q1\n\t"
      "vldrb.8 q2, [%[x], #32]\n\t"
      "vmladava.s8 r4, q2, q0\n\t"
      "vmladava.s8 r12, q2, q1\n\t"
      "vldrb.8 q2, [%[x], #48]\n\t"
      "vmladava.s8 r6, q2, q0\n\t"
      "vmladava.s8 lr, q2, q1\n\t"
      "vldrb.8 q2, [%[x]], #64\n\t"
      "vmladava.s8 r0, q2, q0\n\t"
      "vmladava.s8 r8, q2, q1\n\t"
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n"
      "2:\n\t"
      "vmov.32 q0[0], r0\n\t"
      "vmov.32 q0[1], r2\n\t"
      "vmov.32 q0[2], r4\n\t"
      "vmov.32 q0[3], r6\n\t"
      "vmov.32 q1[0], r8\n\t"
      "vmov.32 q1[1], r10\n\t"
      "vmov.32 q1[2], r12\n\t"
      "vmov.32 q1[3], lr\n\t"
      "ldr r6, [%[a], #16]\n\t"
      TMCU_MVE_REQUANT("q0", "3", "4")
      TMCU_MVE_REQUANT("q1", "6", "7")
      "str r6, [%[a], #16]\n\t"
      "vstrb.32 q0, [%[t], q7]\n\t"
      "adds %[t], %[t], #1\n\t"
      "vstrb.32 q1, [%[t], q7]\n\t"
      "adds %[t], %[t], #1\n\t"
      "ldr r0, [%[a], #36]\n\t"
      "sub %[w1], %[w1], r0\n\t"
      "ldr %[n], [%[a], #40]\n\t"
      "subs %[n], %[n], #1\n\t"
      "str %[n], [%[a], #40]\n\t"
      "bne 5b\n"
      : [x] "=&r"(x), [w0] "=&r"(w0), [w1] "=&r"(w1), [t] "=&r"(t), [n] "=&r"(n)
      : [a] "r"(a)
      : "r0", "r2", "r4", "r6", "r8", "r10", "r12", "lr", "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8",
        "d9", "d10", "d11", "d12", "d13", "d14", "d15", "p0", "memory", "cc");
}

#undef TMCU_MVE_REQUANT

// requant_v (fast_s8.h) of one channel's 4 pixels (scalar multiplier, shift
// and bias), clamped, stored to the pixels' outputs o + offsets (the first
// np of them).
[[gnu::always_inline]] inline void requant_store(int32x4_t v, int32_t b, int32_t m, int32_t s, int8_t* o,
                                                 uint32x4_t offsets, int32_t np, const s8::OutQuant& quant) {
  v = vaddq_n_s32(v, b);
  if (s > 0) v = vqshlq_r_s32(v, s);
  v = vqrdmulhq_n_s32(v, m);
  if (s < 0) v = vrshlq_n_s32(vaddq_s32(v, vshrq_n_s32(v, 31)), s);  // hi - (hi < 0)
  v = clamp_v(v, quant);
  if (np == 4) {
    vstrbq_scatter_offset_s32(o, offsets, v);
  } else {
    vstrbq_scatter_offset_p_s32(o, offsets, v, vctp32q(static_cast<uint32_t>(np)));
  }
}

[[gnu::noinline]] void run(const Conv& cv, int8_t* buf) {
  const int32_t K = cv.K, out_c = cv.out_shape.c;
  const int32_t steps = (K + 15) >> 4;
  const int32_t lead = steps * 16 - K;
  const mve_pred16_t first = static_cast<mve_pred16_t>(~vctp8q(static_cast<uint32_t>(lead)));
  const QuantConvParams& p = *cv.p;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<uint32_t>(out_c));
  const int32_t pixels = cv.out_shape.n * cv.out_shape.h * cv.out_shape.w;
  // Bytes no gather writes (the lead, the slots of absent pixels) are
  // multiplied by weights predicated to 0 or their outputs are not stored;
  // zeroed, they are never indeterminate.
  std::memset(buf, 0, static_cast<size_t>(steps * 64));
  // Small patches (up to 4 chunks, not 1x1) of windows inside the input
  // are gathered with VLDRB's 16-bit offsets, per chunk the input offsets
  // of its even lanes, then of its odd ones (the lead lanes read offset 0);
  // a patch of short rows otherwise takes many predicated pieces.
  const Shape4 s = cv.in_shape;
  const int32_t dil_h = p.dilation_h, dil_w = p.dilation_w;
  const int32_t y_last = s.h - 1 - (cv.kernel_h - 1) * dil_h;
  const int32_t x_last = s.w - 1 - (cv.kernel_w - 1) * dil_w;
  const bool gathered = !cv.direct && steps <= 4 &&
                        ((cv.kernel_h - 1) * dil_h * s.w + (cv.kernel_w - 1) * dil_w + 1) * s.c <= 65535;
  const bool rows = !cv.direct && dil_w == 1;
  const bool contiguous = cv.direct && p.stride_h == 1 && p.stride_w == 1 && cv.out_shape.h == s.h &&
                          cv.out_shape.w == s.w;
  const int32_t row = cv.kernel_w * s.c;
  const int32_t row_step = dil_h * s.w * s.c;
  uint16_t offs[4][16];
  if (gathered) {
    for (int32_t t = 0; t < steps; ++t) {
      for (int32_t l = 0; l < 16; ++l) {
        const int32_t k = 16 * t + l - lead;
        int32_t off = 0;
        if (k >= 0) {
          const int32_t c = k % s.c, tap = k / s.c;
          off = ((tap / cv.kernel_w) * dil_h * s.w + (tap % cv.kernel_w) * dil_w) * s.c + c;
        }
        offs[t][(l & 1) * 8 + (l >> 1)] = static_cast<uint16_t>(off);
      }
    }
  }
  int32_t bfull[kOcChunk];
  int32_t tbl[3 * kOcChunk];
  PairArgs args;
  args.n_first = (static_cast<uint32_t>(steps - 1) << 16) | first;
  args.buf = buf;
  args.K = K;
  args.lo = quant.lo;
  args.hi = quant.hi;
  args.off = quant.offset;
  args.lead = lead;
  vst1q_u32(args.offsets, offsets);
  // The patches of the np pixels from the one at `at` into the buffer.
  auto gather_group = [&](int32_t q, int32_t np, PixelWalk& at) {
    if (contiguous) {  // 1x1, stride 1: the pixels' channels follow each other
      for (int32_t i = 0; i < np; ++i) MveSlot{buf + 16 * i, 64, lead}.put(0, cv.in + (q + i) * K, K);
      return;
    }
    for (int32_t i = 0; i < np; ++i, at.next()) {
      const int32_t iy0 = at.iy0(), ix0 = at.ix0();
      if (gathered && iy0 >= 0 && iy0 <= y_last && ix0 >= 0 && ix0 <= x_last) {
        // A whole window inside the input: each chunk is two gathers
        // of 8 taps (the even and the odd lanes) at the offsets.
        const int8_t* const base = cv.in + ((at.n * s.h + iy0) * s.w + ix0) * s.c;
        int8_t* dst = buf + 16 * i;
        for (int32_t t = 0; t < steps; ++t, dst += 64) {
          const int16x8_t even = vldrbq_gather_offset_s16(base, vldrhq_u16(offs[t]));
          const int16x8_t odd = vldrbq_gather_offset_s16(base, vldrhq_u16(offs[t] + 8));
          vstrbq_s8(dst, vmovntq_s16(vmovnbq_s16(vuninitializedq_s8(), even), odd));
        }
        continue;
      }
      const MveSlot slot{buf + 16 * i, 64, lead};
      if (rows && iy0 >= 0 && iy0 <= y_last && ix0 >= 0 && ix0 <= x_last) {
        // Inside the input, dilation_w 1: kernel_h runs of row bytes.
        const int8_t* src = cv.in + ((at.n * s.h + iy0) * s.w + ix0) * s.c;
        for (int32_t ky = 0, k = 0; ky < cv.kernel_h; ++ky, k += row, src += row_step) slot.put(k, src, row);
        continue;
      }
      gather_pixel(cv, at, slot);
    }
  };
  // The last pixels (pixels % 4 of them) go first, one at a time, 4
  // channels at a time; the first of them also sums the weights for the
  // folded biases (a call without them sums the weights alone).
  const int32_t tail_np = pixels & 3;
  const int32_t q_tail = pixels - tail_np;
  PixelWalk tail_at{cv.out_shape, p.stride_h, p.stride_w, p.pad_top, p.pad_left};
  {
    const int32_t image = cv.out_shape.h * cv.out_shape.w;
    tail_at.n = q_tail / image;
    tail_at.oy = (q_tail - tail_at.n * image) / cv.out_shape.w;
    tail_at.ox = q_tail - tail_at.n * image - tail_at.oy * cv.out_shape.w;
  }
  const uint32_t in_off = static_cast<uint32_t>(p.input_offset);
  for (int32_t oc0 = 0; oc0 < out_c; oc0 += kOcChunk) {
    const int32_t ocn = out_c - oc0 < kOcChunk ? out_c - oc0 : kOcChunk;
    const int32_t* const bc = cv.bias ? cv.bias + oc0 : nullptr;
    const int32_t* const mc = cv.multiplier + oc0;
    const int32_t* const sc = cv.shift + oc0;
    const int8_t* const wl = cv.w + oc0 * K - lead;
    // Folded biases of channels [j, j + n) from their weight sums.
    auto fold = [&](int32_t j, int32_t n, const int32_t* sums) {
      for (int32_t t = 0; t < n; ++t) {
        const int32_t sum = sums ? sums[t] : weight_sum(wl + (j + t) * K, first, steps);
        bfull[j + t] = wrap_add(bc ? bc[j + t] : 0, static_cast<int32_t>(in_off * static_cast<uint32_t>(sum)));
      }
    };
    // np pixels from q one at a time, 4 channels at a time; with sums, the
    // first one's dots sum the weights too.
    auto singles = [&](int32_t q, int32_t np, PixelWalk& at, bool sums) {
      gather_group(q, np, at);
      int8_t* const o = cv.out + q * out_c + oc0;
      for (int32_t j = 0; j < ocn; j += 4) {
        const int32_t nj = ocn - j < 4 ? ocn - j : 4;
        if (sums && nj < 4) fold(j, nj, nullptr);
        for (int32_t i = 0; i < np; ++i) {
          int32x4_t v;
          if (nj == 4) {
            if (sums && i == 0) {
              int32_t s4[4];
              v = dots4oc<true>(buf, wl + j * K, K, first, steps, s4);
              fold(j, 4, s4);
            } else {
              v = dots4oc<false>(buf + 16 * i, wl + j * K, K, first, steps);
            }
          } else {  // the last 1 to 3 channels, one at a time (row stride 0)
            int32_t t4[4] = {0, 0, 0, 0};
            for (int32_t t = 0; t < nj; ++t) {
              t4[t] = vgetq_lane_s32(dots4oc<false>(buf + 16 * i, wl + (j + t) * K, 0, first, steps), 0);
            }
            v = vldrwq_s32(t4);
          }
          const mve_pred16_t pc = vctp32q(static_cast<uint32_t>(nj));
          const int32x4_t r = requant_v(vaddq_s32(v, vldrwq_z_s32(bfull + j, pc)), vldrwq_z_s32(mc + j, pc),
                                        vldrwq_z_s32(sc + j, pc));
          vstrbq_p_s32(o + i * out_c + j, clamp_v(r, quant), pc);
        }
      }
    };
    if (tail_np == 0) {
      fold(0, ocn, nullptr);
    } else {
      PixelWalk at = tail_at;
      singles(q_tail, tail_np, at, true);
    }
    for (int32_t j = 0; j < ocn; ++j) {
      tbl[3 * j] = bfull[j];
      tbl[3 * j + 1] = mc[j];
      tbl[3 * j + 2] = sc[j];
    }
    PixelWalk at{cv.out_shape, p.stride_h, p.stride_w, p.pad_top, p.pad_left};
    for (int32_t q = 0; q < q_tail; q += 4) {
      gather_group(q, 4, at);
      int8_t* const o = cv.out + q * out_c + oc0;
      if (ocn >= 2) {
        args.w = wl;
        args.tbl = tbl;
        args.o = o;
        args.count = ocn >> 1;
        pairs(&args);
      }
      if (ocn & 1) {
        const int32_t j = ocn - 1;
        requant_store(dots1(buf, wl + j * K, first, steps), bfull[j], mc[j], sc[j], o + j, offsets, 4, quant);
      }
    }
  }
}

#else  // DSP

// One pixel's patch as int8s, before expand().
struct LinearPatch {
  int8_t* base;
  void put(int32_t k, const int8_t* src, int32_t n) const {
    int8_t* dst = base + k;
    for (; n >= 4; n -= 4, src += 4, dst += 4) {
      const int32_t v = load32(src);
      std::memcpy(dst, &v, 4);
    }
    for (; n > 0; --n) *dst++ = *src++;
  }
  void fill(int32_t k, int8_t v, int32_t n) const {
    int8_t* dst = base + k;
    const uint32_t v4 = static_cast<uint8_t>(v) * 0x01010101u;
    for (; n >= 4; n -= 4, dst += 4) std::memcpy(dst, &v4, 4);
    for (; n > 0; --n) *dst++ = v;
  }
};

// chunks words of int8s at src into a slot as (x0, x2), (x1, x3) halfword
// pairs plus the offset; the slot's chunks are stride words apart.
inline void expand(int32_t* dst, int32_t stride, const int8_t* src, int32_t chunks, int32_t off2) {
  for (int32_t c = 0; c < chunks; ++c, src += 4, dst += stride) {
    const int32_t v = load32(src);
    dst[0] = __sadd16(__sxtb16(v), off2);
    dst[1] = __sadd16(sxtb16_ror8(v), off2);
  }
}

// The last r = K % 4 weights of a row of K as a word (bytes r..3 zero),
// from the row's last whole word when there is one.
inline int32_t tail_word(const int8_t* row, int32_t K) {
  const int32_t r = K & 3;
  if (K >= 4) return static_cast<int32_t>(static_cast<uint32_t>(load32(row + K - 4)) >> (8 * (4 - r)));
  uint32_t v = 0;
  for (int32_t t = 0; t < r; ++t) v |= static_cast<uint32_t>(static_cast<uint8_t>(row[t])) << (8 * t);
  return static_cast<int32_t>(v);
}

// requantize() for a shift s <= 0 (e = -s, e1 = e - 1; e 0 returns the
// product's high part): floor((x * m + 2^30) / 2^31) is SMMULR of 2x and m,
// (2x * m + 2^31) >> 32, while 2x fits int32 (else requantize() itself),
// then the rounding shift right by e as requantize()'s.
[[gnu::always_inline]] inline int32_t requant_right(int32_t x, int32_t m, int32_t s, int32_t e, int32_t e1) {
  int32_t x2;
  if (__builtin_add_overflow(x, x, &x2)) return s8::requantize(x, m, s);
  int32_t hi;
  __asm__("smmulr %0, %1, %2" : "=r"(hi) : "r"(x2), "r"(m));
  if (e == 0) return hi;
  const int32_t t = hi + (hi >> 31);  // hi - (hi < 0)
  return (t >> e) + ((t >> e1) & 1);
}

// One chunk of the dot products below: the weights' word extended to the
// even and the odd halfword pairs, then per pixel one LDRD of its pairs and
// two SMLADs; the first pixel last, its load advancing x to the next chunk.
#define TMCU_DSP_W                     \
  "ldr %[wo], [%[w]], #4\n\t"          \
  "sxtb16 %[we], %[wo]\n\t"            \
  "sxtb16 %[wo], %[wo], ror #8\n\t"
#define TMCU_DSP_X(acc, off)                          \
  "ldrd %[t0], %[t1], [%[x], #" off "]\n\t"           \
  "smlad %[" acc "], %[t0], %[we], %[" acc "]\n\t"    \
  "smlad %[" acc "], %[t1], %[wo], %[" acc "]\n\t"
#define TMCU_DSP_X0(step)                             \
  "ldrd %[t0], %[t1], [%[x]], #" step "\n\t"          \
  "smlad %[a0], %[t0], %[we], %[a0]\n\t"              \
  "smlad %[a0], %[t1], %[wo], %[a0]\n\t"
#define TMCU_DSP_CHUNK4 TMCU_DSP_W TMCU_DSP_X("a1", "8") TMCU_DSP_X("a2", "16") TMCU_DSP_X("a3", "24") TMCU_DSP_X0("32")
#define TMCU_DSP_CHUNK2 TMCU_DSP_W TMCU_DSP_X("a1", "8") TMCU_DSP_X0("16")
// Two chunks per iteration, the first one alone when full is odd.
#define TMCU_DSP_LOOP(chunk)      \
  "tst %[full], #1\n\t"           \
  "beq 3f\n\t" chunk             \
  "3:\n\t"                        \
  "cmp %[w], %[end]\n\t"          \
  "beq 2f\n"                      \
  "1:\n\t" chunk chunk           \
  "cmp %[w], %[end]\n\t"          \
  "bne 1b\n"                      \
  "2:\n"

// a[i] = sum_k x_i[k] * w[k] over the G interleaved expanded patches at x:
// full whole chunks, then the tail chunk when K % 4 != 0.
template <int G>
[[gnu::always_inline]] inline void dots(const int32_t* x, const int8_t* w, int32_t full, bool has_tail, int32_t tail,
                                        int32_t (&a)[G]) {
  static_assert(G == 2 || G == 4, "4 or 2 pixels");
  int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int32_t we, wo, t0, t1;
  const int8_t* const end = w + 4 * full;
  if (G == 4) {
    __asm__ volatile(TMCU_DSP_LOOP(TMCU_DSP_CHUNK4)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "+r"(x), [w] "+r"(w),
                       [we] "=&r"(we), [wo] "=&r"(wo), [t0] "=&r"(t0), [t1] "=&r"(t1)
                     : [end] "r"(end), [full] "r"(full)
                     : "memory", "cc");
  } else {
    __asm__ volatile(TMCU_DSP_LOOP(TMCU_DSP_CHUNK2)
                     : [a0] "+r"(a0), [a1] "+r"(a1), [x] "+r"(x), [w] "+r"(w), [we] "=&r"(we), [wo] "=&r"(wo),
                       [t0] "=&r"(t0), [t1] "=&r"(t1)
                     : [end] "r"(end), [full] "r"(full)
                     : "memory", "cc");
  }
  if (has_tail) {
    we = __sxtb16(tail);
    wo = sxtb16_ror8(tail);
    a0 = __smlad(x[0], we, a0);
    a0 = __smlad(x[1], wo, a0);
    a1 = __smlad(x[2], we, a1);
    a1 = __smlad(x[3], wo, a1);
    if (G == 4) {
      a2 = __smlad(x[4], we, a2);
      a2 = __smlad(x[5], wo, a2);
      a3 = __smlad(x[6], we, a3);
      a3 = __smlad(x[7], wo, a3);
    }
  }
  a[0] = a0;
  a[1] = a1;
  if (G == 4) {
    a[G - 2] = a2;
    a[G - 1] = a3;
  }
}

#undef TMCU_DSP_W
#undef TMCU_DSP_X
#undef TMCU_DSP_X0
#undef TMCU_DSP_CHUNK4
#undef TMCU_DSP_CHUNK2
#undef TMCU_DSP_LOOP

template <int G>
[[gnu::noinline]] void run(const Conv& cv, int8_t* buf, int8_t* linear) {
  const int32_t K = cv.K, out_c = cv.out_shape.c;
  const int32_t full = K >> 2;
  const bool has_tail = (K & 3) != 0;
  const int32_t chunks = full + (has_tail ? 1 : 0);
  const int32_t stride = 2 * G;  // words
  const QuantConvParams& p = *cv.p;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const int32_t off2 = static_cast<int32_t>((static_cast<uint32_t>(p.input_offset) & 0xFFFFu) * 0x00010001u);
  const bool whole_int8 = p.act_min == -128 && p.act_max == 127;
  const int32_t pixels = cv.out_shape.n * cv.out_shape.h * cv.out_shape.w;
  int32_t* const xq = reinterpret_cast<int32_t*>(buf);
  // The slots of absent pixels (their outputs are not stored) are zeroed,
  // never indeterminate; the linear patch's bytes beyond K hold the pad
  // (0 once expanded).
  std::memset(buf, 0, static_cast<size_t>(chunks * stride * 4));
  const LinearPatch lin{linear};
  lin.fill(K, cv.pad, chunks * 4 - K);
  // Without a tail, a 1x1 patch is expanded straight from the input.
  const bool in_place = cv.direct && !has_tail;
  PixelWalk at{cv.out_shape, p.stride_h, p.stride_w, p.pad_top, p.pad_left};
  const Shape4 s = cv.in_shape;
  for (int32_t q = 0; q < pixels; q += G) {
    const int32_t np = pixels - q < G ? pixels - q : G;
    for (int32_t i = 0; i < np; ++i, at.next()) {
      const int8_t* src = linear;
      if (in_place) {
        src = cv.in + ((at.n * s.h + at.oy * p.stride_h) * s.w + at.ox * p.stride_w) * s.c;
      } else {
        gather_pixel(cv, at, lin);
      }
      expand(xq + 2 * i, stride, src, chunks, off2);
    }
    int8_t* o = cv.out + q * out_c;
    const int8_t* w = cv.w;
    if (np < G) {  // the last pixels: requantize()
      for (int32_t oc = 0; oc < out_c; ++oc, w += K, ++o) {
        int32_t a[G];
        dots<G>(xq, w, full, has_tail, has_tail ? tail_word(w, K) : 0, a);
        const int32_t b = cv.bias ? cv.bias[oc] : 0;
        for (int32_t i = 0; i < np; ++i) o[i * out_c] = finish(wrap_add(a[i], b), cv.multiplier[oc], cv.shift[oc], quant);
      }
      continue;
    }
    for (int32_t oc = 0; oc < out_c; ++oc, w += K, ++o) {
      int32_t a[G];
      dots<G>(xq, w, full, has_tail, has_tail ? tail_word(w, K) : 0, a);
      const int32_t b = cv.bias ? cv.bias[oc] : 0;
      const int32_t m = cv.multiplier[oc], sh = cv.shift[oc];
      if (sh > 0) {
        for (int32_t i = 0; i < np; ++i) o[i * out_c] = finish(wrap_add(a[i], b), m, sh, quant);
      } else if (whole_int8) {
        // The clamp is int8's own range: the offset added saturating
        // (QADD), then SSAT to 8 bits, is quant().
        const int32_t e = -sh;
        int8_t* oi = o;
#pragma GCC unroll 4
        for (int i = 0; i < G; ++i, oi += out_c) {
          *oi = static_cast<int8_t>(__ssat(__qadd(requant_right(wrap_add(a[i], b), m, sh, e, e - 1), quant.offset), 8));
        }
      } else {
        const int32_t e = -sh;
        int8_t* oi = o;
#pragma GCC unroll 4
        for (int i = 0; i < G; ++i, oi += out_c) *oi = quant(requant_right(wrap_add(a[i], b), m, sh, e, e - 1));
      }
    }
  }
}

#endif

}  // namespace

[[gnu::noinline]] inline bool conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                                        int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
                                        const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p) {
  const int32_t K = kernel_h * kernel_w * in_shape.c;
  // In place: each output pixel reads input pixel (oy * stride, ox * stride).
  const bool direct = kernel_h == 1 && kernel_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
                      (out_shape.h - 1) * p.stride_h < in_shape.h && (out_shape.w - 1) * p.stride_w < in_shape.w;
  // The pad value -input_offset must be an int8 (a zero point).
  if (K > kMaxPatch || p.input_offset < -127 || p.input_offset > 128) return false;
  const Conv cv{in, in_shape, out_shape, w, kernel_h, kernel_w, K, bias, multiplier, shift, out, &p, direct,
                static_cast<int8_t>(-p.input_offset)};
  alignas(8) int8_t buf[kPatchBuffer];
#if TMCU_S8_MVE
  // Every channel requantized by requant_v (the compiler's multipliers
  // always are); others take the generic kernel.
  if (!requant_vector_ok(multiplier, shift, out_shape.c)) return false;
  run(cv, buf);
#else
  int8_t linear[kMaxPatch + 4];
  // Expanded patches take 2 bytes per tap: 4 pixels up to K = 288.
  if (((K + 3) & ~3) * 2 * 4 <= kPatchBuffer) {
    run<4>(cv, buf, linear);
  } else {
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

#endif  // TORCHMCU_KERNELS_PORTABLE_CONV2D_S8_FAST_H_
