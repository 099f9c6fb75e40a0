// CONV2D_S8 and DEPTHWISE_CONV2D_S8 on CMSIS-NN's wrappers, which pick the
// variant for the shape and core (1x1, 1xN, im2col + GEMM; 3x3, optimized or
// generic depthwise). Operands: x (NHWC), w (OHWI / [1, kh, kw, C*m]), bias,
// multiplier, shift (int32 [oc]), scratch (int8, planned) when CMSIS-NN needs one.
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

Error conv2d_check(const OpContext& ctx) {
  return conv_check(ctx, portable::kConv2dS8, conv_params, arm_convolve_wrapper_s8_get_buffer_size);
}

void conv2d_run(const OpContext& ctx) {
  conv_run(ctx, portable::kConv2dS8, conv_params, arm_convolve_wrapper_s8);
}

Error depthwise_check(const OpContext& ctx) {
  return conv_check(ctx, portable::kDepthwiseConv2dS8, dw_params, arm_depthwise_conv_wrapper_s8_get_buffer_size);
}

void depthwise_run(const OpContext& ctx) {
  conv_run(ctx, portable::kDepthwiseConv2dS8, dw_params, arm_depthwise_conv_wrapper_s8);
}

}  // namespace

const Kernel kConv2dS8 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS8 = {depthwise_check, depthwise_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
