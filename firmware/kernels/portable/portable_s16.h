// a16w8 portable kernels: int16 activations (symmetric, zero point 0) with
// int8 weights, the integer arithmetic of CMSIS-NN's s16 kernels and of
// TensorFlow Lite Micro's int16x8 reference kernels, bit for bit.
// aot/torchmcu/reference/ (the *_s16 functions) is the NumPy twin.
//
// Layouts as the int8 kernels (portable_s8.h): activations NHWC, convolution
// weights OHWI, depthwise weights [1][kh][kw][out_channels]. Zero points are
// 0, so no offsets are added. Outputs are clamped to [act_min, act_max]
// (int16 values).
//
// Convolution and linear layers accumulate in int64 with an int64 bias and
// requantize with requantize_s64 (CMSIS-NN's arm_nn_requantize_s64): the
// multiplier is reduced to 16 bits, so the 64-bit product cannot overflow
// for any accumulator below 2^47. Element-wise add/mul and the pools use the
// int8 kernels' arithmetic (requantize of portable_s8.h) on int16 values.
//
// Every function is defined for any values of its tensors (multipliers,
// shifts and biases included): out-of-range shifts are clamped and 64-bit
// products and sums wrap.
#ifndef TORCHMCU_KERNELS_PORTABLE_S16_H_
#define TORCHMCU_KERNELS_PORTABLE_S16_H_

#include <cstddef>
#include <cstdint>

#include "kernels/portable/portable_s8.h"

namespace torchmcu {
namespace portable {

/// arm_nn_requantize_s64: reduced = multiplier < 0x7FFF0000 ? (multiplier +
/// 2^15) >> 16 : 0x7FFF; r = int32(acc * reduced >> (14 - shift)) (shift
/// clamped so the shift count lies in [0, 63]; the product wraps); then
/// (r + 1) >> 1, computed in 64 bits.
inline int32_t requantize_s64(int64_t acc, int32_t multiplier, int32_t shift) {
  const int64_t reduced = multiplier < 0x7FFF0000 ? (int64_t(multiplier) + (1 << 15)) >> 16 : 0x7FFF;
  const int32_t total = 14 - (shift < -49 ? -49 : shift > 14 ? 14 : shift);
  const int64_t prod = int64_t(uint64_t(acc) * uint64_t(reduced));
  const int32_t r = int32_t(uint32_t(uint64_t(prod >> total)));
  return int32_t((int64_t(r) + 1) >> 1);
}

struct QuantConvS16Params {
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;  // padded taps contribute 0
  int32_t dilation_h, dilation_w;
  int32_t act_min, act_max;
};

/// acc = bias[c] + sum over taps and input channels of in * w (int64);
/// out = clamp(requantize_s64(acc, multiplier[c], shift[c])). bias may be
/// null (zero). groups == 1.
void conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                int32_t kernel_w, const int64_t* bias, const int32_t* multiplier,
                const int32_t* shift, int16_t* out, Shape4 out_shape, const QuantConvS16Params& p);

/// Grouped as grouped_conv2d_s8 (w: OHWI with I = group_channels).
void grouped_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                        int32_t kernel_w, int32_t group_channels, const int64_t* bias,
                        const int32_t* multiplier, const int32_t* shift, int16_t* out, Shape4 out_shape,
                        const QuantConvS16Params& p);

/// Depthwise: output channel c reads input channel c / depth_multiplier.
void depthwise_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                          int32_t kernel_w, int32_t depth_multiplier, const int64_t* bias,
                          const int32_t* multiplier, const int32_t* shift, int16_t* out,
                          Shape4 out_shape, const QuantConvS16Params& p);

/// out[b][o] = clamp(requantize_s64(bias[o] + sum_i in[b][i] * w[o][i], m, s)) with
/// (m, s) = (multiplier[o], shift[o]) when num_requant == out_features, else
/// (multiplier[0], shift[0]) (per tensor, as arm_fully_connected_s16).
void linear_s16(const int16_t* in, const int8_t* w, const int64_t* bias, const int32_t* multiplier,
                const int32_t* shift, int32_t num_requant, int16_t* out, int32_t batch,
                int32_t in_features, int32_t out_features, int32_t act_min, int32_t act_max);

/// add_s8's arithmetic on int16 values (TFLM's int16 ADD uses left_shift 15).
void add_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p);

/// mul_s8's arithmetic on int16 values.
void mul_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantMulParams& p);

/// max_pool2d_s8 / avg_pool2d_s8 on int16 values.
void max_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o = PoolOptions());
void avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o = PoolOptions());

/// adaptive_avg_pool2d_s8 on int16 values.
void adaptive_avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                             int32_t act_min, int32_t act_max);

/// transpose_conv2d_s8's sum on int16 x (no offsets) in int64 with an
/// int64 bias, requantized by requantize_s64 (TFLite's int16x8 TRANSPOSE_CONV).
void transpose_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                          int32_t kernel_w, const int64_t* bias, const int32_t* multiplier,
                          const int32_t* shift, int16_t* out, Shape4 out_shape, const QuantConvS16Params& p);

/// Bilinear resizing of int16 values at PyTorch's exact source positions
/// (align_corners: o (in - 1) / (out - 1); half_pixel_centers: max((o + 0.5)
/// in / out - 0.5, 0); else o in / out), each neighbour weighted by its
/// fraction rounded to 1/65536; the int64 sum divided by 2^32 rounding half
/// away from zero. (TFLite's 1/1024 positions, which resize_bilinear_s8 keeps
/// for TFLite's bits, would be hundreds of int16 steps off.) Shared quantization.
void resize_bilinear_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                         bool align_corners, bool half_pixel_centers);

/// TFLite Micro's int16 softmax over rows of `cols` (output scale 1/32768,
/// zero point 0): e = lut(exp_lut, clamp(requantize(x - max, multiplier,
/// shift) + 32767)); the row's sum normalised by its leading zeros h
/// (clamped to [1, 31]) gives r = lut(one_lut, ...), the reciprocal; out =
/// clamp((e * r + 2^(30 - h)) >> (31 - h), 0, 32767). lut(t, v) is TFLite's
/// generic_int16_table_lookup on a 513-entry table. cols <= 32768.
void softmax_s16(const int16_t* in, int32_t rows, int32_t cols, int32_t multiplier, int32_t shift,
                 const int16_t* exp_lut, const int16_t* one_lut, int16_t* out);

/// quantize_f32_s8 / dequantize_s8_f32 at int16: round half away from zero
/// of in / scale, plus zero_point, saturated; NaN gives -32768.
void quantize_f32_s16(const float* in, int16_t* out, size_t n, float scale, int32_t zero_point);
void dequantize_s16_f32(const int16_t* in, float* out, size_t n, float scale, int32_t zero_point);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_S16_H_
