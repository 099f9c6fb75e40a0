#include "kernels/portable/activations/activations.h"

#include <cmath>

#include "kernels/portable/common/broadcast.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

inline float activation(float x, int32_t fn, float alpha) {
  switch (fn) {
    case kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kGeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    case kSilu:
      return x / (1.0f + expf(-x));
    case kHardsigmoid: {
      const float v = x + 3.0f;
      return (v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v) / 6.0f;
    }
    case kElu:
      return x > 0.0f ? x : alpha * expm1f(x);
    case kExp:
      return expf(x);
    case kRsqrt:
      return 1.0f / sqrtf(x);
    case kSqrt:
      return sqrtf(x);
    default:  // kReciprocal (the check admits no other)
      return 1.0f / x;
  }
}

inline int32_t clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

// PReLU in broadcast_binary's terms: operands pass through, the pair maps to the output.
template <typename T>
struct PreluQ {
  QuantPreluParams p;
  int32_t lhs(T x) const { return x + p.input_offset; }
  int32_t rhs(int8_t a) const { return a + p.alpha_offset; }
  T combine(int32_t v, int32_t a) const {
    const int32_t r = v >= 0 ? s8::requantize(v, p.output_multiplier_1, p.output_shift_1)
                             : s8::requantize(v * a, p.output_multiplier_2, p.output_shift_2);
    return static_cast<T>(clamp(r, p.act_min - p.output_offset, p.act_max - p.output_offset) + p.output_offset);
  }
};

struct PreluF {
  float lhs(float x) const { return x; }
  float rhs(float a) const { return a; }
  float combine(float x, float a) const { return x >= 0.0f ? x : a * x; }
};

// MUL_S8 / MUL_S16 of a and s = lut(b): the output clamp before the offset
// (as s8::OutQuant) keeps a saturated value from overflowing.
template <typename T>
inline T mul_q(int32_t a, int32_t s, const QuantMulParams& p) {
  const int32_t v = s8::requantize((a + p.input1_offset) * (s + p.input2_offset), p.output_multiplier,
                                   p.output_shift);
  return static_cast<T>(clamp(v, p.act_min - p.output_offset, p.act_max - p.output_offset) + p.output_offset);
}

}  // namespace

void activation_f32(const float* in, float* out, size_t n, int32_t fn, float alpha) {
  for (size_t i = 0; i < n; ++i) out[i] = activation(in[i], fn, alpha);
}

void lut_s16(const int16_t* in, int16_t* out, size_t n, const int16_t* table) {
  for (size_t i = 0; i < n; ++i) out[i] = lut16(in[i], table);
}

void prelu_f32(const float* x, const int32_t* x_dims, const float* alpha, const int32_t* a_dims,
               float* out, const int32_t* out_dims, int32_t rank) {
  broadcast_binary(x, x_dims, alpha, a_dims, out, out_dims, rank, PreluF());
}

void prelu_s8(const int8_t* x, const int32_t* x_dims, const int8_t* alpha, const int32_t* a_dims,
              int8_t* out, const int32_t* out_dims, int32_t rank, const QuantPreluParams& p) {
  broadcast_binary(x, x_dims, alpha, a_dims, out, out_dims, rank, PreluQ<int8_t>{p});
}

void prelu_s16(const int16_t* x, const int32_t* x_dims, const int8_t* alpha, const int32_t* a_dims,
               int16_t* out, const int32_t* out_dims, int32_t rank, const QuantPreluParams& p) {
  broadcast_binary(x, x_dims, alpha, a_dims, out, out_dims, rank, PreluQ<int16_t>{p});
}

void glu_f32(const float* in, float* out, int32_t outer, int32_t half, int32_t inner) {
  const size_t span = size_t(half) * size_t(inner);
  for (int32_t o = 0; o < outer; ++o, in += 2 * span, out += span) {
    for (size_t i = 0; i < span; ++i) out[i] = in[i] / (1.0f + expf(-in[span + i]));
  }
}

void glu_s8(const int8_t* in, const int8_t* table, int8_t* out, int32_t outer, int32_t half,
            int32_t inner, const QuantMulParams& p) {
  const size_t span = size_t(half) * size_t(inner);
  for (int32_t o = 0; o < outer; ++o, in += 2 * span, out += span) {
    for (size_t i = 0; i < span; ++i) out[i] = mul_q<int8_t>(in[i], table[in[span + i] + 128], p);
  }
}

void glu_s16(const int16_t* in, const int16_t* table, int16_t* out, int32_t outer, int32_t half,
             int32_t inner, const QuantMulParams& p) {
  const size_t span = size_t(half) * size_t(inner);
  for (int32_t o = 0; o < outer; ++o, in += 2 * span, out += span) {
    for (size_t i = 0; i < span; ++i) out[i] = mul_q<int16_t>(in[i], lut16(in[span + i], table), p);
  }
}

}  // namespace portable
}  // namespace torchmcu
