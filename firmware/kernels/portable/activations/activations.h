// Activations beyond clamp (the portable kernels of ACTIVATION_F32, LUT_S16,
// PRELU_* and GLU_*): float functions as PyTorch defines them, TFLite's
// interpolated int16 table lookup, TFLite's PRELU at int8 and int16, and GLU
// as a table lookup then MUL. aot/torchmcu/reference/activations.py is the
// NumPy twin of the integer ones.
#ifndef TORCHMCU_KERNELS_PORTABLE_ACTIVATIONS_ACTIVATIONS_H_
#define TORCHMCU_KERNELS_PORTABLE_ACTIVATIONS_ACTIVATIONS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/portable/elementwise/elementwise.h"  // QuantMulParams

namespace torchmcu {
namespace portable {

/// ActivationParams.fn (program.fbs).
enum ActivationFn : int32_t {
  kGelu = 0,        // x / 2 * (1 + erf(x / sqrt(2)))
  kGeluTanh = 1,    // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
  kSilu = 2,        // x * sigmoid(x)
  kHardsigmoid = 3, // relu6(x + 3) / 6
  kElu = 4,         // x > 0 ? x : alpha * (exp(x) - 1)
  kExp = 5,
  kRsqrt = 6,       // 1 / sqrt(x)
  kReciprocal = 7,  // 1 / x
  kSqrt = 8,        // sqrt(x)
  kNumActivationFns = 9,
};

/// out = fn(in) element-wise (fn in [0, kNumActivationFns)). in == out is allowed.
void activation_f32(const float* in, float* out, size_t n, int32_t fn, float alpha);

/// TFLite's generic_int16_table_lookup: the 513-entry table at 256 + (v >> 7)
/// plus the slope to the next entry times (v & 127) / 128, rounded; int16
/// arithmetic wraps as TFLite's.
inline int16_t lut16(int32_t v, const int16_t* table) {
  const int32_t index = 256 + (v >> 7);
  const int16_t base = table[index];
  const int16_t slope = static_cast<int16_t>(table[index + 1] - base);
  const int32_t delta = (slope * (v & 0x7f) + 64) >> 7;
  return static_cast<int16_t>(base + delta);
}

/// out[i] = lut16(in[i], table). in == out is allowed.
void lut_s16(const int16_t* in, int16_t* out, size_t n, const int16_t* table);

/// out = x >= 0 ? x : alpha * x, alpha broadcast to x (dims as add_f32).
void prelu_f32(const float* x, const int32_t* x_dims, const float* alpha, const int32_t* a_dims,
               float* out, const int32_t* out_dims, int32_t rank);

struct QuantPreluParams {
  int32_t input_offset, alpha_offset, output_offset;
  int32_t output_multiplier_1, output_shift_1, output_multiplier_2, output_shift_2;
  int32_t act_min, act_max;
};

/// TFLite's PRELU: v = x + input_offset; out = clamp(output_offset + (v >= 0 ?
/// requantize(v, m1, s1) : requantize(v * (alpha + alpha_offset), m2, s2))),
/// alpha broadcast to x (dims as add_s8). int16 x takes int8 alpha.
void prelu_s8(const int8_t* x, const int32_t* x_dims, const int8_t* alpha, const int32_t* a_dims,
              int8_t* out, const int32_t* out_dims, int32_t rank, const QuantPreluParams& p);
void prelu_s16(const int16_t* x, const int32_t* x_dims, const int8_t* alpha, const int32_t* a_dims,
               int16_t* out, const int32_t* out_dims, int32_t rank, const QuantPreluParams& p);

/// GLU over x viewed as [outer][2][half * inner]... precisely: x [outer][2 *
/// half][inner] -> out [outer][half][inner] = a * sigmoid(b), a the first
/// half along the middle axis, b the second.
void glu_f32(const float* in, float* out, int32_t outer, int32_t half, int32_t inner);

/// glu_f32 on integers: s = table[b + 128] (int8; lut16 of b at int16), then
/// MUL_S8's (MUL_S16's) arithmetic on a and s with p.
void glu_s8(const int8_t* in, const int8_t* table, int8_t* out, int32_t outer, int32_t half,
            int32_t inner, const QuantMulParams& p);
void glu_s16(const int16_t* in, const int16_t* table, int16_t* out, int32_t outer, int32_t half,
             int32_t inner, const QuantMulParams& p);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_ACTIVATIONS_ACTIVATIONS_H_
