#include "kernels/portable/attention_norm/attention_norm.h"

#include <cmath>

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
    // cols^2 (var + eps) / s_in^2: below 2^56 + 2^62 - 2^57 < 2^62 (cols <= 4096, |d| < 2^16).
    const int64_t v = int64_t(cols) * q - s * s + p.eps_term;
    int32_t m = 0;
    int32_t h = 1;
    if (v > 0) {  // 0: a constant row without eps, where every x - mean is 0
      const int32_t k = (62 - (64 - __builtin_clzll(uint64_t(v)))) / 2;
      const uint64_t root = isqrt64(uint64_t(v) << (2 * k));  // in [2^30, 2^31)
      m = int32_t(((uint64_t{1} << 60) + root / 2) / root);    // 2^60 / root, in (2^29, 2^30]
      h = 60 - kLayerNormFractionBits - k;                     // n = c m 2^(k - 44): Q16
    }
    const int32_t sum = int32_t(s);  // |S| <= cols 2^16 <= 2^28
    for (int32_t c = 0; c < cols; ++c) {
      const int32_t centred = cols * (int32_t(in[c]) - p.input_zero_point) - sum;  // |.| < 2^29
      // |n| <= sqrt(cols) 2^16 + 1 <= 2^22 + 1 for any data (Cauchy-Schwarz: c^2 <= cols V).
      const int32_t n = int32_t((int64_t(centred) * m + (int64_t{1} << (h - 1))) >> h);
      const int64_t acc = int64_t(n * gamma[c]) + beta[c];
      const int32_t acc32 = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : int32_t(acc);
      int32_t y = s8::requantize(acc32, p.output_multiplier, p.output_shift);
      y = y < lo ? lo : y > hi ? hi : y;
      out[c] = static_cast<T>(y + p.output_zero_point);
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
  layer_norm_q(in, gamma, beta, out, rows, cols, p);
}

void layer_norm_s16(const int16_t* in, const int8_t* gamma, const int32_t* beta, int16_t* out,
                    int32_t rows, int32_t cols, const QuantLayerNormParams& p) {
  layer_norm_q(in, gamma, beta, out, rows, cols, p);
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
