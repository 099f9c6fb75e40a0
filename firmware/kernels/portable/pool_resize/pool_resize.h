// The pool_resize family's math (MAX/AVG_POOL2D_*, ADAPTIVE_AVG_POOL2D_*,
// RESIZE_*): float32, int8 and int16. The executor's checks and runs:
// ops_pool_resize.cc. Conventions: common/types.h.
#ifndef TORCHMCU_KERNELS_PORTABLE_POOL_RESIZE_POOL_RESIZE_H_
#define TORCHMCU_KERNELS_PORTABLE_POOL_RESIZE_POOL_RESIZE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

struct Pool2dParams {
  int32_t kernel_h, kernel_w;
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t dilation_h, dilation_w;  // max pool only; 1 for avg pool
  bool count_include_pad;          // avg pool: divide by the full window
  int32_t divisor_override;        // avg pool: > 0 replaces the divisor
  ActRange act;
};

/// Max pooling over NHWC; padded taps are ignored (as -inf). Windows that
/// start past the input (ceil_mode) take only their in-bounds taps.
void max_pool2d_f32(const float* in, Shape4 in_shape, float* out,
                    Shape4 out_shape, const Pool2dParams& p);

/// Average pooling over NHWC with PyTorch's divisor rules: the window is
/// clipped to input + padding (bottom/right padding taken equal to pad_top /
/// pad_left, as PyTorch pads symmetrically); count_include_pad divides by
/// that clipped size, otherwise by the number of in-bounds taps;
/// divisor_override wins.
void avg_pool2d_f32(const float* in, Shape4 in_shape, float* out,
                    Shape4 out_shape, const Pool2dParams& p);

/// Nearest-neighbour resizing of NHWC elements of elem_size bytes (any
/// dtype): out[n][i][j] = in[n][rows(i)][cols(j)], with TFLite's
/// GetNearestNeighbor without align_corners: min(floor((o + h) * (in /
/// out)), in - 1) in float32, h = 0.5 with half_pixel_centers else 0.
void resize_nearest(const void* in, Shape4 in_shape, void* out, Shape4 out_shape, size_t elem_size,
                    bool half_pixel_centers);

/// Bilinear resizing as PyTorch's upsample_bilinear2d: with align_corners
/// the source position is o * (in - 1) / (out - 1), else (the half-pixel
/// centres of TFLite's half_pixel_centers) max((o + 0.5) * in / out - 0.5, 0).
void resize_bilinear_f32(const float* in, Shape4 in_shape, float* out, Shape4 out_shape, bool align_corners);

/// Adaptive average pooling: output (i, j) averages rows [floor(i H / OH),
/// ceil((i + 1) H / OH)) and the columns likewise (PyTorch's windows).
void adaptive_avg_pool2d_f32(const float* in, Shape4 in_shape, float* out, Shape4 out_shape, ActRange act);

struct QuantPoolParams {
  int32_t kernel_h, kernel_w;
  int32_t stride_h, stride_w;
  int32_t pad_top, pad_left;
  int32_t act_min, act_max;
};

/// PyTorch's pooling options beyond TFLite's (the defaults are TFLite's).
struct PoolOptions {
  int32_t dilation_h = 1, dilation_w = 1;  // max pool: taps dilation apart
  int32_t count_include_pad = 0;          // avg pool: divide by the padded window
  int32_t divisor_override = 0;           // avg pool: > 0 replaces the divisor
  int32_t pad_bottom = 0, pad_right = 0;  // bound of count_include_pad's window
  int32_t zero_point = 0;                 // the value of the taps a divisor counts beyond the in-bounds ones
  int32_t round_half_even = 0;            // avg pool: PyTorch's rounding (avg_round), zero_point the shared one
};

/// An avg pool's output from its window's sum s (the padding term
/// included) and divisor d >= 1. TFLite's (round_half_even 0): s / d
/// rounded half away from zero, (s +- d / 2) / d in C division. PyTorch's
/// q/dq model (round_half_even 1) rounds the real mean half to even, so
/// relative to the zero point zp: zp + round_half_even((s - d zp) / d). In
/// integers, with q = floor(s / d) and r = s - q d in [0, d): q + 1 when 2r
/// > d, or 2r == d and q - zp is odd, i.e. when 2r + odd > d, odd the parity
/// of q - zp; else q (no s - d zp: no overflow).
inline int32_t avg_round(int32_t s, int32_t d, const PoolOptions& o) {
  if (!o.round_half_even) {
    const int32_t half = d / 2;
    return (s > 0 ? s + half : s - half) / d;
  }
  int32_t q = s / d, r = s % d;
  if (r < 0) {  // C truncates toward zero: the floor is one lower
    q -= 1;
    r += d;
  }
  return q + (2 * r + ((q ^ o.zero_point) & 1) > d ? 1 : 0);
}

/// Max over the in-bounds taps of each window (taps dilation apart),
/// clamped. Same quantization in and out.
void max_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                   const QuantPoolParams& p, const PoolOptions& o = PoolOptions());

/// Sum of the in-bounds taps, plus zero_point for each tap the divisor
/// counts beyond them (PyTorch pads with real 0), divided by the divisor,
/// rounded (avg_round: half away from zero, or PyTorch's half to even
/// relative to the zero point), clamped. The divisor is PyTorch's: divisor_override when > 0;
/// with count_include_pad, the window clipped to [-pad_top, H + pad_bottom)
/// x [-pad_left, W + pad_right); else the in-bounds taps (TFLite's; a window
/// with none outputs clamp(0)).
void avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                   const QuantPoolParams& p, const PoolOptions& o = PoolOptions());

/// The divisor of avg_pool2d_s8's window at (iy0, ix0) = (oy * stride_h -
/// pad_top, ox * stride_w - pad_left) with `count` in-bounds taps.
inline int32_t pool_divisor(const QuantPoolParams& p, const PoolOptions& o, Shape4 in_shape, int32_t iy0,
                            int32_t ix0, int32_t count) {
  if (o.divisor_override > 0) return o.divisor_override;
  if (!o.count_include_pad) return count > 0 ? count : 1;
  const int32_t y1 = iy0 + p.kernel_h < in_shape.h + o.pad_bottom ? iy0 + p.kernel_h : in_shape.h + o.pad_bottom;
  const int32_t x1 = ix0 + p.kernel_w < in_shape.w + o.pad_right ? ix0 + p.kernel_w : in_shape.w + o.pad_right;
  const int32_t d = (y1 - iy0) * (x1 - ix0);
  return d > 0 ? d : 1;
}

/// Adaptive average pooling (PyTorch's windows: rows [floor(i H / OH),
/// ceil((i + 1) H / OH)), columns likewise), each averaged as avg_pool2d_s8
/// (all taps in bounds), clamped to [act_min, act_max]. Shared quantization.
void adaptive_avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                            int32_t act_min, int32_t act_max);

/// TFLite's ResizeBilinearInteger (double rounding) on int8 values: the four
/// neighbours' raw values weighted in 1/1024 units of the source position
/// (scale rounded to 1/1024; half_pixel_centers: TFLite's offsets), the
/// sum divided by 2^20 rounding half away from zero. Shared quantization.
void resize_bilinear_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape, bool align_corners,
                        bool half_pixel_centers);

/// max_pool2d_s8 / avg_pool2d_s8 on int16 values.
void max_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o = PoolOptions());
void avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                    const QuantPoolParams& p, const PoolOptions& o = PoolOptions());

/// adaptive_avg_pool2d_s8 on int16 values.
void adaptive_avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                             int32_t act_min, int32_t act_max);

/// Bilinear resizing of int16 values at PyTorch's exact source positions
/// (align_corners: o (in - 1) / (out - 1); half_pixel_centers: max((o + 0.5)
/// in / out - 0.5, 0); else o in / out), each neighbour weighted by its
/// fraction rounded to 1/65536; the int64 sum divided by 2^32 rounding half
/// away from zero. (TFLite's 1/1024 positions, which resize_bilinear_s8 keeps
/// for TFLite's bits, would be hundreds of int16 steps off.) Shared quantization.
void resize_bilinear_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                         bool align_corners, bool half_pixel_centers);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_POOL_RESIZE_POOL_RESIZE_H_
