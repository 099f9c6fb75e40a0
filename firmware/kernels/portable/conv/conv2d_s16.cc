// a16w8 convolution, depthwise convolution and linear layers (conv.h).
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// 64-bit sums wrap (a bias is a value: any int64 must not be undefined behaviour).
inline int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }

}  // namespace

void grouped_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                        int32_t kernel_w, int32_t group_channels, const int64_t* bias,
                        const int32_t* multiplier, const int32_t* shift, int16_t* out, Shape4 out_shape,
                        const QuantConvS16Params& p) {
  const int32_t cin = in_shape.c;
  const int32_t cout = out_shape.c;
  const int32_t gin = group_channels;
  const int32_t gout = cout / (cin / gin);
  const int32_t row_stride = in_shape.w * cin;
  const int32_t w_stride = kernel_h * kernel_w * gin;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int16_t* in_n = in + int64_t(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, kernel_h, p.dilation_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, kernel_w, p.dilation_w, &kx0, &kx1);
        for (int32_t co = 0; co < cout; ++co) {
          const int8_t* w_o = w + int64_t(co) * w_stride;
          const int16_t* in_g = in_n + (co / gout) * gin;  // the group's first channel
          int64_t acc = 0;  // |in * w| <= 2^22, at most 2^31 taps: no overflow
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const int16_t* x_row = in_g + (iy0 + ky * p.dilation_h) * row_stride;
            const int8_t* w_row = w_o + ky * kernel_w * gin;
            for (int32_t kx = kx0; kx < kx1; ++kx) {
              const int16_t* x = x_row + (ix0 + kx * p.dilation_w) * cin;
              const int8_t* wk = w_row + kx * gin;
              int32_t part = 0;  // one tap's channels: at most 2^22 * gin; flushed every 256
              for (int32_t ci = 0; ci < gin; ++ci) {
                part += int32_t(x[ci]) * wk[ci];
                if ((ci & 255) == 255) {
                  acc += part;
                  part = 0;
                }
              }
              acc += part;
            }
          }
          if (bias != nullptr) acc = wrap_add(acc, bias[co]);
          *out++ = clamp16(requantize_s64(acc, multiplier[co], shift[co]), p.act_min, p.act_max);
        }
      }
    }
  }
}

void conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                int32_t kernel_w, const int64_t* bias, const int32_t* multiplier,
                const int32_t* shift, int16_t* out, Shape4 out_shape, const QuantConvS16Params& p) {
  grouped_conv2d_s16(in, in_shape, w, kernel_h, kernel_w, in_shape.c, bias, multiplier, shift, out,
                     out_shape, p);
}

void depthwise_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                          int32_t kernel_w, int32_t depth_multiplier, const int64_t* bias,
                          const int32_t* multiplier, const int32_t* shift, int16_t* out,
                          Shape4 out_shape, const QuantConvS16Params& p) {
  const int32_t cin = in_shape.c;
  const int32_t cout = out_shape.c;
  const int32_t row_stride = in_shape.w * cin;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int16_t* in_n = in + int64_t(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, kernel_h, p.dilation_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, kernel_w, p.dilation_w, &kx0, &kx1);
        for (int32_t co = 0; co < cout; ++co) {
          const int32_t ci = co / depth_multiplier;
          int64_t acc = 0;
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const int16_t* x_row = in_n + (iy0 + ky * p.dilation_h) * row_stride + ci;
            const int8_t* w_row = w + ky * kernel_w * cout + co;
            for (int32_t kx = kx0; kx < kx1; ++kx) {
              acc += int32_t(x_row[(ix0 + kx * p.dilation_w) * cin]) * w_row[kx * cout];
            }
          }
          if (bias != nullptr) acc = wrap_add(acc, bias[co]);
          *out++ = clamp16(requantize_s64(acc, multiplier[co], shift[co]), p.act_min, p.act_max);
        }
      }
    }
  }
}

void linear_s16(const int16_t* in, const int8_t* w, const int64_t* bias, const int32_t* multiplier,
                const int32_t* shift, int32_t num_requant, int16_t* out, int32_t batch,
                int32_t in_features, int32_t out_features, int32_t act_min, int32_t act_max) {
  const bool per_channel = num_requant == out_features;
  for (int32_t b = 0; b < batch; ++b) {
    const int16_t* x = in + int64_t(b) * in_features;
    for (int32_t o = 0; o < out_features; ++o) {
      const int8_t* w_o = w + int64_t(o) * in_features;
      int64_t acc = 0;
      int32_t part = 0;
      for (int32_t i = 0; i < in_features; ++i) {
        part += int32_t(x[i]) * w_o[i];
        if ((i & 255) == 255) {
          acc += part;
          part = 0;
        }
      }
      acc += part;
      if (bias != nullptr) acc = wrap_add(acc, bias[o]);
      const int32_t k = per_channel ? o : 0;
      *out++ = clamp16(requantize_s64(acc, multiplier[k], shift[k]), act_min, act_max);
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
