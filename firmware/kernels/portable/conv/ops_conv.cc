// The conv family as the executor sees it (LINEAR_*, CONV2D_*,
// DEPTHWISE_CONV2D_*, TRANSPOSE_CONV2D_*; float32, int8, int4 weights and
// a16w8): load-time checks of operands and arguments, and run functions
// handing them to the math of conv.h (common/glue.h says how).
//
// Integer requantization multipliers and shifts and the bias are tensor
// values: no check reads them. The int8 run functions look at them before
// calling the math (s8::requant_in_range) and output zeros for values it
// cannot take; the checks bound the shapes that size the accumulators. The
// int16 math is defined for any of them (conv.h).
#include <cstring>
#include <type_traits>

#include "kernels/portable/common/glue.h"
#include "kernels/portable/common/requantize.h"
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace portable {
namespace {

// ---- float32 ---------------------------------------------------------------

// ---- linear: x [rows, cols], w [out, in], optional bias [out] ---------------

Error linear_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) && ctx.num_args() * 4 == sizeof(schema::LinearArgs) &&
                 (ctx.params_type() == OpParams::NONE || ctx.params_type() == OpParams::LinearParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::LinearArgs>();
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32) && x.rank >= 1 && check::is(w, DType::F32, 2) && check::is(y, DType::F32) &&
                 y.rank == x.rank,
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x_rows, a.x_cols));
  TMCU_TRY(check::holds(w, a.w));
  TMCU_TRY(check::holds(y, a.y_rows, a.y_cols));
  TMCU_CHECK(a.x_cols == a.w[1] && a.y_cols == a.w[0] && a.x_rows == a.y_rows, Error::InvalidOp);
  if (ctx.num_inputs() == 3 && OpContext::present(ctx.input(2))) {
    TMCU_CHECK(check::vector(ctx.input(2), DType::F32, a.w[0]), Error::InvalidOp);
  }
  return Error::Ok;
}

void linear_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::LinearArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;  // null if absent
  linear_f32(ctx.in<const float>(0), ctx.in<const float>(1), bias, ctx.out<float>(0), a.x_rows,
             a.x_cols, a.w[0], ActRange{a.act_min, a.act_max});
}

// ---- conv2d / depthwise: x NHWC, w OHWI or [1, kh, kw, oc], bias [oc] ------

Error conv_common_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) &&
                 check::args<schema::Conv2dArgs>(ctx, OpParams::Conv2dParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32, 4) && check::is(w, DType::F32, 4) && check::is(y, DType::F32, 4), Error::InvalidOp);
  TMCU_TRY(check::holds4(x, a.x));
  TMCU_TRY(check::holds4(w, a.w));
  TMCU_TRY(check::holds4(y, a.y));
  TMCU_CHECK(check::small(a.stride_h, 1) && check::small(a.stride_w, 1) &&
                 check::small(a.dilation_h, 1) && check::small(a.dilation_w, 1) &&
                 check::small(a.pad_top, 0) && check::small(a.pad_left, 0),
             Error::InvalidOp);
  TMCU_CHECK(a.x[0] == a.y[0] &&
                 (check::window_padded(a.x[1], a.y[1], a.w[1], a.stride_h, a.pad_top, a.dilation_h) ||
                  check::rows(a.x[1], a.y[1], a.w[1], a.stride_h, a.pad_top, a.dilation_h, true)) &&
                 (check::window_padded(a.x[2], a.y[2], a.w[2], a.stride_w, a.pad_left, a.dilation_w) ||
                  check::window(a.x[2], a.y[2], a.w[2], a.stride_w, a.pad_left, a.dilation_w, true)),
             Error::InvalidOp);
  if (ctx.num_inputs() == 3 && OpContext::present(ctx.input(2))) {
    TMCU_CHECK(check::vector(ctx.input(2), DType::F32, a.y[3]), Error::InvalidOp);
  }
  return Error::Ok;
}

Conv2dParams conv_f32_params(const schema::Conv2dArgs& a) {
  return Conv2dParams{a.stride_h,   a.stride_w,   a.pad_top, a.pad_left,
                      a.dilation_h, a.dilation_w, a.groups,  ActRange{a.act_min, a.act_max}};
}

Error conv2d_f32_check(const OpContext& ctx) {
  TMCU_TRY(conv_common_f32_check(ctx));
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const int32_t groups = a.groups;
  TMCU_CHECK(groups >= 1 && a.x[3] % groups == 0 && a.y[3] % groups == 0, Error::InvalidOp);
  TMCU_CHECK(a.w[0] == a.y[3] && int64_t(a.w[3]) * groups == a.x[3], Error::InvalidOp);
  return Error::Ok;
}

void conv2d_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;
  conv2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.in<const float>(1), a.w[1], a.w[2], bias,
             ctx.out<float>(0), shape4(a.y), conv_f32_params(a));
}

Error depthwise_f32_check(const OpContext& ctx) {
  TMCU_TRY(conv_common_f32_check(ctx));
  const auto& a = ctx.args<schema::Conv2dArgs>();
  TMCU_CHECK(a.w[0] == 1 && a.multiplier >= 1 && a.w[3] == a.y[3] &&
                 int64_t(a.x[3]) * a.multiplier == a.w[3],
             Error::InvalidOp);
  return Error::Ok;
}

void depthwise_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;
  depthwise_conv2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.in<const float>(1), a.w[1], a.w[2],
                       a.multiplier, bias, ctx.out<float>(0), shape4(a.y), conv_f32_params(a));
}

// ---- integer conv2d / depthwise / linear: x, w, bias, multiplier, shift [, scratch]
// The optional scratch operand is planned RAM for kernels that need it
// (CMSIS-NN's; of the activations' dtype); the portable kernels need none and
// ignore it.

/// What the integer conv glue does differently per activation dtype.
template <typename T>
struct ConvQ;

template <>
struct ConvQ<int8_t> {
  using Params = QuantConvParams;
  // The int32 accumulator is bounded at load (accumulator_ok) and the tensor
  // values checked when the op runs (requant_ok).
  static constexpr bool kBounded = true;
  // linear: the bias holds the kernel sums, so the input offset is not the kernel's.
  static constexpr bool linear_input_offset_ok(int32_t) { return true; }
  // The shape check (groups, depthwise multiplier) before x's and y's; int16
  // has it after them: each dtype keeps its order of checks, so its error codes.
  static constexpr bool kShapeFirst = true;
  static QuantConvParams params(const schema::QuantConv2dArgs& a) {
    return QuantConvParams{a.stride_h,      a.stride_w,     a.pad_top,     a.pad_left,
                           a.dilation_h,    a.dilation_w,   a.input_offset,
                           a.output_offset, a.act_min,      a.act_max};
  }
};

template <>
struct ConvQ<int16_t> {
  using Params = QuantConvS16Params;
  static constexpr bool kBounded = false;
  static constexpr bool linear_input_offset_ok(int32_t v) { return v == 0; }
  static constexpr bool kShapeFirst = false;
  static QuantConvS16Params params(const schema::QuantConv2dArgs& a) {
    return QuantConvS16Params{a.stride_h,   a.stride_w,   a.pad_top, a.pad_left,
                              a.dilation_h, a.dilation_w, a.act_min, a.act_max};
  }
};

template <typename T>
using Bias = typename QType<T>::Bias;

// The scratch operand into int8's params; int16's take none here. (Tag
// dispatch, not `if constexpr`: the Arduino library builds as C++14.)
TMCU_INLINE void take_scratch(const OpContext& ctx, QuantConvParams& q, std::true_type) {
  q.scratch = scratch_operand(ctx, 5, &q.scratch_bytes);
}
template <typename P>
TMCU_INLINE void take_scratch(const OpContext&, P&, std::false_type) {}

/// ConvQ<T>::params(a) with the op's scratch operand (int8: the fast paths'
/// buffers; operand_count_ok allows it as the sixth input).
template <typename T>
TMCU_INLINE typename ConvQ<T>::Params conv_params(const OpContext& ctx, const schema::QuantConv2dArgs& a) {
  typename ConvQ<T>::Params q = ConvQ<T>::params(a);
  take_scratch(ctx, q, std::integral_constant<bool, std::is_same<T, int8_t>::value>());
  return q;
}

/// The int32 accumulator of one output stays within int32 for any bias the
/// math lets through: `terms` products, each at most `per_term` in magnitude.
TMCU_INLINE bool accumulator_ok(int64_t terms, int64_t per_term) {
  return terms * per_term <= int64_t(INT32_MAX);
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

template <typename T>
TMCU_INLINE bool operand_count_ok(const OpContext& ctx) {
  if (ctx.num_outputs() != 1) return false;
  if (ctx.num_inputs() == 5) return true;
  return ctx.num_inputs() == 6 && is_q<T>(ctx.input(5));
}

/// A packed int4 operand (DType::I4, the rank of dims) holds exactly the
/// elements of dims: ceil(elements / 2) bytes.
TMCU_INLINE Error holds_i4(const Operand& o, const int32_t* dims, uint32_t rank) {
  const uint32_t elements = check::bytes(dims, rank, 1);
  return elements != 0 && o.rank == rank && (elements + 1) / 2 == o.nbytes ? Error::Ok
                                                                           : Error::InvalidTensor;
}

template <typename T>
Error conv_args_check(const OpContext& ctx, DType weights) {
  TMCU_CHECK(operand_count_ok<T>(ctx) &&
                 check::args<schema::QuantConv2dArgs>(ctx, OpParams::QuantConv2dParams) &&
                 check::is(ctx.input(1), weights, 4),
             Error::InvalidOp);
  const int32_t* w = ctx.args<schema::QuantConv2dArgs>().w;
  return weights == DType::I4 ? holds_i4(ctx.input(1), w, 4) : check::holds4(ctx.input(1), w);
}

template <typename T>
Error conv_common_check(const OpContext& ctx, int32_t out_channels, int64_t taps, int64_t per_term) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is_q<T>(x, 4) && is_q<T>(y, 4), Error::InvalidOp);
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
  TMCU_CHECK(QType<T>::input_offset_ok(a.input_offset) && QType<T>::output_offset_ok(a.output_offset) &&
                 act_ok<T>(a.act_min, a.act_max),
             Error::InvalidOp);
  TMCU_CHECK(check::vector(ctx.input(2), QType<T>::kBias, out_channels) &&
                 check::vector(ctx.input(3), DType::I32, out_channels) &&
                 check::vector(ctx.input(4), DType::I32, out_channels),
             Error::InvalidOp);
  if (ConvQ<T>::kBounded) TMCU_CHECK(accumulator_ok(taps, per_term), Error::InvalidOp);
  return Error::Ok;
}

// Grouped when the weights' input channels are fewer than the input's:
// groups = x channels / w channels, dividing the output channels too.
TMCU_INLINE bool groups_ok(const schema::QuantConv2dArgs& a) {
  return a.w[3] >= 1 && a.x[3] >= a.w[3] && a.x[3] % a.w[3] == 0 && a.w[0] % (a.x[3] / a.w[3]) == 0;
}

TMCU_INLINE bool depthwise_ok(const schema::QuantConv2dArgs& a) {
  return a.w[0] == 1 && a.multiplier >= 1 && int64_t(a.x[3]) * a.multiplier == a.w[3];
}

/// conv2d or depthwise (kDepthwise) of T activations and kW weights (int8,
/// or int4 for int8 activations: one group).
template <typename T, DType kW, bool kDepthwise>
Error conv_check(const OpContext& ctx) {
  TMCU_TRY(conv_args_check<T>(ctx, kW));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  const bool shape_ok = kDepthwise ? depthwise_ok(a) : kW == DType::I4 ? a.w[3] == a.x[3] : groups_ok(a);
  if (ConvQ<T>::kShapeFirst) TMCU_CHECK(shape_ok, Error::InvalidOp);
  const int32_t out_channels = kDepthwise ? a.w[3] : a.w[0];
  const int64_t taps = kDepthwise ? int64_t(a.w[1]) * a.w[2] : int64_t(a.w[1]) * a.w[2] * a.w[3];
  TMCU_TRY(conv_common_check<T>(ctx, out_channels, taps, kW == DType::I4 ? kConvTermS4 : kConvTermS8));
  if (!ConvQ<T>::kShapeFirst) TMCU_CHECK(shape_ok, Error::InvalidOp);
  return Error::Ok;
}

// The values of bias, multiplier and shift (inputs 2, 3, 4) the int8 math
// can take; false after writing zeros to the output.
bool requant_ok(const OpContext& ctx, int32_t channels, int32_t num_requant, int64_t terms,
                int64_t per_term) {
  if (s8::requant_in_range(ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
                           channels, num_requant, terms, per_term)) {
    return true;
  }
  std::memset(ctx.out<void>(0), 0, ctx.output(0).nbytes);
  return false;
}

template <typename T, void (*Fn)(const T*, Shape4, const int8_t*, int32_t, int32_t, int32_t, const Bias<T>*,
                                 const int32_t*, const int32_t*, T*, Shape4, const typename ConvQ<T>::Params&)>
void conv2d_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (ConvQ<T>::kBounded && !requant_ok(ctx, a.w[0], a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], kConvTermS8)) {
    return;
  }
  Fn(ctx.in<const T>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2], a.w[3], ctx.in<const Bias<T>>(2),
     ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), ctx.out<T>(0), shape4(a.y), conv_params<T>(ctx, a));
}

template <typename T, void (*Fn)(const T*, Shape4, const int8_t*, int32_t, int32_t, int32_t, const Bias<T>*,
                                 const int32_t*, const int32_t*, T*, Shape4, const typename ConvQ<T>::Params&)>
void depthwise_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (ConvQ<T>::kBounded && !requant_ok(ctx, a.w[3], a.w[3], int64_t(a.w[1]) * a.w[2], kConvTermS8)) return;
  Fn(ctx.in<const T>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2], a.multiplier,
     ctx.in<const Bias<T>>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), ctx.out<T>(0), shape4(a.y),
     conv_params<T>(ctx, a));
}

// int4 weights (W4A8): as above, w packed I4, one group.

void conv2d_s4_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!requant_ok(ctx, a.w[0], a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], kConvTermS4)) return;
  conv2d_s4(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2],
            ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
            ctx.out<int8_t>(0), shape4(a.y), ConvQ<int8_t>::params(a));
}

void depthwise_s4_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!requant_ok(ctx, a.w[3], a.w[3], int64_t(a.w[1]) * a.w[2], kConvTermS4)) return;
  depthwise_conv2d_s4(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1],
                      a.w[2], a.multiplier, ctx.in<const int32_t>(2), ctx.in<const int32_t>(3),
                      ctx.in<const int32_t>(4), ctx.out<int8_t>(0), shape4(a.y), ConvQ<int8_t>::params(a));
}

// linear: x [rows, in], w [out, in], bias (int8: kernel sums folded), multiplier,
// shift (one, or one per output) [, scratch].

template <typename T, DType kW = DType::I8>
Error linear_check(const OpContext& ctx) {
  TMCU_CHECK(operand_count_ok<T>(ctx) &&
                 check::args<schema::QuantLinearArgs>(ctx, OpParams::QuantLinearParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  TMCU_CHECK(act_ok<T>(a.act_min, a.act_max) && QType<T>::output_offset_ok(a.output_offset) &&
                 ConvQ<T>::linear_input_offset_ok(a.input_offset),
             Error::InvalidOp);
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(is_q<T>(x) && x.rank >= 1 && is_q<T>(y) && y.rank == x.rank && check::is(w, kW, 2),
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x_rows, a.x_cols));
  TMCU_TRY(kW == DType::I4 ? holds_i4(w, a.w, 2) : check::holds(w, a.w));
  TMCU_TRY(check::holds(y, a.y_rows, a.y_cols));
  TMCU_CHECK(a.x_cols == a.w[1] && a.y_cols == a.w[0] && a.x_rows == a.y_rows, Error::InvalidOp);
  TMCU_CHECK(check::vector(ctx.input(2), QType<T>::kBias, a.w[0]) &&
                 (!ConvQ<T>::kBounded || accumulator_ok(a.w[1], kW == DType::I4 ? kLinearTermS4 : kLinearTermS8)),
             Error::InvalidOp);
  const Operand& mult = ctx.input(3);
  const int32_t n = int32_t(mult.nbytes / 4);
  TMCU_CHECK((n == 1 || n == a.w[0]) && check::vector(mult, DType::I32, n) &&
                 check::vector(ctx.input(4), DType::I32, n),
             Error::InvalidOp);
  return Error::Ok;
}

template <void (*Fn)(const int8_t*, const int8_t*, const int32_t*, const int32_t*, const int32_t*, int32_t,
                     int8_t*, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t),
          int64_t kTerm>
void linear_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  const int32_t n = int32_t(ctx.input(3).nbytes / 4);
  if (!requant_ok(ctx, a.w[0], n, a.w[1], kTerm)) return;
  Fn(ctx.in<const int8_t>(0), ctx.in<const int8_t>(1), ctx.in<const int32_t>(2), ctx.in<const int32_t>(3),
     ctx.in<const int32_t>(4), n, ctx.out<int8_t>(0), a.x_rows, a.w[1], a.w[0], a.output_offset, a.act_min,
     a.act_max);
}

void linear_s16_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLinearArgs>();
  linear_s16(ctx.in<const int16_t>(0), ctx.in<const int8_t>(1), ctx.in<const int64_t>(2),
             ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), int32_t(ctx.input(3).nbytes / 4),
             ctx.out<int16_t>(0), a.x_rows, a.w[1], a.w[0], a.act_min, a.act_max);
}

// ---- transposed convolution: x, w [out_c, kh, kw, in_c], bias, ... ---------------

/// A transposed convolution's output size along one axis: the full result
/// (in - 1) * stride + k, cropped by pad before, and after by (full - out -
/// pad), which lies in (-stride, max(pad, k - 1)] (PyTorch: output_padding
/// < stride).
TMCU_INLINE bool transposed(int32_t in, int32_t out, int32_t k, int32_t stride, int32_t pad) {
  if (!check::small(in, 1) || !check::small(out, 1) || !check::small(k, 1) || !check::small(stride, 1) ||
      !check::small(pad, 0)) {
    return false;
  }
  const int64_t after = (int64_t(in) - 1) * stride + k - out - pad;
  return after > -int64_t(stride) && after <= (pad > k - 1 ? pad : k - 1);
}

/// Shapes and geometry shared by every dtype (x, w, y of rank 4 checked by
/// the caller): w [y channels, kh, kw, x channels / groups].
template <typename A>
Error transpose_geometry(const OpContext& ctx, const A& a) {
  TMCU_TRY(check::holds4(ctx.input(0), a.x));
  TMCU_TRY(check::holds4(ctx.input(1), a.w));
  TMCU_TRY(check::holds4(ctx.output(0), a.y));
  // grouped (PyTorch's groups): w holds in_c / groups channels, each group out_c / groups outputs
  TMCU_CHECK(a.x[0] == a.y[0] && a.w[0] == a.y[3] && a.w[3] >= 1 && a.x[3] % a.w[3] == 0 &&
                 a.y[3] % (a.x[3] / a.w[3]) == 0 && a.dilation_h == 1 &&
                 a.dilation_w == 1 && transposed(a.x[1], a.y[1], a.w[1], a.stride_h, a.pad_top) &&
                 transposed(a.x[2], a.y[2], a.w[2], a.stride_w, a.pad_left),
             Error::InvalidOp);
  return Error::Ok;
}

Error transpose_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) && check::args<schema::Conv2dArgs>(ctx, OpParams::Conv2dParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::Conv2dArgs>();
  TMCU_CHECK(check::is(ctx.input(0), DType::F32, 4) && check::is(ctx.input(1), DType::F32, 4) &&
                 check::is(ctx.output(0), DType::F32, 4) && a.w[3] >= 1 && a.groups == a.x[3] / a.w[3],
             Error::InvalidOp);
  TMCU_TRY(transpose_geometry(ctx, a));
  if (ctx.num_inputs() == 3 && OpContext::present(ctx.input(2))) {
    TMCU_CHECK(check::vector(ctx.input(2), DType::F32, a.y[3]), Error::InvalidOp);
  }
  return Error::Ok;
}

void transpose_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;
  const Conv2dParams p{a.stride_h, a.stride_w, a.pad_top, a.pad_left, 1, 1, 1, ActRange{a.act_min, a.act_max}};
  transpose_conv2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.in<const float>(1), a.w[1], a.w[2], a.w[3], bias,
                       ctx.out<float>(0), shape4(a.y), p);
}

// x, w, bias, multiplier, shift (one per output channel) [, scratch (planned
// for CMSIS-NN; of the output's dtype)].
Error transpose_quant_check(const OpContext& ctx, DType act, DType bias) {
  TMCU_CHECK(ctx.num_outputs() == 1 && (ctx.num_inputs() == 5 || ctx.num_inputs() == 6) &&
                 check::args<schema::QuantConv2dArgs>(ctx, OpParams::QuantConv2dParams),
             Error::InvalidOp);
  if (ctx.num_inputs() == 6) TMCU_CHECK(check::is(ctx.input(5), act), Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(check::is(ctx.input(0), act, 4) && check::is(ctx.input(1), DType::I8, 4) &&
                 check::is(ctx.output(0), act, 4),
             Error::InvalidOp);
  TMCU_TRY(transpose_geometry(ctx, a));
  TMCU_CHECK(check::vector(ctx.input(2), bias, a.y[3]) && check::vector(ctx.input(3), DType::I32, a.y[3]) &&
                 check::vector(ctx.input(4), DType::I32, a.y[3]),
             Error::InvalidOp);
  return Error::Ok;
}

// int8: each output sums at most kh * kw * in_c products of |(x + input_offset) * w|
// <= 255 * 128 (kConvTermS8); the tensor values are checked when the op runs.
// The checks force dilation 1, so ConvQ<T>::params(a) has it.
template <typename T>
Error transpose_q_check(const OpContext& ctx) {
  TMCU_TRY(transpose_quant_check(ctx, QType<T>::kDType, QType<T>::kBias));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(QType<T>::input_offset_ok(a.input_offset) && QType<T>::output_offset_ok(a.output_offset) &&
                 act_ok<T>(a.act_min, a.act_max) &&
                 (!ConvQ<T>::kBounded || accumulator_ok(int64_t(a.w[1]) * a.w[2] * a.w[3], kConvTermS8)),
             Error::InvalidOp);
  return Error::Ok;
}

template <typename T, void (*Fn)(const T*, Shape4, const int8_t*, int32_t, int32_t, int32_t, const Bias<T>*,
                                 const int32_t*, const int32_t*, T*, Shape4, const typename ConvQ<T>::Params&)>
void transpose_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (ConvQ<T>::kBounded && !requant_ok(ctx, a.w[0], a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], kConvTermS8)) {
    return;
  }
  Fn(ctx.in<const T>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2], a.w[3], ctx.in<const Bias<T>>(2),
     ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), ctx.out<T>(0), shape4(a.y), ConvQ<T>::params(a));
}

}  // namespace

const Kernel kLinearF32 = {linear_f32_check, linear_f32_run};
const Kernel kConv2dF32 = {conv2d_f32_check, conv2d_f32_run};
const Kernel kDepthwiseConv2dF32 = {depthwise_f32_check, depthwise_f32_run};
const Kernel kConv2dS8 = {conv_check<int8_t, DType::I8, false>, conv2d_run<int8_t, grouped_conv2d_s8>};
const Kernel kDepthwiseConv2dS8 = {conv_check<int8_t, DType::I8, true>, depthwise_run<int8_t, depthwise_conv2d_s8>};
const Kernel kLinearS8 = {linear_check<int8_t>, linear_s8_run<linear_s8, kLinearTermS8>};
const Kernel kConv2dS4 = {conv_check<int8_t, DType::I4, false>, conv2d_s4_run};
const Kernel kDepthwiseConv2dS4 = {conv_check<int8_t, DType::I4, true>, depthwise_s4_run};
const Kernel kLinearS4 = {linear_check<int8_t, DType::I4>, linear_s8_run<linear_s4, kLinearTermS4>};
const Kernel kConv2dS16 = {conv_check<int16_t, DType::I8, false>, conv2d_run<int16_t, grouped_conv2d_s16>};
const Kernel kDepthwiseConv2dS16 = {conv_check<int16_t, DType::I8, true>,
                                    depthwise_run<int16_t, depthwise_conv2d_s16>};
const Kernel kLinearS16 = {linear_check<int16_t>, linear_s16_run};
const Kernel kTransposeConv2dF32 = {transpose_f32_check, transpose_f32_run};
const Kernel kTransposeConv2dS8 = {transpose_q_check<int8_t>, transpose_q_run<int8_t, transpose_conv2d_s8>};
const Kernel kTransposeConv2dS16 = {transpose_q_check<int16_t>, transpose_q_run<int16_t, transpose_conv2d_s16>};

}  // namespace portable
}  // namespace torchmcu
