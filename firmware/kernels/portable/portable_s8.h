// Int8 portable kernels: the integer arithmetic of CMSIS-NN and of TensorFlow
// Lite Micro's reference kernels, bit for bit. aot/torchmcu/reference/ is
// the NumPy twin of every function here and the expectation the tests use.
//
// Layouts as in portable_f32.h: activations NHWC, convolution weights OHWI,
// depthwise weights [1][kh][kw][out_channels].
//
// Quantization: real = scale * (q - zero_point). Kernels take offsets, not
// zero points: input_offset = -input_zero_point (added to each input value),
// output_offset = output_zero_point (added after requantization). Outputs are
// clamped to [act_min, act_max] (int8 values; a fused ReLU raises act_min).
//
// Requantization (requantize below) is CMSIS-NN's arm_nn_requantize, i.e.
// TFLite's MultiplyByQuantizedMultiplier with double rounding: the real
// multiplier is multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) or 0,
// shift in [-31, 30].
#ifndef TORCHMCU_KERNELS_PORTABLE_S8_H_
#define TORCHMCU_KERNELS_PORTABLE_S8_H_

#include <cstddef>
#include <cstdint>

#include "kernels/portable/portable_f32.h"

namespace torchmcu {
namespace portable {

/// x * 2^max(shift, 0), then the rounding doubling high multiply by
/// `multiplier` (floor((v * multiplier + 2^30) / 2^31): ties round up, as
/// arm_nn_doubling_high_mult_no_sat and TFLite's
/// SaturatingRoundingDoublingHighMul), then a rounding right shift by
/// max(-shift, 0) (round half away from zero, as
/// arm_nn_divide_by_power_of_two). Exact for every int32 x: where x * 2^shift
/// would overflow int32 (CMSIS-NN and TFLite wrap) the result saturates.
int32_t requantize(int32_t x, int32_t multiplier, int32_t shift);

struct QuantConvParams {
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t dilation_h, dilation_w;
  int32_t input_offset;   // padded taps contribute 0 (they hold the zero point)
  int32_t output_offset;
  int32_t act_min, act_max;
};

/// conv2d_s8, depthwise_conv2d_s8 and linear_s8 require their multipliers in
/// [0, 2^31), shifts in [-31, 30] and biases small enough that the int32
/// accumulator cannot overflow (see requant_in_range in requantize_s8.h):
/// the executor's glue (ops_s8.cc) checks these tensor values when the op
/// runs and outputs zeros instead of calling the kernel on others.
///
/// acc = bias[c] + sum over taps and input channels of (in + input_offset) * w;
/// out = clamp(requantize(acc, multiplier[c], shift[c]) + output_offset).
/// bias may be null (zero). groups == 1. The output's size gives the bottom
/// and right padding (any: a causal convolution pads the left side only).
void conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
               int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
               const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p);

/// Grouped: w is OHWI with I = group_channels (in_shape.c / groups
/// groups); output channel o reads the input channels of group o / (O /
/// groups). conv2d_s8 is the one-group case.
void grouped_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                       int32_t kernel_w, int32_t group_channels, const int32_t* bias,
                       const int32_t* multiplier, const int32_t* shift, int8_t* out, Shape4 out_shape,
                       const QuantConvParams& p);

/// Depthwise: output channel c reads input channel c / depth_multiplier;
/// requantization per output channel as conv2d_s8.
void depthwise_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t depth_multiplier, const int32_t* bias,
                         const int32_t* multiplier, const int32_t* shift, int8_t* out,
                         Shape4 out_shape, const QuantConvParams& p);

/// out[b][o] = clamp(requantize(bias[o] + sum_i in[b][i] * w[o][i], m, s) + output_offset)
/// where bias already includes input_offset * sum_i w[o][i] (the "kernel sums",
/// folded ahead of time), and (m, s) = (multiplier[o], shift[o]) when
/// num_requant == out_features, else (multiplier[0], shift[0]).
void linear_s8(const int8_t* in, const int8_t* w, const int32_t* bias,
               const int32_t* multiplier, const int32_t* shift, int32_t num_requant, int8_t* out,
               int32_t batch, int32_t in_features, int32_t out_features, int32_t output_offset,
               int32_t act_min, int32_t act_max);

// ---- W4A8: int4 weights, int8 activations --------------------------------
// Weights are packed two per byte over the tensor's elements in order: element
// i is the low nibble of byte i / 2 when i is even, the high nibble when odd
// (a row may start mid-byte when its length is odd), each a two's complement
// value in [-8, 7]; CMSIS-NN's s4 kernels read the same layout. Layouts,
// arithmetic and requirements otherwise as the _s8 kernels above; the glue
// (ops_s8.cc) bounds the accumulators for products of at most 255 * 8.

/// Weight element i of a packed int4 tensor.
inline int32_t int4_at(const int8_t* packed, int32_t i) {
  const int32_t byte = static_cast<uint8_t>(packed[i >> 1]);
  return (((i & 1) ? byte >> 4 : byte & 15) ^ 8) - 8;
}

/// conv2d_s8 with packed int4 OHWI weights.
void conv2d_s4(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
               int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
               const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p);

/// depthwise_conv2d_s8 with packed int4 [1][kh][kw][C*m] weights.
void depthwise_conv2d_s4(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t depth_multiplier, const int32_t* bias,
                         const int32_t* multiplier, const int32_t* shift, int8_t* out,
                         Shape4 out_shape, const QuantConvParams& p);

/// linear_s8 with packed int4 [out][in] weights (bias with the kernel sums folded in).
void linear_s4(const int8_t* in, const int8_t* w, const int32_t* bias,
               const int32_t* multiplier, const int32_t* shift, int32_t num_requant, int8_t* out,
               int32_t batch, int32_t in_features, int32_t out_features, int32_t output_offset,
               int32_t act_min, int32_t act_max);

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

struct QuantBatchMatmulParams {
  int32_t lhs_offset, rhs_offset;
  int32_t output_multiplier, output_shift, output_offset;
  int32_t act_min, act_max;
};

/// TFLite's int8 BATCH_MATMUL (reference_ops::BatchMatMul, per-tensor): for
/// each of `batch` matrices a [m][k] and bm [k][n],
///   acc = sum_k (a[i][k] + lhs_offset) * (bm[k][j] + rhs_offset)  (int32)
///   out[i][j] = clamp(requantize(acc, output_multiplier, output_shift) + output_offset).
/// The caller keeps k * 255 * 255 within int32.
void batch_matmul_s8(const int8_t* a, const int8_t* bm, int8_t* out, int32_t batch, int32_t m,
                     int32_t k, int32_t n, const QuantBatchMatmulParams& p);

struct QuantPoolParams {
  int32_t kernel_h, kernel_w;
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t act_min, act_max;
};

/// PyTorch's pooling options beyond TFLite's (the defaults are TFLite's).
struct PoolOptions {
  int32_t dilation_h = 1, dilation_w = 1;  // max pool: taps dilation apart
  int32_t count_include_pad = 0;          // avg pool: divide by the padded window
  int32_t divisor_override = 0;           // avg pool: > 0 replaces the divisor
  int32_t pad_bottom = 0, pad_right = 0;  // bound of count_include_pad's window
  int32_t zero_point = 0;                 // the value of the taps a divisor counts beyond the in-bounds ones
};

/// Max over the in-bounds taps of each window (taps dilation apart),
/// clamped. Same quantization in and out.
void max_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                   const QuantPoolParams& p, const PoolOptions& o = PoolOptions());

/// Sum of the in-bounds taps, plus zero_point for each tap the divisor
/// counts beyond them (PyTorch pads with real 0), divided by the divisor,
/// rounding half away from zero ((sum +- divisor/2) / divisor in integer
/// division), clamped. The divisor is PyTorch's: divisor_override when > 0;
/// with count_include_pad, the window clipped to [-pad_top, H + pad_bottom)
/// x [-pad_left, W + pad_right); else the in-bounds taps (TFLite's; a window
/// with none outputs clamp(0)).
void avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                   const QuantPoolParams& p, const PoolOptions& o = PoolOptions());

/// The divisor of avg_pool2d_s8's window at (iy0, ix0) = (oy * stride_h -
/// pad_top, ox * stride_w - pad_left) with `count` in-bounds taps.
inline int32_t pool_divisor(const QuantPoolParams& p, const PoolOptions& o, Shape4 in_shape, int32_t iy0,
                            int32_t ix0, int32_t count) {
  if (o.divisor_override > 0) return o.divisor_override;
  if (!o.count_include_pad) return count > 0 ? count : 1;
  const int32_t y1 = iy0 + p.kernel_h < in_shape.h + o.pad_bottom ? iy0 + p.kernel_h : in_shape.h + o.pad_bottom;
  const int32_t x1 = ix0 + p.kernel_w < in_shape.w + o.pad_right ? ix0 + p.kernel_w : in_shape.w + o.pad_right;
  const int32_t d = (y1 - iy0) * (x1 - ix0);
  return d > 0 ? d : 1;
}

/// Adaptive average pooling (PyTorch's windows: rows [floor(i H / OH),
/// ceil((i + 1) H / OH)), columns likewise), each averaged as avg_pool2d_s8
/// (all taps in bounds), clamped to [act_min, act_max]. Shared quantization.
void adaptive_avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                            int32_t act_min, int32_t act_max);

/// TFLite's int8 TRANSPOSE_CONV (reference_integer_ops::TransposeConv):
/// output pixel (oy, ox) sums (x[iy][ix] + input_offset) * w[oc][ky][kx]
/// over the taps with oy = iy * stride_h - pad_top + ky, ox likewise;
/// out = clamp(requantize(bias[oc] + sum, multiplier[oc], shift[oc]) +
/// output_offset). w: [out_c][kh][kw][in_c]; bias may be null; dilation 1.
void transpose_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
                         const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p);

/// TFLite's ResizeBilinearInteger (double rounding) on int8 values: the four
/// neighbours' raw values weighted in 1/1024 units of the source position
/// (scale rounded to 1/1024; half_pixel_centers: TFLite's offsets), the
/// sum divided by 2^20 rounding half away from zero. Shared quantization.
void resize_bilinear_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape, bool align_corners,
                        bool half_pixel_centers);

/// TFLite/CMSIS-NN int8 softmax over rows of `row_size` (output scale 1/256,
/// zero point -128): fixed-point exp of (x - row max) scaled by
/// (input_multiplier, input_left_shift), inputs with diff < diff_min give 0
/// (-128), as arm_softmax_s8. Exact for row_size < 8192; a row whose sum of
/// exponentials reaches 2^28 (where CMSIS-NN and TFLite would shift by more
/// than 31) outputs -128 throughout.
void softmax_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t input_multiplier,
                int32_t input_left_shift, int32_t diff_min, int8_t* out);

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

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_S8_H_
