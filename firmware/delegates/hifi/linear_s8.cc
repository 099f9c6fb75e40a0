// LINEAR_S8 on xa_nn_matmul_per_chan_sym8sxasym8s_asym8s (one multiplier and
// shift per output) or xa_nn_fully_connected_sym8sxasym8s_asym8s (per-tensor,
// one row). The program's bias already holds input_offset * sum(w) (folded
// ahead of time), so nnlib is called with an input zero bias of 0.
// Operands: x [rows][in], w [out][in], bias (int32 [out]), multiplier and
// shift (int32 [out] or [1]).
#include "delegates/hifi/common.h"
#include "delegates/hifi/kernels.h"

namespace torchmcu {
namespace hifi {
namespace {

/// nnlib runs this op (else the portable kernel does): requantization values in
/// the exact range (products x * w of at most 128 * 128, the input offset being
/// in the bias), and per-channel requantization or a single row.
bool on_nnlib(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t n = int32_t(ctx.input(4).nbytes / 4);
  return requant_exact(ctx, a.w[0], n, a.w[1], 128 * 128) && (n == a.w[0] || a.x_rows == 1);
}

Error linear_check(const OpContext& ctx) { return portable::kLinearS8.check(ctx); }

Error linear_invoke(const OpContext& ctx) {
  if (!on_nnlib(ctx)) return portable::kLinearS8.run(ctx), Error::Ok;
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t out_features = a.w[0];
  const int32_t in_features = a.w[1];
  int8_t* const y = ctx.out<int8_t>(0);
  if (int32_t(ctx.input(4).nbytes / 4) != out_features) {  // per-tensor: one row (on_nnlib)
    TMCU_TRY(status(xa_nn_fully_connected_sym8sxasym8s_asym8s(
        y, ctx.in<const int8_t>(1), ctx.in<const int8_t>(0), ctx.in<const int32_t>(2), in_features, out_features,
        0, ctx.in<const int32_t>(3)[0], ctx.in<const int32_t>(4)[0], a.output_offset)));
  } else {
    TMCU_TRY(status(xa_nn_matmul_per_chan_sym8sxasym8s_asym8s(
        y, ctx.in<const int8_t>(1), ctx.in<const int8_t>(0), ctx.in<const int32_t>(2), out_features, in_features,
        in_features, a.x_rows, in_features, out_features, 1, 0, ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
        a.output_offset)));
  }
  activation(y, a.x_rows * out_features, a.act_min, a.act_max);
  return Error::Ok;
}

}  // namespace

const Kernel kLinearS8 = {linear_check, nullptr, 0, linear_invoke};

}  // namespace hifi
}  // namespace torchmcu
