#include "kernels/fast/conv/dwconv_s8.h"
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

using s8::kAccChunk;
using s8::OutQuant;
using s8::tap_range;

// sum x[i] * w[i] over n contiguous elements, unrolled by four.
inline int32_t dot(const int8_t* x, const int8_t* w, int32_t n, int32_t acc) {
  const int8_t* const end4 = x + (n & ~3);
  const int8_t* const end = x + n;
  while (x != end4) {
    acc += x[0] * w[0];
    acc += x[1] * w[1];
    acc += x[2] * w[2];
    acc += x[3] * w[3];
    x += 4;
    w += 4;
  }
  while (x != end) acc += *x++ * *w++;
  return acc;
}

// sum (x[i] + offset) * w[i].
inline int32_t dot_offset(const int8_t* x, const int8_t* w, int32_t n, int32_t offset,
                          int32_t acc) {
  const int8_t* const end = x + n;
  while (x != end) acc += (*x++ + offset) * *w++;
  return acc;
}

// Outputs [lo, hi) whose whole window lies inside the input: start =
// o * stride - pad >= 0 and start + (kernel - 1) * dilation <= size - 1.
inline void interior(int32_t pad, int32_t stride, int32_t size, int32_t kernel, int32_t dilation,
                     int32_t out_size, int32_t* lo, int32_t* hi) {
  int32_t l = (pad + stride - 1) / stride;
  const int32_t lim = size - 1 - (kernel - 1) * dilation + pad;
  int32_t h = lim < 0 ? 0 : lim / stride + 1;
  if (h > out_size) h = out_size;
  if (l > out_size) l = out_size;
  if (h < l) h = l;
  *lo = l;
  *hi = h;
}

}  // namespace

// Output channel outermost: the weights' sum is then computed once per
// channel, and windows inside the input use sum x * w + input_offset * sum w,
// so the inner loop is a plain int8 dot product. Windows that touch the
// padding add the offset per tap and skip the padded taps. With dilation_w
// == 1 and one group the taps of one kernel row are one contiguous run of
// kw * C values in input and weights alike; grouped, each tap is a run of
// the group's channels.
// Its own function (never inlined): its frame is then not on the stack
// beneath the fast paths'.
namespace {
[[gnu::noinline]] void grouped_generic(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                                       int32_t kernel_w, int32_t group_channels, const int32_t* bias,
                                       const int32_t* multiplier, const int32_t* shift, int8_t* out,
                                       Shape4 out_shape, const QuantConvParams& p) {
  // Locals, not p's fields: int8 stores may alias p, forcing reloads.
  const int32_t stride_h = p.stride_h, stride_w = p.stride_w;
  const int32_t pad_top = p.pad_top, pad_left = p.pad_left;
  const int32_t dil_h = p.dilation_h, dil_w = p.dilation_w;
  const int32_t in_c = in_shape.c;
  const int32_t out_c = out_shape.c;
  const int32_t group_in = group_channels;
  const int32_t group_out = out_c / (in_c / group_in);
  const int32_t w_per_oc = kernel_h * kernel_w * group_in;
  const int32_t row_stride = in_shape.w * in_c;
  const int32_t image_stride = in_shape.h * row_stride;
  const bool contiguous = dil_w == 1 && group_in == in_c;
  const int32_t run = contiguous ? kernel_w * in_c : group_in;
  const int32_t runs = contiguous ? 1 : kernel_w;
  const int32_t run_step = dil_w * in_c;
  const int32_t ky_step = dil_h * row_stride;
  const int32_t in_off = p.input_offset;
  int32_t oy_lo, oy_hi, ox_lo, ox_hi;
  interior(pad_top, stride_h, in_shape.h, kernel_h, dil_h, out_shape.h, &oy_lo, &oy_hi);
  interior(pad_left, stride_w, in_shape.w, kernel_w, dil_w, out_shape.w, &ox_lo,
           &ox_hi);
  const OutQuant quant(p.output_offset, p.act_min, p.act_max);

  for (int32_t oc = 0; oc < out_c; ++oc) {
    const int8_t* wk = w + oc * w_per_oc;
    int32_t wsum = 0;
    for (int32_t i = 0; i < w_per_oc; ++i) wsum += wk[i];
    const int32_t b = bias ? bias[oc] : 0;
    const int32_t b_full = b + in_off * wsum;
    const int32_t m = multiplier[oc];
    const int32_t s = shift[oc];
    int8_t* o = out + oc;
    const int8_t* in_g = in + (oc / group_out) * group_in;  // the group's first channel
    for (int32_t n = 0; n < out_shape.n; ++n) {
      const int8_t* in_n = in_g + n * image_stride;
      for (int32_t oy = 0; oy < out_shape.h; ++oy) {
        const int32_t iy0 = oy * stride_h - pad_top;
        const bool y_in = oy >= oy_lo && oy < oy_hi;
        int32_t ky0, ky1;
        tap_range(iy0, in_shape.h, kernel_h, dil_h, &ky0, &ky1);
        const int32_t x_lo = y_in ? ox_lo : out_shape.w;
        const int32_t x_hi = y_in ? ox_hi : out_shape.w;
        for (int32_t ox = 0; ox < out_shape.w; ++ox) {
          const int32_t ix0 = ox * stride_w - pad_left;
          int32_t acc;
          if (ox >= x_lo && ox < x_hi) {
            acc = b_full;
            const int8_t* x_row = in_n + iy0 * row_stride + ix0 * in_c;
            const int8_t* wt = wk;
            for (int32_t ky = 0; ky < kernel_h; ++ky, x_row += ky_step) {
              const int8_t* x = x_row;
              for (int32_t r = 0; r < runs; ++r, x += run_step, wt += run) {
                acc = dot(x, wt, run, acc);
              }
            }
          } else {
            acc = b;
            int32_t kx0, kx1;
            tap_range(ix0, in_shape.w, kernel_w, dil_w, &kx0, &kx1);
            const int32_t taps_x = kx1 - kx0;
            for (int32_t ky = ky0; ky < ky1 && taps_x > 0; ++ky) {
              const int8_t* x =
                  in_n + (iy0 + ky * dil_h) * row_stride + (ix0 + kx0 * dil_w) * in_c;
              const int8_t* wt = wk + (ky * kernel_w + kx0) * group_in;
              if (contiguous) {
                acc = dot_offset(x, wt, taps_x * in_c, in_off, acc);
              } else {
                for (int32_t t = 0; t < taps_x; ++t, x += run_step, wt += group_in) {
                  acc = dot_offset(x, wt, group_in, in_off, acc);
                }
              }
            }
          }
          *o = quant(s8::requantize(acc, m, s));
          o += out_c;
        }
      }
    }
  }
}
}  // namespace

void grouped_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                       int32_t kernel_w, int32_t group_channels, const int32_t* bias,
                       const int32_t* multiplier, const int32_t* shift, int8_t* out, Shape4 out_shape,
                       const QuantConvParams& p) {
#if TMCU_S8_FAST && TMCU_FAST_CONV
  if (group_channels == in_shape.c &&
      fast::conv2d_s8(in, in_shape, w, kernel_h, kernel_w, bias, multiplier, shift, out, out_shape, p)) {
    return;
  }
#endif
  grouped_generic(in, in_shape, w, kernel_h, kernel_w, group_channels, bias, multiplier, shift, out, out_shape, p);
}

void conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
               int32_t kernel_w, const int32_t* bias, const int32_t* multiplier,
               const int32_t* shift, int8_t* out, Shape4 out_shape, const QuantConvParams& p) {
  grouped_conv2d_s8(in, in_shape, w, kernel_h, kernel_w, in_shape.c, bias, multiplier, shift, out,
                    out_shape, p);
}

// Per output pixel, the output channels are processed in chunks of kAccChunk
// int32 accumulators on the stack; the tap loops run inside a chunk, the
// channel loop innermost and contiguous in input, weights and accumulators.
namespace {
[[gnu::noinline]] void depthwise_generic(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                                         int32_t kernel_w, int32_t depth_multiplier, const int32_t* bias,
                                         const int32_t* multiplier, const int32_t* shift, int8_t* out,
                                         Shape4 out_shape, const QuantConvParams& p) {
  const int32_t stride_h = p.stride_h, stride_w = p.stride_w;
  const int32_t pad_top = p.pad_top, pad_left = p.pad_left;
  const int32_t dil_h = p.dilation_h, dil_w = p.dilation_w;
  const int32_t in_c = in_shape.c;
  const int32_t out_c = out_shape.c;
  const int32_t mult = depth_multiplier;
  const int32_t row_stride = in_shape.w * in_c;
  const int32_t image_stride = in_shape.h * row_stride;
  const int32_t in_off = p.input_offset;
  // A chunk covers ic_block input channels times m_block multiplier values;
  // its output channels are contiguous either way.
  const int32_t m_block = mult <= kAccChunk ? mult : kAccChunk;
  const int32_t ic_block = mult <= kAccChunk ? kAccChunk / mult : 1;
  const OutQuant quant(p.output_offset, p.act_min, p.act_max);
  int32_t acc[kAccChunk];

  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * image_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * stride_h - pad_top;
      int32_t ky0, ky1;
      tap_range(iy0, in_shape.h, kernel_h, dil_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * stride_w - pad_left;
        int32_t kx0, kx1;
        tap_range(ix0, in_shape.w, kernel_w, dil_w, &kx0, &kx1);
        for (int32_t ic0 = 0; ic0 < in_c; ic0 += ic_block) {
          const int32_t ic_n = in_c - ic0 < ic_block ? in_c - ic0 : ic_block;
          for (int32_t m0 = 0; m0 < mult; m0 += m_block) {
            const int32_t m_n = mult - m0 < m_block ? mult - m0 : m_block;
            const int32_t oc0 = ic0 * mult + m0;
            const int32_t count = ic_n * m_n;
            if (bias) {
              for (int32_t j = 0; j < count; ++j) acc[j] = bias[oc0 + j];
            } else {
              for (int32_t j = 0; j < count; ++j) acc[j] = 0;
            }
            for (int32_t ky = ky0; ky < ky1; ++ky) {
              const int32_t iy = iy0 + ky * dil_h;
              for (int32_t kx = kx0; kx < kx1; ++kx) {
                const int32_t ix = ix0 + kx * dil_w;
                const int8_t* x = in_n + iy * row_stride + ix * in_c + ic0;
                const int8_t* wt = w + (ky * kernel_w + kx) * out_c + oc0;
                if (mult == 1) {
                  for (int32_t j = 0; j < count; ++j) acc[j] += (x[j] + in_off) * wt[j];
                } else {
                  int32_t* a = acc;
                  for (int32_t i = 0; i < ic_n; ++i) {
                    const int32_t xv = x[i] + in_off;
                    for (int32_t k = 0; k < m_n; ++k) *a++ += xv * *wt++;
                  }
                }
              }
            }
            for (int32_t j = 0; j < count; ++j) {
              out[oc0 + j] = quant(s8::requantize(acc[j], multiplier[oc0 + j], shift[oc0 + j]));
            }
          }
        }
        out += out_c;
      }
    }
  }
}
}  // namespace

void depthwise_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t depth_multiplier, const int32_t* bias,
                         const int32_t* multiplier, const int32_t* shift, int8_t* out,
                         Shape4 out_shape, const QuantConvParams& p) {
#if TMCU_S8_FAST && TMCU_FAST_DW
  if (fast::depthwise_conv2d_s8(in, in_shape, w, kernel_h, kernel_w, depth_multiplier, bias, multiplier,
                                shift, out, out_shape, p)) {
    return;
  }
#endif
  depthwise_generic(in, in_shape, w, kernel_h, kernel_w, depth_multiplier, bias, multiplier, shift, out,
                    out_shape, p);
}

}  // namespace portable
}  // namespace torchmcu
