// CONV2D_S8 on xa_nn_conv2d_per_chan_sym8sxasym8s and DEPTHWISE_CONV2D_S8 on
// xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s, NHWC (data format 0), batch
// 1. Operands: x (NHWC), w (OHWI / [1, kh, kw, C*m]), bias, multiplier, shift
// (int32 [oc]), scratch (int8, planned by aot/torchmcu/backends/hifi/partition.py).
#include "delegates/hifi/common.h"
#include "delegates/hifi/kernels.h"

namespace torchmcu {
namespace hifi {
namespace {

/// The ops nnlib is called for: one image, no dilation, a bias (nnlib's
/// convolutions require one; checked at load, from the arguments and operands).
bool shape_on_nnlib(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  return a.x[0] == 1 && a.dilation_h == 1 && a.dilation_w == 1 && OpContext::present(ctx.input(2));
}

/// nnlib runs this op (else the portable kernel does): such a shape, and
/// requantization values in the exact range (read each run). Products as the
/// portable kernel bounds them, |x + offset| * |w| <= 2 * 128 * 128, over
/// kh * kw * in_channels taps for a convolution, kh * kw for a depthwise one.
bool on_nnlib(const OpContext& ctx, bool depthwise) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  const int64_t taps = int64_t(a.w[1]) * a.w[2] * (depthwise ? 1 : a.w[3]);
  return shape_on_nnlib(ctx) && requant_exact(ctx, a.y[3], a.y[3], taps, 2 * 128 * 128);
}

WORD32 conv_getsize(const schema::QuantConv2dArgs& a) {
  return xa_nn_conv2d_getsize(a.x[1], a.x[2], a.x[3], a.w[1], a.w[2], a.w[3], 1, 1, a.stride_h, a.pad_top,
                              a.stride_w, a.pad_left, a.y[1], a.y[2], a.y[3], kPrecAsym8s, kPrecSym8s, 0);
}

WORD32 depthwise_getsize(const schema::QuantConv2dArgs& a) {
  return xa_nn_conv2d_depthwise_getsize(a.x[1], a.x[2], a.x[3], a.w[1], a.w[2], a.multiplier, a.stride_w,
                                        a.stride_h, a.pad_left, a.pad_top, a.y[1], a.y[2], 8, 0);
}

/// The portable checks, and for the shapes nnlib may run a scratch of at least
/// nnlib's getsize (whatever the values: the planner gives every such op one).
Error check(const OpContext& ctx, const Kernel& portable, WORD32 (*getsize)(const schema::QuantConv2dArgs&)) {
  TMCU_TRY(portable.check(ctx));
  if (!shape_on_nnlib(ctx)) return Error::Ok;
  uint32_t have = 0;
  (void)scratch(ctx, &have);
  const WORD32 need = getsize(ctx.args<schema::QuantConv2dArgs>());
  TMCU_CHECK(need >= 0 && have >= uint32_t(need), Error::InvalidOp);
  return Error::Ok;
}

Error conv2d_check(const OpContext& ctx) { return check(ctx, portable::kConv2dS8, conv_getsize); }

Error depthwise_check(const OpContext& ctx) {
  return check(ctx, portable::kDepthwiseConv2dS8, depthwise_getsize);
}

Error conv2d_invoke(const OpContext& ctx) {
  if (!on_nnlib(ctx, false)) return portable::kConv2dS8.run(ctx), Error::Ok;
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  uint32_t nbytes = 0;
  void* const buf = scratch(ctx, &nbytes);
  // nnlib takes the multipliers and shifts as non-const; it does not write them.
  TMCU_TRY(status(xa_nn_conv2d_per_chan_sym8sxasym8s(
      ctx.out<int8_t>(0), ctx.in<const int8_t>(0), ctx.in<const int8_t>(1), ctx.in<const int32_t>(2), a.x[1],
      a.x[2], a.x[3], a.w[1], a.w[2], a.w[3], 1, 1, a.y[3], a.stride_w, a.stride_h, a.pad_left, a.pad_top, a.y[1],
      a.y[2], a.input_offset, ctx.in<int32_t>(3), ctx.in<int32_t>(4), a.output_offset, 0, buf)));
  activation(ctx.out<int8_t>(0), a.y[1] * a.y[2] * a.y[3], a.act_min, a.act_max);
  return Error::Ok;
}

Error depthwise_invoke(const OpContext& ctx) {
  if (!on_nnlib(ctx, true)) return portable::kDepthwiseConv2dS8.run(ctx), Error::Ok;
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  uint32_t nbytes = 0;
  void* const buf = scratch(ctx, &nbytes);
  TMCU_TRY(status(xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s(
      ctx.out<int8_t>(0), ctx.in<const int8_t>(1), ctx.in<const int8_t>(0), ctx.in<const int32_t>(2), a.x[1],
      a.x[2], a.x[3], a.w[1], a.w[2], a.multiplier, a.stride_w, a.stride_h, a.pad_left, a.pad_top, a.y[1],
      a.y[2], a.input_offset, ctx.in<const int32_t>(3), ctx.in<const int32_t>(4), a.output_offset, 0, 0, buf)));
  activation(ctx.out<int8_t>(0), a.y[1] * a.y[2] * a.y[3], a.act_min, a.act_max);
  return Error::Ok;
}

}  // namespace

const Kernel kConv2dS8 = {conv2d_check, nullptr, 0, conv2d_invoke};
const Kernel kDepthwiseConv2dS8 = {depthwise_check, nullptr, 0, depthwise_invoke};

}  // namespace hifi
}  // namespace torchmcu
