// The conv family's math (LINEAR_*, CONV2D_*, DEPTHWISE_CONV2D_*,
// TRANSPOSE_CONV2D_*): float32, int8, int4 weights (W4A8) and a16w8. The
// executor's checks and runs: ops_conv.cc. Conventions: common/types.h.
#ifndef TORCHMCU_KERNELS_PORTABLE_CONV_CONV_H_
#define TORCHMCU_KERNELS_PORTABLE_CONV_CONV_H_

#include <cstddef>
#include <cstdint>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

/// out[b][o] = act(bias[o] + sum_i in[b][i] * w[o][i]).
/// w is [out_features][in_features]; bias may be null (zero).
void linear_f32(const float* in, const float* w, const float* bias, float* out,
                int32_t batch, int32_t in_features, int32_t out_features,
                ActRange act);

struct Conv2dParams {
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;  // zero padding; bottom/right follow from shapes
  int32_t dilation_h, dilation_w;
  int32_t groups;             // in.c and out.c are both multiples of groups
  ActRange act;
};

/// Grouped 2-D convolution. in: NHWC `in_shape`; w: OHWI with
/// I = in_shape.c / groups; bias may be null; out: NHWC `out_shape`.
/// Taps that fall in the padding read zero.
void conv2d_f32(const float* in, Shape4 in_shape, const float* w,
                int32_t kernel_h, int32_t kernel_w, const float* bias,
                float* out, Shape4 out_shape, const Conv2dParams& p);

/// Depthwise 2-D convolution (groups == in channels). w: [kh][kw][out.c],
/// out.c = in.c * multiplier; p.groups is ignored.
void depthwise_conv2d_f32(const float* in, Shape4 in_shape, const float* w,
                          int32_t kernel_h, int32_t kernel_w, int32_t multiplier,
                          const float* bias, float* out, Shape4 out_shape,
                          const Conv2dParams& p);

/// Transposed 2-D convolution (TFLite's TRANSPOSE_CONV, PyTorch's
/// conv_transpose2d cropped at pad_top / pad_left to out_shape): output pixel
/// (oy, ox) = bias + sum of in[iy][ix] * w[oc][ky][kx] over the taps with
/// oy = iy * stride_h - pad_top + ky, ox likewise. w: [out_c][kh][kw][gc]:
/// grouped, group g = oc / (out_c / groups) reads input channels g * gc ..
/// g * gc + gc - 1 (gc = group_channels = in_c / groups; PyTorch's groups).
/// bias may be null; dilation 1 (p's groups is not read).
void transpose_conv2d_f32(const float* in, Shape4 in_shape, const float* w, int32_t kernel_h,
                          int32_t kernel_w, int32_t group_channels, const float* bias, float* out, Shape4 out_shape,
                          const Conv2dParams& p);

struct QuantConvParams {
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t dilation_h, dilation_w;
  int32_t input_offset;   // padded taps contribute 0 (they hold the zero point)
  int32_t output_offset;
  int32_t act_min, act_max;
  // The op's planned scratch operand (RAM of the arena, live during the op),
  // or null: the fast paths' buffers (kernels/fast: conv_scratch,
  // dw::kRowsScratch, dw::rows_scratch_bytes), which take the generic loop
  // when it is absent or too small. The generic kernels need none.
  int8_t* scratch = nullptr;
  int32_t scratch_bytes = 0;
};

/// conv2d_s8, depthwise_conv2d_s8 and linear_s8 require their multipliers in
/// [0, 2^31), shifts in [-31, 30] and biases small enough that the int32
/// accumulator cannot overflow (see requant_in_range in common/requantize.h):
/// the executor's glue (ops_conv.cc) checks these tensor values when the op
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
// (ops_conv.cc) bounds the accumulators for products of at most 255 * 8.

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

/// TFLite's int8 TRANSPOSE_CONV (reference_integer_ops::TransposeConv):
/// output pixel (oy, ox) sums (x[iy][ix] + input_offset) * w[oc][ky][kx]
/// over the taps with oy = iy * stride_h - pad_top + ky, ox likewise;
/// out = clamp(requantize(bias[oc] + sum, multiplier[oc], shift[oc]) +
/// output_offset). w: [out_c][kh][kw][group_channels], grouped as
/// transpose_conv2d_f32; bias may be null; dilation 1.
void transpose_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t group_channels, const int32_t* bias, const int32_t* multiplier,
                         const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p);

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

/// transpose_conv2d_s8's sum on int16 x (no offsets) in int64 with an
/// int64 bias, requantized by requantize_s64 (TFLite's int16x8 TRANSPOSE_CONV).
void transpose_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                          int32_t kernel_w, int32_t group_channels, const int64_t* bias, const int32_t* multiplier,
                          const int32_t* shift, int16_t* out, Shape4 out_shape, const QuantConvS16Params& p);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_CONV_CONV_H_
