// The executor's view of the transposed convolutions, resizes and adaptive
// average pools (TRANSPOSE_CONV2D_*, RESIZE_*, ADAPTIVE_AVG_POOL2D_*): load-
// time checks of operands and arguments, and run functions handing them to
// the math of transpose_conv.cc and resize.cc. As in ops_s8.cc, tensor
// values (bias, multiplier, shift) are checked when the op runs, and the
// checks bound the shapes that size the accumulators.
#include <cstring>

#include "kernels/check.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/portable_f32.h"
#include "kernels/portable/portable_s16.h"
#include "kernels/portable/portable_s8.h"
#include "kernels/portable/requantize_s8.h"

namespace torchmcu {
namespace portable {
namespace {

using schema::DType;
using schema::OpParams;
using schema::Operand;

TMCU_INLINE Shape4 shape4(const int32_t* d) { return Shape4{d[0], d[1], d[2], d[3]}; }

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
/// the caller): w [y channels, kh, kw, x channels].
template <typename A>
Error transpose_geometry(const OpContext& ctx, const A& a) {
  TMCU_TRY(check::holds4(ctx.input(0), a.x));
  TMCU_TRY(check::holds4(ctx.input(1), a.w));
  TMCU_TRY(check::holds4(ctx.output(0), a.y));
  TMCU_CHECK(a.x[0] == a.y[0] && a.w[0] == a.y[3] && a.w[3] == a.x[3] && a.dilation_h == 1 &&
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
                 check::is(ctx.output(0), DType::F32, 4) && a.groups == 1,
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
  transpose_conv2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.in<const float>(1), a.w[1], a.w[2], bias,
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

// Each output sums at most kh * kw * in_c products of |(x + input_offset) * w| <= 255 * 128.
constexpr int64_t kTermS8 = 2 * 128 * 128;

Error transpose_s8_check(const OpContext& ctx) {
  TMCU_TRY(transpose_quant_check(ctx, DType::I8, DType::I32));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(a.input_offset >= -127 && a.input_offset <= 128 && a.output_offset >= -128 &&
                 a.output_offset <= 127 && -128 <= a.act_min && a.act_min <= a.act_max && a.act_max <= 127 &&
                 int64_t(a.w[1]) * a.w[2] * a.w[3] * kTermS8 <= int64_t(INT32_MAX),
             Error::InvalidOp);
  return Error::Ok;
}

void transpose_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!s8::requant_in_range(ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), a.w[0],
                            a.w[0], int64_t(a.w[1]) * a.w[2] * a.w[3], kTermS8)) {
    std::memset(ctx.out<void>(0), 0, ctx.output(0).nbytes);
    return;
  }
  const QuantConvParams p{a.stride_h, a.stride_w, a.pad_top, a.pad_left, 1, 1, a.input_offset,
                          a.output_offset, a.act_min, a.act_max};
  transpose_conv2d_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2],
                      ctx.in<const int32_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
                      ctx.out<int8_t>(0), shape4(a.y), p);
}

Error transpose_s16_check(const OpContext& ctx) {
  TMCU_TRY(transpose_quant_check(ctx, DType::I16, DType::I64));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  TMCU_CHECK(a.input_offset == 0 && a.output_offset == 0 && -32768 <= a.act_min && a.act_min <= a.act_max &&
                 a.act_max <= 32767,
             Error::InvalidOp);
  return Error::Ok;
}

void transpose_s16_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  const QuantConvS16Params p{a.stride_h, a.stride_w, a.pad_top, a.pad_left, 1, 1, a.act_min, a.act_max};
  transpose_conv2d_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.in<const int8_t>(1), a.w[1], a.w[2],
                       ctx.in<const int64_t>(2), ctx.in<const int32_t>(3), ctx.in<const int32_t>(4),
                       ctx.out<int16_t>(0), shape4(a.y), p);
}

// ---- resizing: x, y NHWC of one dtype -----------------------------------------------

/// Same batch and channels, sizes up to 2^16 (the 1/1024-unit positions of
/// the integer bilinear stay within int32), flags 0 or 1 and not both.
Error resize_check(const OpContext& ctx, DType dtype) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<schema::ResizeArgs>(ctx, OpParams::ResizeParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::ResizeArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, dtype, 4) && check::is(y, dtype, 4), Error::InvalidOp);
  TMCU_TRY(check::holds4(x, a.x));
  TMCU_TRY(check::holds4(y, a.y));
  TMCU_CHECK(a.x[0] == a.y[0] && a.x[3] == a.y[3] && check::small(a.x[1], 1) && check::small(a.x[2], 1) &&
                 check::small(a.y[1], 1) && check::small(a.y[2], 1) &&
                 (a.align_corners == 0 || a.align_corners == 1) &&
                 (a.half_pixel_centers == 0 || a.half_pixel_centers == 1) &&
                 !(a.align_corners && a.half_pixel_centers),
             Error::InvalidOp);
  return Error::Ok;
}

// Nearest: any of F32, I8, I16 (bytes copied); no align_corners (PyTorch's
// nearest modes have none).
Error nearest_check(const OpContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  TMCU_CHECK(dtype == DType::F32 || dtype == DType::I8 || dtype == DType::I16, Error::InvalidOp);
  TMCU_TRY(resize_check(ctx, dtype));
  TMCU_CHECK(ctx.args<schema::ResizeArgs>().align_corners == 0, Error::InvalidOp);
  return Error::Ok;
}

void nearest_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ResizeArgs>();
  resize_nearest(ctx.in<const void>(0), shape4(a.x), ctx.out<void>(0), shape4(a.y),
                 dtype_size(ctx.input(0).dtype), a.half_pixel_centers != 0);
}

// Float bilinear is PyTorch's: align_corners, or half-pixel centres.
Error bilinear_f32_check(const OpContext& ctx) {
  TMCU_TRY(resize_check(ctx, DType::F32));
  const auto& a = ctx.args<schema::ResizeArgs>();
  TMCU_CHECK(a.align_corners || a.half_pixel_centers, Error::InvalidOp);
  return Error::Ok;
}

void bilinear_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ResizeArgs>();
  resize_bilinear_f32(ctx.in<const float>(0), shape4(a.x), ctx.out<float>(0), shape4(a.y), a.align_corners != 0);
}

Error bilinear_s8_check(const OpContext& ctx) { return resize_check(ctx, DType::I8); }
Error bilinear_s16_check(const OpContext& ctx) { return resize_check(ctx, DType::I16); }

void bilinear_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ResizeArgs>();
  resize_bilinear_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.out<int8_t>(0), shape4(a.y), a.align_corners != 0,
                     a.half_pixel_centers != 0);
}

void bilinear_s16_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ResizeArgs>();
  resize_bilinear_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.out<int16_t>(0), shape4(a.y),
                      a.align_corners != 0, a.half_pixel_centers != 0);
}

// ---- adaptive average pooling: x, y NHWC -------------------------------------------

/// Same batch and channels, sizes up to 2^16, and windows of at most
/// `max_taps` taps (a window spans at most ceil(in / out) + 1 rows).
template <typename A>
Error adaptive_check(const OpContext& ctx, OpParams params, DType dtype, int64_t max_taps) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) && check::args<A>(ctx, params), Error::InvalidOp);
  const A& a = ctx.args<A>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, dtype, 4) && check::is(y, dtype, 4), Error::InvalidOp);
  TMCU_TRY(check::holds4(x, a.x));
  TMCU_TRY(check::holds4(y, a.y));
  TMCU_CHECK(a.x[0] == a.y[0] && a.x[3] == a.y[3] && check::small(a.x[1], 1) && check::small(a.x[2], 1) &&
                 check::small(a.y[1], 1) && check::small(a.y[2], 1),
             Error::InvalidOp);
  const int64_t rows = (a.x[1] + a.y[1] - 1) / a.y[1] + 1, cols = (a.x[2] + a.y[2] - 1) / a.y[2] + 1;
  TMCU_CHECK(rows * cols <= max_taps, Error::InvalidOp);
  return Error::Ok;
}

Error adaptive_f32_check(const OpContext& ctx) {
  return adaptive_check<schema::AdaptivePool2dArgs>(ctx, OpParams::Pool2dParams, DType::F32, int64_t(1) << 32);
}

void adaptive_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::AdaptivePool2dArgs>();
  adaptive_avg_pool2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.out<float>(0), shape4(a.y),
                          ActRange{a.act_min, a.act_max});
}

// The int32 sums: 2^24 taps of |int8| <= 2^7, 2^16 of |int16| <= 2^15.
Error adaptive_s8_check(const OpContext& ctx) {
  TMCU_TRY(adaptive_check<schema::QuantAdaptivePool2dArgs>(ctx, OpParams::QuantPool2dParams, DType::I8,
                                                           int64_t(1) << 24));
  const auto& a = ctx.args<schema::QuantAdaptivePool2dArgs>();
  TMCU_CHECK(-128 <= a.act_min && a.act_min <= a.act_max && a.act_max <= 127, Error::InvalidOp);
  return Error::Ok;
}

Error adaptive_s16_check(const OpContext& ctx) {
  TMCU_TRY(adaptive_check<schema::QuantAdaptivePool2dArgs>(ctx, OpParams::QuantPool2dParams, DType::I16,
                                                           int64_t(1) << 16));
  const auto& a = ctx.args<schema::QuantAdaptivePool2dArgs>();
  TMCU_CHECK(-32768 <= a.act_min && a.act_min <= a.act_max && a.act_max <= 32767, Error::InvalidOp);
  return Error::Ok;
}

void adaptive_s8_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantAdaptivePool2dArgs>();
  adaptive_avg_pool2d_s8(ctx.in<const int8_t>(0), shape4(a.x), ctx.out<int8_t>(0), shape4(a.y), a.act_min,
                         a.act_max);
}

void adaptive_s16_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantAdaptivePool2dArgs>();
  adaptive_avg_pool2d_s16(ctx.in<const int16_t>(0), shape4(a.x), ctx.out<int16_t>(0), shape4(a.y), a.act_min,
                          a.act_max);
}

}  // namespace

const Kernel kTransposeConv2dF32 = {transpose_f32_check, transpose_f32_run};
const Kernel kTransposeConv2dS8 = {transpose_s8_check, transpose_s8_run};
const Kernel kTransposeConv2dS16 = {transpose_s16_check, transpose_s16_run};
const Kernel kResizeNearest = {nearest_check, nearest_run};
const Kernel kResizeBilinearF32 = {bilinear_f32_check, bilinear_f32_run};
const Kernel kResizeBilinearS8 = {bilinear_s8_check, bilinear_s8_run};
const Kernel kResizeBilinearS16 = {bilinear_s16_check, bilinear_s16_run};
const Kernel kAdaptiveAvgPool2dF32 = {adaptive_f32_check, adaptive_f32_run};
const Kernel kAdaptiveAvgPool2dS8 = {adaptive_s8_check, adaptive_s8_run};
const Kernel kAdaptiveAvgPool2dS16 = {adaptive_s16_check, adaptive_s16_run};

}  // namespace portable
}  // namespace torchmcu
