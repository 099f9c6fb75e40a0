// The attention_norm family as the executor sees it (LAYER_NORM_*, GROUP_NORM_*,
// BATCH_MATMUL_*): load-time checks and run functions (common/glue.h says
// how). Batched products broadcast their batch dims (for_each_batch) and read
// b as [K, N] or, adj_y, [N, K].
#include "kernels/portable/attention_norm/attention_norm.h"
#include "kernels/portable/common/glue.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace portable {
namespace {

// ---- layer norm over the last axis: x [rows, cols], gamma, beta [cols] --------------

Error layer_norm_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 3, 1) && check::args<schema::LayerNormArgs>(ctx, OpParams::LayerNormParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::LayerNormArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32) && x.rank >= 1 && check::is(y, DType::F32) && y.rank == x.rank,
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.rows, a.cols));
  TMCU_TRY(check::holds(y, a.rows, a.cols));
  for (uint32_t i = 1; i < ctx.num_inputs(); ++i) {  // gamma, beta: absent or [cols]
    TMCU_CHECK(!OpContext::present(ctx.input(i)) || check::vector(ctx.input(i), DType::F32, a.cols),
               Error::InvalidOp);
  }
  return Error::Ok;
}

const float* optional(const OpContext& ctx, uint32_t i) {
  return i < ctx.num_inputs() && OpContext::present(ctx.input(i)) ? ctx.in<const float>(i) : nullptr;
}

void layer_norm_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::LayerNormArgs>();
  layer_norm_f32(ctx.in<const float>(0), optional(ctx, 1), optional(ctx, 2), ctx.out<float>(0), a.rows, a.cols,
                 a.eps);
}

template <typename T>
Error layer_norm_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 3, 3, 1) &&
                 check::args<schema::QuantLayerNormArgs>(ctx, OpParams::QuantLayerNormParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantLayerNormArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is_q<T>(x) && x.rank >= 1 && is_q<T>(y) && y.rank == x.rank, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.rows, a.cols));
  TMCU_TRY(check::holds(y, a.rows, a.cols));
  const int64_t eps = int64_t(a.eps_hi) * (int64_t{1} << 32) + a.eps_lo;
  TMCU_CHECK(check::vector(ctx.input(1), DType::I8, a.cols) && check::vector(ctx.input(2), DType::I32, a.cols) &&
                 a.cols <= kLayerNormMaxCols && a.eps_hi >= 0 && eps <= kLayerNormMaxEps &&
                 a.output_multiplier >= 0 && shift_ok(a.output_shift) && act_ok<T>(a.act_min, a.act_max) &&
                 QType<T>::zero_point_ok(a.input_zero_point) && QType<T>::zero_point_ok(a.output_zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

QuantLayerNormParams layer_norm_params(const schema::QuantLayerNormArgs& a) {
  return QuantLayerNormParams{a.input_zero_point, int64_t(a.eps_hi) * (int64_t{1} << 32) + a.eps_lo,
                              a.output_multiplier, a.output_shift, a.output_zero_point, a.act_min, a.act_max};
}

template <typename T, void (*Fn)(const T*, const int8_t*, const int32_t*, T*, int32_t, int32_t,
                                 const QuantLayerNormParams&)>
void layer_norm_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLayerNormArgs>();
  Fn(ctx.in<const T>(0), ctx.in<const int8_t>(1), ctx.in<const int32_t>(2), ctx.out<T>(0), a.rows, a.cols,
     layer_norm_params(a));
}

// ---- group norm: x [n, positions, channels] (channels last), gamma, beta [channels] -----

template <typename Args>
GroupNormShape group_shape(const Args& a) {
  return GroupNormShape{a.n, a.positions, a.channels, a.groups};
}

// The shape the args give, x and y holding it, and gamma, beta of `gamma_type` ([channels]; optional when F32).
template <typename Args>
Error group_norm_shape_check(const OpContext& ctx, const Args& a, DType x_type, DType gamma_type) {
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, x_type) && x.rank == 3 && check::is(y, x_type) && y.rank == 3 && a.n >= 1 &&
                 a.positions >= 1 && a.channels >= 1 && a.groups >= 1 && a.channels % a.groups == 0 &&
                 int64_t(a.n) * a.positions <= INT32_MAX,
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.n * a.positions, a.channels));
  TMCU_TRY(check::holds(y, a.n * a.positions, a.channels));
  for (uint32_t i = 1; i < ctx.num_inputs(); ++i) {
    const DType want = i == 1 ? gamma_type : (gamma_type == DType::F32 ? DType::F32 : DType::I32);
    TMCU_CHECK((gamma_type == DType::F32 && !OpContext::present(ctx.input(i))) ||
                   check::vector(ctx.input(i), want, a.channels),
               Error::InvalidOp);
  }
  return Error::Ok;
}

Error group_norm_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 3, 1) && check::args<schema::GroupNormArgs>(ctx, OpParams::GroupNormParams),
             Error::InvalidOp);
  return group_norm_shape_check(ctx, ctx.args<schema::GroupNormArgs>(), DType::F32, DType::F32);
}

void group_norm_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::GroupNormArgs>();
  group_norm_f32(ctx.in<const float>(0), optional(ctx, 1), optional(ctx, 2), ctx.out<float>(0), group_shape(a),
                 a.eps);
}

template <typename T>
Error group_norm_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 3, 3, 1) &&
                 check::args<schema::QuantGroupNormArgs>(ctx, OpParams::QuantGroupNormParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantGroupNormArgs>();
  TMCU_TRY(group_norm_shape_check(ctx, a, QType<T>::kDType, DType::I8));
  const int64_t eps = int64_t(a.eps_hi) * (int64_t{1} << 32) + a.eps_lo;
  TMCU_CHECK(int64_t(a.positions) * (a.channels / a.groups) <= kLayerNormMaxCols && a.eps_hi >= 0 &&
                 eps <= kLayerNormMaxEps && a.output_multiplier >= 0 && shift_ok(a.output_shift) &&
                 act_ok<T>(a.act_min, a.act_max) && QType<T>::zero_point_ok(a.input_zero_point) &&
                 QType<T>::zero_point_ok(a.output_zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename T, void (*Fn)(const T*, const int8_t*, const int32_t*, T*, const GroupNormShape&,
                                 const QuantLayerNormParams&)>
void group_norm_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantGroupNormArgs>();
  const QuantLayerNormParams p{a.input_zero_point, int64_t(a.eps_hi) * (int64_t{1} << 32) + a.eps_lo,
                               a.output_multiplier, a.output_shift, a.output_zero_point, a.act_min, a.act_max};
  Fn(ctx.in<const T>(0), ctx.in<const int8_t>(1), ctx.in<const int32_t>(2), ctx.out<T>(0), group_shape(a), p);
}

// ---- batch matmul: a [..., M, K], b [..., K, N] (adj_y: [..., N, K]) -> [..., M, N] --
// An integer product may carry a scratch operand (I8: CMSIS-NN's kernel sums),
// which the portable kernels ignore.

bool scratch_ok(const OpContext& ctx) {
  return ctx.num_inputs() < 3 || check::is(ctx.input(2), DType::I8);
}

template <typename Args>
void dims_mkn(const OpContext& ctx, const Args& p, int32_t* m, int32_t* k, int32_t* n) {
  const int32_t r = int32_t(ctx.output(0).rank);
  *m = p.a[r - 2];
  *k = p.a[r - 1];
  *n = p.y[r - 1];
}

Error bmm_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::BatchMatmulArgs>(ctx, OpParams::NONE) &&
                 (ctx.params_type() == OpParams::NONE || ctx.params_type() == OpParams::BatchMatmulParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::BatchMatmulArgs>();
  TMCU_CHECK(check::is(ctx.input(0), DType::F32) && check::is(ctx.input(1), DType::F32) &&
                 check::is(ctx.output(0), DType::F32),
             Error::InvalidOp);
  return check::batch_matmul_shapes(ctx, p);
}

void bmm_f32_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::BatchMatmulArgs>();
  int32_t m, k, n;
  dims_mkn(ctx, p, &m, &k, &n);
  const float* a = ctx.in<const float>(0);
  const float* b = ctx.in<const float>(1);
  float* y = ctx.out<float>(0);
  const int64_t mn = int64_t(m) * n;
  for_each_batch(p.a, p.b, p.y, int32_t(ctx.output(0).rank), int64_t(m) * k, int64_t(k) * n,
                 [&](int64_t oa, int64_t ob) {
                   if (p.adj_y) {
                     matmul_t_f32(a + oa, b + ob, y, m, k, n);
                   } else {
                     batch_matmul_f32(a + oa, b + ob, y, 1, m, k, n);
                   }
                   y += mn;
                 });
}

// The accumulator of K products: int8, the int32 sum of K products each at
// most 255 * 255 in magnitude; int16 (zero points 0), K products of at most
// 2^30 keep the int64 sum below 2^47 (requantize_s64's range).
template <typename T>
TMCU_INLINE bool bmm_depth_ok(int32_t k) {
  return sizeof(T) == 1 ? int64_t(k) * 255 * 255 <= INT32_MAX : k < (1 << 17);
}

template <typename T>
Error bmm_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) &&
                 check::args<schema::QuantBatchMatmulArgs>(ctx, OpParams::QuantBatchMatmulParams) &&
                 scratch_ok(ctx),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::QuantBatchMatmulArgs>();
  TMCU_CHECK(is_q<T>(ctx.input(0)) && is_q<T>(ctx.input(1)) && is_q<T>(ctx.output(0)), Error::InvalidOp);
  TMCU_TRY(check::batch_matmul_shapes(ctx, p));
  TMCU_CHECK(act_ok<T>(p.act_min, p.act_max) && shift_ok(p.output_shift) && p.output_multiplier >= 0 &&
                 QType<T>::output_offset_ok(p.output_offset) && QType<T>::input_offset_ok(p.lhs_offset) &&
                 QType<T>::input_offset_ok(p.rhs_offset) && bmm_depth_ok<T>(p.a[ctx.output(0).rank - 1]),
             Error::InvalidOp);
  return Error::Ok;
}

void bmm_s8_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantBatchMatmulArgs>();
  const QuantBatchMatmulParams q{p.lhs_offset, p.rhs_offset, p.output_multiplier, p.output_shift,
                                 p.output_offset, p.act_min, p.act_max};
  int32_t m, k, n;
  dims_mkn(ctx, p, &m, &k, &n);
  const int8_t* a = ctx.in<const int8_t>(0);
  const int8_t* b = ctx.in<const int8_t>(1);
  int8_t* y = ctx.out<int8_t>(0);
  const int64_t mn = int64_t(m) * n;
  for_each_batch(p.a, p.b, p.y, int32_t(ctx.output(0).rank), int64_t(m) * k, int64_t(k) * n,
                 [&](int64_t oa, int64_t ob) {
                   if (p.adj_y) {
                     matmul_t_s8(a + oa, b + ob, y, m, k, n, q);
                   } else {
                     batch_matmul_s8(a + oa, b + ob, y, 1, m, k, n, q);
                   }
                   y += mn;
                 });
}

void bmm_s16_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantBatchMatmulArgs>();
  int32_t m, k, n;
  dims_mkn(ctx, p, &m, &k, &n);
  const int16_t* a = ctx.in<const int16_t>(0);
  const int16_t* b = ctx.in<const int16_t>(1);
  int16_t* y = ctx.out<int16_t>(0);
  const int64_t mn = int64_t(m) * n;
  for_each_batch(p.a, p.b, p.y, int32_t(ctx.output(0).rank), int64_t(m) * k, int64_t(k) * n,
                 [&](int64_t oa, int64_t ob) {
                   matmul_s16(a + oa, b + ob, y, m, k, n, p.adj_y != 0, p.output_multiplier, p.output_shift,
                              p.act_min, p.act_max);
                   y += mn;
                 });
}

}  // namespace

const Kernel kLayerNormF32 = {layer_norm_f32_check, layer_norm_f32_run};
const Kernel kLayerNormS8 = {layer_norm_q_check<int8_t>, layer_norm_q_run<int8_t, layer_norm_s8>};
const Kernel kLayerNormS16 = {layer_norm_q_check<int16_t>, layer_norm_q_run<int16_t, layer_norm_s16>};
const Kernel kGroupNormF32 = {group_norm_f32_check, group_norm_f32_run};
const Kernel kGroupNormS8 = {group_norm_q_check<int8_t>, group_norm_q_run<int8_t, group_norm_s8>};
const Kernel kGroupNormS16 = {group_norm_q_check<int16_t>, group_norm_q_run<int16_t, group_norm_s16>};
const Kernel kBatchMatmulF32 = {bmm_f32_check, bmm_f32_run};
const Kernel kBatchMatmulS8 = {bmm_q_check<int8_t>, bmm_s8_run};
const Kernel kBatchMatmulS16 = {bmm_q_check<int16_t>, bmm_s16_run};

}  // namespace portable
}  // namespace torchmcu
