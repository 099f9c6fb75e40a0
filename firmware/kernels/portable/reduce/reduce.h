// The reduce family's math (MEAN_*, SOFTMAX_*, LOG_SOFTMAX_*,
// SOFTMAX_MASKED_*): float32, TFLite's int8 LOG_SOFTMAX and integer MEAN,
// the int8/int16 softmax (over the entries a constant mask leaves, too).
// aot/torchmcu/reference/reduce.py is the NumPy twin. Conventions:
// common/types.h.
#ifndef TORCHMCU_KERNELS_PORTABLE_REDUCE_REDUCE_H_
#define TORCHMCU_KERNELS_PORTABLE_REDUCE_REDUCE_H_

#include <cstdint>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

/// Mean over the axes whose bit is set in axis_mask (bit d = axis d),
/// 1 <= rank <= kMaxRank. out has the reduced axes removed (or kept as 1:
/// same memory order).
void mean_f32(const float* in, const int32_t* dims, int32_t rank,
              uint32_t axis_mask, float* out);

/// Softmax over one axis: the tensor is viewed as [outer][axis][inner].
void softmax_f32(const float* in, float* out, int32_t outer, int32_t axis,
                 int32_t inner);

/// TFLite/CMSIS-NN int8 softmax over rows of `row_size` (output scale 1/256,
/// zero point -128): fixed-point exp of (x - row max) scaled by
/// (input_multiplier, input_left_shift), inputs with diff < diff_min give 0
/// (-128), as arm_softmax_s8. Exact for row_size < 8192; a row whose sum of
/// exponentials reaches 2^28 (where CMSIS-NN and TFLite would shift by more
/// than 31) outputs -128 throughout.
void softmax_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t input_multiplier,
                int32_t input_left_shift, int32_t diff_min, int8_t* out);

/// TFLite Micro's int16 softmax over rows of `cols` (output scale 1/32768,
/// zero point 0): e = lut(exp_lut, clamp(requantize(x - max, multiplier,
/// shift) + 32767)); the row's sum normalised by its leading zeros h
/// (clamped to [1, 31]) gives r = lut(one_lut, ...), the reciprocal; out =
/// clamp((e * r + 2^(30 - h)) >> (31 - h), 0, 32767). lut(t, v) is TFLite's
/// generic_int16_table_lookup on a 513-entry table. cols <= 32768.
void softmax_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                 const int16_t* exp_lut, const int16_t* one_lut, int16_t* out);

/// log_softmax over one axis, the tensor viewed as [outer][axis][inner].
void log_softmax_f32(const float* in, float* out, int32_t outer, int32_t axis, int32_t inner);

struct QuantLogSoftmaxParams {
  int32_t input_multiplier, input_left_shift;
  int32_t reverse_scaling_divisor, reverse_scaling_right_shift;
  int32_t diff_min;
};

/// TFLite's int8 LOG_SOFTMAX over rows of `cols` < 4096 (output scale
/// 16/256, zero point 127): the sum of exp over d = x - max >= diff_min in
/// Q12.19, its log in Q5.26 (log_x_for_x_greater_than_or_equal_to_1); out =
/// round((d rescaled - log) / 2^22) + 127 where d exceeds the adjusted
/// diff_min, else -128.
void log_softmax_s8(const int8_t* in, int32_t rows, int32_t cols, const QuantLogSoftmaxParams& p,
                    int8_t* out);

struct QuantMeanParams {
  int32_t input_zero_point, output_zero_point;
  int32_t multiplier, shift;  // 1 / count folded in (TFLite's QuantizedMeanOrSum)
  int32_t act_min, act_max;
};

/// TFLite's integer MEAN over the axes set in axis_mask (bit d: axis d of
/// dims, 1 <= rank <= kMaxRank): per output, the int32 sum of its elements
/// minus count * input_zero_point, requantized, + output_zero_point,
/// clamped. out holds the kept axes in order. The sum must fit int32 (count
/// <= 2^23 at int8, 2^15 at int16).
void mean_s8(const int8_t* in, const int32_t* dims, int32_t rank, uint32_t axis_mask,
             const QuantMeanParams& p, int8_t* out);
void mean_s16(const int16_t* in, const int32_t* dims, int32_t rank, uint32_t axis_mask,
              const QuantMeanParams& p, int16_t* out);

/// softmax_s8 over rows of row_size, with row r masked by mask row r %
/// mask_rows (nonzero: the entry is left out of the max and the sum and
/// outputs -128; a row with none left is all -128). mask null: softmax_s8.
/// exp_table (null: computed): int32 [256], entry d + 255 the exponential of
/// a difference d (d >= diff_min), which softmax_exp_table of
/// aot/torchmcu/reference/reduce.py tabulates: each element costs a lookup
/// instead of two fixed-point exponentials (int8 differences take 256 values).
void softmax_rows_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t input_multiplier,
                     int32_t input_left_shift, int32_t diff_min, const uint8_t* mask, int32_t mask_rows,
                     int8_t* out, const int32_t* exp_table);

/// softmax_s16 with a mask (not null) as softmax_rows_s8's; masked entries output 0.
void softmax_rows_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                      const int16_t* exp_lut, const int16_t* one_lut, const uint8_t* mask, int32_t mask_rows,
                      int16_t* out);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_REDUCE_REDUCE_H_
