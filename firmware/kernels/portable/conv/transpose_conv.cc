// Transposed convolution (TRANSPOSE_CONV2D_F32/S8/S16), computed output by
// output: each output pixel gathers the taps that reach it, so no scratch
// accumulator for the whole output is needed (TFLite scatters into one).
// The integer sums are the same, in any order.
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// The kernel taps k in [0, kernel) that reach output coordinate o: those with
// o + pad - k a multiple of stride, i = (o + pad - k) / stride in [0, size).
// They are first, first + stride, ... below end; i of `first` is `i_first`
// and falls by one per step.
struct Taps {
  int32_t first, end, i_first;
};

inline Taps taps(int32_t o, int32_t pad, int32_t stride, int32_t kernel, int32_t size) {
  const int32_t t = o + pad;  // >= 0: pad >= 0
  int32_t first = t % stride;
  int32_t i_first = t / stride;
  // i < size: skip taps whose input lies below the input's end.
  if (i_first >= size) {
    const int32_t skip = i_first - (size - 1);
    first += skip * stride;
    i_first = size - 1;
  }
  // i >= 0: k <= t.
  const int32_t last = t < kernel - 1 ? t : kernel - 1;
  return Taps{first, first > last ? first : last + 1, i_first};
}

// sum (x[i] + offset) * w[i] over n elements, unrolled by four.
inline int32_t dot_offset(const int8_t* x, const int8_t* w, int32_t n, int32_t offset, int32_t acc) {
  const int8_t* const end4 = x + (n & ~3);
  const int8_t* const end = x + n;
  while (x != end4) {
    acc += (x[0] + offset) * w[0];
    acc += (x[1] + offset) * w[1];
    acc += (x[2] + offset) * w[2];
    acc += (x[3] + offset) * w[3];
    x += 4;
    w += 4;
  }
  while (x != end) acc += (*x++ + offset) * *w++;
  return acc;
}

inline float clampf(float v, ActRange a) {
  v = v < a.min ? a.min : v;
  return v > a.max ? a.max : v;
}

}  // namespace

void transpose_conv2d_f32(const float* in, Shape4 in_shape, const float* w, int32_t kernel_h,
                          int32_t kernel_w, int32_t group_channels, const float* bias, float* out, Shape4 out_shape,
                          const Conv2dParams& p) {
  const int32_t cin = in_shape.c, cout = out_shape.c;
  const int32_t gc = group_channels, ocg = cout / (cin / gc);  // per group: input, output channels
  const int32_t row = in_shape.w * cin;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n = in + int64_t(n) * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const Taps ty = taps(oy, p.pad_top, p.stride_h, kernel_h, in_shape.h);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const Taps tx = taps(ox, p.pad_left, p.stride_w, kernel_w, in_shape.w);
        for (int32_t oc = 0; oc < cout; ++oc) {
          float acc = bias ? bias[oc] : 0.0f;
          for (int32_t ky = ty.first, iy = ty.i_first; ky < ty.end; ky += p.stride_h, --iy) {
            for (int32_t kx = tx.first, ix = tx.i_first; kx < tx.end; kx += p.stride_w, --ix) {
              const float* x = in_n + iy * row + ix * cin + (oc / ocg) * gc;
              const float* wt = w + ((int64_t(oc) * kernel_h + ky) * kernel_w + kx) * gc;
              for (int32_t c = 0; c < gc; ++c) acc += x[c] * wt[c];
            }
          }
          *out++ = clampf(acc, p.act);
        }
      }
    }
  }
}

void transpose_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t group_channels, const int32_t* bias, const int32_t* multiplier,
                         const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p) {
  const int32_t cin = in_shape.c, cout = out_shape.c;
  const int32_t gc = group_channels, ocg = cout / (cin / gc);  // per group: input, output channels
  const int32_t row = in_shape.w * cin;
  const int32_t in_off = p.input_offset;
  const int32_t w_per_oc = kernel_h * kernel_w * gc;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + int64_t(n) * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const Taps ty = taps(oy, p.pad_top, p.stride_h, kernel_h, in_shape.h);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const Taps tx = taps(ox, p.pad_left, p.stride_w, kernel_w, in_shape.w);
        const int8_t* w_oc = w;
        for (int32_t oc = 0; oc < cout; ++oc, w_oc += w_per_oc) {
          int32_t acc = bias ? bias[oc] : 0;
          for (int32_t ky = ty.first, iy = ty.i_first; ky < ty.end; ky += p.stride_h, --iy) {
            const int8_t* x_row = in_n + iy * row + (oc / ocg) * gc;
            const int8_t* w_row = w_oc + ky * kernel_w * gc;
            for (int32_t kx = tx.first, ix = tx.i_first; kx < tx.end; kx += p.stride_w, --ix) {
              acc = dot_offset(x_row + ix * cin, w_row + kx * gc, gc, in_off, acc);
            }
          }
          *out++ = quant(s8::requantize(acc, multiplier[oc], shift[oc]));
        }
      }
    }
  }
}

void transpose_conv2d_s16(const int16_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                          int32_t kernel_w, int32_t group_channels, const int64_t* bias, const int32_t* multiplier,
                          const int32_t* shift, int16_t* out, Shape4 out_shape, const QuantConvS16Params& p) {
  const int32_t cin = in_shape.c, cout = out_shape.c;
  const int32_t gc = group_channels, ocg = cout / (cin / gc);  // per group: input, output channels
  const int32_t row = in_shape.w * cin;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int16_t* in_n = in + int64_t(n) * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const Taps ty = taps(oy, p.pad_top, p.stride_h, kernel_h, in_shape.h);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const Taps tx = taps(ox, p.pad_left, p.stride_w, kernel_w, in_shape.w);
        for (int32_t oc = 0; oc < cout; ++oc) {
          int64_t acc = 0;  // |x * w| <= 2^22 per product, summed by 256 in int32
          for (int32_t ky = ty.first, iy = ty.i_first; ky < ty.end; ky += p.stride_h, --iy) {
            for (int32_t kx = tx.first, ix = tx.i_first; kx < tx.end; kx += p.stride_w, --ix) {
              const int16_t* x = in_n + iy * row + ix * cin + (oc / ocg) * gc;
              const int8_t* wt = w + ((int64_t(oc) * kernel_h + ky) * kernel_w + kx) * gc;
              int32_t part = 0;
              for (int32_t c = 0; c < gc; ++c) {
                part += int32_t(x[c]) * wt[c];
                if ((c & 255) == 255) {
                  acc += part;
                  part = 0;
                }
              }
              acc += part;
            }
          }
          if (bias != nullptr) acc = int64_t(uint64_t(acc) + uint64_t(bias[oc]));  // wraps, as the convolutions
          int32_t v = requantize_s64(acc, multiplier[oc], shift[oc]);
          v = v < p.act_min ? p.act_min : v;
          v = v > p.act_max ? p.act_max : v;
          *out++ = static_cast<int16_t>(v);
        }
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
