// CONV2D_S4 and DEPTHWISE_CONV2D_S4 (W4A8) on CMSIS-NN's s4 wrappers
// (arm_convolve_wrapper_s4, arm_depthwise_conv_wrapper_s4), which read the
// weights packed as the program holds them (two per byte, low nibble first,
// over the whole tensor). Operands as CONV2D_S8 (conv_s8.cc).
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

using schema::QuantConv2dArgs;

constexpr uint32_t kScratch = 5;

uint32_t scratch_bytes(const OpContext& ctx) { return uint32_t(scratch(ctx, kScratch).size); }

Error conv2d_check(const OpContext& ctx) {
  TMCU_TRY(portable::kConv2dS4.check(ctx));
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  TMCU_CHECK(shapes_fit(a), Error::InvalidOp);
  const cmsis_nn_conv_params cp = conv_params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = arm_convolve_wrapper_s4_get_buffer_size(&cp, &in, &filter, &out);
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
  const arm_cmsis_nn_status s = arm_convolve_wrapper_s4(
      &c, &cp, &q, &in, ctx.in<const int8_t>(0), &filter, ctx.in<const int8_t>(1), &bias,
      ctx.in<const int32_t>(2), &out, ctx.out<int8_t>(0));
  // check() rules out every argument error; should CMSIS-NN still refuse,
  // the portable kernel computes the same bits.
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kConv2dS4.run(ctx);
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_TRY(portable::kDepthwiseConv2dS4.check(ctx));
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  TMCU_CHECK(shapes_fit(a), Error::InvalidOp);
  const cmsis_nn_dw_conv_params dp = dw_params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = arm_depthwise_conv_wrapper_s4_get_buffer_size(&dp, &in, &filter, &out);
  TMCU_CHECK(need <= 0 || scratch_bytes(ctx) >= uint32_t(need), Error::InvalidOp);
  return Error::Ok;
}

// The depthwise shapes whose CMSIS-NN s4 results were found bit-exact with
// the portable kernel in QEMU (tests/test_int4.py; CMSIS-NN 7.x): with one
// output per input channel, the optimized kernel on DSP cores (its MVE
// variant gave other bits for every shape tried, even channel counts
// included); with a multiplier, the generic kernel when the input channel
// count is even (odd counts gave other bits on M4 and M55). Other shapes run
// on the portable kernel.
bool cmsis_nn_depthwise_s4_ok(const QuantConv2dArgs& a) {
#if defined(ARM_MATH_MVEI)
  const bool optimized_ok = false;
#else
  const bool optimized_ok = true;
#endif
  const bool optimized = a.multiplier == 1 && a.x[0] == 1 && a.dilation_h == 1 && a.dilation_w == 1;
  return optimized ? optimized_ok : (a.x[3] % 2) == 0;
}

void depthwise_run(const OpContext& ctx) {
  const QuantConv2dArgs& a = ctx.args<QuantConv2dArgs>();
  if (!cmsis_nn_depthwise_s4_ok(a)) {
    portable::kDepthwiseConv2dS4.run(ctx);
    return;
  }
  const cmsis_nn_dw_conv_params dp = dw_params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kScratch);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_depthwise_conv_wrapper_s4(
      &c, &dp, &q, &in, ctx.in<const int8_t>(0), &filter, ctx.in<const int8_t>(1), &bias,
      ctx.in<const int32_t>(2), &out, ctx.out<int8_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kDepthwiseConv2dS4.run(ctx);
}

}  // namespace

const Kernel kConv2dS4 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS4 = {depthwise_check, depthwise_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
