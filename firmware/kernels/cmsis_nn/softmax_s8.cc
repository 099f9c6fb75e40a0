// SOFTMAX_S8 over the last axis on arm_softmax_s8.
//
// A program may give the exponentials as a table (an optional second input):
// then the portable kernel, a lookup per element, runs instead. Each
// exponential adds at most 2^19 to the row's sum, so rows shorter than
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
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  const int32_t row = a.x[rank - 1];
  if (row > kMaxRow || ctx.num_inputs() > 1) {  // the exp table makes the portable kernel the faster
    portable::kSoftmaxS8.run(ctx);
    return;
  }
  arm_softmax_s8(ctx.in<const int8_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), row,
                 a.input_multiplier, a.input_left_shift, a.diff_min, ctx.out<int8_t>(0));
}

}  // namespace

const Kernel kSoftmaxS8 = {softmax_check, softmax_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
