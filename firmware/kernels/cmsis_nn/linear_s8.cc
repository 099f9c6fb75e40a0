// LINEAR_S8 on arm_fully_connected_s8 (per-tensor requantization) or
// arm_fully_connected_per_channel_s8 (one multiplier and shift per output).
//
// The program's bias already holds input_offset * sum(w) (the "kernel sums",
// folded ahead of time), so CMSIS-NN is called with input offset 0 and that
// bias. On cores with MVE CMSIS-NN reads its kernel sums from ctx.buf instead
// of the bias; with input offset 0 they are exactly the folded bias, so ctx.buf
// points at it: no scratch and no run-time arm_vector_sum_s8.
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

Error linear_check(const OpContext& ctx) { return portable::kLinearS8.check(ctx); }

void linear_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t in_features = a.w[1];
  const int32_t out_features = a.w[0];
  cmsis_nn_fc_params fc;
  fc.input_offset = 0;  // folded into the bias
  fc.filter_offset = 0;
  fc.output_offset = a.output_offset;
  fc.activation = cmsis_nn_activation{a.act_min, a.act_max};
  int32_t* const bias = ctx.in<int32_t>(2);
  const cmsis_nn_context c{bias, int32_t(ctx.input(2).nbytes)};  // the kernel sums (MVE)
  const cmsis_nn_dims in_dims{a.x_rows, 1, 1, in_features};
  const cmsis_nn_dims filter_dims{in_features, 1, 1, out_features};
  const cmsis_nn_dims bias_dims{1, 1, 1, out_features};
  const cmsis_nn_dims out_dims{a.x_rows, 1, 1, out_features};
  int32_t* const mult = ctx.in<int32_t>(3);
  int32_t* const shift = ctx.in<int32_t>(4);
  arm_cmsis_nn_status s;
  if (ctx.input(3).nbytes == 4) {
    const cmsis_nn_per_tensor_quant_params q{mult[0], shift[0]};
    s = arm_fully_connected_s8(&c, &fc, &q, &in_dims, ctx.in<const int8_t>(0), &filter_dims,
                               ctx.in<const int8_t>(1), &bias_dims, bias, &out_dims,
                               ctx.out<int8_t>(0));
  } else {
    const cmsis_nn_per_channel_quant_params q{mult, shift};
    s = arm_fully_connected_per_channel_s8(&c, &fc, &q, &in_dims, ctx.in<const int8_t>(0),
                                           &filter_dims, ctx.in<const int8_t>(1), &bias_dims, bias,
                                           &out_dims, ctx.out<int8_t>(0));
  }
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kLinearS8.run(ctx);
}

}  // namespace

const Kernel kLinearS8 = {linear_check, linear_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
