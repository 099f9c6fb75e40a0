// The a16w8 ops on CMSIS-NN's s16 kernels: CONV2D_S16 (arm_convolve_wrapper_s16),
// DEPTHWISE_CONV2D_S16 (arm_depthwise_conv_wrapper_s16), LINEAR_S16
// (arm_fully_connected_s16), ADD_S16 / MUL_S16
// (arm_elementwise_add_s16 / mul_s16), MAX_POOL2D_S16 / AVG_POOL2D_S16
// (arm_max_pool_s16 / arm_avgpool_s16).
//
// Each check is the portable kernel's (kernels/portable/<family>/ops_<family>.cc) plus
// CMSIS-NN's own limits; each run calls CMSIS-NN, or the portable kernel for
// what CMSIS-NN has no kernel for (broadcasting add/mul, pool windows that
// may be empty, wide avg pools on DSP cores), and whenever CMSIS-NN returns an error. The same bits either way
// (tests/test_int16.py). Biases are int64 (CMSIS-NN's cmsis_nn_bias_data with
// is_int32_bias false): the accumulator is requantized by
// arm_nn_requantize_s64, as the portable requantize_s64.
#include "kernels/check.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

using schema::QuantPool2dArgs;

// ---- convolutions ---------------------------------------------------------------

Error conv2d_check(const OpContext& ctx) {
  TMCU_TRY(portable::kConv2dS16.check(ctx));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (a.w[3] != a.x[3]) return Error::Ok;  // grouped: arm_convolve_s16 has no groups, the portable kernel runs it
  TMCU_CHECK(shapes_fit(a), Error::InvalidOp);
  const cmsis_nn_conv_params p = conv_params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = arm_convolve_wrapper_s16_get_buffer_size(&p, &in, &filter, &out);
  // arm_convolve_s16 refuses a null buffer even where it would need none.
  TMCU_CHECK(scratch(ctx, kConvScratch).size >= (need > 0 ? need : 1), Error::InvalidOp);
  return Error::Ok;
}

void conv2d_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (a.w[3] != a.x[3]) {
    portable::kConv2dS16.run(ctx);
    return;
  }
  const cmsis_nn_conv_params p = conv_params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kConvScratch);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias_dims{1, 1, 1, out.c};
  const cmsis_nn_bias_data bias{ctx.in<const int64_t>(2), false};
  const arm_cmsis_nn_status s =
      arm_convolve_wrapper_s16(&c, &p, &q, &in, ctx.in<const int16_t>(0), &filter, ctx.in<const int8_t>(1),
                               &bias_dims, &bias, &out, ctx.out<int16_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kConv2dS16.run(ctx);
}

Error depthwise_check(const OpContext& ctx) {
  return conv_check<cmsis_nn_dw_conv_params>(ctx, portable::kDepthwiseConv2dS16, dw_params,
                                             arm_depthwise_conv_wrapper_s16_get_buffer_size);
}

void depthwise_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  const cmsis_nn_dw_conv_params p = dw_params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_context c = scratch(ctx, kConvScratch);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias_dims{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_depthwise_conv_wrapper_s16(
      &c, &p, &q, &in, ctx.in<const int16_t>(0), &filter, ctx.in<const int8_t>(1), &bias_dims,
      ctx.in<const int64_t>(2), &out, ctx.out<int16_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kDepthwiseConv2dS16.run(ctx);
}

// ---- linear ------------------------------------------------------------------------

Error linear_check(const OpContext& ctx) { return portable::kLinearS16.check(ctx); }

// arm_fully_connected_s16 takes one multiplier: with one per output channel
// it runs once per (sample, output channel), a 1-row weight matrix each time.
// Every output is its own dot product, so the bits are the same.
void linear_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t in_features = a.w[1];
  const int32_t out_features = a.w[0];
  const bool per_tensor = ctx.input(3).nbytes == 4;
  cmsis_nn_fc_params fc;
  fc.input_offset = 0;
  fc.filter_offset = 0;
  fc.output_offset = 0;
  fc.activation = cmsis_nn_activation{a.act_min, a.act_max};
  const cmsis_nn_context c{nullptr, 0};
  const int32_t* mult = ctx.in<const int32_t>(3);
  const int32_t* shift = ctx.in<const int32_t>(4);
  const int16_t* x = ctx.in<const int16_t>(0);
  const int8_t* w = ctx.in<const int8_t>(1);
  const int64_t* bias = ctx.in<const int64_t>(2);
  int16_t* y = ctx.out<int16_t>(0);
  const cmsis_nn_dims filter_dims{in_features, 1, 1, per_tensor ? out_features : 1};
  const cmsis_nn_dims bias_dims{1, 1, 1, per_tensor ? out_features : 1};
  if (per_tensor) {
    const cmsis_nn_per_tensor_quant_params q{mult[0], shift[0]};
    const cmsis_nn_dims in_dims{a.x_rows, 1, 1, in_features};
    const cmsis_nn_dims out_dims{a.x_rows, 1, 1, out_features};
    if (arm_fully_connected_s16(&c, &fc, &q, &in_dims, x, &filter_dims, w, &bias_dims, bias, &out_dims, y) !=
        ARM_CMSIS_NN_SUCCESS) {
      portable::kLinearS16.run(ctx);
    }
    return;
  }
  const cmsis_nn_dims in_dims{1, 1, 1, in_features};
  const cmsis_nn_dims out_dims{1, 1, 1, 1};
  for (int32_t b = 0; b < a.x_rows; ++b) {
    for (int32_t o = 0; o < out_features; ++o) {
      const cmsis_nn_per_tensor_quant_params q{mult[o], shift[o]};
      if (arm_fully_connected_s16(&c, &fc, &q, &in_dims, x + int64_t(b) * in_features, &filter_dims,
                                  w + int64_t(o) * in_features, &bias_dims, bias + o, &out_dims,
                                  y + int64_t(b) * out_features + o) != ARM_CMSIS_NN_SUCCESS) {
        portable::kLinearS16.run(ctx);
        return;
      }
    }
  }
}

// ---- add / mul (no broadcasting in CMSIS-NN) -------------------------------------

template <typename A>
bool elementwise(const OpContext& ctx, const A& a) {
  const uint32_t rank = ctx.output(0).rank;
  return check::same_dims(a.a, a.y, rank) && check::same_dims(a.b, a.y, rank);
}

Error add_check(const OpContext& ctx) { return portable::kAddS16.check(ctx); }

void add_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  if (!elementwise(ctx, p)) {
    portable::kAddS16.run(ctx);
    return;
  }
  const arm_cmsis_nn_status s = arm_elementwise_add_s16(
      ctx.in<const int16_t>(0), ctx.in<const int16_t>(1), p.input1_offset, p.input1_multiplier,
      p.input1_shift, p.input2_offset, p.input2_multiplier, p.input2_shift, p.left_shift,
      ctx.out<int16_t>(0), p.output_offset, p.output_multiplier, p.output_shift, p.act_min, p.act_max,
      int32_t(ctx.output(0).nbytes / 2));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kAddS16.run(ctx);
}

Error mul_check(const OpContext& ctx) { return portable::kMulS16.check(ctx); }

void mul_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantMulArgs>();
  if (!elementwise(ctx, p)) {
    portable::kMulS16.run(ctx);
    return;
  }
  const arm_cmsis_nn_status s = arm_elementwise_mul_s16(
      ctx.in<const int16_t>(0), ctx.in<const int16_t>(1), p.input1_offset, p.input2_offset,
      ctx.out<int16_t>(0), p.output_offset, p.output_multiplier, p.output_shift, p.act_min, p.act_max,
      int32_t(ctx.output(0).nbytes / 2));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kMulS16.run(ctx);
}

// ---- pools (pool_run in common.h) -----------------------------------------------------

Error max_pool_check(const OpContext& ctx) { return portable::kMaxPool2dS16.check(ctx); }

void max_pool_run(const OpContext& ctx) {
  pool_run<int16_t>(ctx, portable::kMaxPool2dS16, arm_max_pool_s16, 0);
}

Error avg_pool_check(const OpContext& ctx) { return portable::kAvgPool2dS16.check(ctx); }

void avg_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<QuantPool2dArgs>();
  pool_run<int16_t>(ctx, portable::kAvgPool2dS16, arm_avgpool_s16, arm_avgpool_s16_get_buffer_size(a.y[2], a.x[3]));
}

}  // namespace

const Kernel kConv2dS16 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS16 = {depthwise_check, depthwise_run};
const Kernel kLinearS16 = {linear_check, linear_run};
const Kernel kAddS16 = {add_check, add_run};
const Kernel kMulS16 = {mul_check, mul_run};
const Kernel kMaxPool2dS16 = {max_pool_check, max_pool_run};
const Kernel kAvgPool2dS16 = {avg_pool_check, avg_pool_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
