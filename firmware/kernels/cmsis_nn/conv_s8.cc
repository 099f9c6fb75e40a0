// CONV2D_S8 (grouped too: arm_convolve_s8 takes groups) and
// DEPTHWISE_CONV2D_S8 on CMSIS-NN's wrappers, which pick the variant for
// the shape and core (1x1, 1xN, im2col + GEMM; 3x3, optimized or generic
// depthwise). Operands: x (NHWC), w (OHWI / [1, kh, kw, C*m]), bias,
// multiplier, shift (int32 [oc]), scratch (int8, planned) when CMSIS-NN
// needs one.
#include "arm_nnsupportfunctions.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

// A 1xN shape (arm_convolve_1_x_n_s8) padded other than TFLite's way
// (left = total / 2, right = the rest): a causal convolution, say. MVE's
// 1xN kernel refuses it, so it runs on arm_convolve_s8 (which the 1xN
// kernel calls on other cores anyway).
bool uneven_1xn(const cmsis_nn_conv_params& p, const cmsis_nn_dims& in, const cmsis_nn_dims& filter,
                const cmsis_nn_dims& out) {
  if (!arm_nn_is_convolve_1_x_n(&p, &in, &filter)) return false;
  const int32_t total = (out.w - 1) * p.stride.w + filter.w - in.w;
  return p.padding.w * 2 + total % 2 != total;
}

int32_t conv2d_buffer_size(const cmsis_nn_conv_params* p, const cmsis_nn_dims* in, const cmsis_nn_dims* filter,
                           const cmsis_nn_dims* out) {
  return uneven_1xn(*p, *in, *filter, *out) ? arm_convolve_s8_get_buffer_size(in, filter)
                                            : arm_convolve_wrapper_s8_get_buffer_size(p, in, filter, out);
}

arm_cmsis_nn_status conv2d(const cmsis_nn_context* ctx, const cmsis_nn_conv_params* p,
                           const cmsis_nn_per_channel_quant_params* q, const cmsis_nn_dims* in, const int8_t* x,
                           const cmsis_nn_dims* filter, const int8_t* w, const cmsis_nn_dims* bias_dims,
                           const int32_t* bias, const cmsis_nn_dims* out, int8_t* y) {
  if (uneven_1xn(*p, *in, *filter, *out)) {
    return arm_convolve_s8(ctx, p, q, in, x, filter, w, bias_dims, bias, nullptr, out, y);
  }
  return arm_convolve_wrapper_s8(ctx, p, q, in, x, filter, w, bias_dims, bias, out, y);
}

Error conv2d_check(const OpContext& ctx) {
  return conv_check(ctx, portable::kConv2dS8, conv_params, conv2d_buffer_size);
}

void conv2d_run(const OpContext& ctx) { conv_run(ctx, portable::kConv2dS8, conv_params, conv2d); }

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
