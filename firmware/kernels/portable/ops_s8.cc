// The int8 portable kernels as the executor sees them: load-time checks of
// operands and parameters, and run functions unpacking the program into the
// plain integer math of portable_s8.h. As in ops_f32.cc, each Kernel is its
// own const object so unused ones are never linked.
#include "kernels/check.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_s8.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;

Shape4 shape4(const TensorView& t) { return Shape4{t.dims[0], t.dims[1], t.dims[2], t.dims[3]}; }

bool is_s8_nhwc(const TensorView& t) { return check::is(t, DType::I8, 4); }

/// A 1-D int32 constant of `n` entries (bias, multipliers, shifts).
bool i32_vector(const TensorView& t, int32_t n) {
  // Constants only: their values (shifts, bias bounds) are checked here at
  // load and must not change before the kernel reads them.
  return check::is(t, DType::I32, 1) && t.dims[0] == n && t.constant;
}

bool act_ok(int32_t lo, int32_t hi) { return -128 <= lo && lo <= hi && hi <= 127; }

// Offsets are negated input zero points and output zero points of int8 tensors.
bool input_offset_ok(int32_t v) { return v >= -127 && v <= 128; }
bool output_offset_ok(int32_t v) { return v >= -128 && v <= 127; }

bool shifts_ok(const TensorView& shift) {
  const int32_t* s = shift.as<const int32_t>();
  for (uint32_t i = 0; i < shift.numel(); ++i) {
    if (s[i] < -31 || s[i] > 30) return false;
  }
  return true;
}

/// The int32 accumulator of an output cannot overflow: the bias plus `terms`
/// products each at most `per_term` in magnitude stay within int32. (A
/// hostile bias near INT32_MAX would otherwise overflow the sum: undefined.)
bool bias_ok(const TensorView& bias, int64_t terms, int64_t per_term) {
  const int64_t room = int64_t(INT32_MAX) - terms * per_term;
  if (room < 0) return false;
  const int32_t* b = bias.as<const int32_t>();
  for (uint32_t i = 0; i < bias.numel(); ++i) {
    if (b[i] < -room || b[i] > room) return false;
  }
  return true;
}

/// A tensor's zero point, as the quantize / dequantize kernels use it.
bool zero_point_ok(const TensorView& t) { return t.zero_point >= -128 && t.zero_point <= 127; }

// Same window rule as the float kernels: PyTorch's output size, padding
// symmetric; partial ceil-mode windows are not lowered to int8.
bool window_ok(int32_t in, int32_t out, int32_t k, int32_t stride, int32_t pad, int32_t dilation) {
  const int32_t span = in + 2 * pad - dilation * (k - 1) - 1;
  return span >= 0 && out == span / stride + 1;
}

// ---- conv2d / depthwise: x, w, bias, multiplier, shift [, scratch] ------------
// The optional scratch operand is planned RAM for kernels that need it
// (CMSIS-NN's); the portable kernels need none and ignore it.

bool operand_count_ok(const OpContext& ctx) {
  if (ctx.num_outputs != 1) return false;
  if (ctx.num_inputs == 5) return true;
  return ctx.num_inputs == 6 && ctx.inputs[5].present() && ctx.inputs[5].dtype == DType::I8;
}

// `taps`: the multiply-accumulates of one output element; each is at most
// |(x + input_offset) * w| <= 256 * 128, or |x * w| + |input_offset * w| on
// the interior path (bias + input_offset * sum(w), then sum x * w).
Error conv_common_check(const OpContext& ctx, int32_t kh, int32_t kw, int32_t out_channels,
                        int64_t taps) {
  TMCU_CHECK(operand_count_ok(ctx), Error::InvalidOp);
  const schema::QuantConv2dParams p = ctx.op.params_as_QuantConv2dParams();
  TMCU_CHECK(p.valid(), Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(is_s8_nhwc(x) && is_s8_nhwc(y) && x.dims[0] == y.dims[0] && y.dims[3] == out_channels,
             Error::InvalidOp);
  TMCU_CHECK(check::small(p.stride_h(), 1) && check::small(p.stride_w(), 1) &&
                 check::small(p.dilation_h(), 1) && check::small(p.dilation_w(), 1) &&
                 check::small(p.pad_top(), 0) && check::small(p.pad_left(), 0),
             Error::InvalidOp);
  TMCU_CHECK(window_ok(x.dims[1], y.dims[1], kh, p.stride_h(), p.pad_top(), p.dilation_h()) &&
                 window_ok(x.dims[2], y.dims[2], kw, p.stride_w(), p.pad_left(), p.dilation_w()),
             Error::InvalidOp);
  TMCU_CHECK(input_offset_ok(p.input_offset()) && output_offset_ok(p.output_offset()) &&
                 act_ok(p.act_min(), p.act_max()),
             Error::InvalidOp);
  for (uint32_t i = 2; i < 5; ++i) {
    TMCU_CHECK(i32_vector(ctx.inputs[i], out_channels), Error::InvalidOp);
  }
  TMCU_CHECK(shifts_ok(ctx.inputs[4]) && bias_ok(ctx.inputs[2], taps, 2 * 128 * 128),
             Error::InvalidOp);
  return Error::Ok;
}

QuantConvParams conv_params(const schema::QuantConv2dParams& p) {
  return QuantConvParams{p.stride_h(),     p.stride_w(),      p.pad_top(), p.pad_left(),
                         p.dilation_h(),   p.dilation_w(),    p.input_offset(),
                         p.output_offset(), p.act_min(),      p.act_max()};
}

Error conv2d_check(const OpContext& ctx) {
  TMCU_CHECK(operand_count_ok(ctx), Error::InvalidOp);
  const TensorView& w = ctx.inputs[1];
  TMCU_CHECK(check::is(w, DType::I8, 4) && w.dims[3] == ctx.inputs[0].dims[3], Error::InvalidOp);
  return conv_common_check(ctx, w.dims[1], w.dims[2], w.dims[0],
                           int64_t(w.dims[1]) * w.dims[2] * w.dims[3]);
}

void conv2d_run(const OpContext& ctx) {
  const TensorView& w = ctx.inputs[1];
  conv2d_s8(ctx.inputs[0].as<const int8_t>(), shape4(ctx.inputs[0]), w.as<const int8_t>(),
            w.dims[1], w.dims[2], ctx.inputs[2].as<const int32_t>(),
            ctx.inputs[3].as<const int32_t>(), ctx.inputs[4].as<const int32_t>(),
            ctx.outputs[0].as<int8_t>(), shape4(ctx.outputs[0]),
            conv_params(ctx.op.params_as_QuantConv2dParams()));
}

Error depthwise_check(const OpContext& ctx) {
  TMCU_CHECK(operand_count_ok(ctx), Error::InvalidOp);
  const TensorView& w = ctx.inputs[1];
  TMCU_CHECK(check::is(w, DType::I8, 4) && w.dims[0] == 1, Error::InvalidOp);
  TMCU_TRY(conv_common_check(ctx, w.dims[1], w.dims[2], w.dims[3], int64_t(w.dims[1]) * w.dims[2]));
  const int32_t multiplier = ctx.op.params_as_QuantConv2dParams().multiplier();
  TMCU_CHECK(multiplier >= 1 && int64_t(ctx.inputs[0].dims[3]) * multiplier == w.dims[3],
             Error::InvalidOp);
  return Error::Ok;
}

void depthwise_run(const OpContext& ctx) {
  const TensorView& w = ctx.inputs[1];
  const schema::QuantConv2dParams p = ctx.op.params_as_QuantConv2dParams();
  depthwise_conv2d_s8(ctx.inputs[0].as<const int8_t>(), shape4(ctx.inputs[0]),
                      w.as<const int8_t>(), w.dims[1], w.dims[2], p.multiplier(),
                      ctx.inputs[2].as<const int32_t>(), ctx.inputs[3].as<const int32_t>(),
                      ctx.inputs[4].as<const int32_t>(), ctx.outputs[0].as<int8_t>(),
                      shape4(ctx.outputs[0]), conv_params(p));
}

// ---- linear: x [..., in], w [out, in], bias (kernel sums folded), mult, shift
// [, scratch]

Error linear_check(const OpContext& ctx) {
  TMCU_CHECK(operand_count_ok(ctx), Error::InvalidOp);
  const schema::QuantLinearParams p = ctx.op.params_as_QuantLinearParams();
  TMCU_CHECK(p.valid() && act_ok(p.act_min(), p.act_max()) && output_offset_ok(p.output_offset()),
             Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& w = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(x.present() && x.dtype == DType::I8 && y.dtype == DType::I8 && x.rank >= 1 &&
                 y.rank == x.rank && check::is(w, DType::I8, 2),
             Error::InvalidOp);
  TMCU_CHECK(x.dims[x.rank - 1] == w.dims[1] && y.dims[y.rank - 1] == w.dims[0] &&
                 check::extent(x, 0, x.rank - 1) == check::extent(y, 0, y.rank - 1),
             Error::InvalidOp);
  TMCU_CHECK(i32_vector(ctx.inputs[2], w.dims[0]) && bias_ok(ctx.inputs[2], w.dims[1], 128 * 128),
             Error::InvalidOp);
  const int32_t n = ctx.inputs[3].dims[0];
  TMCU_CHECK((n == 1 || n == w.dims[0]) && i32_vector(ctx.inputs[3], n) &&
                 i32_vector(ctx.inputs[4], n) && shifts_ok(ctx.inputs[4]),
             Error::InvalidOp);
  return Error::Ok;
}

void linear_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const TensorView& w = ctx.inputs[1];
  const schema::QuantLinearParams p = ctx.op.params_as_QuantLinearParams();
  linear_s8(x.as<const int8_t>(), w.as<const int8_t>(), ctx.inputs[2].as<const int32_t>(),
            ctx.inputs[3].as<const int32_t>(), ctx.inputs[4].as<const int32_t>(),
            ctx.inputs[3].dims[0], ctx.outputs[0].as<int8_t>(),
            int32_t(check::extent(x, 0, x.rank - 1)), w.dims[1], w.dims[0], p.output_offset(),
            p.act_min(), p.act_max());
}

// ---- add / mul with broadcasting --------------------------------------------

Error binary_shapes_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 2, 1, DType::I8), Error::InvalidOp);
  TMCU_CHECK(check::broadcastable(ctx), Error::InvalidOp);
  return Error::Ok;
}

bool shift_ok(int32_t s) { return s >= -31 && s <= 30; }

Error add_check(const OpContext& ctx) {
  TMCU_TRY(binary_shapes_check(ctx));
  const schema::QuantAddParams p = ctx.op.params_as_QuantAddParams();
  TMCU_CHECK(p.valid() && act_ok(p.act_min(), p.act_max()) && p.left_shift() >= 0 &&
                 p.left_shift() <= 22 && shift_ok(p.output_shift()) &&
                 // Input multipliers < 1 (as the compiler and TFLM derive them):
                 // each rescaled input stays below 2^30, so their sum fits int32.
                 p.input1_shift() >= -31 && p.input1_shift() <= 0 && p.input1_multiplier() >= 0 &&
                 p.input2_shift() >= -31 && p.input2_shift() <= 0 && p.input2_multiplier() >= 0 &&
                 input_offset_ok(p.input1_offset()) &&
                 input_offset_ok(p.input2_offset()) &&
                 output_offset_ok(p.output_offset()),
             Error::InvalidOp);
  return Error::Ok;
}

void add_run(const OpContext& ctx) {
  const schema::QuantAddParams p = ctx.op.params_as_QuantAddParams();
  const QuantAddParams q{p.input1_offset(), p.input1_multiplier(), p.input1_shift(),
                         p.input2_offset(), p.input2_multiplier(), p.input2_shift(),
                         p.left_shift(),    p.output_multiplier(), p.output_shift(),
                         p.output_offset(), p.act_min(),           p.act_max()};
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  add_s8(a.as<const int8_t>(), a.dims, b.as<const int8_t>(), b.dims, y.as<int8_t>(), y.dims,
         y.rank, q);
}

Error mul_check(const OpContext& ctx) {
  TMCU_TRY(binary_shapes_check(ctx));
  const schema::QuantMulParams p = ctx.op.params_as_QuantMulParams();
  TMCU_CHECK(p.valid() && act_ok(p.act_min(), p.act_max()) && shift_ok(p.output_shift()) &&
                 input_offset_ok(p.input1_offset()) &&
                 input_offset_ok(p.input2_offset()) &&
                 output_offset_ok(p.output_offset()),
             Error::InvalidOp);
  return Error::Ok;
}

void mul_run(const OpContext& ctx) {
  const schema::QuantMulParams p = ctx.op.params_as_QuantMulParams();
  const QuantMulParams q{p.input1_offset(),    p.input2_offset(), p.output_multiplier(),
                         p.output_shift(),     p.output_offset(), p.act_min(),
                         p.act_max()};
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  mul_s8(a.as<const int8_t>(), a.dims, b.as<const int8_t>(), b.dims, y.as<int8_t>(), y.dims,
         y.rank, q);
}

// ---- pools ---------------------------------------------------------------------

Error pool_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::I8), Error::InvalidOp);
  const schema::QuantPool2dParams p = ctx.op.params_as_QuantPool2dParams();
  TMCU_CHECK(p.valid() && act_ok(p.act_min(), p.act_max()), Error::InvalidOp);
  TMCU_CHECK(check::small(p.kernel_h(), 1) && check::small(p.kernel_w(), 1) &&
                 check::small(p.stride_h(), 1) && check::small(p.stride_w(), 1) &&
                 check::small(p.pad_top(), 0) && check::small(p.pad_left(), 0),
             Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(is_s8_nhwc(x) && is_s8_nhwc(y) && x.dims[0] == y.dims[0] && x.dims[3] == y.dims[3],
             Error::InvalidOp);
  TMCU_CHECK(window_ok(x.dims[1], y.dims[1], p.kernel_h(), p.stride_h(), p.pad_top(), 1) &&
                 window_ok(x.dims[2], y.dims[2], p.kernel_w(), p.stride_w(), p.pad_left(), 1),
             Error::InvalidOp);
  return Error::Ok;
}

QuantPoolParams pool_params(const schema::QuantPool2dParams& p) {
  return QuantPoolParams{p.kernel_h(), p.kernel_w(), p.stride_h(), p.stride_w(),
                         p.pad_top(),  p.pad_left(), p.act_min(),  p.act_max()};
}

void max_pool_run(const OpContext& ctx) {
  max_pool2d_s8(ctx.inputs[0].as<const int8_t>(), shape4(ctx.inputs[0]),
                ctx.outputs[0].as<int8_t>(), shape4(ctx.outputs[0]),
                pool_params(ctx.op.params_as_QuantPool2dParams()));
}

void avg_pool_run(const OpContext& ctx) {
  avg_pool2d_s8(ctx.inputs[0].as<const int8_t>(), shape4(ctx.inputs[0]),
                ctx.outputs[0].as<int8_t>(), shape4(ctx.outputs[0]),
                pool_params(ctx.op.params_as_QuantPool2dParams()));
}

// ---- softmax over the last axis ----------------------------------------------

Error softmax_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::I8), Error::InvalidOp);
  const schema::QuantSoftmaxParams p = ctx.op.params_as_QuantSoftmaxParams();
  const TensorView& x = ctx.inputs[0];
  TMCU_CHECK(p.valid() && x.rank >= 1 && check::same_dims(x, ctx.outputs[0]) &&
                 p.input_left_shift() >= 0 && p.input_left_shift() <= 31 && p.diff_min() <= 0,
             Error::InvalidOp);
  // Only differences >= diff_min are scaled by 2^input_left_shift: that
  // product must fit in int32.
  TMCU_CHECK(int64_t(p.diff_min()) * (int64_t{1} << p.input_left_shift()) >= INT32_MIN,
             Error::InvalidOp);
  return Error::Ok;
}

void softmax_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  const schema::QuantSoftmaxParams p = ctx.op.params_as_QuantSoftmaxParams();
  const int32_t row = x.dims[x.rank - 1];
  softmax_s8(x.as<const int8_t>(), int32_t(check::extent(x, 0, x.rank - 1)), row,
             p.input_multiplier(), p.input_left_shift(), p.diff_min(),
             ctx.outputs[0].as<int8_t>());
}

// ---- element-wise: quantize, dequantize, clamp, table lookup ------------------

Error quantize_check(const OpContext& ctx) {
  TMCU_CHECK(ctx.num_inputs == 1 && ctx.num_outputs == 1, Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(x.present() && x.dtype == DType::F32 && y.dtype == DType::I8 &&
                 x.numel() == y.numel() && y.scale > 0.0f && zero_point_ok(y),
             Error::InvalidOp);
  return Error::Ok;
}

void quantize_run(const OpContext& ctx) {
  const TensorView& y = ctx.outputs[0];
  quantize_f32_s8(ctx.inputs[0].as<const float>(), y.as<int8_t>(), y.numel(), y.scale,
                  y.zero_point);
}

Error dequantize_check(const OpContext& ctx) {
  TMCU_CHECK(ctx.num_inputs == 1 && ctx.num_outputs == 1, Error::InvalidOp);
  const TensorView& x = ctx.inputs[0];
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(x.present() && x.dtype == DType::I8 && y.dtype == DType::F32 &&
                 x.numel() == y.numel() && zero_point_ok(x),
             Error::InvalidOp);
  return Error::Ok;
}

void dequantize_run(const OpContext& ctx) {
  const TensorView& x = ctx.inputs[0];
  dequantize_s8_f32(x.as<const int8_t>(), ctx.outputs[0].as<float>(), x.numel(), x.scale,
                    x.zero_point);
}

Error clamp_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 1, 1, 1, DType::I8), Error::InvalidOp);
  const schema::QuantClampParams p = ctx.op.params_as_QuantClampParams();
  TMCU_CHECK(p.valid() && act_ok(p.min(), p.max()) &&
                 ctx.inputs[0].nbytes == ctx.outputs[0].nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void clamp_run(const OpContext& ctx) {
  const schema::QuantClampParams p = ctx.op.params_as_QuantClampParams();
  clamp_s8(ctx.inputs[0].as<const int8_t>(), ctx.outputs[0].as<int8_t>(),
           ctx.outputs[0].numel(), p.min(), p.max());
}

Error lut_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 2, 1, DType::I8), Error::InvalidOp);
  TMCU_CHECK(ctx.inputs[1].numel() == 256 && ctx.inputs[0].nbytes == ctx.outputs[0].nbytes,
             Error::InvalidOp);
  return Error::Ok;
}

void lut_run(const OpContext& ctx) {
  lut_s8(ctx.inputs[0].as<const int8_t>(), ctx.outputs[0].as<int8_t>(),
         ctx.outputs[0].numel(), ctx.inputs[1].as<const int8_t>());
}

}  // namespace

const Kernel kQuantizeS8 = {quantize_check, quantize_run};
const Kernel kDequantizeS8 = {dequantize_check, dequantize_run};
const Kernel kConv2dS8 = {conv2d_check, conv2d_run};
const Kernel kDepthwiseConv2dS8 = {depthwise_check, depthwise_run};
const Kernel kLinearS8 = {linear_check, linear_run};
const Kernel kAddS8 = {add_check, add_run};
const Kernel kMulS8 = {mul_check, mul_run};
const Kernel kMaxPool2dS8 = {pool_check, max_pool_run};
const Kernel kAvgPool2dS8 = {pool_check, avg_pool_run};
const Kernel kSoftmaxS8 = {softmax_check, softmax_run};
const Kernel kClampS8 = {clamp_check, clamp_run};
const Kernel kLutS8 = {lut_check, lut_run};

}  // namespace portable
}  // namespace torchmcu

// ---- maximum / minimum: the raw int8 values, one quantization in and out ------
// (appended: new op codes; the executor glue above is unchanged)

namespace torchmcu {
namespace portable {
namespace {

bool same_quant(const TensorView& a, const TensorView& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

Error max_min_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 2, 1, schema::DType::I8), Error::InvalidOp);
  TMCU_CHECK(check::broadcastable(ctx), Error::InvalidOp);
  const TensorView& y = ctx.outputs[0];
  TMCU_CHECK(same_quant(ctx.inputs[0], y) && same_quant(ctx.inputs[1], y), Error::InvalidOp);
  return Error::Ok;
}

template <void (*Fn)(const int8_t*, const int32_t*, const int8_t*, const int32_t*, int8_t*,
                     const int32_t*, int32_t)>
void max_min_s8_run(const OpContext& ctx) {
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  Fn(a.as<const int8_t>(), a.dims, b.as<const int8_t>(), b.dims, y.as<int8_t>(), y.dims, y.rank);
}

// ---- batch matmul: a [..., M, K], b [..., K, N] -> [..., M, N], same batch dims

Error batch_matmul_s8_check(const OpContext& ctx) {
  TMCU_CHECK(check::operands(ctx, 2, 2, 1, schema::DType::I8), Error::InvalidOp);
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const TensorView& y = ctx.outputs[0];
  // out is written while a and b are still read: no overlap.
  TMCU_CHECK(check::disjoint(a, y) && check::disjoint(b, y), Error::InvalidOp);
  const int32_t r = y.rank;
  TMCU_CHECK(r >= 2 && a.rank == r && b.rank == r, Error::InvalidOp);
  for (int32_t d = 0; d < r - 2; ++d) {
    TMCU_CHECK(a.dims[d] == y.dims[d] && b.dims[d] == y.dims[d], Error::InvalidOp);
  }
  TMCU_CHECK(a.dims[r - 1] == b.dims[r - 2] && a.dims[r - 2] == y.dims[r - 2] &&
                 b.dims[r - 1] == y.dims[r - 1],
             Error::InvalidOp);
  const schema::QuantBatchMatmulParams p = ctx.op.params_as_QuantBatchMatmulParams();
  TMCU_CHECK(p.valid() && act_ok(p.act_min(), p.act_max()) && shift_ok(p.output_shift()) &&
                 p.output_multiplier() >= 0 && output_offset_ok(p.output_offset()) &&
                 input_offset_ok(p.lhs_offset()) && input_offset_ok(p.rhs_offset()),
             Error::InvalidOp);
  // The int32 accumulator: K products each at most 255 * 255 in magnitude.
  TMCU_CHECK(int64_t(a.dims[r - 1]) * 255 * 255 <= int64_t(INT32_MAX), Error::InvalidOp);
  return Error::Ok;
}

void batch_matmul_s8_run(const OpContext& ctx) {
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  const schema::QuantBatchMatmulParams p = ctx.op.params_as_QuantBatchMatmulParams();
  const QuantBatchMatmulParams q{p.lhs_offset(),    p.rhs_offset(),    p.output_multiplier(),
                                 p.output_shift(),  p.output_offset(), p.act_min(),
                                 p.act_max()};
  const int32_t r = a.rank;
  batch_matmul_s8(a.as<const int8_t>(), b.as<const int8_t>(), ctx.outputs[0].as<int8_t>(),
                  int32_t(check::extent(a, 0, r - 2)), a.dims[r - 2], a.dims[r - 1],
                  b.dims[r - 1], q);
}

}  // namespace

const Kernel kMaximumS8 = {max_min_s8_check, max_min_s8_run<maximum_s8>};
const Kernel kMinimumS8 = {max_min_s8_check, max_min_s8_run<minimum_s8>};
const Kernel kBatchMatmulS8 = {batch_matmul_s8_check, batch_matmul_s8_run};

}  // namespace portable
}  // namespace torchmcu
