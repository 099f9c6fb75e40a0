// The elementwise family as the executor sees it (ADD/SUB/MUL/DIV/MAXIMUM/
// MINIMUM_*, CLAMP_*, SIGMOID/TANH/HARDSWISH_F32, LUT_S8, QUANTIZE_*,
// DEQUANTIZE_*, REQUANTIZE; float32, int8, int16): load-time checks of
// operands and arguments, and run functions handing them to the math of
// elementwise.h (common/glue.h says how). SUB takes ADD's arguments and
// parameters (TFLite derives them the same way), so its checks are ADD's;
// DIV_F32's are ADD_F32's.
#include "kernels/portable/common/glue.h"
#include "kernels/portable/common/requantize.h"
#include "kernels/portable/elementwise/elementwise.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace portable {
namespace {

// ---- float32 ---------------------------------------------------------------

// ---- element-wise unary: clamp (relu, relu6, hardtanh), sigmoid, tanh, ------
// hardswish. Any shapes: only the element count matters.

Error unary_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::is(ctx.input(0), DType::F32) && check::is(ctx.output(0), DType::F32) &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

Error no_args_unary_check(const OpContext& ctx) {
  TMCU_CHECK(ctx.num_args() == 0, Error::InvalidOp);
  return unary_check(ctx);
}

Error clamp_check(const OpContext& ctx) {
  TMCU_CHECK(check::args<schema::ClampArgs>(ctx, OpParams::ClampParams), Error::InvalidOp);
  return unary_check(ctx);
}

uint32_t elements(const OpContext& ctx) { return ctx.output(0).nbytes / 4; }

void clamp_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ClampArgs>();
  clamp_f32(ctx.in<const float>(0), ctx.out<float>(0), elements(ctx), a.min, a.max);
}

void sigmoid_run(const OpContext& ctx) {
  sigmoid_f32(ctx.in<const float>(0), ctx.out<float>(0), elements(ctx));
}

void tanh_run(const OpContext& ctx) {
  tanh_f32(ctx.in<const float>(0), ctx.out<float>(0), elements(ctx));
}

void hardswish_run(const OpContext& ctx) {
  hardswish_f32(ctx.in<const float>(0), ctx.out<float>(0), elements(ctx));
}

// ---- add / sub / mul / div / maximum / minimum with broadcasting -----------

Error binary_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::BinaryArgs>(ctx, OpParams::BinaryParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::BinaryArgs>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(a, DType::F32) && check::is(b, DType::F32) && check::is(y, DType::F32), Error::InvalidOp);
  TMCU_TRY(check::holds(a, p.a));
  TMCU_TRY(check::holds(b, p.b));
  TMCU_TRY(check::holds(y, p.y));
  TMCU_CHECK(check::broadcastable(a, p.a, b, p.b, y, p.y) &&
                 check::inplace_ok(ctx, a, p.a, y, p.y) && check::inplace_ok(ctx, b, p.b, y, p.y),
             Error::InvalidOp);
  return Error::Ok;
}

template <void (*Fn)(const float*, const int32_t*, const float*, const int32_t*, float*,
                     const int32_t*, int32_t, ActRange)>
void binary_f32_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::BinaryArgs>();
  Fn(ctx.in<const float>(0), p.a, ctx.in<const float>(1), p.b, ctx.out<float>(0), p.y,
     int32_t(ctx.output(0).rank), ActRange{p.act_min, p.act_max});
}

// ---- integer add / sub / mul / maximum / minimum / div with broadcasting ------

// Two inputs, one output, arguments A (with `params`); a and b broadcast to
// y, with the dims the arguments give them; with kInplace, y may be a or b
// where the kernel's mask says so (inplace::kAddS8, ...).
template <typename A, typename T, bool kInplace>
Error binary_shapes_check(const OpContext& ctx, OpParams params) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<A>(ctx, params), Error::InvalidOp);
  const A& s = ctx.args<A>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is_q<T>(a) && is_q<T>(b) && is_q<T>(y), Error::InvalidOp);
  TMCU_TRY(check::holds(a, s.a));
  TMCU_TRY(check::holds(b, s.b));
  TMCU_TRY(check::holds(y, s.y));
  TMCU_CHECK(check::broadcastable(a, s.a, b, s.b, y, s.y) &&
                 (!kInplace || (check::inplace_ok(ctx, a, s.a, y, s.y) && check::inplace_ok(ctx, b, s.b, y, s.y))),
             Error::InvalidOp);
  return Error::Ok;
}

// int8's ADD and MUL run in place (their masks: inplace::kAddS8, kMulS8), int16's do not.
template <typename T>
constexpr bool kInplaceAddMul = sizeof(T) == 1;

template <typename T>
Error add_check(const OpContext& ctx) {
  TMCU_TRY((binary_shapes_check<schema::QuantAddArgs, T, kInplaceAddMul<T>>(ctx, OpParams::QuantAddParams)));
  const auto& p = ctx.args<schema::QuantAddArgs>();
  // Input multipliers < 1 (as the compiler and TFLM derive them): each
  // rescaled input stays below 2^30, so their sum fits int32.
  TMCU_CHECK(act_ok<T>(p.act_min, p.act_max) && p.left_shift >= 0 &&
                 p.left_shift <= QType<T>::kAddMaxLeftShift && shift_ok(p.output_shift) &&
                 p.input1_shift >= -31 && p.input1_shift <= 0 && p.input1_multiplier >= 0 &&
                 p.input2_shift >= -31 && p.input2_shift <= 0 && p.input2_multiplier >= 0 &&
                 p.output_multiplier >= 0 && QType<T>::input_offset_ok(p.input1_offset) &&
                 QType<T>::input_offset_ok(p.input2_offset) && QType<T>::output_offset_ok(p.output_offset),
             Error::InvalidOp);
  return Error::Ok;
}

// ADD and SUB (its arguments are ADD's).
template <typename T, void (*Fn)(const T*, const int32_t*, const T*, const int32_t*, T*, const int32_t*, int32_t,
                                 const QuantAddParams&)>
void add_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  const QuantAddParams q{p.input1_offset, p.input1_multiplier, p.input1_shift,
                         p.input2_offset, p.input2_multiplier, p.input2_shift,
                         p.left_shift,    p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,           p.act_max};
  Fn(ctx.in<const T>(0), p.a, ctx.in<const T>(1), p.b, ctx.out<T>(0), p.y, int32_t(ctx.output(0).rank), q);
}

template <typename T>
Error mul_check(const OpContext& ctx) {
  TMCU_TRY((binary_shapes_check<schema::QuantMulArgs, T, kInplaceAddMul<T>>(ctx, OpParams::QuantMulParams)));
  const auto& p = ctx.args<schema::QuantMulArgs>();
  // int16: |a * b| <= 2^30 with zero offsets.
  TMCU_CHECK(act_ok<T>(p.act_min, p.act_max) && shift_ok(p.output_shift) && p.output_multiplier >= 0 &&
                 QType<T>::input_offset_ok(p.input1_offset) && QType<T>::input_offset_ok(p.input2_offset) &&
                 QType<T>::output_offset_ok(p.output_offset),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename T, void (*Fn)(const T*, const int32_t*, const T*, const int32_t*, T*, const int32_t*, int32_t,
                                 const QuantMulParams&)>
void mul_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantMulArgs>();
  const QuantMulParams q{p.input1_offset, p.input2_offset, p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,       p.act_max};
  Fn(ctx.in<const T>(0), p.a, ctx.in<const T>(1), p.b, ctx.out<T>(0), p.y, int32_t(ctx.output(0).rank), q);
}

// Maximum / minimum of the raw int8 values: one quantization in and out.
Error max_min_check(const OpContext& ctx) {
  TMCU_TRY((binary_shapes_check<schema::QuantMaxMinArgs, int8_t, true>(ctx, OpParams::NONE)));
  const auto& p = ctx.args<schema::QuantMaxMinArgs>();
  TMCU_CHECK(p.a_scale == p.y_scale && p.a_zero_point == p.y_zero_point &&
                 p.b_scale == p.y_scale && p.b_zero_point == p.y_zero_point,
             Error::InvalidOp);
  return Error::Ok;
}

template <void (*Fn)(const int8_t*, const int32_t*, const int8_t*, const int32_t*, int8_t*,
                     const int32_t*, int32_t)>
void max_min_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantMaxMinArgs>();
  Fn(ctx.in<const int8_t>(0), p.a, ctx.in<const int8_t>(1), p.b, ctx.out<int8_t>(0), p.y,
     int32_t(ctx.output(0).rank));
}

Error div_s8_check(const OpContext& ctx) {
  TMCU_TRY((binary_shapes_check<schema::QuantDivArgs, int8_t, true>(ctx, OpParams::QuantDivParams)));
  const auto& p = ctx.args<schema::QuantDivArgs>();
  // output_shift <= 23: with |v1| <= 255 (8 bits, headroom >= 23) the final
  // division's exponent is never negative.
  TMCU_CHECK(act_ok<int8_t>(p.act_min, p.act_max) && p.output_shift >= -31 && p.output_shift <= 23 &&
                 p.output_multiplier >= 0 && QType<int8_t>::input_offset_ok(p.input1_offset) &&
                 QType<int8_t>::input_offset_ok(p.input2_offset) && QType<int8_t>::output_offset_ok(p.output_offset),
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

// ---- quantize, dequantize, requantize, clamp, table lookup --------------------
// Any shapes: only the element count matters.

template <typename T>
Error quantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32) && is_q<T>(y) && x.nbytes == (4 / sizeof(T)) * uint64_t(y.nbytes) &&
                 a.scale > 0.0f && QType<T>::zero_point_ok(a.zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename T, void (*Fn)(const float*, T*, size_t, float, int32_t)>
void quantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantizeArgs>();
  Fn(ctx.in<const float>(0), ctx.out<T>(0), ctx.output(0).nbytes / sizeof(T), a.scale, a.zero_point);
}

template <typename T>
Error dequantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is_q<T>(x) && check::is(y, DType::F32) && y.nbytes == (4 / sizeof(T)) * uint64_t(x.nbytes) &&
                 QType<T>::zero_point_ok(a.zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename T, void (*Fn)(const T*, float*, size_t, float, int32_t)>
void dequantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantizeArgs>();
  Fn(ctx.in<const T>(0), ctx.out<float>(0), ctx.input(0).nbytes / sizeof(T), a.scale, a.zero_point);
}

// REQUANTIZE: int8 or int16 in, int8 or int16 out, element for element.
Error requantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::RequantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::RequantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  const bool x8 = check::is(x, DType::I8);
  const bool y8 = check::is(y, DType::I8);
  TMCU_CHECK((x8 || is_q<int16_t>(x)) && (y8 || is_q<int16_t>(y)), Error::InvalidOp);
  // Same element count; zero points of the operands' widths (int16: 0), so
  // x - input_zero_point stays within 17 bits.
  TMCU_CHECK(uint64_t(x.nbytes) * (y8 ? 1 : 2) == uint64_t(y.nbytes) * (x8 ? 1 : 2) &&
                 (x8 ? QType<int8_t>::zero_point_ok(a.input_zero_point) : QType<int16_t>::zero_point_ok(a.input_zero_point)) &&
                 (y8 ? QType<int8_t>::zero_point_ok(a.output_zero_point)
                     : QType<int16_t>::zero_point_ok(a.output_zero_point)) &&
                 a.multiplier >= 0 && shift_ok(a.shift),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename In, typename Out>
void requantize_loop(const In* x, Out* y, size_t n, const schema::RequantizeArgs& a, int32_t lo, int32_t hi) {
  for (size_t i = 0; i < n; ++i) {
    int32_t v = s8::requantize(int32_t(x[i]) - a.input_zero_point, a.multiplier, a.shift) + a.output_zero_point;
    v = v < lo ? lo : v > hi ? hi : v;
    y[i] = static_cast<Out>(v);
  }
}

void requantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::RequantizeArgs>();
  const bool x8 = ctx.input(0).dtype == DType::I8;
  const bool y8 = ctx.output(0).dtype == DType::I8;
  const size_t n = x8 ? ctx.input(0).nbytes : ctx.input(0).nbytes / 2;
  if (x8 && y8) {
    requantize_loop(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), n, a, -128, 127);
  } else if (x8) {
    requantize_loop(ctx.in<const int8_t>(0), ctx.out<int16_t>(0), n, a, -32768, 32767);
  } else if (y8) {
    requantize_loop(ctx.in<const int16_t>(0), ctx.out<int8_t>(0), n, a, -128, 127);
  } else {
    requantize_loop(ctx.in<const int16_t>(0), ctx.out<int16_t>(0), n, a, -32768, 32767);
  }
}

Error clamp_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantClampArgs>(ctx, OpParams::QuantClampParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantClampArgs>();
  TMCU_CHECK(is_q<int8_t>(ctx.input(0)) && is_q<int8_t>(ctx.output(0)) && act_ok<int8_t>(a.min, a.max) &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void clamp_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantClampArgs>();
  clamp_s8(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), ctx.output(0).nbytes, a.min, a.max);
}

Error lut_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && ctx.num_args() == 0 && is_q<int8_t>(ctx.input(0)) &&
                 is_q<int8_t>(ctx.input(1)) && is_q<int8_t>(ctx.output(0)) && ctx.input(1).nbytes == 256 &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void lut_s8_run(const OpContext& ctx) {
  lut_s8(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), ctx.output(0).nbytes, ctx.in<const int8_t>(1));
}

// ---- masked_fill (any of F32, I8, I16) and compare (F32, I32, U8 -> U8) ----

Error masked_fill_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::MaskedFillArgs>(ctx, OpParams::MaskedFillParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::MaskedFillArgs>();
  const Operand& x = ctx.input(0);
  const Operand& m = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK((check::is(x, DType::F32) || is_q<int8_t>(x) || is_q<int16_t>(x)) && check::is(m, DType::U8) &&
                 check::is(y, x.dtype),
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, p.x));
  TMCU_TRY(check::holds(m, p.mask));
  TMCU_TRY(check::holds(y, p.y));
  TMCU_CHECK(check::broadcastable(x, p.x, m, p.mask, y, p.y) && check::same_dims(p.x, p.y, y.rank) &&
                 (x.dtype != DType::I8 || (p.qvalue >= -128 && p.qvalue <= 127)) &&
                 (x.dtype != DType::I16 || (p.qvalue >= -32768 && p.qvalue <= 32767)),
             Error::InvalidOp);
  return Error::Ok;
}

void masked_fill_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::MaskedFillArgs>();
  const int32_t rank = int32_t(ctx.output(0).rank);
  const uint8_t* m = ctx.in<const uint8_t>(1);
  switch (ctx.input(0).dtype) {
    case DType::F32:
      masked_fill(ctx.in<const float>(0), p.x, m, p.mask, p.value, ctx.out<float>(0), p.y, rank);
      break;
    case DType::I8:
      masked_fill(ctx.in<const int8_t>(0), p.x, m, p.mask, int8_t(p.qvalue), ctx.out<int8_t>(0), p.y, rank);
      break;
    default:
      masked_fill(ctx.in<const int16_t>(0), p.x, m, p.mask, int16_t(p.qvalue), ctx.out<int16_t>(0), p.y, rank);
      break;
  }
}

Error compare_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && check::args<schema::CompareArgs>(ctx, OpParams::CompareParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::CompareArgs>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK((check::is(a, DType::F32) || check::is(a, DType::I32) || check::is(a, DType::U8)) &&
                 check::is(b, a.dtype) && check::is(y, DType::U8) && p.op >= kCompareLt && p.op <= kCompareNe,
             Error::InvalidOp);
  TMCU_TRY(check::holds(a, p.a));
  TMCU_TRY(check::holds(b, p.b));
  TMCU_TRY(check::holds(y, p.y));
  TMCU_CHECK(check::broadcastable(a, p.a, b, p.b, y, p.y), Error::InvalidOp);
  return Error::Ok;
}

void compare_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::CompareArgs>();
  const int32_t rank = int32_t(ctx.output(0).rank);
  uint8_t* y = ctx.out<uint8_t>(0);
  switch (ctx.input(0).dtype) {
    case DType::F32:
      compare(ctx.in<const float>(0), p.a, ctx.in<const float>(1), p.b, p.op, y, p.y, rank);
      break;
    case DType::I32:
      compare(ctx.in<const int32_t>(0), p.a, ctx.in<const int32_t>(1), p.b, p.op, y, p.y, rank);
      break;
    default:
      compare(ctx.in<const uint8_t>(0), p.a, ctx.in<const uint8_t>(1), p.b, p.op, y, p.y, rank);
      break;
  }
}

}  // namespace

const Kernel kMaskedFill = {masked_fill_check, masked_fill_run, inplace::kMaskedFill};
const Kernel kCompare = {compare_check, compare_run};
const Kernel kClampF32 = {clamp_check, clamp_run, inplace::kClampF32};
const Kernel kSigmoidF32 = {no_args_unary_check, sigmoid_run, inplace::kSigmoidF32};
const Kernel kTanhF32 = {no_args_unary_check, tanh_run, inplace::kTanhF32};
const Kernel kHardswishF32 = {no_args_unary_check, hardswish_run, inplace::kHardswishF32};
const Kernel kAddF32 = {binary_f32_check, binary_f32_run<add_f32>, inplace::kAddF32};
const Kernel kSubF32 = {binary_f32_check, binary_f32_run<sub_f32>, inplace::kSubF32};
const Kernel kMulF32 = {binary_f32_check, binary_f32_run<mul_f32>, inplace::kMulF32};
const Kernel kDivF32 = {binary_f32_check, binary_f32_run<div_f32>, inplace::kDivF32};
const Kernel kMaximumF32 = {binary_f32_check, binary_f32_run<maximum_f32>, inplace::kMaximumF32};
const Kernel kMinimumF32 = {binary_f32_check, binary_f32_run<minimum_f32>, inplace::kMinimumF32};
const Kernel kAddS8 = {add_check<int8_t>, add_run<int8_t, add_s8>, inplace::kAddS8};
const Kernel kSubS8 = {add_check<int8_t>, add_run<int8_t, sub_s8>, inplace::kSubS8};
const Kernel kMulS8 = {mul_check<int8_t>, mul_run<int8_t, mul_s8>, inplace::kMulS8};
const Kernel kDivS8 = {div_s8_check, div_s8_run, inplace::kDivS8};
const Kernel kMaximumS8 = {max_min_check, max_min_run<maximum_s8>, inplace::kMaximumS8};
const Kernel kMinimumS8 = {max_min_check, max_min_run<minimum_s8>, inplace::kMinimumS8};
const Kernel kAddS16 = {add_check<int16_t>, add_run<int16_t, add_s16>};
const Kernel kSubS16 = {add_check<int16_t>, add_run<int16_t, sub_s16>, inplace::kSubS16};
const Kernel kMulS16 = {mul_check<int16_t>, mul_run<int16_t, mul_s16>};
const Kernel kClampS8 = {clamp_s8_check, clamp_s8_run, inplace::kClampS8};
const Kernel kLutS8 = {lut_s8_check, lut_s8_run, inplace::kLutS8};
const Kernel kQuantizeS8 = {quantize_check<int8_t>, quantize_run<int8_t, quantize_f32_s8>};
const Kernel kDequantizeS8 = {dequantize_check<int8_t>, dequantize_run<int8_t, dequantize_s8_f32>};
const Kernel kQuantizeS16 = {quantize_check<int16_t>, quantize_run<int16_t, quantize_f32_s16>};
const Kernel kDequantizeS16 = {dequantize_check<int16_t>, dequantize_run<int16_t, dequantize_s16_f32>};
const Kernel kRequantize = {requantize_check, requantize_run};

}  // namespace portable
}  // namespace torchmcu
