// The pool_resize family as the executor sees it (MAX_POOL2D_*, AVG_POOL2D_*,
// ADAPTIVE_AVG_POOL2D_*, RESIZE_*; float32, int8, int16): load-time checks
// of operands and arguments, and run functions handing them to the math of
// pool_resize.h (common/glue.h says how).
#include "kernels/portable/common/glue.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/pool_resize/pool_resize.h"

namespace torchmcu {
namespace portable {
namespace {

// ---- pooling over NHWC ------------------------------------------------------

Error pool_f32_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 1, 1, 1) &&
                 check::args<schema::Pool2dArgs>(ctx, OpParams::Pool2dParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::Pool2dArgs>();
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, DType::F32, 4) && check::is(y, DType::F32, 4), Error::InvalidOp);
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

Pool2dParams pool_f32_params(const schema::Pool2dArgs& a) {
  return Pool2dParams{a.kernel_h,   a.kernel_w,   a.stride_h,          a.stride_w,
                      a.pad_top,    a.pad_left,   a.dilation_h,        a.dilation_w,
                      a.count_include_pad != 0,   a.divisor_override,  ActRange{a.act_min, a.act_max}};
}

void max_pool_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Pool2dArgs>();
  max_pool2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.out<float>(0), shape4(a.y),
                 pool_f32_params(a));
}

void avg_pool_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::Pool2dArgs>();
  avg_pool2d_f32(ctx.in<const float>(0), shape4(a.x), ctx.out<float>(0), shape4(a.y),
                 pool_f32_params(a));
}

// ---- integer pools: int8 and int16 -----------------------------------------------

template <typename T, bool kMax>
Error pool_check(const OpContext& ctx) {
  TMCU_TRY(check::quant_pool(ctx, QType<T>::kDType, QType<T>::kPoolMaxTaps, kMax));
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  return act_ok<T>(a.act_min, a.act_max) ? Error::Ok : Error::InvalidOp;
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
  o.round_half_even = a.round_half_even;
  return o;
}

template <typename T, void (*Fn)(const T*, Shape4, T*, Shape4, const QuantPoolParams&, const PoolOptions&)>
void pool_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantPool2dArgs>();
  Fn(ctx.in<const T>(0), shape4(a.x), ctx.out<T>(0), shape4(a.y), pool_params(a), pool_options(a));
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

template <typename T>
Error bilinear_q_check(const OpContext& ctx) {
  return resize_check(ctx, QType<T>::kDType);
}

template <typename T, void (*Fn)(const T*, Shape4, T*, Shape4, bool, bool)>
void bilinear_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::ResizeArgs>();
  Fn(ctx.in<const T>(0), shape4(a.x), ctx.out<T>(0), shape4(a.y), a.align_corners != 0, a.half_pixel_centers != 0);
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

// The int32 sums: 2^24 taps of |int8| <= 2^7, 2^16 of |int16| <= 2^15 (the pools' bounds).
template <typename T>
Error adaptive_q_check(const OpContext& ctx) {
  TMCU_TRY(adaptive_check<schema::QuantAdaptivePool2dArgs>(ctx, OpParams::QuantPool2dParams, QType<T>::kDType,
                                                           QType<T>::kPoolMaxTaps));
  const auto& a = ctx.args<schema::QuantAdaptivePool2dArgs>();
  TMCU_CHECK(act_ok<T>(a.act_min, a.act_max), Error::InvalidOp);
  return Error::Ok;
}

template <typename T, void (*Fn)(const T*, Shape4, T*, Shape4, int32_t, int32_t)>
void adaptive_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantAdaptivePool2dArgs>();
  Fn(ctx.in<const T>(0), shape4(a.x), ctx.out<T>(0), shape4(a.y), a.act_min, a.act_max);
}

}  // namespace

const Kernel kMaxPool2dF32 = {pool_f32_check, max_pool_f32_run};
const Kernel kAvgPool2dF32 = {pool_f32_check, avg_pool_f32_run};
const Kernel kMaxPool2dS8 = {pool_check<int8_t, true>, pool_run<int8_t, max_pool2d_s8>};
const Kernel kAvgPool2dS8 = {pool_check<int8_t, false>, pool_run<int8_t, avg_pool2d_s8>};
const Kernel kMaxPool2dS16 = {pool_check<int16_t, true>, pool_run<int16_t, max_pool2d_s16>};
const Kernel kAvgPool2dS16 = {pool_check<int16_t, false>, pool_run<int16_t, avg_pool2d_s16>};
const Kernel kResizeNearest = {nearest_check, nearest_run};
const Kernel kResizeBilinearF32 = {bilinear_f32_check, bilinear_f32_run};
const Kernel kResizeBilinearS8 = {bilinear_q_check<int8_t>, bilinear_q_run<int8_t, resize_bilinear_s8>};
const Kernel kResizeBilinearS16 = {bilinear_q_check<int16_t>, bilinear_q_run<int16_t, resize_bilinear_s16>};
const Kernel kAdaptiveAvgPool2dF32 = {adaptive_f32_check, adaptive_f32_run};
const Kernel kAdaptiveAvgPool2dS8 = {adaptive_q_check<int8_t>, adaptive_q_run<int8_t, adaptive_avg_pool2d_s8>};
const Kernel kAdaptiveAvgPool2dS16 = {adaptive_q_check<int16_t>, adaptive_q_run<int16_t, adaptive_avg_pool2d_s16>};

}  // namespace portable
}  // namespace torchmcu
