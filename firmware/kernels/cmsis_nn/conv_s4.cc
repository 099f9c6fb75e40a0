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

Error conv2d_check(const OpContext& ctx) {
  return conv_check(ctx, portable::kConv2dS4, conv_params, arm_convolve_wrapper_s4_get_buffer_size);
}

void conv2d_run(const OpContext& ctx) {
  conv_run(ctx, portable::kConv2dS4, conv_params, arm_convolve_wrapper_s4);
}

Error depthwise_check(const OpContext& ctx) {
  return conv_check(ctx, portable::kDepthwiseConv2dS4, dw_params, arm_depthwise_conv_wrapper_s4_get_buffer_size);
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
  if (!cmsis_nn_depthwise_s4_ok(ctx.args<QuantConv2dArgs>())) {
    portable::kDepthwiseConv2dS4.run(ctx);
    return;
  }
  conv_run(ctx, portable::kDepthwiseConv2dS4, dw_params, arm_depthwise_conv_wrapper_s4);
}

}  // namespace

const Kernel kConv2dS4 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS4 = {depthwise_check, depthwise_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
