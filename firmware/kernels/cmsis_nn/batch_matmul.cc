// BATCH_MATMUL_S8 / BATCH_MATMUL_S16 on arm_batch_matmul_s8 / _s16, which
// take b transposed ([..., N, K], the program's adj_y) and at most four dims
// ([n, h, rows, cols], n and h broadcast either way). A b given as [K, N] or
// a product of higher rank runs on the portable kernel: same bits either way.
// With MVE, arm_batch_matmul_s8 sums each row of b into the op's scratch
// operand (4 bytes a row).
#include "kernels/check.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

// The operand's dims padded to four at the front.
cmsis_nn_dims dims4(const int32_t* d, int32_t rank) {
  int32_t v[4] = {1, 1, 1, 1};
  for (int32_t i = 0; i < rank; ++i) v[4 - rank + i] = d[i];
  return cmsis_nn_dims{v[0], v[1], v[2], v[3]};
}

bool on_cmsis(const OpContext& ctx, const schema::QuantBatchMatmulArgs& p) {
  return p.adj_y == 1 && ctx.output(0).rank <= 4;
}

Error bmm_s8_check(const OpContext& ctx) {
  TMCU_TRY(portable::kBatchMatmulS8.check(ctx));
#if defined(ARM_MATH_MVEI)
  const auto& p = ctx.args<schema::QuantBatchMatmulArgs>();
  if (on_cmsis(ctx, p)) {  // the kernel sums: one int32 per row of b
    const cmsis_nn_context s = scratch(ctx, 2);
    TMCU_CHECK(s.buf != nullptr && int64_t(s.size) >= 4 * int64_t(p.y[ctx.output(0).rank - 1]), Error::InvalidOp);
  }
#endif
  return Error::Ok;
}

template <typename T>
struct Bmm {
  cmsis_nn_dims lhs, rhs, out;
  cmsis_nn_bmm_params params;
  cmsis_nn_per_tensor_quant_params quant;
};

template <typename T>
Bmm<T> bmm(const OpContext& ctx, const schema::QuantBatchMatmulArgs& p, int32_t multiplier) {
  const int32_t r = int32_t(ctx.output(0).rank);
  return Bmm<T>{dims4(p.a, r), dims4(p.b, r), dims4(p.y, r),
                cmsis_nn_bmm_params{false, true,
                                    cmsis_nn_fc_params{p.lhs_offset, p.rhs_offset, p.output_offset,
                                                       cmsis_nn_activation{p.act_min, p.act_max}}},
                cmsis_nn_per_tensor_quant_params{multiplier, p.output_shift}};
}

void bmm_s8_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantBatchMatmulArgs>();
  if (!on_cmsis(ctx, p)) {
    portable::kBatchMatmulS8.run(ctx);
    return;
  }
  const cmsis_nn_context s = scratch(ctx, 2);
  const Bmm<int8_t> b = bmm<int8_t>(ctx, p, p.output_multiplier);
  const arm_cmsis_nn_status status = arm_batch_matmul_s8(&s, &b.params, &b.quant, &b.lhs, ctx.in<const int8_t>(0),
                                                         &b.rhs, ctx.in<const int8_t>(1), &b.out, ctx.out<int8_t>(0));
  if (status != ARM_CMSIS_NN_SUCCESS) portable::kBatchMatmulS8.run(ctx);
}

Error bmm_s16_check(const OpContext& ctx) { return portable::kBatchMatmulS16.check(ctx); }

void bmm_s16_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantBatchMatmulArgs>();
  if (!on_cmsis(ctx, p)) {
    portable::kBatchMatmulS16.run(ctx);
    return;
  }
  const cmsis_nn_context s = scratch(ctx, 2);
  const Bmm<int16_t> b = bmm<int16_t>(ctx, p, p.output_multiplier);  // CMSIS-NN reduces it to 16 bits itself
  const arm_cmsis_nn_status status =
      arm_batch_matmul_s16(&s, &b.params, &b.quant, &b.lhs, ctx.in<const int16_t>(0), &b.rhs,
                           ctx.in<const int16_t>(1), &b.out, ctx.out<int16_t>(0));
  if (status != ARM_CMSIS_NN_SUCCESS) portable::kBatchMatmulS16.run(ctx);
}

}  // namespace

const Kernel kBatchMatmulS8 = {bmm_s8_check, bmm_s8_run};
const Kernel kBatchMatmulS16 = {bmm_s16_check, bmm_s16_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
