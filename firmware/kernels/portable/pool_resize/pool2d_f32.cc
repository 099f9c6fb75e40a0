#include <limits>

#include "kernels/portable/pool_resize/pool_resize.h"

namespace torchmcu {
namespace portable {
namespace {

// Kernel taps [lo, hi) whose input coordinate start + k * dilation lies in
// [0, size), found once per output pixel so the channel loop has no checks.
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

void max_pool2d_f32(const float* in, Shape4 in_shape, float* out,
                    Shape4 out_shape, const Pool2dParams& p) {
  const int32_t c_n = in_shape.c;
  const size_t row_stride = static_cast<size_t>(in_shape.w) * c_n;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n =
        in + static_cast<size_t>(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      tap_range(iy0, in_shape.h, p.kernel_h, p.dilation_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        tap_range(ix0, in_shape.w, p.kernel_w, p.dilation_w, &kx0, &kx1);
        for (int32_t c = 0; c < c_n; ++c) out[c] = neg_inf;
        for (int32_t ky = ky0; ky < ky1; ++ky) {
          const float* row = in_n + (iy0 + ky * p.dilation_h) * row_stride;
          for (int32_t kx = kx0; kx < kx1; ++kx) {
            const float* x =
                row + static_cast<size_t>(ix0 + kx * p.dilation_w) * c_n;
            for (int32_t c = 0; c < c_n; ++c) {
              out[c] = x[c] > out[c] ? x[c] : out[c];
            }
          }
        }
        for (int32_t c = 0; c < c_n; ++c) out[c] = act_clamp(out[c], p.act);
        out += c_n;
      }
    }
  }
}

void avg_pool2d_f32(const float* in, Shape4 in_shape, float* out,
                    Shape4 out_shape, const Pool2dParams& p) {
  const int32_t c_n = in_shape.c;
  const size_t row_stride = static_cast<size_t>(in_shape.w) * c_n;
  // PyTorch pads symmetrically, so the bottom/right padding that bounds the
  // divisor's window equals the top/left padding.
  const int32_t h_lim = in_shape.h + p.pad_top;
  const int32_t w_lim = in_shape.w + p.pad_left;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n =
        in + static_cast<size_t>(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      int32_t y0 = oy * p.stride_h - p.pad_top;
      int32_t y1 = y0 + p.kernel_h < h_lim ? y0 + p.kernel_h : h_lim;
      const int32_t padded_h = y1 - y0;
      y0 = y0 < 0 ? 0 : y0;
      y1 = y1 < in_shape.h ? y1 : in_shape.h;
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        int32_t x0 = ox * p.stride_w - p.pad_left;
        int32_t x1 = x0 + p.kernel_w < w_lim ? x0 + p.kernel_w : w_lim;
        const int32_t padded_w = x1 - x0;
        x0 = x0 < 0 ? 0 : x0;
        x1 = x1 < in_shape.w ? x1 : in_shape.w;
        int32_t divisor;
        if (p.divisor_override > 0) {
          divisor = p.divisor_override;
        } else if (p.count_include_pad) {
          divisor = padded_h * padded_w;
        } else {
          divisor = (y1 - y0) * (x1 - x0);
        }
        for (int32_t c = 0; c < c_n; ++c) out[c] = 0.0f;
        for (int32_t iy = y0; iy < y1; ++iy) {
          const float* x =
              in_n + iy * row_stride + static_cast<size_t>(x0) * c_n;
          for (int32_t ix = x0; ix < x1; ++ix, x += c_n) {
            for (int32_t c = 0; c < c_n; ++c) out[c] += x[c];
          }
        }
        // An all-padding window has divisor 0 only without count_include_pad;
        // its sum is 0 too, and PyTorch cannot produce such a window anyway.
        const float scale =
            divisor > 0 ? 1.0f / static_cast<float>(divisor) : 0.0f;
        for (int32_t c = 0; c < c_n; ++c) {
          out[c] = act_clamp(out[c] * scale, p.act);
        }
        out += c_n;
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
