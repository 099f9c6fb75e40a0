// a16w8 max and average pooling (pool_resize.h): max_pool2d_s8's and
// avg_pool2d_s8's arithmetic on int16 values.
#include "kernels/portable/common/requantize.h"
#include "kernels/portable/pool_resize/pool_resize.h"

namespace torchmcu {
namespace portable {
namespace {

// One pool over the in-bounds taps of every output pixel: Max keeps the
// largest value, Avg the int32 sum (rounded division at the end).
template <bool kMax>
void pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                const QuantPoolParams& p, const PoolOptions& o) {
  const int32_t c_n = in_shape.c;
  const int32_t row_stride = in_shape.w * c_n;
  const int32_t dil_h = kMax ? o.dilation_h : 1, dil_w = kMax ? o.dilation_w : 1;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int16_t* in_n = in + int64_t(n) * in_shape.h * row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const int32_t iy0 = oy * p.stride_h - p.pad_top;
      int32_t ky0, ky1;
      s8::tap_range(iy0, in_shape.h, p.kernel_h, dil_h, &ky0, &ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const int32_t ix0 = ox * p.stride_w - p.pad_left;
        int32_t kx0, kx1;
        s8::tap_range(ix0, in_shape.w, p.kernel_w, dil_w, &kx0, &kx1);
        const int32_t count = (ky1 - ky0) * (kx1 - kx0);
        const int32_t divisor = pool_divisor(p, o, in_shape, iy0, ix0, count);
        for (int32_t c = 0; c < c_n; ++c) {
          // max: starting at act_min folds in the lower clamp; avg: the taps the divisor adds hold the zero point
          int32_t acc = kMax ? p.act_min : (count > 0 ? (divisor - count) * o.zero_point : 0);
          for (int32_t ky = ky0; ky < ky1; ++ky) {
            const int16_t* x = in_n + (iy0 + ky * dil_h) * row_stride + (ix0 + kx0 * dil_w) * c_n + c;
            for (int32_t kx = kx0; kx < kx1; ++kx, x += dil_w * c_n) {
              if (kMax) {
                acc = *x > acc ? *x : acc;
              } else {
                acc += *x;  // at most 2^16 taps (checked) of |x| <= 2^15: fits int32
              }
            }
          }
          if (!kMax) acc = avg_round(acc, divisor, o);
          *out++ = clamp16(acc, p.act_min, p.act_max);
        }
      }
    }
  }
}

}  // namespace

void max_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o) {
  pool2d_s16<true>(in, in_shape, out, out_shape, p, o);
}

void avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o) {
  pool2d_s16<false>(in, in_shape, out, out_shape, p, o);
}

}  // namespace portable
}  // namespace torchmcu
