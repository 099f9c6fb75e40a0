// CONV2D_S8 and DEPTHWISE_CONV2D_S8 on CMSIS-NN's wrappers, which pick the
// variant for the shape and core (1x1, 1xN, im2col + GEMM; 3x3, optimized or
// generic depthwise). Operands: x (NHWC), w (OHWI / [1, kh, kw, C*m]), bias,
// multiplier, shift (int32 [oc]), scratch (int8, planned) when CMSIS-NN needs one.
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

using schema::QuantConv2dArgs;

constexpr uint32_t kScratch = 5;

uint32_t scratch_bytes(const OpContext& ctx) { return uint32_t(scratch(ctx, kScratch).size); }

Error conv2d_check(const OpContext& ctx) {
  TMCU_TRY(portable::kConv2dS8.check(ctx));
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  TMCU_CHECK(shapes_fit(a), Error::InvalidOp);
  const cmsis_nn_conv_params cp = conv_params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = arm_convolve_wrapper_s8_get_buffer_size(&cp, &in, &filter, &out);
  TMCU_CHECK(need <= 0 || scratch_bytes(ctx) >= uint32_t(need), Error::InvalidOp);
  return Error::Ok;
}

void conv2d_run(const OpContext& ctx) {
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  const cmsis_nn_conv_params cp = conv_params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kScratch);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_convolve_wrapper_s8(
      &c, &cp, &q, &in, ctx.in<const int8_t>(0), &filter, ctx.in<const int8_t>(1), &bias,
      ctx.in<const int32_t>(2), &out, ctx.out<int8_t>(0));
  // check() rules out every argument error; should CMSIS-NN still refuse,
  // the portable kernel computes the same bits.
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kConv2dS8.run(ctx);
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_TRY(portable::kDepthwiseConv2dS8.check(ctx));
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  TMCU_CHECK(shapes_fit(a), Error::InvalidOp);
  const cmsis_nn_dw_conv_params dp = dw_params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = arm_depthwise_conv_wrapper_s8_get_buffer_size(&dp, &in, &filter, &out);
  TMCU_CHECK(need <= 0 || scratch_bytes(ctx) >= uint32_t(need), Error::InvalidOp);
  return Error::Ok;
}

void depthwise_run(const OpContext& ctx) {
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  const cmsis_nn_dw_conv_params dp = dw_params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kScratch);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_depthwise_conv_wrapper_s8(
      &c, &dp, &q, &in, ctx.in<const int8_t>(0), &filter, ctx.in<const int8_t>(1), &bias,
      ctx.in<const int32_t>(2), &out, ctx.out<int8_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kDepthwiseConv2dS8.run(ctx);
}

}  // namespace

const Kernel kConv2dS8 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS8 = {depthwise_check, depthwise_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
