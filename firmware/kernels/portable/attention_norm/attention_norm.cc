#include "kernels/portable/attention_norm/attention_norm.h"

#include <cmath>

#include "core/kernel.h"  // TMCU_INLINE
#include "kernels/fast/attention_norm/batch_matmul_s8.h"
#include "kernels/fast/attention_norm/layer_norm_s8.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// floor(sqrt(v)), digit by digit.
uint64_t isqrt64(uint64_t v) {
  uint64_t r = 0;
  uint64_t bit = uint64_t{1} << 62;
  while (bit > v) bit >>= 2;
  while (bit != 0) {
    if (v >= r + bit) {
      v -= r + bit;
      r = (r >> 1) + bit;
    } else {
      r >>= 1;
    }
    bit >>= 2;
  }
  return r;
}

// n's scale for one row or group of `count` values with S = sum d, Q = sum d^2:
// V = count Q - S^2 + eps_term (count^2 (var + eps) / s_in^2: below 2^56 + 2^62 -
// 2^57 < 2^62 for count <= 4096, |d| < 2^16); n = c m 2^-h, c = count d - S.
struct NormScale {
  int32_t m = 0;  // 0: a constant row without eps, where every x - mean is 0
  int32_t h = 1;
};

TMCU_INLINE NormScale norm_scale(int32_t count, int64_t s, int64_t q, int64_t eps_term) {
  const int64_t v = int64_t(count) * q - s * s + eps_term;
  NormScale out;
  if (v > 0) {
    const int32_t k = (62 - (64 - __builtin_clzll(uint64_t(v)))) / 2;
    const uint64_t root = isqrt64(uint64_t(v) << (2 * k));  // in [2^30, 2^31)
    out.m = int32_t(((uint64_t{1} << 60) + root / 2) / root);  // 2^60 / root, in (2^29, 2^30]
    out.h = 60 - kLayerNormFractionBits - k;                   // n = c m 2^(k - 44): Q16
  }
  return out;
}

// One output: centred = count d - S (|.| < 2^29), n in Q16 (|n| <= sqrt(count)
// 2^16 + 1 <= 2^22 + 1 for any data, Cauchy-Schwarz: c^2 <= count V), times
// gamma plus beta, requantized.
template <typename T>
TMCU_INLINE T norm_out(int32_t centred, NormScale sc, int8_t gamma, int32_t beta, const QuantLayerNormParams& p,
                       int32_t lo, int32_t hi) {
  const int32_t n = int32_t((int64_t(centred) * sc.m + (int64_t{1} << (sc.h - 1))) >> sc.h);
  const int64_t acc = int64_t(n * gamma) + beta;
  const int32_t acc32 = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : int32_t(acc);
  int32_t y = s8::requantize(acc32, p.output_multiplier, p.output_shift);
  y = y < lo ? lo : y > hi ? hi : y;
  return static_cast<T>(y + p.output_zero_point);
}

template <typename T>
void layer_norm_q(const T* in, const int8_t* gamma, const int32_t* beta, T* out, int32_t rows, int32_t cols,
                  const QuantLayerNormParams& p) {
  const int32_t lo = p.act_min - p.output_zero_point, hi = p.act_max - p.output_zero_point;
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    int64_t s = 0, q = 0;
    for (int32_t c = 0; c < cols; ++c) {
      const int64_t d = int64_t(in[c]) - p.input_zero_point;
      s += d;
      q += d * d;
    }
    const NormScale sc = norm_scale(cols, s, q, p.eps_term);
    const int32_t sum = int32_t(s);  // |S| <= cols 2^16 <= 2^28
    for (int32_t c = 0; c < cols; ++c) {
      out[c] = norm_out<T>(cols * (int32_t(in[c]) - p.input_zero_point) - sum, sc, gamma[c], beta[c], p, lo, hi);
    }
  }
}

// Group norm: x [n][positions][channels], `groups` groups of cg = channels /
// groups channels, each normalised over its positions * cg values (count).
template <typename T>
void group_norm_q(const T* in, const int8_t* gamma, const int32_t* beta, T* out, const GroupNormShape& g,
                  const QuantLayerNormParams& p) {
  const int32_t lo = p.act_min - p.output_zero_point, hi = p.act_max - p.output_zero_point;
  const int32_t cg = g.channels / g.groups, count = g.positions * cg;
  const int64_t plane = int64_t(g.positions) * g.channels;
  for (int32_t b = 0; b < g.n; ++b, in += plane, out += plane) {
    for (int32_t c0 = 0; c0 < g.channels; c0 += cg) {
      int64_t s = 0, q = 0;
      for (int32_t i = 0; i < g.positions; ++i) {
        const T* x = in + int64_t(i) * g.channels + c0;
        for (int32_t c = 0; c < cg; ++c) {
          const int64_t d = int64_t(x[c]) - p.input_zero_point;
          s += d;
          q += d * d;
        }
      }
      const NormScale sc = norm_scale(count, s, q, p.eps_term);
      const int32_t sum = int32_t(s);
      for (int32_t i = 0; i < g.positions; ++i) {
        const int64_t at = int64_t(i) * g.channels + c0;
        for (int32_t c = 0; c < cg; ++c) {
          out[at + c] = norm_out<T>(count * (int32_t(in[at + c]) - p.input_zero_point) - sum, sc, gamma[c0 + c],
                                    beta[c0 + c], p, lo, hi);
        }
      }
    }
  }
}

}  // namespace

void layer_norm_f32(const float* in, const float* gamma, const float* beta, float* out, int32_t rows,
                    int32_t cols, float eps) {
  for (int32_t r = 0; r < rows; ++r, in += cols, out += cols) {
    float sum = 0.0f;
    for (int32_t c = 0; c < cols; ++c) sum += in[c];
    const float mean = sum / static_cast<float>(cols);
    float var = 0.0f;
    for (int32_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean);
    const float inv = 1.0f / sqrtf(var / static_cast<float>(cols) + eps);
    for (int32_t c = 0; c < cols; ++c) {
      float y = (in[c] - mean) * inv;
      if (gamma) y *= gamma[c];
      if (beta) y += beta[c];
      out[c] = y;
    }
  }
}

void layer_norm_s8(const int8_t* in, const int8_t* gamma, const int32_t* beta, int8_t* out, int32_t rows,
                   int32_t cols, const QuantLayerNormParams& p) {
#if TMCU_S8_FAST
  if (fast::layer_norm_s8(in, gamma, beta, out, rows, cols, p)) return;
#endif
  layer_norm_q(in, gamma, beta, out, rows, cols, p);
}

void layer_norm_s16(const int16_t* in, const int8_t* gamma, const int32_t* beta, int16_t* out,
                    int32_t rows, int32_t cols, const QuantLayerNormParams& p) {
#if TMCU_S8_MVE
  if (fast::layer_norm_s16(in, gamma, beta, out, rows, cols, p)) return;
#endif
  layer_norm_q(in, gamma, beta, out, rows, cols, p);
}

void group_norm_f32(const float* in, const float* gamma, const float* beta, float* out, const GroupNormShape& g,
                    float eps) {
  const int32_t cg = g.channels / g.groups;
  const float count = static_cast<float>(int64_t(g.positions) * cg);
  const int64_t plane = int64_t(g.positions) * g.channels;
  for (int32_t b = 0; b < g.n; ++b, in += plane, out += plane) {
    for (int32_t c0 = 0; c0 < g.channels; c0 += cg) {
      float sum = 0.0f;
      for (int32_t i = 0; i < g.positions; ++i) {
        for (int32_t c = 0; c < cg; ++c) sum += in[int64_t(i) * g.channels + c0 + c];
      }
      const float mean = sum / count;
      float var = 0.0f;
      for (int32_t i = 0; i < g.positions; ++i) {
        for (int32_t c = 0; c < cg; ++c) {
          const float d = in[int64_t(i) * g.channels + c0 + c] - mean;
          var += d * d;
        }
      }
      const float inv = 1.0f / sqrtf(var / count + eps);
      for (int32_t i = 0; i < g.positions; ++i) {
        for (int32_t c = c0; c < c0 + cg; ++c) {
          const int64_t at = int64_t(i) * g.channels + c;
          float y = (in[at] - mean) * inv;
          if (gamma) y *= gamma[c];
          if (beta) y += beta[c];
          out[at] = y;
        }
      }
    }
  }
}

void group_norm_s8(const int8_t* in, const int8_t* gamma, const int32_t* beta, int8_t* out, const GroupNormShape& g,
                   const QuantLayerNormParams& p) {
  group_norm_q(in, gamma, beta, out, g, p);
}

void group_norm_s16(const int16_t* in, const int8_t* gamma, const int32_t* beta, int16_t* out,
                    const GroupNormShape& g, const QuantLayerNormParams& p) {
  group_norm_q(in, gamma, beta, out, g, p);
}

void matmul_t_f32(const float* a, const float* bt, float* out, int32_t m, int32_t k, int32_t n) {
  for (int32_t i = 0; i < m; ++i, a += k) {
    const float* b = bt;
    for (int32_t j = 0; j < n; ++j, b += k) {
      float acc = 0.0f;
      for (int32_t kk = 0; kk < k; ++kk) acc += a[kk] * b[kk];
      *out++ = acc;
    }
  }
}

void matmul_t_s8(const int8_t* a, const int8_t* bt, int8_t* out, int32_t m, int32_t k, int32_t n,
                 const QuantBatchMatmulParams& p) {
#if TMCU_S8_FAST
  if (fast::matmul_t_s8(a, bt, out, m, k, n, p)) return;
#endif
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  for (int32_t i = 0; i < m; ++i, a += k) {
    const int8_t* b = bt;
    for (int32_t j = 0; j < n; ++j, b += k) {
      int32_t acc = 0;  // the caller bounds k * 255 * 255
      for (int32_t kk = 0; kk < k; ++kk) acc += (a[kk] + p.lhs_offset) * (b[kk] + p.rhs_offset);
      *out++ = quant(s8::requantize(acc, p.output_multiplier, p.output_shift));
    }
  }
}

void matmul_s16(const int16_t* a, const int16_t* b, int16_t* out, int32_t m, int32_t k, int32_t n,
                bool b_transposed, int32_t multiplier, int32_t shift, int32_t act_min, int32_t act_max) {
  // Element (kk, j) of b: [k][n] or, transposed, [n][k].
  const int64_t step_k = b_transposed ? 1 : n, step_j = b_transposed ? k : 1;
  for (int32_t i = 0; i < m; ++i, a += k) {
    for (int32_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      const int16_t* bj = b + j * step_j;
      for (int32_t kk = 0; kk < k; ++kk) acc += int32_t(a[kk]) * bj[kk * step_k];
      int32_t y = requantize_s64(acc, multiplier, shift);
      y = y < act_min ? act_min : y > act_max ? act_max : y;
      *out++ = static_cast<int16_t>(y);
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
