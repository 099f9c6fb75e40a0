#include "kernels/portable/conv/conv.h"

namespace torchmcu {
namespace portable {
namespace {

// Kernel taps [lo, hi) whose input coordinate start + k * dilation lies in
// [0, size). Computing this once per output pixel keeps bounds checks out of
// the tap and channel loops.
inline void tap_range(int32_t start, int32_t size, int32_t kernel,
                      int32_t dilation, int32_t* lo, int32_t* hi) {
  int32_t l = start < 0 ? (-start + dilation - 1) / dilation : 0;
  int32_t h = size - start <= 0 ? 0 : (size - start + dilation - 1) / dilation;
  if (h > kernel) h = kernel;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

inline float act_clamp(float v, ActRange act) {
  v = v < act.min ? act.min : v;
  return v > act.max ? act.max : v;
}

}  // namespace

void conv2d_f32(const float* in, Shape4 in_shape, const float* w,
                int32_t kernel_h, int32_t kernel_w, const float* bias,
                float* out, Shape4 out_shape, const Conv2dParams& p) {
  const int32_t in_c = in_shape.c;
  const int32_t group_in = in_c / p.groups;
  const int32_t group_out = out_shape.c / p.groups;
  const size_t w_per_oc = static_cast<size_t>(kernel_h) * kernel_w * group_in;
  const size_t row_stride = static_cast<size_t>(in_shape.w) * in_c;
  const size_t tap_x_stride = static_cast<size_t>(p.dilation_w) * in_c;
  const size_t wtap_x_stride = static_cast<size_t>(kernel_w) * group_in;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n =
        in + static_cast<size_t>(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      tap_range(iy0, in_shape.h, kernel_h, p.dilation_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        tap_range(ix0, in_shape.w, kernel_w, p.dilation_w, &kx0, &kx1);
        const int32_t taps_x = kx1 - kx0;
        // First in-bounds tap of this output pixel, channel 0 (unused, and
        // not formed, when the window misses the input entirely).
        const bool empty = ky0 == ky1 || taps_x == 0;
        const size_t first_tap =
            empty ? 0
                  : static_cast<size_t>(iy0 + ky0 * p.dilation_h) * row_stride +
                        static_cast<size_t>(ix0 + kx0 * p.dilation_w) * in_c;
        const float* in_px = in_n + first_tap;
        const float* wk = w;
        int32_t oc = 0;
        for (int32_t g = 0; g < p.groups; ++g) {
          const float* in_g = in_px + g * group_in;
          for (int32_t j = 0; j < group_out; ++j, ++oc, wk += w_per_oc) {
            float acc = bias ? bias[oc] : 0.0f;
            const float* in_row = in_g;
            const float* w_row =
                wk + (static_cast<size_t>(ky0) * kernel_w + kx0) * group_in;
            for (int32_t ky = ky0; ky < ky1; ++ky) {
              const float* x = in_row;
              const float* wt = w_row;
              for (int32_t t = 0; t < taps_x; ++t) {
                const float* xc = x;
                const float* wc = wt;
                const float* const wc_end = wt + group_in;
                while (wc != wc_end) acc += *xc++ * *wc++;
                x += tap_x_stride;
                wt += group_in;
              }
              in_row += row_stride * p.dilation_h;
              w_row += wtap_x_stride;
            }
            *out++ = act_clamp(acc, p.act);
          }
        }
      }
    }
  }
}

void depthwise_conv2d_f32(const float* in, Shape4 in_shape, const float* w,
                          int32_t kernel_h, int32_t kernel_w,
                          int32_t multiplier, const float* bias, float* out,
                          Shape4 out_shape, const Conv2dParams& p) {
  const int32_t in_c = in_shape.c;
  const int32_t out_c = out_shape.c;
  const size_t row_stride = static_cast<size_t>(in_shape.w) * in_c;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n =
        in + static_cast<size_t>(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      tap_range(iy0, in_shape.h, kernel_h, p.dilation_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        tap_range(ix0, in_shape.w, kernel_w, p.dilation_w, &kx0, &kx1);
        // Accumulate straight into the output pixel: the channel loop stays
        // innermost and contiguous in input, weights and output alike.
        for (int32_t c = 0; c < out_c; ++c) out[c] = bias ? bias[c] : 0.0f;
        for (int32_t ky = ky0; ky < ky1; ++ky) {
          const int32_t iy = iy0 + ky * p.dilation_h;
          for (int32_t kx = kx0; kx < kx1; ++kx) {
            const int32_t ix = ix0 + kx * p.dilation_w;
            const float* x = in_n + iy * row_stride +
                             static_cast<size_t>(ix) * in_c;
            const float* wt =
                w + (static_cast<size_t>(ky) * kernel_w + kx) * out_c;
            float* y = out;
            if (multiplier == 1) {
              for (int32_t c = 0; c < in_c; ++c) y[c] += x[c] * wt[c];
            } else {
              for (int32_t c = 0; c < in_c; ++c) {
                const float xc = x[c];
                for (int32_t m = 0; m < multiplier; ++m) *y++ += xc * *wt++;
              }
            }
          }
        }
        for (int32_t c = 0; c < out_c; ++c) out[c] = act_clamp(out[c], p.act);
        out += out_c;
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
