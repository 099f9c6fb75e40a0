// Internal to the CMSIS-NN kernels: CMSIS-NN's headers and the conversions
// from kernel arguments to its argument structs.
#ifndef TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_
#define TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_

#include "arm_nnfunctions.h"
#include "core/kernel.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace cmsis_nn {

/// NHWC dims as CMSIS-NN's.
inline cmsis_nn_dims nhwc(const int32_t* d) { return cmsis_nn_dims{d[0], d[1], d[2], d[3]}; }

/// The optional scratch operand (input `index`): its bytes, or none.
inline cmsis_nn_context scratch(const OpContext& ctx, uint32_t index) {
  cmsis_nn_context c{nullptr, 0};
  if (ctx.num_inputs() > index && OpContext::present(ctx.input(index))) {
    c.buf = ctx.in<void>(index);
    c.size = int32_t(ctx.input(index).nbytes);
  }
  return c;
}

/// CMSIS-NN's convolutions keep dims and pads in 16 bits.
inline bool fits_u16(int32_t v) { return v >= 0 && v <= 0xffff; }

// Convolution arguments (CONV2D_S8/S4, DEPTHWISE_CONV2D_S8/S4) as CMSIS-NN's structs.
inline cmsis_nn_conv_params conv_params(const schema::QuantConv2dArgs& a) {
  cmsis_nn_conv_params c;
  c.input_offset = a.input_offset;
  c.output_offset = a.output_offset;
  c.stride = cmsis_nn_tile{a.stride_w, a.stride_h};
  c.padding = cmsis_nn_tile{a.pad_left, a.pad_top};
  c.dilation = cmsis_nn_tile{a.dilation_w, a.dilation_h};
  c.activation = cmsis_nn_activation{a.act_min, a.act_max};
  return c;
}

inline cmsis_nn_dw_conv_params dw_params(const schema::QuantConv2dArgs& a) {
  cmsis_nn_dw_conv_params c;
  c.input_offset = a.input_offset;
  c.output_offset = a.output_offset;
  c.ch_mult = a.multiplier;
  c.stride = cmsis_nn_tile{a.stride_w, a.stride_h};
  c.padding = cmsis_nn_tile{a.pad_left, a.pad_top};
  c.dilation = cmsis_nn_tile{a.dilation_w, a.dilation_h};
  c.activation = cmsis_nn_activation{a.act_min, a.act_max};
  return c;
}

inline cmsis_nn_per_channel_quant_params quant(const OpContext& ctx) {
  return cmsis_nn_per_channel_quant_params{ctx.in<int32_t>(3), ctx.in<int32_t>(4)};
}

// CMSIS-NN holds dims, strides and pads of convolutions in 16 bits.
inline bool shapes_fit(const schema::QuantConv2dArgs& a) {
  for (int32_t d = 0; d < 4; ++d) {
    if (!fits_u16(a.x[d]) || !fits_u16(a.w[d]) || !fits_u16(a.y[d])) return false;
  }
  return fits_u16(a.stride_h) && fits_u16(a.stride_w) && fits_u16(a.pad_top) && fits_u16(a.pad_left);
}

// The convolutions (CONV2D_S8/S4, DEPTHWISE_CONV2D_S8/S4) share operands
// (x, w, bias, multiplier, shift, scratch) and the shape of CMSIS-NN's entry
// points: a wrapper that picks the variant, and its scratch-size function.
// P is cmsis_nn_conv_params or cmsis_nn_dw_conv_params.
constexpr uint32_t kConvScratch = 5;

template <typename P>
using ConvBufferSize = int32_t (*)(const P*, const cmsis_nn_dims*, const cmsis_nn_dims*,
                                   const cmsis_nn_dims*);
template <typename P>
using ConvWrapper = arm_cmsis_nn_status (*)(const cmsis_nn_context*, const P*,
                                            const cmsis_nn_per_channel_quant_params*,
                                            const cmsis_nn_dims*, const int8_t*, const cmsis_nn_dims*,
                                            const int8_t*, const cmsis_nn_dims*, const int32_t*,
                                            const cmsis_nn_dims*, int8_t*);

/// The portable kernel's checks, dims CMSIS-NN can hold, and a planned
/// scratch of at least what the wrapper asks for.
template <typename P>
Error conv_check(const OpContext& ctx, const Kernel& portable, P (*params)(const schema::QuantConv2dArgs&),
                 ConvBufferSize<P> buffer_size) {
  TMCU_TRY(portable.check(ctx));
  const schema::QuantConv2dArgs& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(shapes_fit(a), Error::InvalidOp);
  const P p = params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = buffer_size(&p, &in, &filter, &out);
  TMCU_CHECK(need <= 0 || scratch(ctx, kConvScratch).size >= need, Error::InvalidOp);
  return Error::Ok;
}

/// Runs the wrapper; check() rules out every argument error, and should
/// CMSIS-NN still refuse, the portable kernel computes the same bits.
template <typename P>
void conv_run(const OpContext& ctx, const Kernel& portable, P (*params)(const schema::QuantConv2dArgs&),
              ConvWrapper<P> wrapper) {
  const schema::QuantConv2dArgs& a = ctx.args<schema::QuantConv2dArgs>();
  const P p = params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kConvScratch);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = wrapper(&c, &p, &q, &in, ctx.in<const int8_t>(0), &filter,
                                        ctx.in<const int8_t>(1), &bias, ctx.in<const int32_t>(2), &out,
                                        ctx.out<int8_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable.run(ctx);
}

// Pools (MAX_POOL2D / AVG_POOL2D, S8 and S16) on arm_max_pool_* and
// arm_avgpool_*. CMSIS-NN requires every window to hold at least one input
// tap (avg pool returns an argument error, max pool leaves the output
// unwritten): padding smaller than the kernel guarantees that, and PyTorch's
// pools (padding at most half the kernel) always have it. On DSP cores
// (without MVE) the avg pools accumulate in a buffer of one int32 per
// channel; pools have no scratch operand, so it is a fixed stack array of
// kPoolChannels entries. Other shapes run on the portable kernel (same bits).
constexpr int32_t kPoolChannels = 256;

template <typename T>
using PoolFn = arm_cmsis_nn_status (*)(const cmsis_nn_context*, const cmsis_nn_pool_params*,
                                       const cmsis_nn_dims*, const T*, const cmsis_nn_dims*,
                                       const cmsis_nn_dims*, T*);

/// `buffer_bytes`: what the CMSIS-NN function asks for (its
/// *_get_buffer_size; 0 for max pool).
template <typename T>
void pool_run(const OpContext& ctx, const Kernel& portable, PoolFn<T> pool, int32_t buffer_bytes) {
  const schema::QuantPool2dArgs& a = ctx.args<schema::QuantPool2dArgs>();
  // CMSIS-NN's pools have TFLite's windows, divisors and rounding: not
  // PyTorch's dilation, count_include_pad, divisor_override or half-to-even mean.
  const bool tflite = a.dilation_h == 1 && a.dilation_w == 1 && !a.count_include_pad && a.divisor_override == 0 &&
                      !a.round_half_even;
  if (!tflite || a.pad_top >= a.kernel_h || a.pad_left >= a.kernel_w ||
      buffer_bytes > int32_t(kPoolChannels * sizeof(int32_t))) {
    portable.run(ctx);
    return;
  }
  int32_t acc[kPoolChannels];
  const cmsis_nn_context c{buffer_bytes > 0 ? acc : nullptr, buffer_bytes};
  cmsis_nn_pool_params pp;
  pp.stride = cmsis_nn_tile{a.stride_w, a.stride_h};
  pp.padding = cmsis_nn_tile{a.pad_left, a.pad_top};
  pp.activation = cmsis_nn_activation{a.act_min, a.act_max};
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter{1, a.kernel_h, a.kernel_w, 1};
  const cmsis_nn_dims out = nhwc(a.y);
  if (pool(&c, &pp, &in, ctx.in<const T>(0), &filter, &out, ctx.out<T>(0)) != ARM_CMSIS_NN_SUCCESS) {
    portable.run(ctx);
  }
}

}  // namespace cmsis_nn
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_
