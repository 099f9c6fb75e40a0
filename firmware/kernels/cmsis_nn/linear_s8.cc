// LINEAR_S8 on arm_fully_connected_s8 (per-tensor requantization) or
// arm_fully_connected_per_channel_s8 (one multiplier and shift per output).
//
// The program's bias already holds input_offset * sum(w) (the "kernel sums",
// folded ahead of time), so CMSIS-NN is called with input offset 0 and that
// bias. On cores with MVE CMSIS-NN reads its kernel sums from ctx.buf instead
// of the bias; with input offset 0 they are exactly the folded bias, so ctx.buf
// points at it: no scratch and no run-time arm_vector_sum_s8.
#include "kernels/check.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

Error linear_check(const OpContext& ctx) { return portable::kLinearS8.check(ctx); }

void linear_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const TensorView& w = ctx.inputs[1];
  const TensorView& bias = ctx.inputs[2];
  const schema::QuantLinearParams p = ctx.op.params_as_QuantLinearParams();
  const int32_t batch = int32_t(check::extent(x, 0, x.rank - 1));
  const int32_t in_features = w.dims[1];
  const int32_t out_features = w.dims[0];
  cmsis_nn_fc_params fc;
  fc.input_offset = 0;  // folded into the bias
  fc.filter_offset = 0;
  fc.output_offset = p.output_offset();
  fc.activation = cmsis_nn_activation{p.act_min(), p.act_max()};
  const cmsis_nn_context c{bias.data, int32_t(bias.nbytes)};  // the kernel sums (MVE)
  const cmsis_nn_dims in_dims{batch, 1, 1, in_features};
  const cmsis_nn_dims filter_dims{in_features, 1, 1, out_features};
  const cmsis_nn_dims bias_dims{1, 1, 1, out_features};
  const cmsis_nn_dims out_dims{batch, 1, 1, out_features};
  int32_t* const mult = ctx.inputs[3].as<int32_t>();
  int32_t* const shift = ctx.inputs[4].as<int32_t>();
  arm_cmsis_nn_status s;
  if (ctx.inputs[3].dims[0] == 1) {
    const cmsis_nn_per_tensor_quant_params q{mult[0], shift[0]};
    s = arm_fully_connected_s8(&c, &fc, &q, &in_dims, x.as<const int8_t>(), &filter_dims,
                               w.as<const int8_t>(), &bias_dims, bias.as<const int32_t>(),
                               &out_dims, ctx.outputs[0].as<int8_t>());
  } else {
    const cmsis_nn_per_channel_quant_params q{mult, shift};
    s = arm_fully_connected_per_channel_s8(&c, &fc, &q, &in_dims, x.as<const int8_t>(),
                                           &filter_dims, w.as<const int8_t>(), &bias_dims,
                                           bias.as<const int32_t>(), &out_dims,
                                           ctx.outputs[0].as<int8_t>());
  }
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kLinearS8.run(ctx);
}

}  // namespace

const Kernel kLinearS8 = {linear_check, linear_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
