// CONV2D_S8 and DEPTHWISE_CONV2D_S8 on CMSIS-NN's wrappers, which pick the
// variant for the shape and core (1x1, 1xN, im2col + GEMM; 3x3, optimized or
// generic depthwise). Operands: x (NHWC), w (OHWI / [1, kh, kw, C*m]), bias,
// multiplier, shift (int32 [oc]), scratch (int8, planned) when CMSIS-NN needs one.
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

constexpr uint32_t kScratch = 5;

cmsis_nn_conv_params conv_params(const schema::QuantConv2dParams& p) {
  cmsis_nn_conv_params c;
  c.input_offset = p.input_offset();
  c.output_offset = p.output_offset();
  c.stride = cmsis_nn_tile{p.stride_w(), p.stride_h()};
  c.padding = cmsis_nn_tile{p.pad_left(), p.pad_top()};
  c.dilation = cmsis_nn_tile{p.dilation_w(), p.dilation_h()};
  c.activation = cmsis_nn_activation{p.act_min(), p.act_max()};
  return c;
}

cmsis_nn_dw_conv_params dw_params(const schema::QuantConv2dParams& p) {
  cmsis_nn_dw_conv_params c;
  c.input_offset = p.input_offset();
  c.output_offset = p.output_offset();
  c.ch_mult = p.multiplier();
  c.stride = cmsis_nn_tile{p.stride_w(), p.stride_h()};
  c.padding = cmsis_nn_tile{p.pad_left(), p.pad_top()};
  c.dilation = cmsis_nn_tile{p.dilation_w(), p.dilation_h()};
  c.activation = cmsis_nn_activation{p.act_min(), p.act_max()};
  return c;
}

cmsis_nn_per_channel_quant_params quant(const OpContext& ctx) {
  return cmsis_nn_per_channel_quant_params{ctx.inputs[3].as<int32_t>(),
                                           ctx.inputs[4].as<int32_t>()};
}

// CMSIS-NN holds dims, strides and pads of convolutions in 16 bits.
bool shapes_fit(const OpContext& ctx, const schema::QuantConv2dParams& p) {
  const TensorView* const tensors[3] = {&ctx.inputs[0], &ctx.inputs[1], &ctx.outputs[0]};
  for (const TensorView* t : tensors) {
    for (int32_t d = 0; d < 4; ++d) {
      if (!fits_u16(t->dims[d])) return false;
    }
  }
  return fits_u16(p.stride_h()) && fits_u16(p.stride_w()) && fits_u16(p.pad_top()) &&
         fits_u16(p.pad_left());
}

Error conv2d_check(const OpContext& ctx) {
  TMCU_TRY(portable::kConv2dS8.check(ctx));
  const schema::QuantConv2dParams p = ctx.op.params_as_QuantConv2dParams();
  TMCU_CHECK(shapes_fit(ctx, p), Error::InvalidOp);
  const cmsis_nn_conv_params cp = conv_params(p);
  const cmsis_nn_dims in = nhwc(ctx.inputs[0]);
  const cmsis_nn_dims filter = nhwc(ctx.inputs[1]);
  const cmsis_nn_dims out = nhwc(ctx.outputs[0]);
  const int32_t need = arm_convolve_wrapper_s8_get_buffer_size(&cp, &in, &filter, &out);
  TMCU_CHECK(need <= 0 || scratch_bytes(ctx, kScratch) >= uint32_t(need), Error::InvalidOp);
  return Error::Ok;
}

void conv2d_run(const OpContext& ctx) {
  const cmsis_nn_conv_params cp = conv_params(ctx.op.params_as_QuantConv2dParams());
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kScratch);
  const cmsis_nn_dims in = nhwc(ctx.inputs[0]);
  const cmsis_nn_dims filter = nhwc(ctx.inputs[1]);
  const cmsis_nn_dims out = nhwc(ctx.outputs[0]);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_convolve_wrapper_s8(
      &c, &cp, &q, &in, ctx.inputs[0].as<const int8_t>(), &filter, ctx.inputs[1].as<const int8_t>(),
      &bias, ctx.inputs[2].as<const int32_t>(), &out, ctx.outputs[0].as<int8_t>());
  // check() rules out every argument error; should CMSIS-NN still refuse,
  // the portable kernel computes the same bits.
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kConv2dS8.run(ctx);
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_TRY(portable::kDepthwiseConv2dS8.check(ctx));
  const schema::QuantConv2dParams p = ctx.op.params_as_QuantConv2dParams();
  TMCU_CHECK(shapes_fit(ctx, p), Error::InvalidOp);
  const cmsis_nn_dw_conv_params dp = dw_params(p);
  const cmsis_nn_dims in = nhwc(ctx.inputs[0]);
  const cmsis_nn_dims filter = nhwc(ctx.inputs[1]);
  const cmsis_nn_dims out = nhwc(ctx.outputs[0]);
  const int32_t need = arm_depthwise_conv_wrapper_s8_get_buffer_size(&dp, &in, &filter, &out);
  TMCU_CHECK(need <= 0 || scratch_bytes(ctx, kScratch) >= uint32_t(need), Error::InvalidOp);
  return Error::Ok;
}

void depthwise_run(const OpContext& ctx) {
  const cmsis_nn_dw_conv_params dp = dw_params(ctx.op.params_as_QuantConv2dParams());
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kScratch);
  const cmsis_nn_dims in = nhwc(ctx.inputs[0]);
  const cmsis_nn_dims filter = nhwc(ctx.inputs[1]);
  const cmsis_nn_dims out = nhwc(ctx.outputs[0]);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_depthwise_conv_wrapper_s8(
      &c, &dp, &q, &in, ctx.inputs[0].as<const int8_t>(), &filter, ctx.inputs[1].as<const int8_t>(),
      &bias, ctx.inputs[2].as<const int32_t>(), &out, ctx.outputs[0].as<int8_t>());
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kDepthwiseConv2dS8.run(ctx);
}

}  // namespace

const Kernel kConv2dS8 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS8 = {depthwise_check, depthwise_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
