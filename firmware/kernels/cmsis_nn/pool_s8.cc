// MAX_POOL2D_S8 and AVG_POOL2D_S8 on arm_max_pool_s8 / arm_avgpool_s8 (see
// pool_run in common.h for the shapes that run on the portable kernel).
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

Error max_pool_check(const OpContext& ctx) { return portable::kMaxPool2dS8.check(ctx); }

void max_pool_run(const OpContext& ctx) {
  pool_run<int8_t>(ctx, portable::kMaxPool2dS8, arm_max_pool_s8, 0);
}

Error avg_pool_check(const OpContext& ctx) { return portable::kAvgPool2dS8.check(ctx); }

void avg_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  pool_run<int8_t>(ctx, portable::kAvgPool2dS8, arm_avgpool_s8, arm_avgpool_s8_get_buffer_size(a.y[2], a.x[3]));
}

}  // namespace

const Kernel kMaxPool2dS8 = {max_pool_check, max_pool_run};
const Kernel kAvgPool2dS8 = {avg_pool_check, avg_pool_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
