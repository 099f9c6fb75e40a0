// SOFTMAX_S8 over the last axis on arm_softmax_s8.
//
// Each exponential adds at most 2^19 to the row's sum, so rows shorter than
// 512 keep the sum below 2^28, where CMSIS-NN's arithmetic is defined. Wider
// rows (whose sum may reach 2^28: CMSIS-NN would shift by more than 31 bits)
// run on the portable kernel, which defines that case.
#include "kernels/check.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

constexpr int32_t kMaxRow = 511;

Error softmax_check(const OpContext& ctx) { return portable::kSoftmaxS8.check(ctx); }

void softmax_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const int32_t row = x.dims[x.rank - 1];
  if (row > kMaxRow) {
    portable::kSoftmaxS8.run(ctx);
    return;
  }
  const schema::QuantSoftmaxParams p = ctx.op.params_as_QuantSoftmaxParams();
  arm_softmax_s8(x.as<const int8_t>(), int32_t(check::extent(x, 0, x.rank - 1)), row,
                 p.input_multiplier(), p.input_left_shift(), p.diff_min(),
                 ctx.outputs[0].as<int8_t>());
}

}  // namespace

const Kernel kSoftmaxS8 = {softmax_check, softmax_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
