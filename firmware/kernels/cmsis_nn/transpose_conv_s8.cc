// TRANSPOSE_CONV2D_S8 on arm_transpose_conv_wrapper_s8: with stride <= 2
// and more than 16 input channels a convolution of the zero-upscaled input
// by the reversed filter (arm_convolve_s8), else CMSIS-NN's scatter into a
// rolling int32 buffer. The scratch operand holds the wrapper's buffer, then
// (convolution path) the reversed filter. Geometries CMSIS-NN does not
// cover run on the portable kernel (same bits).
#include "arm_nnsupportfunctions.h"
#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

cmsis_nn_transpose_conv_params transpose_params(const schema::QuantConv2dArgs& a) {
  cmsis_nn_transpose_conv_params c;
  c.input_offset = a.input_offset;
  c.output_offset = a.output_offset;
  c.stride = cmsis_nn_tile{a.stride_w, a.stride_h};
  c.padding = cmsis_nn_tile{a.pad_left, a.pad_top};
  c.padding_offsets = cmsis_nn_tile{0, 0};
  c.dilation = cmsis_nn_tile{1, 1};
  c.activation = cmsis_nn_activation{a.act_min, a.act_max};
  return c;
}

// What CMSIS-NN computes as PyTorch does: padding below the kernel (the
// convolution path pads by kernel - 1 - padding) and an output no larger
// than the full result (the scatter path's rolling buffer holds only that).
bool covered(const schema::QuantConv2dArgs& a) {
  if (!shapes_fit(a) || a.w[3] != a.x[3] || a.pad_top >= a.w[1] || a.pad_left >= a.w[2]) return false;  // groups 1
  const int64_t full_h = (int64_t(a.x[1]) - 1) * a.stride_h + a.w[1];
  const int64_t full_w = (int64_t(a.x[2]) - 1) * a.stride_w + a.w[2];
  return a.y[1] + a.pad_top <= full_h && a.y[2] + a.pad_left <= full_w && fits_u16(a.x[1] * a.stride_h) &&
         fits_u16(a.x[2] * a.stride_w);
}

struct Buffers {
  int32_t ctx, reverse;  // bytes; ctx rounded up to 4 so the reversed filter stays aligned
};

Buffers buffers(const schema::QuantConv2dArgs& a) {
  const cmsis_nn_transpose_conv_params p = transpose_params(a);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const int32_t reverse = arm_transpose_conv_s8_get_reverse_conv_buffer_size(&p, &in, &filter);
  int32_t ctx = arm_transpose_conv_s8_get_buffer_size(&p, &in, &filter, &out);
  if (reverse == 0) {
    // The scatter path's rolling buffer as arm_transpose_conv_s8 indexes it
    // (its size function takes the row's tail from stride.h, the kernel from stride.w).
    const int32_t tail = a.w[2] > a.stride_w ? a.w[2] : a.stride_w;
    const int32_t rows = a.w[1] > a.stride_h ? a.w[1] : a.stride_h;
    const int32_t used = ((a.x[2] - 1) * a.stride_w + tail) * a.y[3] * rows * int32_t(sizeof(int32_t));
    ctx = ctx > used ? ctx : used;
  }
  return Buffers{(ctx + 3) & ~3, reverse};
}

Error transpose_check(const OpContext& ctx) {
  TMCU_TRY(portable::kTransposeConv2dS8.check(ctx));
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!covered(a)) return Error::Ok;  // the portable kernel runs it
  const Buffers b = buffers(a);
  TMCU_CHECK(int64_t(scratch(ctx, kConvScratch).size) >= int64_t(b.ctx) + b.reverse && b.ctx > 0,
             Error::InvalidOp);
  return Error::Ok;
}

void transpose_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantConv2dArgs>();
  if (!covered(a)) {
    portable::kTransposeConv2dS8.run(ctx);
    return;
  }
  const Buffers b = buffers(a);
  const cmsis_nn_context whole = scratch(ctx, kConvScratch);
  const cmsis_nn_context c{whole.buf, b.ctx};
  const cmsis_nn_context reverse{b.reverse > 0 ? static_cast<int8_t*>(whole.buf) + b.ctx : nullptr, b.reverse};
  const cmsis_nn_transpose_conv_params p = transpose_params(a);
  const cmsis_nn_per_channel_quant_params q = quant(ctx);
  const cmsis_nn_dims in = nhwc(a.x);
  const cmsis_nn_dims filter = nhwc(a.w);
  const cmsis_nn_dims out = nhwc(a.y);
  const cmsis_nn_dims bias{1, 1, 1, out.c};
  const arm_cmsis_nn_status s = arm_transpose_conv_wrapper_s8(
      &c, &reverse, &p, &q, &in, ctx.in<const int8_t>(0), &filter, ctx.in<const int8_t>(1), &bias,
      ctx.in<const int32_t>(2), &out, ctx.out<int8_t>(0));
  if (s != ARM_CMSIS_NN_SUCCESS) portable::kTransposeConv2dS8.run(ctx);
}

}  // namespace

const Kernel kTransposeConv2dS8 = {transpose_check, transpose_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
