// ADD_S8 and MUL_S8 on arm_elementwise_add_s8 / arm_elementwise_mul_s8.
// CMSIS-NN's element-wise kernels do not broadcast: an op whose operands both
// have the output's dims runs on CMSIS-NN, a broadcasting one on the portable
// kernel (a branch on the shapes at run time; same bits either way).
//
// In place: every variant (scalar, DSP, MVE) reads a block of both inputs
// (1 or 4 elements) before it writes the same block of the output, so the
// output may be either input itself, as for the portable kernels.
#include "kernels/check.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

template <typename A>
bool elementwise(const OpContext& ctx, const A& a) {
  const uint32_t rank = ctx.output(0).rank;
  return check::same_dims(a.a, a.y, rank) && check::same_dims(a.b, a.y, rank);
}

Error add_check(const OpContext& ctx) { return portable::kAddS8.check(ctx); }

void add_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  if (!elementwise(ctx, p)) {
    portable::kAddS8.run(ctx);
    return;
  }
  const arm_cmsis_nn_status s = arm_elementwise_add_s8(
      ctx.in<const int8_t>(0), ctx.in<const int8_t>(1), p.input1_offset, p.input1_multiplier,
      p.input1_shift, p.input2_offset, p.input2_multiplier, p.input2_shift, p.left_shift,
      ctx.out<int8_t>(0), p.output_offset, p.output_multiplier, p.output_shift, p.act_min,
      p.act_max, int32_t(ctx.output(0).nbytes));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kAddS8.run(ctx);
}

Error mul_check(const OpContext& ctx) { return portable::kMulS8.check(ctx); }

void mul_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantMulArgs>();
  if (!elementwise(ctx, p)) {
    portable::kMulS8.run(ctx);
    return;
  }
  const arm_cmsis_nn_status s = arm_elementwise_mul_s8(
      ctx.in<const int8_t>(0), ctx.in<const int8_t>(1), p.input1_offset, p.input2_offset,
      ctx.out<int8_t>(0), p.output_offset, p.output_multiplier, p.output_shift, p.act_min,
      p.act_max, int32_t(ctx.output(0).nbytes));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kMulS8.run(ctx);
}

}  // namespace

const Kernel kAddS8 = {add_check, add_run, inplace::kAddS8};
const Kernel kMulS8 = {mul_check, mul_run, inplace::kMulS8};

}  // namespace cmsis_nn
}  // namespace torchmcu
