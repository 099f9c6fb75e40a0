// The elementwise family's math (ADD/SUB/MUL/DIV/MAXIMUM/MINIMUM_*, CLAMP_*,
// SIGMOID/TANH/HARDSWISH_F32, LUT_S8, QUANTIZE_*, DEQUANTIZE_*; REQUANTIZE is
// in ops_elementwise.cc): float32, TFLite's int8 and int16 arithmetic bit
// for bit. Broadcasting binary ops take dims of `rank` entries each.
// aot/torchmcu/reference/elementwise.py is the NumPy twin of the integer
// ones. Conventions: common/types.h.
#ifndef TORCHMCU_KERNELS_PORTABLE_ELEMENTWISE_ELEMENTWISE_H_
#define TORCHMCU_KERNELS_PORTABLE_ELEMENTWISE_ELEMENTWISE_H_

#include <cstdint>

#include <cstddef>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

/// out[i] = min(max(in[i], lo), hi) for i < n. in == out is allowed.
void clamp_f32(const float* in, float* out, size_t n, float lo, float hi);

/// out[i] = 1 / (1 + exp(-in[i])). in == out is allowed.
void sigmoid_f32(const float* in, float* out, size_t n);

/// out[i] = tanh(in[i]). in == out is allowed.
void tanh_f32(const float* in, float* out, size_t n);

/// Broadcasting element-wise ops. All three shapes have `rank` dims
/// (1 <= rank <= kMaxRank); a_dims[d] and b_dims[d] are out_dims[d] or 1.
/// out may alias a or b when that operand has out's shape.
void add_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act);
void mul_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act);
/// Element-wise max / min (torch.maximum / torch.minimum: a NaN operand gives
/// NaN), broadcasting as add_f32.
void maximum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act);
void minimum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act);

/// out[i] = in[i] * min(max(in[i] + 3, 0), 6) / 6. in == out is allowed.
void hardswish_f32(const float* in, float* out, size_t n);

struct QuantAddParams {
  int32_t input1_offset, input1_multiplier, input1_shift;
  int32_t input2_offset, input2_multiplier, input2_shift;
  int32_t left_shift;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
};

/// TFLite int8 ADD with broadcasting (dims as add_f32):
///   a' = requantize((a + input1_offset) << left_shift, input1_multiplier, input1_shift)
///   b' likewise; out = clamp(requantize(a' + b', output_multiplier, output_shift) + output_offset)
/// (input shifts are <= 0 here, so requantize reduces to TFLite's
/// MultiplyByQuantizedMultiplierSmallerThanOneExp).
void add_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
            int8_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p);

struct QuantMulParams {
  int32_t input1_offset, input2_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
};

/// out = clamp(requantize((a + input1_offset) * (b + input2_offset), m, s) + output_offset),
/// broadcasting as add_s8.
void mul_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
            int8_t* out, const int32_t* out_dims, int32_t rank, const QuantMulParams& p);

/// out = max(a, b) / min(a, b) on the raw int8 values, broadcasting as add_s8.
/// Inputs and output share one quantization (TFLite's int8 MAXIMUM/MINIMUM).
void maximum_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
                int8_t* out, const int32_t* out_dims, int32_t rank);
void minimum_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims,
                int8_t* out, const int32_t* out_dims, int32_t rank);

/// out = mask ? value : x (torch.masked_fill), the U8 mask broadcast to x
/// (dims as add_f32; out_dims == x_dims). Any element type (float, int8 and
/// int16 raw values at x's quantization). out may alias x.
template <typename T>
void masked_fill(const T* x, const int32_t* x_dims, const uint8_t* mask, const int32_t* mask_dims, T value, T* out,
                 const int32_t* out_dims, int32_t rank);

/// CompareParams.op.
constexpr int32_t kCompareLt = 0, kCompareLe = 1, kCompareGt = 2, kCompareGe = 3, kCompareEq = 4, kCompareNe = 5;

/// out = (a op b) ? 1 : 0 (U8), broadcasting as add_f32; T float, int32_t or
/// uint8_t (a NaN compares false but for !=, as PyTorch).
template <typename T>
void compare(const T* a, const int32_t* a_dims, const T* b, const int32_t* b_dims, int32_t op, uint8_t* out,
             const int32_t* out_dims, int32_t rank);

/// out = clamp(round_half_away(in / scale) + zero_point, -128, 127), as TFLite's
/// AffineQuantize (a float division, std::round).
void quantize_f32_s8(const float* in, int8_t* out, size_t n, float scale, int32_t zero_point);

/// out = (in - zero_point) * scale.
void dequantize_s8_f32(const int8_t* in, float* out, size_t n, float scale, int32_t zero_point);

/// out = min(max(in, lo), hi). in == out is allowed.
void clamp_s8(const int8_t* in, int8_t* out, size_t n, int32_t lo, int32_t hi);

/// out[i] = table[in[i] + 128]: any element-wise function, tabulated ahead of
/// time. in == out is allowed.
void lut_s8(const int8_t* in, int8_t* out, size_t n, const int8_t* table);

/// add_s8's arithmetic on int16 values (TFLM's int16 ADD uses left_shift 15).
void add_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p);

/// mul_s8's arithmetic on int16 values.
void mul_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantMulParams& p);

/// quantize_f32_s8 / dequantize_s8_f32 at int16: round half away from zero
/// of in / scale, plus zero_point, saturated; NaN gives -32768.
void quantize_f32_s16(const float* in, int16_t* out, size_t n, float scale, int32_t zero_point);
void dequantize_s16_f32(const int16_t* in, float* out, size_t n, float scale, int32_t zero_point);

/// out = a - b (a / b), clamped to act; broadcasting and aliasing as add_f32.
void sub_f32(const float* a, const int32_t* a_dims, const float* b, const int32_t* b_dims, float* out,
             const int32_t* out_dims, int32_t rank, ActRange act);
void div_f32(const float* a, const int32_t* a_dims, const float* b, const int32_t* b_dims, float* out,
             const int32_t* out_dims, int32_t rank, ActRange act);

/// TFLite's SUB: add_s8's arithmetic (QuantAddParams) with the rescaled
/// inputs subtracted. int16: left_shift 15, offsets 0, as add_s16.
void sub_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims, int8_t* out,
            const int32_t* out_dims, int32_t rank, const QuantAddParams& p);
void sub_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p);

struct QuantDivParams {
  int32_t input1_offset, input2_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
};

/// TFLite's int8 DIV (reference_ops::Div): v1 = a + input1_offset, v2 = b +
/// input2_offset (signs moved so that v2 > 0); r = 1 / v2 in Q0.31 with its
/// exponent e (GetReciprocal); h = the leading sign bits of v1; q =
/// mul_sat(v1 << h, r); out = clamp(output_offset + round(mul_sat(q,
/// output_multiplier) / 2^(e + h - output_shift))), where an exponent above
/// 31 gives 0 (TFLite's shift is undefined there) and output_shift <= 23
/// keeps it >= 0. v2 == 0 gives act_max, act_min or output_offset by the
/// sign of v1 (x / 0 = +-inf; 0 / 0).
void div_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims, int8_t* out,
            const int32_t* out_dims, int32_t rank, const QuantDivParams& p);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_ELEMENTWISE_ELEMENTWISE_H_
