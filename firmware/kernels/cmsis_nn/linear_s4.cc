// LINEAR_S4 (W4A8) on arm_fully_connected_s4, which requantizes per tensor
// only. The program's bias holds input_offset * sum(w) (as LINEAR_S8's), so
// CMSIS-NN runs with input offset 0 and that bias. Per-channel
// requantization: one call per output row when rows start on a byte
// (in_features even: row o is bytes [o * in / 2, (o + 1) * in / 2)); rows
// that start mid-byte (odd in_features, per channel) run on the portable
// kernel. Same bits either way.
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

Error linear_check(const OpContext& ctx) { return portable::kLinearS4.check(ctx); }

void linear_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t in_features = a.w[1];
  const int32_t out_features = a.w[0];
  const bool per_tensor = ctx.input(3).nbytes == 4;
  if (!per_tensor && (in_features & 1)) {
    portable::kLinearS4.run(ctx);
    return;
  }
  cmsis_nn_fc_params fc;
  fc.input_offset = 0;  // folded into the bias
  fc.filter_offset = 0;
  fc.output_offset = a.output_offset;
  fc.activation = cmsis_nn_activation{a.act_min, a.act_max};
  const cmsis_nn_context c{nullptr, 0};
  const int32_t* const bias = ctx.in<const int32_t>(2);
  const int32_t* const mult = ctx.in<const int32_t>(3);
  const int32_t* const shift = ctx.in<const int32_t>(4);
  const int8_t* const w = ctx.in<const int8_t>(1);
  const int8_t* const x = ctx.in<const int8_t>(0);
  int8_t* const y = ctx.out<int8_t>(0);
  const cmsis_nn_dims filter_dims{in_features, 1, 1, per_tensor ? out_features : 1};
  const cmsis_nn_dims bias_dims{1, 1, 1, per_tensor ? out_features : 1};
  if (per_tensor) {
    const cmsis_nn_dims in_dims{a.x_rows, 1, 1, in_features};
    const cmsis_nn_dims out_dims{a.x_rows, 1, 1, out_features};
    const cmsis_nn_per_tensor_quant_params q{mult[0], shift[0]};
    const arm_cmsis_nn_status s = arm_fully_connected_s4(&c, &fc, &q, &in_dims, x, &filter_dims, w,
                                                         &bias_dims, bias, &out_dims, y);
    if (s != ARM_CMSIS_NN_SUCCESS) portable::kLinearS4.run(ctx);
    return;
  }
  // One output row at a time, each with its own requantization.
  const cmsis_nn_dims in_dims{1, 1, 1, in_features};
  const cmsis_nn_dims out_dims{1, 1, 1, 1};
  const int32_t row_bytes = in_features / 2;
  for (int32_t b = 0; b < a.x_rows; ++b) {
    for (int32_t o = 0; o < out_features; ++o) {
      const cmsis_nn_per_tensor_quant_params q{mult[o], shift[o]};
      const arm_cmsis_nn_status s =
          arm_fully_connected_s4(&c, &fc, &q, &in_dims, x + b * in_features, &filter_dims,
                                 w + o * row_bytes, &bias_dims, bias + o, &out_dims,
                                 y + b * out_features + o);
      if (s != ARM_CMSIS_NN_SUCCESS) {
        portable::kLinearS4.run(ctx);
        return;
      }
    }
  }
}

}  // namespace

const Kernel kLinearS4 = {linear_check, linear_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
