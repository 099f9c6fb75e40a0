// The reduce family as the executor sees it (MEAN_*, SOFTMAX_*,
// LOG_SOFTMAX_*, SOFTMAX_MASKED_*): load-time checks of operands and
// arguments, and run functions handing them to the math of reduce.h
// (common/glue.h says how).
#include "kernels/portable/common/glue.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/reduce/reduce.h"

namespace torchmcu {
namespace portable {
namespace {

// x and y of one dtype and the same dims (rank >= 1).
template <typename A>
Error same_shape(const OpContext& ctx, const A& a, DType dtype) {
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, dtype) && check::is(y, dtype) && x.rank >= 1 && y.rank == x.rank, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(check::same_dims(a.x, a.y, x.rank), Error::InvalidOp);
  return Error::Ok;
}

// ---- mean over axes ---------------------------------------------------------

Error mean_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::MeanArgs>(ctx, OpParams::ReduceParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::MeanArgs>();
  const Operand& x = ctx.input(0);
  TMCU_CHECK(check::is(x, DType::F32) && check::is(ctx.output(0), DType::F32) && x.rank >= 1 && a.axis_mask != 0 &&
                 (a.axis_mask >> x.rank) == 0,
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  int64_t kept = 1;
  for (uint32_t d = 0; d < x.rank; ++d) {
    if (((a.axis_mask >> d) & 1) == 0) kept *= a.x[d];
  }
  TMCU_CHECK(kept * 4 == ctx.output(0).nbytes, Error::InvalidOp);
  return Error::Ok;
}

void mean_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::MeanArgs>();
  mean_f32(ctx.in<const float>(0), a.x, int32_t(ctx.input(0).rank), a.axis_mask,
           ctx.out<float>(0));
}

// ---- softmax over one axis --------------------------------------------------

Error softmax_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::SoftmaxArgs>(ctx, OpParams::SoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::SoftmaxArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32) && check::is(y, DType::F32), Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(a.axis >= 0 && a.axis < int32_t(x.rank) && y.rank == x.rank &&
                 check::same_dims(a.x, a.y, x.rank),
             Error::InvalidOp);
  return Error::Ok;
}

void softmax_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::SoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_f32(ctx.in<const float>(0), ctx.out<float>(0), int32_t(check::extent(a.x, 0, a.axis)),
              a.x[a.axis], int32_t(check::extent(a.x, a.axis + 1, rank)));
}

// ---- softmax over the last axis ----------------------------------------------

/// int8 softmax and log-softmax: only differences >= diff_min are scaled by
/// 2^input_left_shift, and that product must fit in int32.
TMCU_INLINE bool diff_min_ok(int32_t input_left_shift, int32_t diff_min) {
  return input_left_shift >= 0 && input_left_shift <= 31 && diff_min <= 0 &&
         int64_t(diff_min) * (int64_t{1} << input_left_shift) >= INT32_MIN;
}

/// int16 softmax: rows of at most 2^15 (the int32 sum), the exp and 1/(1+x)
/// tables (inputs 1 and 2, int16 [513] each).
template <typename A>
TMCU_INLINE bool softmax_s16_ok(const OpContext& ctx, const A& a) {
  return a.x[ctx.input(0).rank - 1] <= 32768 && check::vector(ctx.input(1), DType::I16, 513) &&
         check::vector(ctx.input(2), DType::I16, 513) && a.input_multiplier >= 0 && shift_ok(a.input_left_shift);
}

// An optional second input: the exp table (int32 [256], reduce.h).
Error softmax_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 2, 1) &&
                 (ctx.num_inputs() == 1 || check::vector(ctx.input(1), DType::I32, 256)) &&
                 check::args<schema::QuantSoftmaxArgs>(ctx, OpParams::QuantSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  TMCU_TRY(same_shape(ctx, a, DType::I8));
  TMCU_CHECK(diff_min_ok(a.input_left_shift, a.diff_min), Error::InvalidOp);
  return Error::Ok;
}

void softmax_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_rows_s8(ctx.in<const int8_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1],
                  a.input_multiplier, a.input_left_shift, a.diff_min, nullptr, 1, ctx.out<int8_t>(0),
                  ctx.num_inputs() == 2 ? ctx.in<const int32_t>(1) : nullptr);
}

// x, exp table, 1/(1+x) table (int16 [513] each) -> y, over the last axis.
Error softmax_s16_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 3, 3, 1) &&
                 check::args<schema::QuantSoftmaxArgs>(ctx, OpParams::QuantSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  TMCU_TRY(same_shape(ctx, a, DType::I16));
  TMCU_CHECK(softmax_s16_ok(ctx, a), Error::InvalidOp);
  return Error::Ok;
}

void softmax_s16_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_s16(ctx.in<const int16_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1],
              a.input_multiplier, a.input_left_shift, ctx.in<const int16_t>(1), ctx.in<const int16_t>(2),
              ctx.out<int16_t>(0));
}

// ---- log softmax ----------------------------------------------------------------------

Error log_softmax_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::SoftmaxArgs>(ctx, OpParams::SoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::SoftmaxArgs>();
  TMCU_TRY(same_shape(ctx, a, DType::F32));
  TMCU_CHECK(a.axis >= 0 && a.axis < int32_t(ctx.input(0).rank), Error::InvalidOp);
  return Error::Ok;
}

void log_softmax_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::SoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  log_softmax_f32(ctx.in<const float>(0), ctx.out<float>(0), int32_t(check::extent(a.x, 0, a.axis)),
                  a.x[a.axis], int32_t(check::extent(a.x, a.axis + 1, rank)));
}

Error log_softmax_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantLogSoftmaxArgs>(ctx, OpParams::QuantLogSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantLogSoftmaxArgs>();
  TMCU_TRY(same_shape(ctx, a, DType::I8));
  // Rows below 4096 keep the Q12.19 sum of exponentials (each <= 2^19) in int32;
  // differences >= diff_min scaled by 2^input_left_shift stay in int32.
  TMCU_CHECK(a.x[ctx.input(0).rank - 1] < 4096 && diff_min_ok(a.input_left_shift, a.diff_min) &&
                 a.input_multiplier >= 0 && a.reverse_scaling_divisor >= 0 &&
                 a.reverse_scaling_right_shift >= 0 && a.reverse_scaling_right_shift <= 31,
             Error::InvalidOp);
  return Error::Ok;
}

void log_softmax_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLogSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  const QuantLogSoftmaxParams p{a.input_multiplier, a.input_left_shift, a.reverse_scaling_divisor,
                                a.reverse_scaling_right_shift, a.diff_min};
  log_softmax_s8(ctx.in<const int8_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1], p,
                 ctx.out<int8_t>(0));
}

// ---- mean over any axes -----------------------------------------------------------------

template <typename T>
Error mean_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::QuantMeanArgs>(ctx, OpParams::QuantMeanParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantMeanArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is_q<T>(x) && is_q<T>(y) && x.rank >= 1, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  const int32_t r = int32_t(x.rank);
  TMCU_CHECK(a.axis_mask >> r == 0, Error::InvalidOp);
  int64_t kept = 1, count = 1;
  for (int32_t d = 0; d < r; ++d) ((a.axis_mask >> d) & 1u ? count : kept) *= a.x[d];
  // y holds the kept elements (reduced axes dropped or 1: the same bytes);
  // the int32 sum holds count values of 8 (16) bits.
  const int64_t max_count = sizeof(T) == 1 ? int64_t{1} << 23 : int64_t{1} << 15;
  TMCU_CHECK(int64_t(y.nbytes) == kept * int64_t(sizeof(T)) && count <= max_count && a.multiplier >= 0 &&
                 shift_ok(a.shift) && act_ok<T>(a.act_min, a.act_max) &&
                 QType<T>::zero_point_ok(a.input_zero_point) && QType<T>::zero_point_ok(a.output_zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

QuantMeanParams mean_params(const schema::QuantMeanArgs& a) {
  return QuantMeanParams{a.input_zero_point, a.output_zero_point, a.multiplier, a.shift, a.act_min, a.act_max};
}

template <typename T, void (*Fn)(const T*, const int32_t*, int32_t, uint32_t, const QuantMeanParams&, T*)>
void mean_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantMeanArgs>();
  Fn(ctx.in<const T>(0), a.x, int32_t(ctx.input(0).rank), a.axis_mask, mean_params(a), ctx.out<T>(0));
}

// ---- softmax with a constant mask over the last axis ----------------------------------

// The mask, input `index`: U8 [mask_rows, cols], mask_rows dividing the rows.
Error mask_check(const OpContext& ctx, const schema::QuantMaskedSoftmaxArgs& a, uint32_t index) {
  const Operand& m = ctx.input(index);
  const int32_t rank = int32_t(ctx.input(0).rank);
  const int64_t rows = check::extent(a.x, 0, rank - 1);
  TMCU_CHECK(check::is(m, DType::U8, 2), Error::InvalidOp);
  TMCU_TRY(check::holds(m, a.mask));
  TMCU_CHECK(a.mask[1] == a.x[rank - 1] && rows % a.mask[0] == 0, Error::InvalidOp);
  return Error::Ok;
}

// x, mask [, exp table (int32 [256])] -> y.
Error masked_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) &&
                 (ctx.num_inputs() == 2 || check::vector(ctx.input(2), DType::I32, 256)) &&
                 check::args<schema::QuantMaskedSoftmaxArgs>(ctx, OpParams::QuantSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantMaskedSoftmaxArgs>();
  TMCU_TRY(same_shape(ctx, a, DType::I8));
  TMCU_TRY(mask_check(ctx, a, 1));
  TMCU_CHECK(diff_min_ok(a.input_left_shift, a.diff_min), Error::InvalidOp);
  return Error::Ok;
}

void masked_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantMaskedSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_rows_s8(ctx.in<const int8_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1],
                  a.input_multiplier, a.input_left_shift, a.diff_min, ctx.in<const uint8_t>(1), a.mask[0],
                  ctx.out<int8_t>(0), ctx.num_inputs() == 3 ? ctx.in<const int32_t>(2) : nullptr);
}

Error masked_s16_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 4, 4, 1) &&
                 check::args<schema::QuantMaskedSoftmaxArgs>(ctx, OpParams::QuantSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantMaskedSoftmaxArgs>();
  TMCU_TRY(same_shape(ctx, a, DType::I16));
  TMCU_TRY(mask_check(ctx, a, 3));
  TMCU_CHECK(softmax_s16_ok(ctx, a), Error::InvalidOp);
  return Error::Ok;
}

void masked_s16_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantMaskedSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_rows_s16(ctx.in<const int16_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1],
                   a.input_multiplier, a.input_left_shift, ctx.in<const int16_t>(1), ctx.in<const int16_t>(2),
                   ctx.in<const uint8_t>(3), a.mask[0], ctx.out<int16_t>(0));
}

}  // namespace

const Kernel kMeanF32 = {mean_f32_check, mean_f32_run};
const Kernel kSoftmaxF32 = {softmax_f32_check, softmax_f32_run};
const Kernel kSoftmaxS8 = {softmax_s8_check, softmax_s8_run};
const Kernel kSoftmaxS16 = {softmax_s16_check, softmax_s16_run};
const Kernel kLogSoftmaxF32 = {log_softmax_f32_check, log_softmax_f32_run};
const Kernel kLogSoftmaxS8 = {log_softmax_s8_check, log_softmax_s8_run};
const Kernel kMeanS8 = {mean_q_check<int8_t>, mean_q_run<int8_t, mean_s8>};
const Kernel kMeanS16 = {mean_q_check<int16_t>, mean_q_run<int16_t, mean_s16>};
const Kernel kSoftmaxMaskedS8 = {masked_s8_check, masked_s8_run};
const Kernel kSoftmaxMaskedS16 = {masked_s16_check, masked_s16_run};

}  // namespace portable
}  // namespace torchmcu
