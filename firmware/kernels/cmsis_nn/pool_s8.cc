// MAX_POOL2D_S8 and AVG_POOL2D_S8 on arm_max_pool_s8 / arm_avgpool_s8.
//
// CMSIS-NN requires every window to hold at least one input tap (avg pool
// returns an argument error, max pool leaves the output unwritten). Padding
// smaller than the kernel guarantees that, and PyTorch's pools (padding at most
// half the kernel) always have it; other shapes run on the portable kernel.
//
// On DSP cores (without MVE) arm_avgpool_s8 accumulates in a buffer of one
// int32 per channel. Pools have no scratch operand, so the buffer is a fixed
// stack array of kAvgPoolChannels entries; wider pools run on the portable
// kernel there (same bits).
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

using schema::QuantPool2dArgs;

constexpr int32_t kAvgPoolChannels = 256;

bool windows_non_empty(const QuantPool2dArgs& a) {
  return a.pad_top < a.kernel_h && a.pad_left < a.kernel_w;
}

cmsis_nn_pool_params pool_params(const QuantPool2dArgs& a) {
  cmsis_nn_pool_params c;
  c.stride = cmsis_nn_tile{a.stride_w, a.stride_h};
  c.padding = cmsis_nn_tile{a.pad_left, a.pad_top};
  c.activation = cmsis_nn_activation{a.act_min, a.act_max};
  return c;
}

Error max_pool_check(const OpContext& ctx) { return portable::kMaxPool2dS8.check(ctx); }

void max_pool_run(const OpContext& ctx) {
  const QuantPool2dArgs& a = ctx.args<QuantPool2dArgs>();
  if (!windows_non_empty(a)) {
    portable::kMaxPool2dS8.run(ctx);
    return;
  }
  const cmsis_nn_pool_params pp = pool_params(a);
  const cmsis_nn_context c{nullptr, 0};
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter{1, a.kernel_h, a.kernel_w, 1};
  const cmsis_nn_dims out = nhwc(a.y);
  const arm_cmsis_nn_status s =
      arm_max_pool_s8(&c, &pp, &in, ctx.in<const int8_t>(0), &filter, &out, ctx.out<int8_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kMaxPool2dS8.run(ctx);
}

Error avg_pool_check(const OpContext& ctx) { return portable::kAvgPool2dS8.check(ctx); }

void avg_pool_run(const OpContext& ctx) {
  const QuantPool2dArgs& a = ctx.args<QuantPool2dArgs>();
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t need = arm_avgpool_s8_get_buffer_size(out.w, in.c);
  if (!windows_non_empty(a) || need > int32_t(kAvgPoolChannels * sizeof(int32_t))) {
    portable::kAvgPool2dS8.run(ctx);
    return;
  }
  int32_t acc[kAvgPoolChannels];
  const cmsis_nn_context c{need > 0 ? acc : nullptr, need};
  const cmsis_nn_pool_params pp = pool_params(a);
  const cmsis_nn_dims filter{1, a.kernel_h, a.kernel_w, 1};
  const arm_cmsis_nn_status s =
      arm_avgpool_s8(&c, &pp, &in, ctx.in<const int8_t>(0), &filter, &out, ctx.out<int8_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kAvgPool2dS8.run(ctx);
}

}  // namespace

const Kernel kMaxPool2dS8 = {max_pool_check, max_pool_run};
const Kernel kAvgPool2dS8 = {avg_pool_check, avg_pool_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
