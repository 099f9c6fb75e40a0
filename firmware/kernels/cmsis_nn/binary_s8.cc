// ADD_S8 and MUL_S8 on arm_elementwise_add_s8 / arm_elementwise_mul_s8.
// CMSIS-NN's element-wise kernels do not broadcast: an op whose operands both
// have the output's dims runs on CMSIS-NN, a broadcasting one on the portable
// kernel (a branch on the shapes at run time; same bits either way).
#include "kernels/check.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

bool elementwise(const OpContext& ctx) {
  return check::same_dims(ctx.inputs[0], ctx.outputs[0]) &&
         check::same_dims(ctx.inputs[1], ctx.outputs[0]);
}

Error add_check(const OpContext& ctx) { return portable::kAddS8.check(ctx); }

void add_run(const OpContext& ctx) {
  if (!elementwise(ctx)) {
    portable::kAddS8.run(ctx);
    return;
  }
  const schema::QuantAddParams p = ctx.op.params_as_QuantAddParams();
  const arm_cmsis_nn_status s = arm_elementwise_add_s8(
      ctx.inputs[0].as<const int8_t>(), ctx.inputs[1].as<const int8_t>(), p.input1_offset(),
      p.input1_multiplier(), p.input1_shift(), p.input2_offset(), p.input2_multiplier(),
      p.input2_shift(), p.left_shift(), ctx.outputs[0].as<int8_t>(), p.output_offset(),
      p.output_multiplier(), p.output_shift(), p.act_min(), p.act_max(),
      int32_t(ctx.outputs[0].numel()));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kAddS8.run(ctx);
}

Error mul_check(const OpContext& ctx) { return portable::kMulS8.check(ctx); }

void mul_run(const OpContext& ctx) {
  if (!elementwise(ctx)) {
    portable::kMulS8.run(ctx);
    return;
  }
  const schema::QuantMulParams p = ctx.op.params_as_QuantMulParams();
  const arm_cmsis_nn_status s = arm_elementwise_mul_s8(
      ctx.inputs[0].as<const int8_t>(), ctx.inputs[1].as<const int8_t>(), p.input1_offset(),
      p.input2_offset(), ctx.outputs[0].as<int8_t>(), p.output_offset(), p.output_multiplier(),
      p.output_shift(), p.act_min(), p.act_max(), int32_t(ctx.outputs[0].numel()));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kMulS8.run(ctx);
}

}  // namespace

const Kernel kAddS8 = {add_check, add_run};
const Kernel kMulS8 = {mul_check, mul_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
