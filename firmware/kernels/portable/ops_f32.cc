// The float32 portable kernels as the executor sees them: for each op code, a
// load-time check of its operands and arguments (the *Args struct
// program.fbs gives for it), and a run function that hands the arguments,
// read in place, to the plain math of portable_f32.h.
//
// Each Kernel is a separate const object: the generated kernel table names
// only the ones a model uses, and --gc-sections drops the rest.
#include <cstring>

#include "kernels/check.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_f32.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;
using schema::OpParams;
using schema::Operand;

TMCU_INLINE Shape4 shape4(const int32_t* d) { return Shape4{d[0], d[1], d[2], d[3]}; }

TMCU_INLINE bool f32(const Operand& o) { return check::is(o, DType::F32); }
TMCU_INLINE bool nhwc(const Operand& o) { return check::is(o, DType::F32, 4); }

// ---- linear: x [rows, cols], w [out, in], optional bias [out] ---------------

Error linear_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) && ctx.num_args() * 4 == sizeof(schema::LinearArgs) &&
                 (ctx.params_type() == OpParams::NONE || ctx.params_type() == OpParams::LinearParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::LinearArgs>();
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(f32(x) && x.rank >= 1 && check::is(w, DType::F32, 2) && f32(y) && y.rank == x.rank,
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

void linear_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::LinearArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;  // null if absent
  linear_f32(ctx.in<const float>(0), ctx.in<const float>(1), bias, ctx.out<float>(0), a.x_rows,
             a.x_cols, a.w[0], ActRange{a.act_min, a.act_max});
}

// ---- conv2d / depthwise: x NHWC, w OHWI or [1, kh, kw, oc], bias [oc] ------

Error conv_common_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 3, 1) &&
                 check::args<schema::Conv2dArgs>(ctx, OpParams::Conv2dParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const Operand& x = ctx.input(0);
  const Operand& w = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(nhwc(x) && check::is(w, DType::F32, 4) && nhwc(y), Error::InvalidOp);
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

Conv2dParams conv_params(const schema::Conv2dArgs& a) {
  return Conv2dParams{a.stride_h,   a.stride_w,   a.pad_top, a.pad_left,
                      a.dilation_h, a.dilation_w, a.groups,  ActRange{a.act_min, a.act_max}};
}

Error conv2d_check(const OpContext& ctx) {
  TMCU_TRY(conv_common_check(ctx));
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const int32_t groups = a.groups;
  TMCU_CHECK(groups >= 1 && a.x[3] % groups == 0 && a.y[3] % groups == 0, Error::InvalidOp);
  TMCU_CHECK(a.w[0] == a.y[3] && int64_t(a.w[3]) * groups == a.x[3], Error::InvalidOp);
  return Error::Ok;
}

void conv2d_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;
  conv2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.in<const float>(1), a.w[1], a.w[2], bias,
             ctx.out<float>(0), shape4(a.y), conv_params(a));
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_TRY(conv_common_check(ctx));
  const auto& a = ctx.args<schema::Conv2dArgs>();
  TMCU_CHECK(a.w[0] == 1 && a.multiplier >= 1 && a.w[3] == a.y[3] &&
                 int64_t(a.x[3]) * a.multiplier == a.w[3],
             Error::InvalidOp);
  return Error::Ok;
}

void depthwise_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Conv2dArgs>();
  const float* bias = ctx.num_inputs() == 3 ? ctx.in<const float>(2) : nullptr;
  depthwise_conv2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.in<const float>(1), a.w[1], a.w[2],
                       a.multiplier, bias, ctx.out<float>(0), shape4(a.y), conv_params(a));
}

// ---- element-wise unary: clamp (relu, relu6, hardtanh), sigmoid, tanh, ------
// hardswish. Any shapes: only the element count matters.

Error unary_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && f32(ctx.input(0)) && f32(ctx.output(0)) &&
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

// ---- add / mul / maximum / minimum with broadcasting ------------------------

Error binary_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 2, 2, 1) &&
                 check::args<schema::BinaryArgs>(ctx, OpParams::BinaryParams),
             Error::InvalidOp);
  const auto& p = ctx.args<schema::BinaryArgs>();
  const Operand& a = ctx.input(0);
  const Operand& b = ctx.input(1);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(f32(a) && f32(b) && f32(y), Error::InvalidOp);
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
void binary_run(const OpContext& ctx) {
  const auto& p = ctx.args<schema::BinaryArgs>();
  Fn(ctx.in<const float>(0), p.a, ctx.in<const float>(1), p.b, ctx.out<float>(0), p.y,
     int32_t(ctx.output(0).rank), ActRange{p.act_min, p.act_max});
}

// ---- pooling over NHWC ------------------------------------------------------

Error pool_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::Pool2dArgs>(ctx, OpParams::Pool2dParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::Pool2dArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(nhwc(x) && nhwc(y), Error::InvalidOp);
  TMCU_TRY(check::holds4(x, a.x));
  TMCU_TRY(check::holds4(y, a.y));
  TMCU_CHECK(check::small(a.kernel_h, 1) && check::small(a.kernel_w, 1) &&
                 check::small(a.stride_h, 1) && check::small(a.stride_w, 1) &&
                 check::small(a.dilation_h, 1) && check::small(a.dilation_w, 1) &&
                 check::small(a.pad_top, 0) && check::small(a.pad_left, 0) &&
                 a.divisor_override >= 0,
             Error::InvalidOp);
  TMCU_CHECK(a.x[0] == a.y[0] && a.x[3] == a.y[3] &&
                 check::window(a.x[1], a.y[1], a.kernel_h, a.stride_h, a.pad_top, a.dilation_h, true) &&
                 check::window(a.x[2], a.y[2], a.kernel_w, a.stride_w, a.pad_left, a.dilation_w, true),
             Error::InvalidOp);
  return Error::Ok;
}

Pool2dParams pool_params(const schema::Pool2dArgs& a) {
  return Pool2dParams{a.kernel_h,   a.kernel_w,   a.stride_h,          a.stride_w,
                      a.pad_top,    a.pad_left,   a.dilation_h,        a.dilation_w,
                      a.count_include_pad != 0,   a.divisor_override,  ActRange{a.act_min, a.act_max}};
}

void max_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Pool2dArgs>();
  max_pool2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.out<float>(0), shape4(a.y),
                 pool_params(a));
}

void avg_pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Pool2dArgs>();
  avg_pool2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.out<float>(0), shape4(a.y),
                 pool_params(a));
}

// ---- mean over axes ---------------------------------------------------------

Error mean_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::MeanArgs>(ctx, OpParams::ReduceParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::MeanArgs>();
  const Operand& x = ctx.input(0);
  TMCU_CHECK(f32(x) && f32(ctx.output(0)) && x.rank >= 1 && a.axis_mask != 0 &&
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

void mean_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::MeanArgs>();
  mean_f32(ctx.in<const float>(0), a.x, int32_t(ctx.input(0).rank), a.axis_mask,
           ctx.out<float>(0));
}

// ---- softmax over one axis --------------------------------------------------

Error softmax_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::SoftmaxArgs>(ctx, OpParams::SoftmaxParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::SoftmaxArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(f32(x) && f32(y), Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(a.axis >= 0 && a.axis < int32_t(x.rank) && y.rank == x.rank &&
                 check::same_dims(a.x, a.y, x.rank),
             Error::InvalidOp);
  return Error::Ok;
}

void softmax_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::SoftmaxArgs>();
  const int32_t rank = int32_t(ctx.input(0).rank);
  softmax_f32(ctx.in<const float>(0), ctx.out<float>(0), int32_t(check::extent(a.x, 0, a.axis)),
              a.x[a.axis], int32_t(check::extent(a.x, a.axis + 1, rank)));
}

// ---- data movement: permute, concat, copy, pad (any dtype) -------------------

// Inputs and the output of one (known) dtype.
TMCU_INLINE bool same_dtype(const OpContext& ctx) {
  const DType t = ctx.input(0).dtype;
  for (uint32_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!check::is(ctx.input(i), t)) return false;
  }
  return ctx.output(0).dtype == t;
}

Error permute_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && same_dtype(ctx) &&
                 check::args<schema::PermuteArgs>(ctx, OpParams::PermuteParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::PermuteArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(x.rank >= 1 && y.rank == x.rank && a.perm_size == int32_t(x.rank), Error::InvalidOp);
  uint32_t seen = 0;
  for (uint32_t d = 0; d < x.rank; ++d) {
    const int32_t from = a.perm[d];
    TMCU_CHECK(from >= 0 && from < int32_t(x.rank) && ((seen >> from) & 1) == 0, Error::InvalidOp);
    seen |= 1u << from;
    TMCU_CHECK(a.y[d] == a.x[from], Error::InvalidOp);
  }
  return Error::Ok;
}

void permute_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::PermuteArgs>();
  const Operand& x = ctx.input(0);
  permute(ctx.data<const void>(x), a.x, int32_t(x.rank), a.perm, ctx.out<void>(0),
          dtype_size(x.dtype));
}

// CONCAT's arguments: ConcatArgs, then [int:6] dims per input.
const int32_t* concat_dims(const OpContext& ctx, uint32_t i) {
  return reinterpret_cast<const int32_t*>(ctx.arg_words() + sizeof(schema::ConcatArgs) / 4) +
         kMaxRank * i;
}

Error concat_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, kMaxInputs, 1) && same_dtype(ctx) &&
                 ctx.num_args() * 4 == sizeof(schema::ConcatArgs) + 4 * kMaxRank * ctx.num_inputs() &&
                 ctx.params_type() == OpParams::ConcatParams,
             Error::InvalidOp);
  const auto& a = ctx.args<schema::ConcatArgs>();
  const Operand& y = ctx.output(0);
  TMCU_TRY(check::holds(y, a.y));
  TMCU_CHECK(a.axis >= 0 && a.axis < int32_t(y.rank), Error::InvalidOp);
  int64_t total = 0;
  for (uint32_t i = 0; i < ctx.num_inputs(); ++i) {
    const Operand& x = ctx.input(i);
    const int32_t* dims = concat_dims(ctx, i);
    TMCU_TRY(check::holds(x, dims));
    TMCU_CHECK(x.rank == y.rank, Error::InvalidOp);
    for (int32_t d = 0; d < int32_t(y.rank); ++d) {
      TMCU_CHECK(d == a.axis || dims[d] == a.y[d], Error::InvalidOp);
    }
    total += dims[a.axis];
  }
  TMCU_CHECK(total == a.y[a.axis], Error::InvalidOp);
  return Error::Ok;
}

void concat_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ConcatArgs>();
  const void* srcs[kMaxInputs];
  size_t inner[kMaxInputs];
  const size_t elem = dtype_size(ctx.output(0).dtype);
  const int32_t rank = int32_t(ctx.output(0).rank);
  for (uint32_t i = 0; i < ctx.num_inputs(); ++i) {
    srcs[i] = ctx.data<const void>(ctx.input(i));
    inner[i] = size_t(check::extent(concat_dims(ctx, i), a.axis, rank)) * elem;
  }
  concat(srcs, inner, int32_t(ctx.num_inputs()), int32_t(check::extent(a.y, 0, a.axis)),
         ctx.out<void>(0));
}

Error copy_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && same_dtype(ctx) && ctx.num_args() == 0 &&
                 ctx.input(0).nbytes == ctx.output(0).nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void copy_run(const OpContext& ctx) {
  // memmove: the output may be the input itself (a no-op then).
  std::memmove(ctx.out<void>(0), ctx.in<const void>(0), ctx.output(0).nbytes);
}

// Constant padding (F32 or I8): out dim d = before[d] + in dim d + after[d].
Error pad_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && same_dtype(ctx) &&
                 check::args<schema::PadArgs>(ctx, OpParams::PadParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::PadArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(x.dtype == DType::F32 || x.dtype == DType::I8, Error::InvalidOp);
  TMCU_TRY(check::holds(x, a.x));
  TMCU_TRY(check::holds(y, a.y));
  const int32_t rank = int32_t(x.rank);
  TMCU_CHECK(rank >= 1 && y.rank == x.rank && a.before_size == rank && a.after_size == rank,
             Error::InvalidOp);
  for (int32_t d = 0; d < rank; ++d) {
    TMCU_CHECK(check::small(a.before[d], 0) && check::small(a.after[d], 0) &&
                   int64_t(a.before[d]) + a.x[d] + a.after[d] == int64_t(a.y[d]),
               Error::InvalidOp);
  }
  if (x.dtype == DType::I8) {  // one quantization in and out; the value an int8
    TMCU_CHECK(a.qvalue >= -128 && a.qvalue <= 127 && a.x_scale == a.y_scale &&
                   a.x_zero_point == a.y_zero_point,
               Error::InvalidOp);
  }
  return Error::Ok;
}

void pad_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::PadArgs>();
  const Operand& x = ctx.input(0);
  const float fvalue = a.value;
  const int8_t qvalue = static_cast<int8_t>(a.qvalue);
  const void* value = x.dtype == DType::F32 ? static_cast<const void*>(&fvalue)
                                            : static_cast<const void*>(&qvalue);
  pad(ctx.data<const void>(x), a.x, int32_t(x.rank), a.before, a.after, value, ctx.out<void>(0),
      dtype_size(x.dtype));
}

}  // namespace

const Kernel kLinearF32 = {linear_check, linear_run};
const Kernel kConv2dF32 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dF32 = {depthwise_check, depthwise_run};
const Kernel kClampF32 = {clamp_check, clamp_run, kInplaceFirst};
const Kernel kSigmoidF32 = {no_args_unary_check, sigmoid_run, kInplaceFirst};
const Kernel kTanhF32 = {no_args_unary_check, tanh_run, kInplaceFirst};
const Kernel kAddF32 = {binary_check, binary_run<add_f32>, kInplaceBoth};
const Kernel kMulF32 = {binary_check, binary_run<mul_f32>, kInplaceBoth};
const Kernel kMaxPool2dF32 = {pool_check, max_pool_run};
const Kernel kAvgPool2dF32 = {pool_check, avg_pool_run};
const Kernel kMeanF32 = {mean_check, mean_run};
const Kernel kSoftmaxF32 = {softmax_check, softmax_run};
const Kernel kPermute = {permute_check, permute_run};
const Kernel kConcat = {concat_check, concat_run};
const Kernel kCopy = {copy_check, copy_run, kInplaceFirst};
const Kernel kPad = {pad_check, pad_run};
const Kernel kMaximumF32 = {binary_check, binary_run<maximum_f32>, kInplaceBoth};
const Kernel kMinimumF32 = {binary_check, binary_run<minimum_f32>, kInplaceBoth};
const Kernel kHardswishF32 = {no_args_unary_check, hardswish_run, kInplaceFirst};

}  // namespace portable
}  // namespace torchmcu
