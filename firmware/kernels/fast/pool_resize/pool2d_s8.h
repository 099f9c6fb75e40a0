// Fast paths of avg_pool2d_s8 and max_pool2d_s8 (see fast.h), included by
// portable/pool_resize/pool2d_s8.cc only. Max pooling: below, at
// max_pool2d_s8. Average pooling:
//
// The window's sum per channel is accumulated in int16 lanes over blocks of
// rows of at most 256 taps (the sum of 256 int8 values lies in [-32768,
// 32512], exact), each block's sums added to int32 ones (windows of rows
// longer than 256 taps run the generic kernel). MVE: 16 channels per step, two
// int16x8 accumulators fed by widening loads (the channel tail
// predicated); DSP: 8 channels per step, SXTB16 of each 4-byte word into
// halfword pairs (channels 0 and 2, 1 and 3) added by SADD16. The rest of
// the channels, the padding term and the rounding division (avg_round) are
// the generic kernel's, per channel; MVE divides 4 channels at a time by a
// multiply (pool_finish, pool_finish_even).
#ifndef TORCHMCU_KERNELS_FAST_POOL_RESIZE_POOL2D_S8_H_
#define TORCHMCU_KERNELS_FAST_POOL_RESIZE_POOL2D_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include <cstring>

#include "kernels/portable/common/requantize.h"
#include "kernels/portable/pool_resize/pool_resize.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

// Compiled for speed whatever the image's -O (see conv/conv2d_s8.h).
#pragma GCC push_options
#if !TMCU_FAST_OS
#pragma GCC optimize("O2")
#endif

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

constexpr int32_t kPoolMaxTaps = 256;

#if !TMCU_S8_MVE
// Bytes 1 and 3 of v sign-extended to halfwords (see conv/conv2d_s8.h).
[[gnu::always_inline]] inline int16x2_t pool_sxtb16_ror8(int32_t v) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
#endif
constexpr int32_t kPoolStep = TMCU_S8_MVE ? 16 : 8;  // channels per step

// The window's taps: rows [y0, y1) of the image, columns starting at x0
// (input pixel index), kw of them; row_stride and c_n in bytes.
struct PoolWindow {
  const int8_t* first;  // the first tap's channel 0
  int32_t rows, cols, row_stride, c_n;
};

// sums[j] = the sum of channel c + j, j < kPoolStep, over the window's
// rows (at most kPoolMaxTaps taps; channels beyond c_n read as 0).
inline void pool_sums16(const PoolWindow& win, int32_t c, int16_t* sums) {
#if TMCU_S8_MVE
  const int32_t left = win.c_n - c;
  const mve_pred16_t p0 = vctp16q(static_cast<uint32_t>(left));
  const mve_pred16_t p1 = vctp16q(static_cast<uint32_t>(left > 8 ? left - 8 : 0));
  int16x8_t a0 = vdupq_n_s16(0), a1 = vdupq_n_s16(0);
  const int8_t* row = win.first + c;
  if (left >= 16) {  // unpredicated: GCC sets the predicate before each predicated load
    for (int32_t y = 0; y < win.rows; ++y, row += win.row_stride) {
      const int8_t* x = row;
      for (int32_t i = win.cols; i > 0; --i, x += win.c_n) {
        a0 = vaddq_s16(a0, vldrbq_s16(x));
        a1 = vaddq_s16(a1, vldrbq_s16(x + 8));
      }
    }
  } else {
    for (int32_t y = 0; y < win.rows; ++y, row += win.row_stride) {
      const int8_t* x = row;
      for (int32_t i = win.cols; i > 0; --i, x += win.c_n) {
        a0 = vaddq_s16(a0, vldrbq_z_s16(x, p0));
        a1 = vaddq_s16(a1, vldrbq_z_s16(x + 8, p1));
      }
    }
  }
  vst1q_s16(sums, a0);
  vst1q_s16(sums + 8, a1);
#else
  // Halfword pairs: e0 = channels (0, 2), o0 = (1, 3), e1 = (4, 6), o1 = (5, 7).
  int16x2_t e0 = 0, o0 = 0, e1 = 0, o1 = 0;
  const int8_t* row = win.first + c;
  for (int32_t y = 0; y < win.rows; ++y, row += win.row_stride) {
    const int8_t* x = row;
    for (int32_t i = win.cols; i > 0; --i, x += win.c_n) {
      int32_t v0, v1;
      std::memcpy(&v0, x, 4);
      std::memcpy(&v1, x + 4, 4);
      e0 = __sadd16(e0, __sxtb16(v0));
      o0 = __sadd16(o0, pool_sxtb16_ror8(v0));
      e1 = __sadd16(e1, __sxtb16(v1));
      o1 = __sadd16(o1, pool_sxtb16_ror8(v1));
    }
  }
  const int16x2_t pairs[4] = {e0, o0, e1, o1};
  for (int j = 0; j < 4; ++j) {
    // pairs[j] holds channels 4 (j / 2) + (j % 2) (low half) and that + 2.
    const int32_t ch = 4 * (j / 2) + (j % 2);
    sums[ch] = static_cast<int16_t>(pairs[j] & 0xffff);
    sums[ch + 2] = static_cast<int16_t>(static_cast<uint32_t>(pairs[j]) >> 16);
  }
#endif
}

// sums[j] = the window's sum of channel c + j, j < kPoolStep: its rows in
// blocks of at most kPoolMaxTaps taps (win.cols <= kPoolMaxTaps).
inline void pool_sums(PoolWindow win, int32_t c, int32_t* sums) {
  alignas(16) int16_t part[kPoolStep];
  const int32_t block = win.cols > 0 ? kPoolMaxTaps / win.cols : 1;
  for (int32_t j = 0; j < kPoolStep; ++j) sums[j] = 0;
  int32_t rows = win.rows;
  do {
    win.rows = rows < block ? rows : block;
    pool_sums16(win, c, part);
    for (int32_t j = 0; j < kPoolStep; ++j) sums[j] += part[j];
    win.first += win.rows * win.row_stride;
    rows -= win.rows;
  } while (rows > 0);
}

#if TMCU_S8_MVE

// out[j] = clamp(trunc((sums[j] + padded +- half) / d)) for j < cn, the
// sign of the rounding term that of the sum (at sum 0, |n| = half < d gives
// 0 either way); 4 channels per step, the division as the multiply by
// recip (see avg_pool2d_s8).
[[gnu::always_inline]] inline int32x4_t pool_load4(const int16_t* s) { return vldrhq_s32(s); }
[[gnu::always_inline]] inline int32x4_t pool_load4(const int32_t* s) { return vldrwq_s32(s); }

// The sums int16 (a window of at most kPoolMaxTaps taps) or int32 (blocks).
template <class Sum>
inline void pool_finish(const Sum* sums, int32_t cn, int32_t padded, int32_t half, uint32_t recip, int32_t lo,
                        int32_t hi, int8_t* out) {
  const int32x4_t hv = vdupq_n_s32(half), lov = vdupq_n_s32(lo), hiv = vdupq_n_s32(hi);
  const uint32x4_t rv = vdupq_n_u32(recip);
  for (int32_t j = 0; j < cn; j += 4) {
    const int32x4_t s = vaddq_n_s32(pool_load4(sums + j), padded);
    const int32x4_t sign = vshrq_n_s32(s, 31);
    const int32x4_t n = vaddq_s32(s, vsubq_s32(veorq_s32(hv, sign), sign));  // s + half or s - half
    const uint32x4_t q = vmulhq_u32(vreinterpretq_u32_s32(vabsq_s32(n)), rv);
    const int32x4_t v = vsubq_s32(veorq_s32(vreinterpretq_s32_u32(q), sign), sign);
    vstrbq_p_s32(out + j, vminq_s32(vmaxq_s32(v, lov), hiv), vctp32q(static_cast<uint32_t>(cn - j)));
  }
}

// avg_round with round_half_even: out[j] = clamp(q + up) for j < cn, q =
// floor(s / d), s = sums[j] + padded. bias = padded + 128 d makes u = s + 128 d
// >= 0 (without divisor_override d counts every in-bounds tap, each >= -128,
// and each tap beyond them adds zero_point >= -128), so floor(u / d) = q +
// 128 is recip's multiply (exact while u d < 2^32) and r = u - (q + 128) d;
// up (avg_round's) when 2r + odd > d, odd the parity of q - zp (of q + 128
// xor zp): the sign bit of d - 2r - odd. No predicates (GCC 13's combine
// fails on their logic).
template <class Sum>
inline void pool_finish_even(const Sum* sums, int32_t cn, int32_t bias, int32_t d, uint32_t recip, int32_t zp,
                             int32_t lo, int32_t hi, int8_t* out) {
  const int32x4_t lov = vdupq_n_s32(lo), hiv = vdupq_n_s32(hi);
  const uint32x4_t rv = vdupq_n_u32(recip), zv = vdupq_n_u32(static_cast<uint32_t>(zp)), one = vdupq_n_u32(1);
  const uint32x4_t dv = vdupq_n_u32(static_cast<uint32_t>(d));
  for (int32_t j = 0; j < cn; j += 4) {
    const uint32x4_t u = vreinterpretq_u32_s32(vaddq_n_s32(pool_load4(sums + j), bias));
    const uint32x4_t q = vmulhq_u32(u, rv);
    const uint32x4_t twice = vshlq_n_u32(vsubq_u32(u, vmulq_u32(q, dv)), 1);
    const uint32x4_t odd = vandq_u32(veorq_u32(q, zv), one);
    const uint32x4_t up = vshrq_n_u32(vsubq_u32(dv, vaddq_u32(twice, odd)), 31);
    const int32x4_t v = vsubq_n_s32(vreinterpretq_s32_u32(vaddq_u32(q, up)), 128);
    vstrbq_p_s32(out + j, vminq_s32(vmaxq_s32(v, lov), hiv), vctp32q(static_cast<uint32_t>(cn - j)));
  }
}

// The MVE division of an output pixel's channels: how (the rounding's
// recip; 0: the scalar avg_round).
struct PoolDiv {
  uint32_t recip;
  bool even;       // pool_finish_even, else pool_finish
  int32_t bias;    // pool_finish_even's padded + 128 d
};

// The vector division, when exact for every sum of the window (see
// pool_finish and pool_finish_even), else recip 0.
inline PoolDiv pool_div(const PoolOptions& o, int32_t count, int32_t divisor, int32_t padded) {
  // ceil(2^32 / d) = floor((2^32 - 1) / d) + 1 (in 32 bits: no 64-bit division helper).
  const uint32_t recip = divisor >= 2 ? 0xffffffffu / static_cast<uint32_t>(divisor) + 1 : 0;
  if (o.round_half_even) {
    const bool ok = divisor >= 2 && o.divisor_override == 0 &&
                    int64_t{255} * divisor * divisor < (int64_t{1} << 32);  // u <= 255 d
    return PoolDiv{ok ? recip : 0, true, padded + 128 * divisor};
  }
  // floor(|n| * ceil(2^32 / d) / 2^32) = floor(|n| / d) exactly while |n| * d < 2^32
  // (the error term |n| * (ceil - 2^32 / d) / 2^32 stays below 1 / d), d >= 2; |sum| <= 128 per tap.
  const int64_t most = int64_t{128} * count + (padded < 0 ? -int64_t{padded} : int64_t{padded}) + divisor / 2;
  const bool ok = divisor >= 2 && most * divisor < (int64_t{1} << 32);
  return PoolDiv{ok ? recip : 0, false, 0};
}

// Vector-divided channels of one pixel: false when recip is 0 (the scalar loop's).
template <class Sum>
inline bool pool_finish_vec(const Sum* sums, int32_t cn, const PoolDiv& dv, int32_t padded, int32_t divisor,
                            const PoolOptions& o, int32_t lo, int32_t hi, int8_t* out) {
  if (dv.recip == 0) return false;
  if (dv.even) {
    pool_finish_even(sums, cn, dv.bias, divisor, dv.recip, o.zero_point, lo, hi, out);
  } else {
    pool_finish(sums, cn, padded, divisor / 2, dv.recip, lo, hi, out);
  }
  return true;
}

#endif

// The scalar finish of channels [0, cn): avg_round of sums[j] + padded, clamped.
template <class Sum>
inline void pool_finish_scalar(const Sum* sums, int32_t cn, int32_t padded, int32_t divisor, const PoolOptions& o,
                               int32_t lo, int32_t hi, int8_t* out) {
  for (int32_t j = 0; j < cn; ++j) {
    int32_t v = avg_round(sums[j] + padded, divisor, o);
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    out[j] = static_cast<int8_t>(v);
  }
}

// avg_pool2d_s8's channels of one output pixel whose window has more than
// kPoolMaxTaps taps: int32 sums of int16 blocks (pool_sums), then as
// avg_pool2d_s8 (MVE: dv, the vector division or none). Out of line: the
// common windows' loop keeps its registers.
#if TMCU_S8_MVE
[[gnu::noinline]] void pool_blocks(const PoolWindow& win, int32_t c_fast, int32_t padded, int32_t divisor,
                                   const PoolOptions& o, const PoolDiv& dv, int32_t lo, int32_t hi, int8_t* out) {
#else
[[gnu::noinline]] void pool_blocks(const PoolWindow& win, int32_t c_fast, int32_t padded, int32_t divisor,
                                   const PoolOptions& o, int32_t lo, int32_t hi, int8_t* out) {
#endif
  alignas(16) int32_t sums[kPoolStep];
  const int32_t c_n = win.c_n;
  for (int32_t c = 0; c < c_n; c += kPoolStep) {
    const int32_t cn = c_n - c < kPoolStep ? c_n - c : kPoolStep;
    if (c < c_fast) {
      pool_sums(win, c, sums);
    } else {  // the DSP's last channels, fewer than a step
      for (int32_t j = 0; j < cn; ++j) {
        int32_t s = 0;
        const int8_t* row = win.first + c + j;
        for (int32_t y = 0; y < win.rows; ++y, row += win.row_stride) {
          for (int32_t i = 0; i < win.cols; ++i) s += row[i * c_n];
        }
        sums[j] = s;
      }
    }
#if TMCU_S8_MVE
    if (pool_finish_vec(sums, cn, dv, padded, divisor, o, lo, hi, out + c)) continue;
#endif
    pool_finish_scalar(sums, cn, padded, divisor, o, lo, hi, out + c);
  }
}

}  // namespace

// avg_pool2d_s8 of the portable tier (kernels/portable/<family>/) for windows of rows of at most
// kPoolMaxTaps taps; false for others. DSP: kPoolStep channels at a time while a whole step's
// bytes lie in the pixel (the rest as the generic kernel).
[[gnu::noinline]] inline bool avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                                            const QuantPoolParams& p, const PoolOptions& o) {
  if (p.kernel_w > kPoolMaxTaps) return false;
  const int32_t stride_h = p.stride_h, stride_w = p.stride_w;
  const int32_t pad_top = p.pad_top, pad_left = p.pad_left;
  const int32_t lo = p.act_min, hi = p.act_max;
  const int32_t c_n = in_shape.c;
  const int32_t row_stride = in_shape.w * c_n;
  // MVE steps read only the live channels (predicated); DSP steps read 8 bytes.
  const int32_t c_fast = TMCU_S8_MVE ? c_n : c_n - c_n % kPoolStep;
  alignas(16) int16_t sums[kPoolStep];
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * stride_h - pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, p.kernel_h, 1, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox, out += c_n) {
        const int32_t ix0 = ox * stride_w - pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, p.kernel_w, 1, &kx0, &kx1);
        const int32_t count = (ky1 - ky0) * (kx1 - kx0);
        const int32_t divisor = pool_divisor(p, o, in_shape, iy0, ix0, count);
        const int32_t padded = count > 0 ? (divisor - count) * o.zero_point : 0;  // taps the divisor adds
#if TMCU_S8_MVE
        const PoolDiv dv = pool_div(o, count, divisor, padded);
#endif
        const PoolWindow win{in_n + (iy0 + ky0) * row_stride + (ix0 + kx0) * c_n, ky1 - ky0, kx1 - kx0, row_stride,
                             c_n};
        if (win.rows * win.cols > kPoolMaxTaps) {
#if TMCU_S8_MVE
          pool_blocks(win, c_fast, padded, divisor, o, dv, lo, hi, out);
#else
          pool_blocks(win, c_fast, padded, divisor, o, lo, hi, out);
#endif
          continue;
        }
        for (int32_t c = 0; c < c_n; c += kPoolStep) {
          const int32_t cn = c_n - c < kPoolStep ? c_n - c : kPoolStep;
          if (c < c_fast) {
            pool_sums16(win, c, sums);
          } else {  // the DSP's last channels, fewer than a step
            for (int32_t j = 0; j < cn; ++j) {
              int32_t s = 0;
              const int8_t* row = win.first + c + j;
              for (int32_t y = 0; y < win.rows; ++y, row += row_stride) {
                for (int32_t i = 0; i < win.cols; ++i) s += row[i * c_n];
              }
              sums[j] = static_cast<int16_t>(s);
            }
          }
#if TMCU_S8_MVE
          if (pool_finish_vec(sums, cn, dv, padded, divisor, o, lo, hi, out + c)) continue;
#endif
          pool_finish_scalar(sums, cn, padded, divisor, o, lo, hi, out + c);
        }
      }
    }
  }
  return true;
}

// max_pool2d_s8 of the portable tier, every window: per output pixel and
// step of channels the maximum over the window's in-bounds taps, starting at
// act_min (the lower clamp folded in, as the generic kernel), then the upper
// clamp. MVE: 16 channels per VMAX (the channel tail predicated); DSP: 4
// channels per word, SSUB8 setting the GE flags of the lanes where the tap
// is the larger and SEL taking those (the last c_n % 4 channels as the
// generic kernel). True always (same outputs, any window).
[[gnu::noinline]] inline bool max_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                                            const QuantPoolParams& p, const PoolOptions& o) {
  const int32_t dil_h = o.dilation_h, dil_w = o.dilation_w;
  const int32_t c_n = in_shape.c;
  const int32_t row_stride = in_shape.w * c_n;
  const int32_t x_step = dil_w * c_n, y_step = dil_h * row_stride;
  const int8_t lo = static_cast<int8_t>(p.act_min), hi = static_cast<int8_t>(p.act_max);
#if !TMCU_S8_MVE
  const int32_t c_fast = c_n & ~3;
  const uint32_t lo4 = static_cast<uint8_t>(lo) * 0x01010101u, hi4 = static_cast<uint8_t>(hi) * 0x01010101u;
#endif
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, p.kernel_h, dil_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox, out += c_n) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, p.kernel_w, dil_w, &kx0, &kx1);
        const int8_t* const first = in_n + (iy0 + ky0 * dil_h) * row_stride + (ix0 + kx0 * dil_w) * c_n;
        const int32_t rows = ky1 - ky0, cols = kx1 - kx0;
#if TMCU_S8_MVE
        for (int32_t c = 0; c < c_n; c += 16) {
          const mve_pred16_t pr = vctp8q(static_cast<uint32_t>(c_n - c));
          int8x16_t m = vdupq_n_s8(lo);
          const int8_t* row = first + c;
          for (int32_t y = 0; y < rows; ++y, row += y_step) {
            const int8_t* x = row;
            for (int32_t i = cols; i > 0; --i, x += x_step) m = vmaxq_s8(m, vldrbq_z_s8(x, pr));
          }
          vstrbq_p_s8(out + c, vminq_s8(m, vdupq_n_s8(hi)), pr);
        }
#else
        int32_t c = 0;
        for (; c < c_fast; c += 4) {
          uint32_t m = lo4;
          const int8_t* row = first + c;
          for (int32_t y = 0; y < rows; ++y, row += y_step) {
            const int8_t* x = row;
            for (int32_t i = cols; i > 0; --i, x += x_step) {
              uint32_t v;
              std::memcpy(&v, x, 4);
              __ssub8(static_cast<int8x4_t>(v), static_cast<int8x4_t>(m));
              m = static_cast<uint32_t>(__sel(static_cast<uint8x4_t>(v), static_cast<uint8x4_t>(m)));
            }
          }
          __ssub8(static_cast<int8x4_t>(m), static_cast<int8x4_t>(hi4));
          m = static_cast<uint32_t>(__sel(static_cast<uint8x4_t>(hi4), static_cast<uint8x4_t>(m)));
          std::memcpy(out + c, &m, 4);
        }
        for (; c < c_n; ++c) {
          int8_t m = lo;
          const int8_t* row = first + c;
          for (int32_t y = 0; y < rows; ++y, row += y_step) {
            const int8_t* x = row;
            for (int32_t i = cols; i > 0; --i, x += x_step) m = *x > m ? *x : m;
          }
          out[c] = m > hi ? hi : m;
        }
#endif
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

#endif  // TORCHMCU_KERNELS_FAST_POOL_RESIZE_POOL2D_S8_H_
