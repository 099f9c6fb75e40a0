// conv2d_s8's fast path on MVE (Cortex-M55): the GEMM of conv/conv2d_s8.h
// (which includes this file, after its shared helpers, and whose comment
// describes the method) with VMLADAVA.S8 over chunks of 16 bytes.
#ifndef TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_MVE_H_
#define TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_MVE_H_

#include <arm_mve.h>

#include <cstddef>
#include <cstring>

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

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

// weight_sum of n (<= 4) rows K apart: the rows' loads interleaved, out[j]
// row j's.
inline void weight_sums(const int8_t* w, int32_t K, int32_t n, mve_pred16_t first, int32_t steps, int32_t* out) {
  if (n < 4) {
    for (int32_t j = 0; j < n; ++j) out[j] = weight_sum(w + j * K, first, steps);
    return;
  }
  const int8_t *w0 = w, *w1 = w + K, *w2 = w + 2 * K, *w3 = w + 3 * K;
  int32_t s0 = vaddvq_s8(vldrbq_z_s8(w0, first)), s1 = vaddvq_s8(vldrbq_z_s8(w1, first));
  int32_t s2 = vaddvq_s8(vldrbq_z_s8(w2, first)), s3 = vaddvq_s8(vldrbq_z_s8(w3, first));
  for (int32_t t = 1; t < steps; ++t) {
    w0 += 16;
    w1 += 16;
    w2 += 16;
    w3 += 16;
    s0 = vaddvaq_s8(s0, vldrbq_s8(w0));
    s1 = vaddvaq_s8(s1, vldrbq_s8(w1));
    s2 = vaddvaq_s8(s2, vldrbq_s8(w2));
    s3 = vaddvaq_s8(s3, vldrbq_s8(w3));
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
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

// The GEMM of one group of 4 pixels against pairs of output channels,
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
  const int32_t* tbl_end;  // 40: tbl after the last pair
  int32_t unused;          // 44
  uint32_t offsets[4];  // 48: the 4 pixels' output offsets (i * out_c)
};
static_assert(offsetof(PairArgs, o) == 32 && offsetof(PairArgs, tbl_end) == 40 && offsetof(PairArgs, offsets) == 48,
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
      "ldr r0, [%[a], #40]\n\t"
      "cmp r6, r0\n\t"
      "bne 5b\n"
      : [x] "=&r"(x), [w0] "=&r"(w0), [w1] "=&r"(w1), [t] "=&r"(t), [n] "=&r"(n)
      : [a] "r"(a)
      : "r0", "r2", "r4", "r6", "r8", "r10", "r12", "lr", "d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8",
        "d9", "d10", "d11", "d12", "d13", "d14", "d15", "p0", "memory", "cc");
}

#undef TMCU_MVE_REQUANT

// requant_v (fast.h) of 4 channels, its hi - (hi < 0 and s < 0) as
// hi + (hi >> 31 & s >> 31): no predicate to build from two comparisons.
[[gnu::always_inline]] inline int32x4_t requant4(int32x4_t acc, int32x4_t m, int32x4_t s) {
  const int32x4_t zero = vdupq_n_s32(0);
  const int32x4_t hi = vqrdmulhq_s32(vqshlq_s32(acc, vmaxq_s32(s, zero)), m);
  const int32x4_t t = vaddq_s32(hi, vandq_s32(vshrq_n_s32(hi, 31), vshrq_n_s32(s, 31)));
  return vrshlq_s32(t, vminq_s32(s, zero));
}

// requant_v (fast.h) of one channel's 4 pixels (scalar multiplier, shift
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

[[gnu::noinline]] void run(const Conv& cv, int8_t* buf, int32_t* tbl) {
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
  // Per channel of a chunk its folded bias, multiplier and shift (pairs()
  // loads the three with one LDM); a smaller chunk would gather the
  // patches again for each.
  constexpr int32_t kChunk = kOcChunk;  // tbl: 3 * kChunk words of the scratch
  const uint32x4_t every3 = vmulq_n_u32(vidupq_n_u32(0, 1), 3);
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
  for (int32_t oc0 = 0; oc0 < out_c; oc0 += kChunk) {
    const int32_t ocn = out_c - oc0 < kChunk ? out_c - oc0 : kChunk;
    const int32_t* const bc = cv.bias ? cv.bias + oc0 : nullptr;
    const int32_t* const mc = cv.multiplier + oc0;
    const int32_t* const sc = cv.shift + oc0;
    const int8_t* const wl = cv.w + oc0 * K - lead;
    // Folded biases of channels [j, j + n) from their weight sums.
    auto fold = [&](int32_t j, int32_t n, const int32_t* sums) {
      for (int32_t t = 0; t < n; ++t) {
        const int32_t sum = sums ? sums[t] : weight_sum(wl + (j + t) * K, first, steps);
        tbl[3 * (j + t)] = wrap_add(bc ? bc[j + t] : 0, static_cast<int32_t>(in_off * static_cast<uint32_t>(sum)));
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
          const int32x4_t r = requant4(vaddq_s32(v, vldrwq_gather_shifted_offset_z_s32(tbl + 3 * j, every3, pc)),
                                       vldrwq_z_s32(mc + j, pc), vldrwq_z_s32(sc + j, pc));
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
        args.tbl_end = tbl + 6 * (ocn >> 1);
        pairs(&args);
      }
      if (ocn & 1) {
        const int32_t j = ocn - 1;
        requant_store(dots1(buf, wl + j * K, first, steps), tbl[3 * j], mc[j], sc[j], o + j, offsets, 4, quant);
      }
    }
  }
}

// The K-tiled GEMM (run_wide) of pairs of output channels over one K chunk
// of 4 interleaved patches: the 8 accumulators loaded from acc (channel j's
// 4 pixels, then channel j + 1's), every step a VMLADAVA (the first one's
// weight loads predicated by the chunk's lead lanes, which load as 0), the
// sums stored back; pairs() without the requantization.
struct AccArgs {
  uint32_t n_first;   // 0: (steps - 1) << 16 | the first step's predicate
  const int8_t* buf;  // 4: the 4 interleaved patch chunks
  const int8_t* w;    // 8: the first pair's first row at the chunk, minus lead
  int32_t K;          // 12: the weight rows' stride
  int32_t* acc;       // 16: the first pair's 8 accumulators
  int32_t* acc_end;   // 20: acc after the last pair
  int32_t back;       // 24: steps * 16 - K: a row's end to the next row's chunk start
};
static_assert(offsetof(AccArgs, acc_end) == 20 && offsetof(AccArgs, back) == 24, "the asm's offsets");

#define TMCU_MVE_ACC_STEP                  \
  "vldrb.8 q2, [%[x], #16]\n\t"            \
  "vmladava.s8 r2, q2, q0\n\t"             \
  "vmladava.s8 r10, q2, q1\n\t"            \
  "vldrb.8 q2, [%[x], #32]\n\t"            \
  "vmladava.s8 r4, q2, q0\n\t"             \
  "vmladava.s8 r12, q2, q1\n\t"            \
  "vldrb.8 q2, [%[x], #48]\n\t"            \
  "vmladava.s8 r6, q2, q0\n\t"             \
  "vmladava.s8 lr, q2, q1\n\t"             \
  "vldrb.8 q2, [%[x]], #64\n\t"            \
  "vmladava.s8 r0, q2, q0\n\t"             \
  "vmladava.s8 r8, q2, q1\n\t"

[[gnu::noinline]] void pairs_acc(AccArgs* a) {
  const int8_t *x, *w0, *w1;
  int32_t* t;
  uint32_t n;
  __asm__ volatile(
      "ldr %[w1], [%[a], #8]\n\t"
      "ldr %[t], [%[a], #16]\n"
      "5:\n\t"
      "ldr %[x], [%[a], #12]\n\t"
      "mov %[w0], %[w1]\n\t"
      "add %[w1], %[w1], %[x]\n\t"
      "ldr %[x], [%[a], #4]\n\t"
      "ldr %[n], [%[a], #0]\n\t"
      "ldrd r0, r2, [%[t]]\n\t"
      "ldrd r4, r6, [%[t], #8]\n\t"
      "ldrd r8, r10, [%[t], #16]\n\t"
      "ldrd r12, lr, [%[t], #24]\n\t"
      "vmsr p0, %[n]\n\t"
      "vpstt\n\t"
      "vldrbt.8 q0, [%[w0]], #16\n\t"
      "vldrbt.8 q1, [%[w1]], #16\n\t"
      TMCU_MVE_ACC_STEP
      "lsrs %[n], %[n], #16\n\t"
      "beq 2f\n"
      "1:\n\t"
      "vldrb.8 q0, [%[w0]], #16\n\t"
      "vldrb.8 q1, [%[w1]], #16\n\t"
      TMCU_MVE_ACC_STEP
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n"
      "2:\n\t"
      "strd r0, r2, [%[t]]\n\t"
      "strd r4, r6, [%[t], #8]\n\t"
      "strd r8, r10, [%[t], #16]\n\t"
      "strd r12, lr, [%[t], #24]\n\t"
      "adds %[t], %[t], #32\n\t"
      "ldr r0, [%[a], #24]\n\t"
      "sub %[w1], %[w1], r0\n\t"
      "ldr r0, [%[a], #20]\n\t"
      "cmp %[t], r0\n\t"
      "bne 5b\n"
      : [x] "=&r"(x), [w0] "=&r"(w0), [w1] "=&r"(w1), [t] "=&r"(t), [n] "=&r"(n)
      : [a] "r"(a)
      : "r0", "r2", "r4", "r6", "r8", "r10", "r12", "lr", "d0", "d1", "d2", "d3", "d4", "d5", "p0", "memory",
        "cc");
}

#undef TMCU_MVE_ACC_STEP

// Output channels per block of run_wide: their 4 pixels' accumulators and
// folded biases in the scratch after the patches (640 bytes).
constexpr int32_t kWideOc = 32;

// run_wide's chunk of K: at most kMaxPatch, a multiple of 16.
constexpr int32_t kWideK(int32_t K) {
  return ((K + (K + kMaxPatch - 1) / kMaxPatch - 1) / ((K + kMaxPatch - 1) / kMaxPatch) + 15) & ~15;
}

// conv2d_s8 for patches of any K (run() takes K <= kMaxPatch): per block of
// kWideOc output channels and group of 4 pixels, the accumulators start at
// the folded biases and take the patches' K chunks (of at most kMaxPatch,
// multiples of 16 but the last) one after the other, each chunk gathered
// into buf as run()'s patches (its own lead bytes in front) and multiplied
// by the rows' same chunk with pairs_acc (dots1 for an odd last channel);
// then requantized as run()'s. The patches are gathered again for each
// block: K bytes per pixel against kWideOc * K MACs.
[[gnu::noinline]] void run_wide(const Conv& cv, int8_t* buf, int32_t* words) {
  const int32_t K = cv.K, out_c = cv.out_shape.c;
  const int32_t kc = kWideK(K);  // <= kMaxPatch, a multiple of 16
  // The whole rows' lead, for the weight sums.
  const int32_t steps_k = (K + 15) >> 4;
  const int32_t lead_k = steps_k * 16 - K;
  const mve_pred16_t first_k = static_cast<mve_pred16_t>(~vctp8q(static_cast<uint32_t>(lead_k)));
  const QuantConvParams& p = *cv.p;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<uint32_t>(out_c));
  const int32_t pixels = cv.out_shape.n * cv.out_shape.h * cv.out_shape.w;
  // Never indeterminate: the slots of absent pixels (their outputs are not
  // stored) and the lead bytes (multiplied by weights predicated to 0).
  std::memset(buf, 0, static_cast<size_t>(kc * 4));
  const uint32_t in_off = static_cast<uint32_t>(p.input_offset);
  int32_t* const acc = words;              // 4 * kWideOc, 16-byte aligned
  int32_t* const folded = words + 4 * kWideOc;  // kWideOc
  AccArgs args;
  args.buf = buf;
  args.K = K;
  args.acc = acc;
  for (int32_t oc0 = 0; oc0 < out_c; oc0 += kWideOc) {
    const int32_t ocn = out_c - oc0 < kWideOc ? out_c - oc0 : kWideOc;
    const int8_t* const wb = cv.w + oc0 * K;
    for (int32_t j0 = 0; j0 < ocn; j0 += 4) {
      const int32_t jn = ocn - j0 < 4 ? ocn - j0 : 4;
      int32_t s4[4];
      weight_sums(wb + j0 * K - lead_k, K, jn, first_k, steps_k, s4);
      for (int32_t j = j0; j < j0 + jn; ++j) {
        folded[j] = wrap_add(cv.bias ? cv.bias[oc0 + j] : 0,
                             static_cast<int32_t>(in_off * static_cast<uint32_t>(s4[j - j0])));
      }
    }
    args.acc_end = acc + 4 * (ocn & ~1);
    PixelWalk at{cv.out_shape, p.stride_h, p.stride_w, p.pad_top, p.pad_left};
    for (int32_t q = 0; q < pixels; q += 4) {
      const int32_t np = pixels - q < 4 ? pixels - q : 4;
      for (int32_t j = 0; j < ocn; ++j) vst1q_s32(acc + 4 * j, vdupq_n_s32(folded[j]));
      const PixelWalk group = at;
      for (int32_t k0 = 0; k0 < K; k0 += kc) {
        const int32_t kn = K - k0 < kc ? K - k0 : kc;
        const int32_t steps = (kn + 15) >> 4;
        const int32_t lead = steps * 16 - kn;
        const mve_pred16_t first = static_cast<mve_pred16_t>(~vctp8q(static_cast<uint32_t>(lead)));
        at = group;
        for (int32_t i = 0; i < np; ++i, at.next()) {
          const KWindow<MveSlot> win{MveSlot{buf + 16 * i, 64, lead}, k0, k0 + kn};
          gather_pixel(cv, at, win);
        }
        const int8_t* const wl = wb + k0 - lead;
        if (ocn >= 2) {
          args.n_first = (static_cast<uint32_t>(steps - 1) << 16) | first;
          args.w = wl;
          args.back = steps * 16 - K;
          pairs_acc(&args);
        }
        if (ocn & 1) {
          const int32_t j = ocn - 1;
          int32_t* const aj = acc + 4 * j;
          vst1q_s32(aj, vaddq_s32(vld1q_s32(aj), dots1(buf, wl + j * K, first, steps)));
        }
      }
      int8_t* const o = cv.out + q * out_c + oc0;
      for (int32_t j = 0; j < ocn; ++j) {
        requant_store(vld1q_s32(acc + 4 * j), 0, cv.multiplier[oc0 + j], cv.shift[oc0 + j], o + j, offsets, np,
                      quant);
      }
    }
  }
}

}  // namespace
}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_FAST_CONV_CONV2D_S8_MVE_H_
