// W4A8 kernels: conv2d_s8, depthwise_conv2d_s8 and linear_s8 reading packed
// int4 weights (conv.h), unpacked tap by tap. Same integer math, so
// the same bits: each accumulator is bias + sum (x + input_offset) * w over
// the in-bounds taps (padded taps add nothing), requantized per channel.
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {

using s8::OutQuant;
using s8::tap_range;

// Output channel outermost: its weights start at element oc * kh * kw * C,
// which is mid-byte when that count is odd, hence element indices, not pointers.
void conv2d_s4(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
               int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
               const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p) {
  const int32_t in_c = in_shape.c;
  const int32_t out_c = out_shape.c;
  const int32_t w_per_oc = kernel_h * kernel_w * in_c;
  const int32_t row_stride = in_shape.w * in_c;
  const int32_t image_stride = in_shape.h * row_stride;
  const int32_t in_off = p.input_offset;
  const OutQuant quant(p.output_offset, p.act_min, p.act_max);
  for (int32_t oc = 0; oc < out_c; ++oc) {
    const int32_t w0 = oc * w_per_oc;
    const int32_t b = bias ? bias[oc] : 0;
    const int32_t m = multiplier[oc];
    const int32_t s = shift[oc];
    int8_t* o = out + oc;
    for (int32_t n = 0; n < out_shape.n; ++n) {
      const int8_t* in_n = in + n * image_stride;
      for (int32_t oy = 0; oy < out_shape.h; ++oy) {
        const int32_t iy0 = oy * p.stride_h - p.pad_top;
        int32_t ky0, ky1;
        tap_range(iy0, in_shape.h, kernel_h, p.dilation_h, &ky0, &ky1);
        for (int32_t ox = 0; ox < out_shape.w; ++ox) {
          const int32_t ix0 = ox * p.stride_w - p.pad_left;
          int32_t kx0, kx1;
          tap_range(ix0, in_shape.w, kernel_w, p.dilation_w, &kx0, &kx1);
          int32_t acc = b;
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const int8_t* x_row = in_n + (iy0 + ky * p.dilation_h) * row_stride;
            for (int32_t kx = kx0; kx < kx1; ++kx) {
              const int8_t* x = x_row + (ix0 + kx * p.dilation_w) * in_c;
              int32_t wi = w0 + (ky * kernel_w + kx) * in_c;
              for (int32_t c = 0; c < in_c; ++c, ++wi) acc += (x[c] + in_off) * int4_at(w, wi);
            }
          }
          *o = quant(s8::requantize(acc, m, s));
          o += out_c;
        }
      }
    }
  }
}

void depthwise_conv2d_s4(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t depth_multiplier, const int32_t* bias,
                         const int32_t* multiplier, const int32_t* shift, int8_t* out,
                         Shape4 out_shape, const QuantConvParams& p) {
  const int32_t in_c = in_shape.c;
  const int32_t out_c = out_shape.c;
  const int32_t row_stride = in_shape.w * in_c;
  const int32_t image_stride = in_shape.h * row_stride;
  const int32_t in_off = p.input_offset;
  const OutQuant quant(p.output_offset, p.act_min, p.act_max);
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * image_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      tap_range(iy0, in_shape.h, kernel_h, p.dilation_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        tap_range(ix0, in_shape.w, kernel_w, p.dilation_w, &kx0, &kx1);
        for (int32_t oc = 0; oc < out_c; ++oc) {
          const int32_t ic = oc / depth_multiplier;
          int32_t acc = bias ? bias[oc] : 0;
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const int8_t* x_row = in_n + (iy0 + ky * p.dilation_h) * row_stride + ic;
            for (int32_t kx = kx0; kx < kx1; ++kx) {
              const int32_t xv = x_row[(ix0 + kx * p.dilation_w) * in_c] + in_off;
              acc += xv * int4_at(w, (ky * kernel_w + kx) * out_c + oc);
            }
          }
          out[oc] = quant(s8::requantize(acc, multiplier[oc], shift[oc]));
        }
        out += out_c;
      }
    }
  }
}

void linear_s4(const int8_t* in, const int8_t* w, const int32_t* bias,
               const int32_t* multiplier, const int32_t* shift, int32_t num_requant, int8_t* out,
               int32_t batch, int32_t in_features, int32_t out_features, int32_t output_offset,
               int32_t act_min, int32_t act_max) {
  const OutQuant quant(output_offset, act_min, act_max);
  const bool per_channel = num_requant == out_features;
  for (int32_t b = 0; b < batch; ++b) {
    const int8_t* x = in + b * in_features;
    for (int32_t o = 0; o < out_features; ++o) {
      int32_t acc = bias ? bias[o] : 0;
      const int32_t w0 = o * in_features;
      for (int32_t i = 0; i < in_features; ++i) acc += x[i] * int4_at(w, w0 + i);
      const int32_t c = per_channel ? o : 0;
      out[o] = quant(s8::requantize(acc, multiplier[c], shift[c]));
    }
    out += out_features;
  }
}

}  // namespace portable
}  // namespace torchmcu
