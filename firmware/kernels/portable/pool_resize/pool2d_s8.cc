#include "kernels/fast/pool_resize/pool2d_s8.h"
#include "kernels/portable/pool_resize/pool_resize.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {

// Max accumulates straight into the int8 output pixel, channels innermost.
void max_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                   const QuantPoolParams& p, const PoolOptions& o) {
#if TMCU_S8_FAST && TMCU_FAST_POOL
  if (fast::max_pool2d_s8(in, in_shape, out, out_shape, p, o)) return;
#endif
  const int32_t kernel_h = p.kernel_h, kernel_w = p.kernel_w;
  const int32_t stride_h = p.stride_h, stride_w = p.stride_w;
  const int32_t pad_top = p.pad_top, pad_left = p.pad_left;
  const int32_t dil_h = o.dilation_h, dil_w = o.dilation_w;
  const int32_t lo = p.act_min, hi = p.act_max;
  const int32_t c_n = in_shape.c;
  const int32_t row_stride = in_shape.w * c_n;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * stride_h - pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, kernel_h, dil_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * stride_w - pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, kernel_w, dil_w, &kx0, &kx1);
        // Starting from act_min folds the lower clamp into the max.
        const int8_t start = static_cast<int8_t>(lo);
        for (int32_t c = 0; c < c_n; ++c) out[c] = start;
        for (int32_t ky = ky0; ky < ky1; ++ky) {
          const int8_t* x = in_n + (iy0 + ky * dil_h) * row_stride + (ix0 + kx0 * dil_w) * c_n;
          for (int32_t kx = kx0; kx < kx1; ++kx, x += dil_w * c_n) {
            for (int32_t c = 0; c < c_n; ++c) out[c] = x[c] > out[c] ? x[c] : out[c];
          }
        }
        if (hi < 127) {
          const int8_t top = static_cast<int8_t>(hi);
          for (int32_t c = 0; c < c_n; ++c) out[c] = out[c] > top ? top : out[c];
        }
        out += c_n;
      }
    }
  }
}

// Sums in chunks of kAccChunk int32 accumulators on the stack. A window with
// no in-bounds tap (possible only with padding >= kernel) sums to 0.
void avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                   const QuantPoolParams& p, const PoolOptions& o) {
#if TMCU_S8_FAST && TMCU_FAST_POOL
  if (fast::avg_pool2d_s8(in, in_shape, out, out_shape, p, o)) return;
#endif
  const int32_t kernel_h = p.kernel_h, kernel_w = p.kernel_w;
  const int32_t stride_h = p.stride_h, stride_w = p.stride_w;
  const int32_t pad_top = p.pad_top, pad_left = p.pad_left;
  const int32_t lo = p.act_min, hi = p.act_max;
  const int32_t c_n = in_shape.c;
  const int32_t row_stride = in_shape.w * c_n;
  int32_t acc[s8::kAccChunk];
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * stride_h - pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, kernel_h, 1, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * stride_w - pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, kernel_w, 1, &kx0, &kx1);
        const int32_t count = (ky1 - ky0) * (kx1 - kx0);
        const int32_t divisor = pool_divisor(p, o, in_shape, iy0, ix0, count);
        const int32_t padded = count > 0 ? (divisor - count) * o.zero_point : 0;  // taps the divisor adds
        for (int32_t c0 = 0; c0 < c_n; c0 += s8::kAccChunk) {
          const int32_t cn = c_n - c0 < s8::kAccChunk ? c_n - c0 : s8::kAccChunk;
          for (int32_t c = 0; c < cn; ++c) acc[c] = padded;
          for (int32_t iy = iy0 + ky0; iy < iy0 + ky1; ++iy) {
            const int8_t* x = in_n + iy * row_stride + (ix0 + kx0) * c_n + c0;
            for (int32_t kx = kx0; kx < kx1; ++kx, x += c_n) {
              for (int32_t c = 0; c < cn; ++c) acc[c] += x[c];
            }
          }
          for (int32_t c = 0; c < cn; ++c) {
            int32_t v = avg_round(acc[c], divisor, o);
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
            out[c0 + c] = static_cast<int8_t>(v);
          }
        }
        out += c_n;
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
