// Fast path of layer_norm_s8 (and on MVE layer_norm_s16; see fast.h), included by
// portable/attention_norm/attention_norm.cc only. Per row:
// - S and Q (MVE: VADDVA and VMLADAVA over 16 lanes; DSP: SMLAD on SXTB16
//   pairs), int32 sums below 2^26, exact;
// - the row's scale as norm_scale of attention_norm.cc, its integer square
//   root and 2^60 / root from floating-point estimates made exact (with
//   the double FPU of the M55: within 1, corrected; single precision:
//   within 2^8, the low bits decided one at a time): ~30 to ~90
//   instructions where the digit-by-digit root takes ~300;
// - per output: c = cols x - sum x (= cols d - S), and n = (c m + 2^(h-1))
//   >> h as the high word (VMULH, SMULL) of c' = c 2^L rounded by J, L =
//   max(33 - h, 0), J = max(h - 32, 1): the rounding of the nested floors
//   is that of n. c' fits int32: c^2 <= cols V (Cauchy-Schwarz), V < 2^(62 -
//   2k) and h = 44 - k give |c'| < 2^26 (computed in wrapping arithmetic:
//   only the result needs to fit); then sat32(n gamma + beta) (VQADD, QADD:
//   |n gamma| < 2^30), requantize() and the clamp. MVE: 4 outputs per step,
//   8 instructions per element of the encoder's 64-value rows; DSP: ~46
//   (QEMU counts).
#ifndef TORCHMCU_KERNELS_FAST_ATTENTION_NORM_LAYER_NORM_S8_H_
#define TORCHMCU_KERNELS_FAST_ATTENTION_NORM_LAYER_NORM_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include <type_traits>

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

#include "kernels/portable/attention_norm/attention_norm.h"

#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

#if defined(__ARM_FP) && (__ARM_FP & 8)

[[gnu::always_inline]] inline double ln_sqrt(double v) {
  double r;
  __asm__("vsqrt.f64 %P0, %P1" : "=w"(r) : "w"(v));
  return r;
}

[[gnu::always_inline]] inline double ln_double(uint64_t v) {
  return double(uint32_t(v >> 32)) * 4294967296.0 + double(uint32_t(v));
}

// floor(sqrt(u)) for u in [2^60, 2^62): the double root is within 1.
inline uint32_t ln_isqrt(uint64_t u) {
  uint32_t r = uint32_t(ln_sqrt(ln_double(u)));
  while (uint64_t(r) * r > u) --r;
  while (uint64_t(r + 1) * (r + 1) <= u) ++r;
  return r;
}

// floor(num / root), num < 2^61, root in [2^30, 2^31): the double quotient
// is within 1, corrected by the exact remainder.
inline uint32_t ln_divide(uint64_t num, uint32_t root) {
  uint32_t m = uint32_t(ln_double(num) / double(root));
  int64_t rem = int64_t(num - uint64_t(m) * root);
  while (rem < 0) --m, rem += root;
  while (rem >= int64_t(root)) ++m, rem -= root;
  return m;
}

#else

// The largest r in [base, base + 2 step) with fits(r) (fits monotone, true
// at base): one bit of the offset at a time from step down.
template <typename Fits>
[[gnu::always_inline]] inline uint32_t ln_greedy(uint32_t base, uint32_t step, Fits fits) {
  for (uint32_t b = step; b != 0; b >>= 1) {
    if (fits(base + b)) base += b;
  }
  return base;
}

// VSQRT.F32 where there is an FPU (no errno path into libm).
[[gnu::always_inline]] inline float ln_sqrtf(float v) {
#if defined(__ARM_FP) && (__ARM_FP & 4)
  float r;
  __asm__("vsqrt.f32 %0, %1" : "=t"(r) : "t"(v));
  return r;
#else
  return __builtin_sqrtf(v);
#endif
}

// floor(sqrt(u)) for u in [2^60, 2^62): the single-precision root of u's top
// 32 bits is within 2^8 of it (relative error below 2^-23), so the root is
// in [est - 512, est + 512), its offset decided one bit at a time.
inline uint32_t ln_isqrt(uint64_t u) {
  const float f = ln_sqrtf(float(uint32_t(u >> 32)));  // u's root / 2^16
  return ln_greedy(uint32_t(f * 65536.0f) - 512u, 512u, [u](uint32_t r) { return uint64_t(r) * r <= u; });
}

// floor(num / root), num in [2^60, 2^60 + 2^30), root in [2^30, 2^31): the
// single-precision quotient of 2^60 is within 2^8 of it, decided so.
inline uint32_t ln_divide(uint64_t num, uint32_t root) {
  const uint32_t est = uint32_t(1152921504606846976.0f / float(root));
  return ln_greedy(est - 512u, 512u, [num, root](uint32_t m) { return uint64_t(m) * root <= num; });
}

#endif

// norm_scale of attention_norm.cc: m = round(2^60 / root), h.
struct LnScale {
  int32_t m, shift_up, shift_down;  // n = vrshl(vmulh(c << shift_up, m), -shift_down)
};

inline LnScale ln_scale(int32_t count, int64_t s, int64_t q, int64_t eps_term) {
  const int64_t v = int64_t(count) * q - s * s + eps_term;
  if (v <= 0) return LnScale{0, 0, 1};
  const int32_t k = (62 - (64 - __builtin_clzll(uint64_t(v)))) / 2;
  const uint32_t root = ln_isqrt(uint64_t(v) << (2 * k));  // in [2^30, 2^31)
  const uint32_t m = ln_divide((uint64_t{1} << 60) + root / 2, root);
  const int32_t h = 60 - kLayerNormFractionBits - k;
  return LnScale{int32_t(m), h < 33 ? 33 - h : 0, h > 32 ? h - 32 : 1};
}

}  // namespace

#if TMCU_S8_MVE

// layer_norm_s8 / layer_norm_s16 (portable/attention_norm/attention_norm.h):
// false when requant_v is not requantize() for the output's multiplier.
// int16: S by VADDVA over 8 lanes (below 2^27), Q by VMLALDAVA in 64 bits.
template <typename T>
[[gnu::noinline]] bool layer_norm_q(const T* in, const int8_t* gamma, const int32_t* beta, T* out, int32_t rows,
                                    int32_t cols, const QuantLayerNormParams& p) {
  if (!requant_vector_ok(&p.output_multiplier, &p.output_shift, 1)) return false;
  const int32_t zp = p.input_zero_point;
  const int32_t m0 = p.output_multiplier, s0 = p.output_shift;
  const int32_t up0 = s0 > 0 ? s0 : 0, down0 = s0 < 0 ? s0 : 0, neg0 = s0 < 0 ? 1 : 0;
  const int32x4_t lo = vdupq_n_s32(p.act_min - p.output_zero_point), hi = vdupq_n_s32(p.act_max - p.output_zero_point);
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    int32_t sx = 0;
    int64_t sxx = 0;
    if constexpr (sizeof(T) == 1) {
      int32_t q32 = 0;  // below 2^26 in magnitude
      for (int32_t c = 0; c < cols; c += 16) {
        const mve_pred16_t pr = vctp8q(static_cast<uint32_t>(cols - c));
        const int8x16_t x = vldrbq_z_s8(in + c, pr);
        sx = vaddvaq_p_s8(sx, x, pr);
        q32 = vmladavaq_p_s8(q32, x, x, pr);
      }
      sxx = q32;
    } else {
      for (int32_t c = 0; c < cols; c += 8) {
        const mve_pred16_t pr = vctp16q(static_cast<uint32_t>(cols - c));
        const int16x8_t x = vldrhq_z_s16(in + c, pr);
        sx = vaddvaq_p_s16(sx, x, pr);
        sxx = vmlaldavaq_p_s16(sxx, x, x, pr);
      }
    }
    const int64_t s = int64_t(sx) - int64_t(cols) * zp;
    const int64_t q = sxx - 2 * int64_t(zp) * sx + int64_t(cols) * zp * zp;  // sum (x - zp)^2
    const LnScale sc = ln_scale(cols, s, q, p.eps_term);
    // c' = (cols x - sum x) 2^shift_up, wrapping.
    const int32x4_t times = vdupq_n_s32(static_cast<int32_t>(static_cast<uint32_t>(cols) << sc.shift_up));
    const int32_t minus = static_cast<int32_t>(0u - (static_cast<uint32_t>(sx) << sc.shift_up));
    const int32x4_t mv = vdupq_n_s32(sc.m);
    const int32_t down = -sc.shift_down;
    // 4 outputs from c; the tail's lanes in pr.
    auto out4 = [&](int32_t c, auto tail, mve_pred16_t pr) {
      constexpr bool kTail = decltype(tail)::value;
      int32x4_t x;
      if constexpr (sizeof(T) == 1) {
        x = kTail ? vldrbq_z_s32(in + c, pr) : vldrbq_s32(in + c);
      } else {
        x = kTail ? vldrhq_z_s32(in + c, pr) : vldrhq_s32(in + c);
      }
      const int32x4_t g = kTail ? vldrbq_z_s32(gamma + c, pr) : vldrbq_s32(gamma + c);
      const int32x4_t b = kTail ? vldrwq_z_s32(beta + c, pr) : vldrwq_s32(beta + c);
      const int32x4_t n = vrshlq_n_s32(vmulhq_s32(vmlasq_n_s32(x, times, minus), mv), down);
      const int32x4_t h = vqrdmulhq_n_s32(vqshlq_r_s32(vqaddq_s32(vmulq_s32(n, g), b), up0), m0);
      const int32x4_t y = vrshlq_n_s32(vmlaq_n_s32(h, vshrq_n_s32(h, 31), neg0), down0);
      const int32x4_t o = vaddq_n_s32(vminq_s32(vmaxq_s32(y, lo), hi), p.output_zero_point);
      if constexpr (sizeof(T) == 1) {
        kTail ? vstrbq_p_s32(out + c, o, pr) : vstrbq_s32(out + c, o);
      } else {
        kTail ? vstrhq_p_s32(out + c, o, pr) : vstrhq_s32(out + c, o);
      }
    };
    int32_t c = 0;
    for (; c + 4 <= cols; c += 4) out4(c, std::false_type{}, 0);
    if (c < cols) out4(c, std::true_type{}, vctp32q(static_cast<uint32_t>(cols - c)));
  }
  return true;
}

[[gnu::always_inline]] inline bool layer_norm_s8(const int8_t* in, const int8_t* gamma, const int32_t* beta,
                                                 int8_t* out, int32_t rows, int32_t cols, const QuantLayerNormParams& p) {
  return layer_norm_q(in, gamma, beta, out, rows, cols, p);
}

[[gnu::always_inline]] inline bool layer_norm_s16(const int16_t* in, const int8_t* gamma, const int32_t* beta,
                                                  int16_t* out, int32_t rows, int32_t cols,
                                                  const QuantLayerNormParams& p) {
  return layer_norm_q(in, gamma, beta, out, rows, cols, p);
}

#else  // DSP

// layer_norm_s8 (portable/attention_norm/attention_norm.h) with a negative
// output shift (the compiler's: 2^-16 s_gamma / s_out); false otherwise.
// S and Q by SMLAD on SXTB16 pairs; per output, c' = c 2^L as above, n its
// SMULL high word rounded by J, QADD, requantize() as linear_s8's (hi, then
// ((t >> (e - 1)) + 1) >> 1 with t = hi - (hi < 0)).
[[gnu::noinline]] inline bool layer_norm_s8(const int8_t* in, const int8_t* gamma, const int32_t* beta, int8_t* out,
                                            int32_t rows, int32_t cols, const QuantLayerNormParams& p) {
  if (p.output_shift >= 0) return false;
  const int32_t zp = p.input_zero_point;
  const int32_t m0 = p.output_multiplier;
  const int32_t e1 = -p.output_shift - 1;
  const int32_t lo = p.act_min - p.output_zero_point, hi = p.act_max - p.output_zero_point;
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    int32_t sx = 0, sxx = 0;
    int32_t c = 0;
    for (; c + 4 <= cols; c += 4) {
      int32_t v;
      __builtin_memcpy(&v, in + c, 4);
      const int16x2_t xe = __sxtb16(v), xo = __sxtb16(static_cast<int32_t>((static_cast<uint32_t>(v) >> 8) | (static_cast<uint32_t>(v) << 24)));
      sxx = __smlad(xe, xe, __smlad(xo, xo, sxx));
      sx = __smlad(xe, 0x00010001, __smlad(xo, 0x00010001, sx));
    }
    for (; c < cols; ++c) {
      sx += in[c];
      sxx += in[c] * in[c];
    }
    const int64_t s = int64_t(sx) - int64_t(cols) * zp;
    const int64_t q = sxx - 2 * int64_t(zp) * sx + int64_t(cols) * zp * zp;
    const LnScale sc = ln_scale(cols, s, q, p.eps_term);
    const uint32_t times = static_cast<uint32_t>(cols) << sc.shift_up;
    const uint32_t minus = 0u - (static_cast<uint32_t>(sx) << sc.shift_up);
    const int32_t mm = sc.m;
    const int32_t j1 = sc.shift_down - 1;
    for (c = 0; c < cols; ++c) {
      const int32_t cp = static_cast<int32_t>(static_cast<uint32_t>(in[c]) * times + minus);
      const int32_t n = ((static_cast<int32_t>((int64_t(cp) * mm) >> 32) >> j1) + 1) >> 1;
      const int32_t acc = __qadd(n * gamma[c], beta[c]);
      const int32_t h = static_cast<int32_t>((int64_t(acc) * m0 + (int64_t{1} << 30)) >> 31);
      int32_t y = (((h + (h >> 31)) >> e1) + 1) >> 1;
      y = y < lo ? lo : y > hi ? hi : y;
      out[c] = static_cast<int8_t>(y + p.output_zero_point);
    }
  }
  return true;
}

#endif

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif

#endif  // TORCHMCU_KERNELS_FAST_ATTENTION_NORM_LAYER_NORM_S8_H_
