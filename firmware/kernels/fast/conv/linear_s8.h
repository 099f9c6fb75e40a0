// Fast path of linear_s8 (see fast.h), included by portable/conv/linear_s8.cc only.
//
// The compiler has folded the input offset into the bias (the kernel sums),
// so each output is bias[o] + the plain int8 dot product of the input row
// with weight row o. Several weight rows go through the input row
// together, so each input load feeds several multiply-accumulates:
// - MVE: 4 rows, 16 int8 lanes per VMLADAVA (one instruction, 16 MACs into
//   a scalar accumulator; 10 instructions per 64 MACs), the K % 16 tail
//   predicated; the 4 accumulators of a block requantized as one vector
//   (requant_v's arithmetic, where that is requantize(): checked per call).
// - DSP: the input row expanded once into SXTB16 halfword pairs (even and
//   odd bytes of each 4-byte group, on the stack); 2 rows at a time when
//   the rows are 4-byte aligned: 8 weights per LDRD, 8 input pairs per
//   LDM, SXTB16 and SMLAD (2 MACs) by hand-scheduled assembly (1.22
//   instructions per MAC); else 4 rows of 32-bit loads in C.
//
// The sums wrap in 32 bits (the instructions wrap): the exact accumulator
// fits in int32 (the glue's requant_in_range), so the wrapped sum of the
// same terms in another order is that value.
#ifndef TORCHMCU_KERNELS_FAST_CONV_LINEAR_S8_H_
#define TORCHMCU_KERNELS_FAST_CONV_LINEAR_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include <cstring>

#include "kernels/portable/common/requantize.h"
#include "kernels/portable/conv/conv.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

// Compiled for speed whatever the image's -O (see conv/conv2d_s8.h).
#pragma GCC push_options
#if !TMCU_FAST_OS
#pragma GCC optimize("O2", "no-ivopts")
#endif

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

inline int8_t fc_finish(int32_t acc, int32_t m, int32_t s, const s8::OutQuant& quant) {
  return quant(s8::requantize(acc, m, s));
}

#if TMCU_S8_MVE

// Weight rows per block: 4 scalar accumulators (even registers for
// VMLADAVA), 4 row pointers and the input pointer fit the core registers.
constexpr int kFcRows = 4;

// Trip counts of the dot products over one row of K inputs: n16 full
// vectors, then a predicated tail of K % 16 lanes.
struct FcSteps {
  int32_t n16;
  mve_pred16_t tail;
  bool has_tail;
  explicit FcSteps(int32_t K)
      : n16(K >> 4), tail(vctp8q(static_cast<uint32_t>(K & 15))), has_tail((K & 15) != 0) {}
};

// Returns a (lanes j < NO) + x . w_j for NO rows K apart.
template <int NO>
[[gnu::always_inline]] inline int32x4_t fc_dots(const int8_t* x, const int8_t* w, int32_t K, const FcSteps& st,
                                                int32x4_t a) {
  int32_t acc[NO];
  const int8_t* wp[NO];
#pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) {
    acc[j] = 0;
    wp[j] = w + j * K;
  }
  for (int32_t i = st.n16; i > 0; --i) {
    const int8x16_t xv = vldrbq_s8(x);
    x += 16;
#pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) {
      acc[j] = vmladavaq_s8(acc[j], xv, vldrbq_s8(wp[j]));
      wp[j] += 16;
    }
  }
  if (st.has_tail) {
    const int8x16_t xv = vldrbq_z_s8(x, st.tail);
#pragma GCC unroll 4
    for (int j = 0; j < NO; ++j) acc[j] = vmladavaq_s8(acc[j], xv, vldrbq_z_s8(wp[j], st.tail));
  }
#pragma GCC unroll 4
  for (int j = 0; j < NO; ++j) a = vsetq_lane_s32(vgetq_lane_s32(a, j) + acc[j], a, j);
  return a;
}

// requantize() of 4 lanes as fast.h's requant_v, with the shift's parts
// given: up = max(s, 0), down = min(s, 0), neg = -1 where s < 0, else 0.
[[gnu::always_inline]] inline int32x4_t fc_requant(int32x4_t acc, int32x4_t m, int32x4_t up, int32x4_t down,
                                                   int32x4_t neg) {
  const int32x4_t hi = vqrdmulhq_s32(vqshlq_s32(acc, up), m);
  return vrshlq_s32(vaddq_s32(hi, vandq_s32(vshrq_n_s32(hi, 31), neg)), down);
}

#else  // DSP

// Bytes 1 and 3 of v sign-extended to halfwords (see conv/conv2d_s8.h).
[[gnu::always_inline]] inline int16x2_t fc_sxtb16_ror8(int32_t v) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

[[gnu::always_inline]] inline int32_t fc_load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One SMLAD step of a row: 4 weights against the input's expanded pairs.
[[gnu::always_inline]] inline int32_t fc_mac4(int32_t acc, int16x2_t xe, int16x2_t xo, const int8_t*& wp) {
  const int32_t u = fc_load32(wp);
  wp += 4;
  acc = __smlad(xe, __sxtb16(u), acc);
  return __smlad(xo, fc_sxtb16_ror8(u), acc);
}

[[gnu::always_inline]] inline int32_t fc_mac4_at(int32_t acc, int16x2_t xe, int16x2_t xo, const int8_t* wp) {
  const int32_t u = fc_load32(wp);
  acc = __smlad(xe, __sxtb16(u), acc);
  return __smlad(xo, fc_sxtb16_ror8(u), acc);
}

// The input row's 4-byte groups as SXTB16 pairs: xp[2i] = bytes 0 and 2 of
// group i, xp[2i + 1] = bytes 1 and 3 (the K % 4 tail left out).
inline void fc_expand(const int8_t* x, int32_t K, int16x2_t* xp) {
  for (const int8_t* const end = x + (K & ~3); x != end; x += 4, xp += 2) {
    const int32_t v = fc_load32(x);
    xp[0] = __sxtb16(v);
    xp[1] = fc_sxtb16_ror8(v);
  }
}

[[gnu::always_inline]] inline int32_t fc_wrap_mac(int32_t acc, int32_t x, int32_t w) {
  return static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(x * w));
}

// acc[j] += x . w_j over K inputs for 4 rows stride apart at any
// alignment, x given raw and as its expanded pairs xp: 4 int8s per step (row
// j's word at wq + j * stride: one pointer for the 4 rows), the K % 4 tail.
[[gnu::always_inline]] inline void fc_dots4(const int8_t* x, const int16x2_t* xp, const int8_t* w, int32_t stride,
                                            int32_t K, int32_t* acc) {
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  const int32_t s3 = 3 * stride;
  const int8_t* wq = w;
  for (const int16x2_t* const end = xp + 2 * (K >> 2); xp != end; xp += 2) {
    const int16x2_t xe = xp[0], xo = xp[1];
    a1 = fc_mac4_at(a1, xe, xo, wq + stride);
    a2 = fc_mac4_at(a2, xe, xo, wq + 2 * stride);
    a3 = fc_mac4_at(a3, xe, xo, wq + s3);
    a0 = fc_mac4(a0, xe, xo, wq);
  }
  const int8_t *w1 = wq + stride, *w2 = wq + 2 * stride, *w3 = wq + s3;
  for (int32_t k = 0; k < (K & 3); ++k) {
    const int32_t xv = x[(K & ~3) + k];
    a0 = fc_wrap_mac(a0, xv, wq[k]);
    a1 = fc_wrap_mac(a1, xv, w1[k]);
    a2 = fc_wrap_mac(a2, xv, w2[k]);
    a3 = fc_wrap_mac(a3, xv, w3[k]);
  }
  acc[0] = a0;
  acc[1] = a1;
  acc[2] = a2;
  acc[3] = a3;
}

// 8 inputs of 2 rows: each row's 8 bytes by one LDRD, the 8 expanded input
// pairs by one LDM (r8-r11, the ascending list LDM needs).
#define TMCU_FC_STEP8 \
  "ldmia  %[xp]!, {r8, r9, r10, r11}\n\t" \
  "ldrd   %[lo], %[hi], [%[w0]], #8\n\t" \
  "sxtb16 %[u], %[lo]\n\t" \
  "smlad  %[a0], r8, %[u], %[a0]\n\t" \
  "sxtb16 %[lo], %[lo], ror #8\n\t" \
  "smlad  %[a0], r9, %[lo], %[a0]\n\t" \
  "sxtb16 %[u], %[hi]\n\t" \
  "smlad  %[a0], r10, %[u], %[a0]\n\t" \
  "sxtb16 %[hi], %[hi], ror #8\n\t" \
  "smlad  %[a0], r11, %[hi], %[a0]\n\t" \
  "ldrd   %[lo], %[hi], [%[w1]], #8\n\t" \
  "sxtb16 %[u], %[lo]\n\t" \
  "smlad  %[a1], r8, %[u], %[a1]\n\t" \
  "sxtb16 %[lo], %[lo], ror #8\n\t" \
  "smlad  %[a1], r9, %[lo], %[a1]\n\t" \
  "sxtb16 %[u], %[hi]\n\t" \
  "smlad  %[a1], r10, %[u], %[a1]\n\t" \
  "sxtb16 %[hi], %[hi], ror #8\n\t" \
  "smlad  %[a1], r11, %[hi], %[a1]\n\t"

// acc[j] += x . w_j over K inputs (a multiple of 4) for 2 rows stride apart,
// both 4-byte aligned: TMCU_FC_STEP8 4 times per loop (78 instructions per
// 64 MACs), then once per 8 inputs left, the K % 8 rest in C.
[[gnu::always_inline]] inline void fc_dots2_aligned(const int16x2_t* xp, const int8_t* w, int32_t stride, int32_t K,
                                                    int32_t* acc) {
  int32_t a0 = acc[0], a1 = acc[1];
  const int8_t* w0 = w;
  const int8_t* w1 = w + stride;
  int32_t lo, hi, u;
  const int16x2_t* const xp_end = xp + 2 * ((K >> 5) << 3);
  if (xp != xp_end) {
    __asm__ volatile("1:\n\t" TMCU_FC_STEP8 TMCU_FC_STEP8 TMCU_FC_STEP8 TMCU_FC_STEP8
                     "cmp    %[xp], %[end]\n\t"
                     "bne    1b"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [xp] "+r"(xp), [w0] "+r"(w0), [w1] "+r"(w1), [lo] "=&r"(lo),
                       [hi] "=&r"(hi), [u] "=&r"(u)
                     : [end] "r"(xp_end)
                     : "r8", "r9", "r10", "r11", "cc", "memory");
  }
  for (int32_t k = K & 24; k > 0; k -= 8) {
    __asm__ volatile(TMCU_FC_STEP8
                     : [a0] "+r"(a0), [a1] "+r"(a1), [xp] "+r"(xp), [w0] "+r"(w0), [w1] "+r"(w1), [lo] "=&r"(lo),
                       [hi] "=&r"(hi), [u] "=&r"(u)
                     :
                     : "r8", "r9", "r10", "r11", "memory");
  }
  if (K & 4) {
    const int16x2_t xe = xp[0], xo = xp[1];
    a0 = fc_mac4(a0, xe, xo, w0);
    a1 = fc_mac4(a1, xe, xo, w1);
  }
  acc[0] = a0;
  acc[1] = a1;
}
#undef TMCU_FC_STEP8

// acc += x . w over K inputs, one row.
[[gnu::always_inline]] inline void fc_dots1(const int8_t* x, const int16x2_t* xp, const int8_t* w, int32_t K,
                                            int32_t* acc) {
  int32_t a = *acc;
  for (int32_t k = K >> 2; k > 0; --k, xp += 2) a = fc_mac4(a, xp[0], xp[1], w);
  for (int32_t k = 0; k < (K & 3); ++k) a = fc_wrap_mac(a, x[(K & ~3) + k], w[k]);
  *acc = a;
}

// requantize() and the output clamp of one accumulator; the common case
// (shift < 0) inline: hi as common/requantize.h, then its rounding shift by e =
// -shift, half away from zero, as ((t >> (e - 1)) + 1) >> 1 with t = hi -
// (hi < 0) (floor((t + 2^(e-1)) / 2^e), which cannot wrap: hi <= 2^31 - 2).
[[gnu::always_inline]] inline int8_t fc_out(int32_t acc, int32_t m, int32_t s, const s8::OutQuant& quant) {
  if (s >= 0) return fc_finish(acc, m, s, quant);
  const int32_t hi = static_cast<int32_t>((static_cast<int64_t>(acc) * m + (int64_t{1} << 30)) >> 31);
  const int32_t t = hi - static_cast<int32_t>(static_cast<uint32_t>(hi) >> 31);
  return quant(((t >> (~s)) + 1) >> 1);
}

#endif

}  // namespace

#if TMCU_S8_MVE

// True when requant_v is requantize() for every channel of [0, n): as
// fast.h's requant_vector_ok, 4 channels at a time (no lane with s > 0
// and m - 1 < 511 unsigned).
inline bool fc_vector_ok(const int32_t* multiplier, const int32_t* shift, int32_t n) {
  uint32_t bad = 0;
  int32_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const uint32x4_t up = vreinterpretq_u32_s32(vshrq_n_s32(vnegq_s32(vldrwq_s32(shift + c)), 31));
    const uint32x4_t small = vqsubq_u32(vdupq_n_u32(511), vreinterpretq_u32_s32(vsubq_n_s32(vldrwq_s32(multiplier + c), 1)));
    bad = vmaxvq_u32(bad, vandq_u32(up, small));
  }
  return bad == 0 && requant_vector_ok(multiplier + c, shift + c, n - c);
}

// The blocks of linear_s8 below, per channel or per tensor.
template <bool kPerChannel>
[[gnu::always_inline]] inline void fc_blocks(const int8_t* in, const int8_t* wj, int32_t K, int32_t N,
                                             const FcSteps& st, const int32_t* bias, const int32_t* multiplier,
                                             const int32_t* shift, const s8::OutQuant& quant, int8_t* out) {
  const int32x4_t zero = vdupq_n_s32(0);
  const int32x4_t lo = vdupq_n_s32(quant.lo), hi = vdupq_n_s32(quant.hi);
  const int32_t m0 = multiplier[0], s0 = shift[0];
  const int32_t up0 = s0 > 0 ? s0 : 0, down0 = s0 < 0 ? s0 : 0, neg0 = s0 < 0 ? 1 : 0;
  int32_t o = 0;
  for (; o + kFcRows <= N; o += kFcRows, wj += kFcRows * K) {
    int32x4_t v = fc_dots<kFcRows>(in, wj, K, st, bias ? vldrwq_s32(bias + o) : zero);
    if (kPerChannel) {
      const int32x4_t s = vldrwq_s32(shift + o);
      const int32x4_t h = vqrdmulhq_s32(vqshlq_s32(v, vmaxq_s32(s, zero)), vldrwq_s32(multiplier + o));
      v = vrshlq_s32(vaddq_s32(h, vandq_s32(vshrq_n_s32(h, 31), vshrq_n_s32(s, 31))), vminq_s32(s, zero));
    } else {  // scalar operands: fewer vector registers live
      const int32x4_t h = vqrdmulhq_n_s32(vqshlq_r_s32(v, up0), m0);
      v = vrshlq_n_s32(vmlaq_n_s32(h, vshrq_n_s32(h, 31), neg0), down0);
    }
    vstrbq_s32(out + o, vaddq_n_s32(vminq_s32(vmaxq_s32(v, lo), hi), quant.offset));
  }
  for (; o < N; ++o, wj += K) {
    const int32x4_t acc = fc_dots<1>(in, wj, K, st, vdupq_n_s32(bias ? bias[o] : 0));
    const int32_t c = kPerChannel ? o : 0;
    out[o] = fc_finish(vgetq_lane_s32(acc, 0), multiplier[c], shift[c], quant);
  }
}

// linear_s8 of the portable tier (kernels/portable/<family>/): blocks of kFcRows weight rows requantized as
// a vector, then the remaining rows one at a time; when requant_v cannot
// take the multipliers (fast.h), every output as the generic kernel.
[[gnu::noinline]] inline bool linear_s8(const int8_t* in, const int8_t* w, const int32_t* bias,
                                        const int32_t* multiplier, const int32_t* shift, int32_t num_requant,
                                        int8_t* out, int32_t batch, int32_t in_features, int32_t out_features,
                                        int32_t output_offset, int32_t act_min, int32_t act_max) {
  if (!fc_vector_ok(multiplier, shift, num_requant)) return false;
  const int32_t K = in_features, N = out_features;
  if (num_requant == N ? !TMCU_FAST_FC_PER_CHANNEL : !TMCU_FAST_FC_PER_TENSOR) return false;  // fast.h
  const s8::OutQuant quant(output_offset, act_min, act_max);
  const FcSteps st(K);
  for (int32_t b = 0; b < batch; ++b, in += K, out += N) {
    if (TMCU_FAST_FC_PER_CHANNEL && (num_requant == N || !TMCU_FAST_FC_PER_TENSOR)) {
      fc_blocks<true>(in, w, K, N, st, bias, multiplier, shift, quant, out);
    } else {
      fc_blocks<false>(in, w, K, N, st, bias, multiplier, shift, quant, out);
    }
  }
  return true;
}

#else  // DSP

// Inputs expanded at a time (a multiple of 32; 2 bytes of stack each) and
// output rows accumulated at a time when the row is longer: each chunk of
// it is expanded once per group of rows.
constexpr int32_t kFcChunk = 320;
constexpr int32_t kFcGroup = 64;

// acc[j] += the dot products of rows [0, n) of w (K apart) with the chunk
// of kn inputs x / xp, blocks of 2 rows (aligned rows) or 4 (any), then
// the remaining rows one at a time.
[[gnu::always_inline]] inline void fc_rows(const int8_t* x, const int16x2_t* xp, const int8_t* w, int32_t K,
                                           int32_t kn, int32_t n, bool aligned, int32_t* acc) {
  int32_t j = 0;
  if (aligned) {
    for (; j + 2 <= n; j += 2, w += 2 * K) fc_dots2_aligned(xp, w, K, kn, acc + j);
  } else {
    for (; j + 4 <= n; j += 4, w += 4 * K) fc_dots4(x, xp, w, K, kn, acc + j);
  }
  for (; j < n; ++j, w += K) fc_dots1(x, xp, w, kn, acc + j);
}

// out[0..n) (n = 1 or 2 rows K apart) without the expansion, for so few
// rows that expanding the input would cost more than it saves: 4 inputs
// per step, their pairs shared by the rows, the K % 4 tail in C.
[[gnu::always_inline]] inline void fc_few_rows(const int8_t* x, const int8_t* w, int32_t K, int32_t n,
                                               const int32_t* bias, const int32_t* multiplier,
                                               const int32_t* shift, int32_t step, const s8::OutQuant& quant,
                                               int8_t* out) {
  int32_t a0 = bias ? bias[0] : 0, a1 = n > 1 && bias ? bias[1] : 0;
  const int8_t* w0 = w;
  const int8_t* w1 = n > 1 ? w + K : w;  // one row: the second sum is dropped
  const int8_t* const end = x + (K & ~3);
  for (; x != end; x += 4) {
    const int32_t v = fc_load32(x);
    const int16x2_t xe = __sxtb16(v), xo = fc_sxtb16_ror8(v);
    a0 = fc_mac4(a0, xe, xo, w0);
    a1 = fc_mac4(a1, xe, xo, w1);
  }
  for (int32_t k = 0; k < (K & 3); ++k) {
    a0 = fc_wrap_mac(a0, x[k], w0[k]);
    a1 = fc_wrap_mac(a1, x[k], w1[k]);
  }
  out[0] = fc_out(a0, multiplier[0], shift[0], quant);
  if (n > 1) out[1] = fc_out(a1, multiplier[step], shift[step], quant);
}

// linear_s8 of the portable tier (kernels/portable/<family>/): the input row expanded once (in chunks when
// longer than kFcChunk), the rows as fc_rows, then each output requantized.
[[gnu::noinline]] inline bool linear_s8(const int8_t* in, const int8_t* w, const int32_t* bias,
                                        const int32_t* multiplier, const int32_t* shift, int32_t num_requant,
                                        int8_t* out, int32_t batch, int32_t in_features, int32_t out_features,
                                        int32_t output_offset, int32_t act_min, int32_t act_max) {
  const int32_t K = in_features, N = out_features;
  const s8::OutQuant quant(output_offset, act_min, act_max);
  const int32_t step = num_requant == N ? 1 : 0;  // per channel or per tensor
  const bool aligned = (reinterpret_cast<uintptr_t>(w) & 3) == 0 && (K & 3) == 0;
  if (N <= 2 ? !TMCU_FAST_FC_FEW : K > kFcChunk && !TMCU_FAST_FC_CHUNKED) return false;  // fast.h
  int16x2_t xp[kFcChunk / 2];
  int32_t acc[kFcGroup];
  for (int32_t b = 0; b < batch; ++b, in += K, out += N) {
    if (TMCU_FAST_FC_FEW && N <= 2) {
      fc_few_rows(in, w, K, N, bias, multiplier, shift, step, quant, out);
      continue;
    }
    if (K <= kFcChunk || !TMCU_FAST_FC_CHUNKED) {  // one chunk: blocks of rows, each requantized at once
      fc_expand(in, K, xp);
      const int8_t* wj = w;
      const int32_t* m = multiplier;
      const int32_t* sh = shift;
      int32_t o = 0;
      if (aligned) {
        for (; o + 2 <= N; o += 2, wj += 2 * K, m += 2 * step, sh += 2 * step) {
          int32_t a[2] = {0, 0};
          if (bias) {
            a[0] = bias[o];
            a[1] = bias[o + 1];
          }
          fc_dots2_aligned(xp, wj, K, K, a);
          out[o] = fc_out(a[0], m[0], sh[0], quant);
          out[o + 1] = fc_out(a[1], m[step], sh[step], quant);
        }
      } else {
        for (; o + 4 <= N; o += 4, wj += 4 * K, m += 4 * step, sh += 4 * step) {
          int32_t a[4] = {0, 0, 0, 0};
          if (bias) std::memcpy(a, bias + o, sizeof(a));
          fc_dots4(in, xp, wj, K, K, a);
          for (int j = 0; j < 4; ++j) out[o + j] = fc_out(a[j], m[j * step], sh[j * step], quant);
        }
      }
      for (; o < N; ++o, wj += K, m += step, sh += step) {
        int32_t a = bias ? bias[o] : 0;
        fc_dots1(in, xp, wj, K, &a);
        out[o] = fc_out(a, m[0], sh[0], quant);
      }
      continue;
    }
    for (int32_t g0 = 0; g0 < N; g0 += kFcGroup) {
      const int32_t gn = N - g0 < kFcGroup ? N - g0 : kFcGroup;
      for (int32_t j = 0; j < gn; ++j) acc[j] = bias ? bias[g0 + j] : 0;
      for (int32_t k0 = 0; k0 < K; k0 += kFcChunk) {
        const int32_t kn = K - k0 < kFcChunk ? K - k0 : kFcChunk;
        fc_expand(in + k0, kn, xp);
        fc_rows(in + k0, xp, w + g0 * K + k0, K, kn, gn, aligned, acc);
      }
      for (int32_t j = 0; j < gn; ++j) {
        out[g0 + j] = fc_out(acc[j], multiplier[(g0 + j) * step], shift[(g0 + j) * step], quant);
      }
    }
  }
  return true;
}

#endif

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_CONV_LINEAR_S8_H_
