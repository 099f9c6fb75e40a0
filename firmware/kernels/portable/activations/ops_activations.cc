// The executor's side of activations.h (ACTIVATION_F32, LUT_S16, PRELU_*,
// GLU_*): load-time checks and run functions. Tables and alpha values are
// data: every function is defined for any of them.
#include "kernels/portable/common/glue.h"
#include "kernels/portable/activations/activations.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace portable {
namespace {

// ---- ACTIVATION_F32: any shape, only the element count matters ------------------

Error activation_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::ActivationArgs>(ctx, OpParams::ActivationParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::ActivationArgs>();
  TMCU_CHECK(check::is(ctx.input(0), DType::F32) && check::is(ctx.output(0), DType::F32) &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes && a.fn >= 0 && a.fn < kNumActivationFns,
             Error::InvalidOp);
  return Error::Ok;
}

void activation_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ActivationArgs>();
  activation_f32(ctx.in<const float>(0), ctx.out<float>(0), ctx.output(0).nbytes / 4, a.fn, a.alpha);
}

// ---- LUT_S16: x, table (int16 [513]) -> y -----------------------------------------

Error lut_s16_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && ctx.num_args() == 0 && check::is(ctx.input(0), DType::I16) &&
                 check::vector(ctx.input(1), DType::I16, 513) && check::is(ctx.output(0), DType::I16) &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void lut_s16_run(const OpContext& ctx) {
  lut_s16(ctx.in<const int16_t>(0), ctx.out<int16_t>(0), ctx.output(0).nbytes / 2, ctx.in<const int16_t>(1));
}

// ---- PRELU: x, alpha broadcast to y ------------------------------------------------

template <typename A>
Error broadcast_shapes(const OpContext& ctx, const A& s, DType x_type, DType alpha_type) {
  const Operand& x = ctx.input(0);
  const Operand& alpha = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, x_type) && check::is(alpha, alpha_type) && check::is(y, x_type), Error::InvalidOp);
  TMCU_TRY(check::holds(x, s.a));
  TMCU_TRY(check::holds(alpha, s.b));
  TMCU_TRY(check::holds(y, s.y));
  TMCU_CHECK(check::broadcastable(x, s.a, alpha, s.b, y, s.y) && check::inplace_ok(ctx, x, s.a, y, s.y),
             Error::InvalidOp);
  return Error::Ok;
}

Error prelu_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::BinaryArgs>(ctx, OpParams::BinaryParams),
             Error::InvalidOp);
  return broadcast_shapes(ctx, ctx.args<schema::BinaryArgs>(), DType::F32, DType::F32);
}

void prelu_f32_run(const OpContext& ctx) {
  const auto& s = ctx.args<schema::BinaryArgs>();
  prelu_f32(ctx.in<const float>(0), s.a, ctx.in<const float>(1), s.b, ctx.out<float>(0), s.y,
            int32_t(ctx.output(0).rank));
}

template <typename T>
Error prelu_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::QuantPreluArgs>(ctx, OpParams::QuantPreluParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::QuantPreluArgs>();
  TMCU_TRY(broadcast_shapes(ctx, p, QType<T>::kDType, DType::I8));
  // Offsets are negated zero points (int16 ones are 0; alpha is int8); |v * alpha| <= 2^16 * 2^8.
  TMCU_CHECK(act_ok<T>(p.act_min, p.act_max) && shift_ok(p.output_shift_1) && shift_ok(p.output_shift_2) &&
                 p.output_multiplier_1 >= 0 && p.output_multiplier_2 >= 0 &&
                 QType<T>::input_offset_ok(p.input_offset) && QType<T>::output_offset_ok(p.output_offset) &&
                 QType<int8_t>::input_offset_ok(p.alpha_offset),
             Error::InvalidOp);
  return Error::Ok;
}

QuantPreluParams prelu_params(const schema::QuantPreluArgs& p) {
  return QuantPreluParams{p.input_offset,        p.alpha_offset,   p.output_offset,
                          p.output_multiplier_1, p.output_shift_1, p.output_multiplier_2,
                          p.output_shift_2,      p.act_min,        p.act_max};
}

template <typename T, void (*Fn)(const T*, const int32_t*, const int8_t*, const int32_t*, T*, const int32_t*,
                                 int32_t, const QuantPreluParams&)>
void prelu_q_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantPreluArgs>();
  Fn(ctx.in<const T>(0), p.a, ctx.in<const int8_t>(1), p.b, ctx.out<T>(0), p.y, int32_t(ctx.output(0).rank),
     prelu_params(p));
}

// ---- GLU: x [.., 2h, ..] -> y [.., h, ..] along `axis` ------------------------------

// y is x with the axis halved; (outer, half, inner) of that view.
template <typename A>
Error glu_shapes(const OpContext& ctx, const A& a, DType dtype, int32_t* outer, int32_t* half, int32_t* inner) {
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, dtype) && check::is(y, dtype) && x.rank >= 1 && y.rank == x.rank, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  const int32_t r = int32_t(x.rank);
  TMCU_CHECK(a.axis >= 0 && a.axis < r, Error::InvalidOp);
  for (int32_t d = 0; d < r; ++d) {
    TMCU_CHECK(d == a.axis ? int64_t(a.x[d]) == 2 * int64_t(a.y[d]) : a.x[d] == a.y[d], Error::InvalidOp);
  }
  *outer = int32_t(check::extent(a.y, 0, a.axis));
  *half = a.y[a.axis];
  *inner = int32_t(check::extent(a.y, a.axis + 1, r));
  return Error::Ok;
}

Error glu_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::GluArgs>(ctx, OpParams::GluParams),
             Error::InvalidOp);
  int32_t o, h, i;
  return glu_shapes(ctx, ctx.args<schema::GluArgs>(), DType::F32, &o, &h, &i);
}

void glu_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::GluArgs>();
  const int32_t r = int32_t(ctx.input(0).rank);
  glu_f32(ctx.in<const float>(0), ctx.out<float>(0), int32_t(check::extent(a.y, 0, a.axis)), a.y[a.axis],
          int32_t(check::extent(a.y, a.axis + 1, r)));
}

template <typename T>
Error glu_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::QuantGluArgs>(ctx, OpParams::QuantGluParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::QuantGluArgs>();
  int32_t o, h, i;
  TMCU_TRY(glu_shapes(ctx, p, QType<T>::kDType, &o, &h, &i));
  // The table: int8 [256], or int16 [513] (lut16's).
  TMCU_CHECK(check::vector(ctx.input(1), QType<T>::kDType, sizeof(T) == 2 ? 513 : 256), Error::InvalidOp);
  TMCU_CHECK(shift_ok(p.output_shift) && p.output_multiplier >= 0 && QType<T>::input_offset_ok(p.input1_offset) &&
                 QType<T>::input_offset_ok(p.input2_offset) && QType<T>::output_offset_ok(p.output_offset) &&
                 act_ok<T>(p.act_min, p.act_max),
             Error::InvalidOp);
  return Error::Ok;
}

QuantMulParams glu_mul(const schema::QuantGluArgs& p) {
  return QuantMulParams{p.input1_offset, p.input2_offset, p.output_multiplier, p.output_shift,
                        p.output_offset, p.act_min,       p.act_max};
}

template <typename T, void (*Fn)(const T*, const T*, T*, int32_t, int32_t, int32_t, const QuantMulParams&)>
void glu_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantGluArgs>();
  const int32_t r = int32_t(ctx.input(0).rank);
  Fn(ctx.in<const T>(0), ctx.in<const T>(1), ctx.out<T>(0), int32_t(check::extent(a.y, 0, a.axis)), a.y[a.axis],
     int32_t(check::extent(a.y, a.axis + 1, r)), glu_mul(a));
}

}  // namespace

const Kernel kActivationF32 = {activation_check, activation_run, inplace::kActivationF32};
const Kernel kLutS16 = {lut_s16_check, lut_s16_run, inplace::kLutS16};
const Kernel kPreluF32 = {prelu_f32_check, prelu_f32_run};
const Kernel kPreluS8 = {prelu_q_check<int8_t>, prelu_q_run<int8_t, prelu_s8>};
const Kernel kPreluS16 = {prelu_q_check<int16_t>, prelu_q_run<int16_t, prelu_s16>};
const Kernel kGluF32 = {glu_f32_check, glu_f32_run};
const Kernel kGluS8 = {glu_q_check<int8_t>, glu_q_run<int8_t, glu_s8>};
const Kernel kGluS16 = {glu_q_check<int16_t>, glu_q_run<int16_t, glu_s16>};

}  // namespace portable
}  // namespace torchmcu
