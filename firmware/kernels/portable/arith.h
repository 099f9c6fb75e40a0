// Subtraction and division (the portable kernels of SUB_* and DIV_*), with
// broadcasting as add_f32 / add_s8: float, and TFLite's int8 (and int16)
// SUB and int8 DIV, bit for bit. aot/torchmcu/reference/elementwise.py
// (sub, div) is the NumPy twin of the integer ones.
#ifndef TORCHMCU_KERNELS_PORTABLE_ARITH_H_
#define TORCHMCU_KERNELS_PORTABLE_ARITH_H_

#include <cstdint>

#include "kernels/portable/portable_s8.h"

namespace torchmcu {
namespace portable {

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

#endif  // TORCHMCU_KERNELS_PORTABLE_ARITH_H_
