// The executor's side of arith.h (SUB_*, DIV_*). SUB takes ADD's arguments
// and parameters (TFLite derives them the same way), so its checks are
// ADD's; DIV_F32's are ADD_F32's.
#include "kernels/check.h"
#include "kernels/portable/arith.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_s16.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;
using schema::OpParams;
using schema::Operand;

Error sub_f32_check(const OpContext& ctx) { return kAddF32.check(ctx); }
Error sub_s8_check(const OpContext& ctx) { return kAddS8.check(ctx); }
Error sub_s16_check(const OpContext& ctx) { return kAddS16.check(ctx); }

template <void (*Fn)(const float*, const int32_t*, const float*, const int32_t*, float*, const int32_t*,
                     int32_t, ActRange)>
void binary_f32_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::BinaryArgs>();
  Fn(ctx.in<const float>(0), p.a, ctx.in<const float>(1), p.b, ctx.out<float>(0), p.y,
     int32_t(ctx.output(0).rank), ActRange{p.act_min, p.act_max});
}

QuantAddParams add_params(const schema::QuantAddArgs& p) {
  return QuantAddParams{p.input1_offset, p.input1_multiplier, p.input1_shift, p.input2_offset,
                        p.input2_multiplier, p.input2_shift, p.left_shift, p.output_multiplier,
                        p.output_shift, p.output_offset, p.act_min, p.act_max};
}

void sub_s8_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  sub_s8(ctx.in<const int8_t>(0), p.a, ctx.in<const int8_t>(1), p.b, ctx.out<int8_t>(0), p.y,
         int32_t(ctx.output(0).rank), add_params(p));
}

void sub_s16_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  sub_s16(ctx.in<const int16_t>(0), p.a, ctx.in<const int16_t>(1), p.b, ctx.out<int16_t>(0), p.y,
          int32_t(ctx.output(0).rank), add_params(p));
}

Error div_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::QuantDivArgs>(ctx, OpParams::QuantDivParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::QuantDivArgs>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(a, DType::I8) && check::is(b, DType::I8) && check::is(y, DType::I8), Error::InvalidOp);
  TMCU_TRY(check::holds(a, p.a));
  TMCU_TRY(check::holds(b, p.b));
  TMCU_TRY(check::holds(y, p.y));
  TMCU_CHECK(check::broadcastable(a, p.a, b, p.b, y, p.y) && check::inplace_ok(ctx, a, p.a, y, p.y) &&
                 check::inplace_ok(ctx, b, p.b, y, p.y),
             Error::InvalidOp);
  // output_shift <= 23: with |v1| <= 255 (8 bits, headroom >= 23) the final
  // division's exponent is never negative.
  TMCU_CHECK(-128 <= p.act_min && p.act_min <= p.act_max && p.act_max <= 127 && p.output_shift >= -31 &&
                 p.output_shift <= 23 && p.output_multiplier >= 0 && p.input1_offset >= -127 &&
                 p.input1_offset <= 128 && p.input2_offset >= -127 && p.input2_offset <= 128 &&
                 p.output_offset >= -128 && p.output_offset <= 127,
             Error::InvalidOp);
  return Error::Ok;
}

void div_s8_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantDivArgs>();
  const QuantDivParams q{p.input1_offset, p.input2_offset, p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,       p.act_max};
  div_s8(ctx.in<const int8_t>(0), p.a, ctx.in<const int8_t>(1), p.b, ctx.out<int8_t>(0), p.y,
         int32_t(ctx.output(0).rank), q);
}

}  // namespace

const Kernel kSubF32 = {sub_f32_check, binary_f32_run<sub_f32>, kInplaceBoth};
const Kernel kSubS8 = {sub_s8_check, sub_s8_run, kInplaceBoth};
const Kernel kSubS16 = {sub_s16_check, sub_s16_run, kInplaceBoth};
const Kernel kDivF32 = {sub_f32_check, binary_f32_run<div_f32>, kInplaceBoth};
const Kernel kDivS8 = {div_s8_check, div_s8_run, kInplaceBoth};

}  // namespace portable
}  // namespace torchmcu
