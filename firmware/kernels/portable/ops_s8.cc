// The int8 portable kernels as the executor sees them: load-time checks of
// operands and arguments, and run functions handing the arguments, read in
// place, to the plain integer math of portable_s8.h. As in ops_f32.cc, each
// Kernel is its own const object so unused ones are never linked.
//
// Requantization multipliers and shifts and the bias are tensor values: no
// check reads them. The run functions look at them before calling the math
// (s8::requant_in_range) and output zeros for values it cannot take; the
// checks bound the shapes that size the accumulators.
#include <cstring>

#include "kernels/check.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_s8.h"
#include "kernels/portable/reductions.h"
#include "kernels/portable/requantize_s8.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;
using schema::OpParams;
using schema::Operand;

TMCU_INLINE Shape4 shape4(const int32_t* d) { return Shape4{d[0], d[1], d[2], d[3]}; }

TMCU_INLINE bool s8(const Operand& o) { return check::is(o, DType::I8); }
TMCU_INLINE bool s8_nhwc(const Operand& o) { return check::is(o, DType::I8, 4); }

TMCU_INLINE bool act_ok(int32_t lo, int32_t hi) { return -128 <= lo && lo <= hi && hi <= 127; }

// Offsets are negated input zero points and output zero points of int8 tensors.
TMCU_INLINE bool input_offset_ok(int32_t v) { return v >= -127 && v <= 128; }
TMCU_INLINE bool output_offset_ok(int32_t v) { return v >= -128 && v <= 127; }
TMCU_INLINE bool shift_ok(int32_t s) { return s >= -31 && s <= 30; }

/// A tensor's zero point, as the quantize / dequantize kernels use it.
TMCU_INLINE bool zero_point_ok(int32_t zp) { return zp >= -128 && zp <= 127; }

/// The int32 accumulator of one output stays within int32 for any bias the
/// math lets through: `terms` products, each at most `per_term` in magnitude.
TMCU_INLINE bool accumulator_ok(int64_t terms, int64_t per_term) {
  return terms * per_term <= int64_t(INT32_MAX);
}

// ---- conv2d / depthwise: x, w, bias, multiplier, shift [, scratch] ------------
// The optional scratch operand is planned RAM for kernels that need it
// (CMSIS-NN's); the portable kernels need none and ignore it.

TMCU_INLINE bool operand_count_ok(const OpContext& ctx) {
  if (ctx.num_outputs() != 1) return false;
  if (ctx.num_inputs() == 5) return true;
  return ctx.num_inputs() == 6 && s8(ctx.input(5));
}

// `taps`: the multiply-accumulates of one output element; each is at most
// |(x + input_offset) * w| <= 256 * 128, or |x * w| + |input_offset * w| on
// the interior path (bias + input_offset * sum(w), then sum x * w).
constexpr int64_t kConvTermS8 = 2 * 128 * 128;
// int4 weights (|w| <= 8), summed tap by tap: |(x + input_offset) * w| <= 256 * 8.
constexpr int64_t kConvTermS4 = 256 * 8;
// linear: the bias holds the kernel sums, the kernel adds x * w only.
constexpr int64_t kLinearTermS8 = 128 * 128;
constexpr int64_t kLinearTermS4 = 128 * 8;

/// A packed int4 operand (DType::I4, the rank of dims) holds exactly the
/// elements of dims: ceil(elements / 2) bytes.
TMCU_INLINE Error holds_i4(const Operand& o, const int32_t* dims, uint32_t rank) {
  const uint32_t elements = check::bytes(dims, rank, 1);
  return elements != 0 && o.rank == rank && (elements + 1) / 2 == o.nbytes ? Error::Ok
                                                                           : Error::InvalidTensor;
}

Error conv_common_check(const OpContext& ctx, int32_t out_channels, int64_t taps,
                        int64_t per_term = kConvTermS8) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s8_nhwc(x) && s8_nhwc(y), Error::InvalidOp);
  TMCU_TRY(check::holds4(x, a.x));
  TMCU_TRY(check::holds4(y, a.y));
  TMCU_CHECK(a.x[0] == a.y[0] && a.y[3] == out_channels, Error::InvalidOp);
  TMCU_CHECK(check::small(a.stride_h, 1) && check::small(a.stride_w, 1) &&
                 check::small(a.dilation_h, 1) && check::small(a.dilation_w, 1) &&
                 check::small(a.pad_top, 0) && check::small(a.pad_left, 0),
             Error::InvalidOp);
  TMCU_CHECK(check::window_padded(a.x[1], a.y[1], a.w[1], a.stride_h, a.pad_top, a.dilation_h) &&
                 check::window_padded(a.x[2], a.y[2], a.w[2], a.stride_w, a.pad_left, a.dilation_w),
             Error::InvalidOp);
  TMCU_CHECK(input_offset_ok(a.input_offset) && output_offset_ok(a.output_offset) &&
                 act_ok(a.act_min, a.act_max),
             Error::InvalidOp);
  for (uint32_t i = 2; i < 5; ++i) {
    TMCU_CHECK(check::vector(ctx.input(i), DType::I32, out_channels), Error::InvalidOp);
  }
  TMCU_CHECK(accumulator_ok(taps, per_term), Error::InvalidOp);
  return Error::Ok;
}

Error conv_args_check(const OpContext& ctx, DType weights = DType::I8) {
  TMCU_CHECK(operand_count_ok(ctx) &&
                 check::args<schema::QuantConv2dArgs>(ctx, OpParams::QuantConv2dParams) &&
                 check::is(ctx.input(1), weights, 4),
             Error::InvalidOp);
  const int32_t* w = ctx.args<schema::QuantConv2dArgs>().w;
  return weights == DType::I4 ? holds_i4(ctx.input(1), w, 4) : check::holds4(ctx.input(1), w);
}

QuantConvParams conv_params(const schema::QuantConv2dArgs& a) {
  return QuantConvParams{a.stride_h,      a.stride_w,     a.pad_top,     a.pad_left,
                         a.dilation_h,    a.dilation_w,   a.input_offset,
                         a.output_offset, a.act_min,      a.act_max};
}

// Grouped when the weights' input channels are fewer than the input's:
// groups = x channels / w channels, dividing the output channels too.
TMCU_INLINE bool groups_ok(const schema::QuantConv2dArgs& a) {
  return a.w[3] >= 1 && a.x[3] >= a.w[3] && a.x[3] % a.w[3] == 0 && a.w[0] % (a.x[3] / a.w[3]) == 0;
}

Error conv2d_check(const OpContext& ctx) {
  TMCU_TRY(conv_args_check(ctx));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(groups_ok(a), Error::InvalidOp);
  return conv_common_check(ctx, a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3]);
}

// The values of bias, multiplier and shift (inputs 2, 3, 4) the math can
// take; false after writing zeros to the output.
bool requant_ok(const OpContext& ctx, int32_t channels, int32_t num_requant, int64_t terms,
                int64_t per_term) {
  if (s8::requant_in_range(ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
                           channels, num_requant, terms, per_term)) {
    return true;
  }
  std::memset(ctx.out<void>(0), 0, ctx.output(0).nbytes);
  return false;
}

void conv2d_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!requant_ok(ctx, a.w[0], a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], 2 * 128 * 128)) return;
  grouped_conv2d_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2], a.w[3],
                    ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
                    ctx.out<int8_t>(0), shape4(a.y), conv_params(a));
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_TRY(conv_args_check(ctx));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(a.w[0] == 1 && a.multiplier >= 1 && int64_t(a.x[3]) * a.multiplier == a.w[3],
             Error::InvalidOp);
  return conv_common_check(ctx, a.w[3], int64_t(a.w[1]) * a.w[2]);
}

void depthwise_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!requant_ok(ctx, a.w[3], a.w[3], int64_t(a.w[1]) * a.w[2], 2 * 128 * 128)) return;
  depthwise_conv2d_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1],
                      a.w[2], a.multiplier, ctx.in<const int32_t>(2), ctx.in<const int32_t>(3),
                      ctx.in<const int32_t>(4), ctx.out<int8_t>(0), shape4(a.y), conv_params(a));
}

// ---- conv2d / depthwise with int4 weights (W4A8): as above, w packed I4 --------

Error conv2d_s4_check(const OpContext& ctx) {
  TMCU_TRY(conv_args_check(ctx, DType::I4));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(a.w[3] == a.x[3], Error::InvalidOp);
  return conv_common_check(ctx, a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], kConvTermS4);
}

void conv2d_s4_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!requant_ok(ctx, a.w[0], a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], kConvTermS4)) return;
  conv2d_s4(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2],
            ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
            ctx.out<int8_t>(0), shape4(a.y), conv_params(a));
}

Error depthwise_s4_check(const OpContext& ctx) {
  TMCU_TRY(conv_args_check(ctx, DType::I4));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(a.w[0] == 1 && a.multiplier >= 1 && int64_t(a.x[3]) * a.multiplier == a.w[3],
             Error::InvalidOp);
  return conv_common_check(ctx, a.w[3], int64_t(a.w[1]) * a.w[2], kConvTermS4);
}

void depthwise_s4_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!requant_ok(ctx, a.w[3], a.w[3], int64_t(a.w[1]) * a.w[2], kConvTermS4)) return;
  depthwise_conv2d_s4(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1],
                      a.w[2], a.multiplier, ctx.in<const int32_t>(2), ctx.in<const int32_t>(3),
                      ctx.in<const int32_t>(4), ctx.out<int8_t>(0), shape4(a.y), conv_params(a));
}

// ---- linear: x [rows, in], w [out, in], bias (kernel sums folded), mult, shift
// [, scratch]

Error linear_check_weights(const OpContext& ctx, DType weights, int64_t per_term) {
  TMCU_CHECK(operand_count_ok(ctx) &&
                 check::args<schema::QuantLinearArgs>(ctx, OpParams::QuantLinearParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  TMCU_CHECK(act_ok(a.act_min, a.act_max) && output_offset_ok(a.output_offset), Error::InvalidOp);
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s8(x) && x.rank >= 1 && s8(y) && y.rank == x.rank && check::is(w, weights, 2),
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x_rows, a.x_cols));
  TMCU_TRY(weights == DType::I4 ? holds_i4(w, a.w, 2) : check::holds(w, a.w));
  TMCU_TRY(check::holds(y, a.y_rows, a.y_cols));
  TMCU_CHECK(a.x_cols == a.w[1] && a.y_cols == a.w[0] && a.x_rows == a.y_rows, Error::InvalidOp);
  TMCU_CHECK(check::vector(ctx.input(2), DType::I32, a.w[0]) && accumulator_ok(a.w[1], per_term),
             Error::InvalidOp);
  const Operand& mult = ctx.input(3);
  const int32_t n = int32_t(mult.nbytes / 4);
  TMCU_CHECK((n == 1 || n == a.w[0]) && check::vector(mult, DType::I32, n) &&
                 check::vector(ctx.input(4), DType::I32, n),
             Error::InvalidOp);
  return Error::Ok;
}

Error linear_check(const OpContext& ctx) { return linear_check_weights(ctx, DType::I8, kLinearTermS8); }
Error linear_s4_check(const OpContext& ctx) { return linear_check_weights(ctx, DType::I4, kLinearTermS4); }

void linear_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t n = int32_t(ctx.input(3).nbytes / 4);
  if (!requant_ok(ctx, a.w[0], n, a.w[1], kLinearTermS8)) return;
  linear_s8(ctx.in<const int8_t>(0), ctx.in<const int8_t>(1), ctx.in<const int32_t>(2),
            ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), n, ctx.out<int8_t>(0), a.x_rows, a.w[1],
            a.w[0], a.output_offset, a.act_min, a.act_max);
}

void linear_s4_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t n = int32_t(ctx.input(3).nbytes / 4);
  if (!requant_ok(ctx, a.w[0], n, a.w[1], kLinearTermS4)) return;
  linear_s4(ctx.in<const int8_t>(0), ctx.in<const int8_t>(1), ctx.in<const int32_t>(2),
            ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), n, ctx.out<int8_t>(0), a.x_rows, a.w[1],
            a.w[0], a.output_offset, a.act_min, a.act_max);
}

// ---- add / mul / maximum / minimum with broadcasting ----------------------------

// a and b broadcast to y, with the dims the arguments give them.
template <typename A>
Error binary_shapes_check(const OpContext& ctx) {
  const A& s = ctx.args<A>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s8(a) && s8(b) && s8(y), Error::InvalidOp);
  TMCU_TRY(check::holds(a, s.a));
  TMCU_TRY(check::holds(b, s.b));
  TMCU_TRY(check::holds(y, s.y));
  TMCU_CHECK(check::broadcastable(a, s.a, b, s.b, y, s.y) && check::inplace_ok(ctx, a, s.a, y, s.y) &&
                 check::inplace_ok(ctx, b, s.b, y, s.y),
             Error::InvalidOp);
  return Error::Ok;
}

Error add_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::QuantAddArgs>(ctx, OpParams::QuantAddParams),
             Error::InvalidOp);
  TMCU_TRY(binary_shapes_check<schema::QuantAddArgs>(ctx));
  const auto& p = ctx.args<schema::QuantAddArgs>();
  TMCU_CHECK(act_ok(p.act_min, p.act_max) && p.left_shift >= 0 && p.left_shift <= 22 &&
                 shift_ok(p.output_shift) &&
                 // Input multipliers < 1 (as the compiler and TFLM derive them):
                 // each rescaled input stays below 2^30, so their sum fits int32.
                 p.input1_shift >= -31 && p.input1_shift <= 0 && p.input1_multiplier >= 0 &&
                 p.input2_shift >= -31 && p.input2_shift <= 0 && p.input2_multiplier >= 0 &&
                 p.output_multiplier >= 0 && input_offset_ok(p.input1_offset) &&
                 input_offset_ok(p.input2_offset) && output_offset_ok(p.output_offset),
             Error::InvalidOp);
  return Error::Ok;
}

void add_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantAddArgs>();
  const QuantAddParams q{p.input1_offset, p.input1_multiplier, p.input1_shift,
                         p.input2_offset, p.input2_multiplier, p.input2_shift,
                         p.left_shift,    p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,           p.act_max};
  add_s8(ctx.in<const int8_t>(0), p.a, ctx.in<const int8_t>(1), p.b, ctx.out<int8_t>(0), p.y,
         int32_t(ctx.output(0).rank), q);
}

Error mul_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::QuantMulArgs>(ctx, OpParams::QuantMulParams),
             Error::InvalidOp);
  TMCU_TRY(binary_shapes_check<schema::QuantMulArgs>(ctx));
  const auto& p = ctx.args<schema::QuantMulArgs>();
  TMCU_CHECK(act_ok(p.act_min, p.act_max) && shift_ok(p.output_shift) &&
                 p.output_multiplier >= 0 && input_offset_ok(p.input1_offset) &&
                 input_offset_ok(p.input2_offset) && output_offset_ok(p.output_offset),
             Error::InvalidOp);
  return Error::Ok;
}

void mul_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::QuantMulArgs>();
  const QuantMulParams q{p.input1_offset, p.input2_offset, p.output_multiplier, p.output_shift,
                         p.output_offset, p.act_min,       p.act_max};
  mul_s8(ctx.in<const int8_t>(0), p.a, ctx.in<const int8_t>(1), p.b, ctx.out<int8_t>(0), p.y,
         int32_t(ctx.output(0).rank), q);
}

// Maximum / minimum of the raw int8 values: one quantization in and out.
Error max_min_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::QuantMaxMinArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  TMCU_TRY(binary_shapes_check<schema::QuantMaxMinArgs>(ctx));
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

// ---- pools ---------------------------------------------------------------------

// Windows of at most 2^24 taps: the int32 sum of int8 values stays in range.
template <bool kMax>
Error pool_check(const OpContext& ctx) {
  TMCU_TRY(check::quant_pool(ctx, DType::I8, int64_t(1) << 24, kMax));
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  return act_ok(a.act_min, a.act_max) ? Error::Ok : Error::InvalidOp;
}

QuantPoolParams pool_params(const schema::QuantPool2dArgs& a) {
  return QuantPoolParams{a.kernel_h, a.kernel_w, a.stride_h, a.stride_w,
                         a.pad_top,  a.pad_left, a.act_min,  a.act_max};
}

PoolOptions pool_options(const schema::QuantPool2dArgs& a) {
  PoolOptions o;
  o.dilation_h = a.dilation_h;
  o.dilation_w = a.dilation_w;
  o.count_include_pad = a.count_include_pad;
  o.divisor_override = a.divisor_override;
  o.pad_bottom = a.pad_bottom;
  o.pad_right = a.pad_right;
  o.zero_point = a.zero_point;
  return o;
}

void max_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  max_pool2d_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.out<int8_t>(0), shape4(a.y),
                pool_params(a), pool_options(a));
}

void avg_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  avg_pool2d_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.out<int8_t>(0), shape4(a.y),
                pool_params(a), pool_options(a));
}

// ---- softmax over the last axis ----------------------------------------------

// An optional second input: the exp table (int32 [256], reductions.h).
Error softmax_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 2, 1) &&
                 (ctx.num_inputs() == 1 || check::vector(ctx.input(1), DType::I32, 256)) &&
                 check::args<schema::QuantSoftmaxArgs>(ctx, OpParams::QuantSoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s8(x) && s8(y) && x.rank >= 1 && y.rank == x.rank, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(check::same_dims(a.x, a.y, x.rank) && a.input_left_shift >= 0 &&
                 a.input_left_shift <= 31 && a.diff_min <= 0,
             Error::InvalidOp);
  // Only differences >= diff_min are scaled by 2^input_left_shift: that
  // product must fit in int32.
  TMCU_CHECK(int64_t(a.diff_min) * (int64_t{1} << a.input_left_shift) >= INT32_MIN,
             Error::InvalidOp);
  return Error::Ok;
}

void softmax_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantSoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_rows_s8(ctx.in<const int8_t>(0), int32_t(check::extent(a.x, 0, rank - 1)), a.x[rank - 1],
                  a.input_multiplier, a.input_left_shift, a.diff_min, nullptr, 1, ctx.out<int8_t>(0),
                  ctx.num_inputs() == 2 ? ctx.in<const int32_t>(1) : nullptr);
}

// ---- element-wise: quantize, dequantize, clamp, table lookup ------------------
// Any shapes: only the element count matters.

Error quantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32) && s8(y) && x.nbytes == 4 * uint64_t(y.nbytes) &&
                 a.scale > 0.0f && zero_point_ok(a.zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

void quantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantizeArgs>();
  quantize_f32_s8(ctx.in<const float>(0), ctx.out<int8_t>(0), ctx.output(0).nbytes, a.scale,
                  a.zero_point);
}

Error dequantize_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantizeArgs>(ctx, OpParams::NONE),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(s8(x) && check::is(y, DType::F32) && y.nbytes == 4 * uint64_t(x.nbytes) &&
                 zero_point_ok(a.zero_point),
             Error::InvalidOp);
  return Error::Ok;
}

void dequantize_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantizeArgs>();
  dequantize_s8_f32(ctx.in<const int8_t>(0), ctx.out<float>(0), ctx.input(0).nbytes, a.scale,
                    a.zero_point);
}

Error clamp_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::QuantClampArgs>(ctx, OpParams::QuantClampParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantClampArgs>();
  TMCU_CHECK(s8(ctx.input(0)) && s8(ctx.output(0)) && act_ok(a.min, a.max) &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void clamp_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantClampArgs>();
  clamp_s8(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), ctx.output(0).nbytes, a.min, a.max);
}

Error lut_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) && ctx.num_args() == 0 && s8(ctx.input(0)) &&
                 s8(ctx.input(1)) && s8(ctx.output(0)) && ctx.input(1).nbytes == 256 &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void lut_run(const OpContext& ctx) {
  lut_s8(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), ctx.output(0).nbytes,
         ctx.in<const int8_t>(1));
}

}  // namespace

const Kernel kQuantizeS8 = {quantize_check, quantize_run};
const Kernel kDequantizeS8 = {dequantize_check, dequantize_run};
const Kernel kConv2dS8 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS8 = {depthwise_check, depthwise_run};
const Kernel kLinearS8 = {linear_check, linear_run};
const Kernel kAddS8 = {add_check, add_run, kInplaceBoth};
const Kernel kMulS8 = {mul_check, mul_run, kInplaceBoth};
const Kernel kMaxPool2dS8 = {pool_check<true>, max_pool_run};
const Kernel kAvgPool2dS8 = {pool_check<false>, avg_pool_run};
const Kernel kSoftmaxS8 = {softmax_check, softmax_run};
const Kernel kClampS8 = {clamp_check, clamp_run, kInplaceFirst};
const Kernel kLutS8 = {lut_check, lut_run, kInplaceFirst};
const Kernel kMaximumS8 = {max_min_check, max_min_run<maximum_s8>, kInplaceBoth};
const Kernel kMinimumS8 = {max_min_check, max_min_run<minimum_s8>, kInplaceBoth};
const Kernel kConv2dS4 = {conv2d_s4_check, conv2d_s4_run};
const Kernel kDepthwiseConv2dS4 = {depthwise_s4_check, depthwise_s4_run};
const Kernel kLinearS4 = {linear_s4_check, linear_s4_run};

}  // namespace portable
}  // namespace torchmcu
