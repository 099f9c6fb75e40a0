// Resizing (RESIZE_NEAREST, RESIZE_BILINEAR_F32/S8/S16) and adaptive average
// pooling (ADAPTIVE_AVG_POOL2D_F32/S8/S16) over NHWC: the source rows and
// columns are found once per output row and column, the channel loop is
// innermost and contiguous.
#include <cmath>
#include <cstring>

#include "kernels/portable/pool_resize/pool_resize.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// TFLite's GetNearestNeighbor without align_corners, in float32.
inline int32_t nearest(int32_t o, int32_t in, int32_t out, bool half_pixel) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float v = half_pixel ? (static_cast<float>(o) + 0.5f) * scale : static_cast<float>(o) * scale;
  int32_t i = static_cast<int32_t>(std::floor(v));
  i = i < in - 1 ? i : in - 1;
  return i > 0 ? i : 0;
}

// ResizeBilinearInteger's source position in 1/1024 units and its neighbours.
struct Source10 {
  int32_t v, lo, hi;
};

inline int32_t scale10(int32_t in, int32_t out, bool align_corners) {
  if (align_corners && out > 1) return ((1 << 10) * (in - 1) + (out - 1) / 2) / (out - 1);
  return ((1 << 10) * in + out / 2) / out;
}

inline Source10 source10(int32_t o, int32_t scale, bool half_pixel, int32_t in) {
  const int32_t v = half_pixel ? o * scale + scale / 2 - (1 << 9) : o * scale;
  const int32_t lo = v / (1 << 10);  // C division: a small negative v gives 0
  const int32_t hi = (v + (1 << 10) - 1) / (1 << 10);
  return Source10{v, lo > 0 ? lo : 0, hi < in - 1 ? hi : in - 1};
}

// int8 values in int32: the fractions lie in [-2^9, 2^10) (below 0 at the
// first row or column with half-pixel centres), so the four weights'
// magnitudes sum to at most (2^11)^2 and |sum| <= 2^7 * 2^22 fits int32
// (TFLite's int64 sums hold the same values).
void bilinear_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape, bool align_corners,
                 bool half_pixel) {
  const int32_t c_n = in_shape.c;
  const int64_t row = int64_t(in_shape.w) * c_n;
  const int32_t sy = scale10(in_shape.h, out_shape.h, align_corners);
  const int32_t sx = scale10(in_shape.w, out_shape.w, align_corners);
  constexpr int32_t kOne = 1 << 10;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const Source10 y = source10(oy, sy, half_pixel, in_shape.h);
      const int32_t fy = y.v - kOne * y.lo;  // in [-2^9, 2^10]: the half-pixel offset below row 0
      const int8_t* r0 = in_n + y.lo * row;
      const int8_t* r1 = in_n + y.hi * row;
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const Source10 x = source10(ox, sx, half_pixel, in_shape.w);
        const int32_t fx = x.v - kOne * x.lo;
        const int32_t w00 = (kOne - fy) * (kOne - fx), w10 = fy * (kOne - fx);
        const int32_t w01 = (kOne - fy) * fx, w11 = fy * fx;
        const int8_t* a = r0 + x.lo * c_n;
        const int8_t* b = r1 + x.lo * c_n;
        const int8_t* c = r0 + x.hi * c_n;
        const int8_t* d = r1 + x.hi * c_n;
        for (int32_t ch = 0; ch < c_n; ++ch) {
          const int32_t acc = a[ch] * w00 + b[ch] * w10 + c[ch] * w01 + d[ch] * w11;
          const int32_t round = acc > 0 ? (1 << 19) : -(1 << 19);
          *out++ = static_cast<int8_t>((acc + round) / (1 << 20));
        }
      }
    }
  }
}

// The exact source position t / den of output o (den > 0), as PyTorch's
// bilinear computes it in real numbers: align_corners o (in - 1) / (out - 1),
// half-pixel centres max((o + 0.5) in / out - 0.5, 0), else o in / out.
// Returns the lower neighbour, the upper one (clamped to the input) and
// the fraction in 1/65536 units, rounded to nearest.
struct Source16 {
  int32_t lo, hi, f;
};

inline Source16 source16(int32_t o, int32_t in, int32_t out, bool align_corners, bool half_pixel) {
  int64_t t, den;
  if (align_corners) {
    t = int64_t(o) * (in - 1);
    den = out > 1 ? out - 1 : 1;
    if (out == 1) t = 0;
  } else if (half_pixel) {
    t = (2 * int64_t(o) + 1) * in - out;
    den = 2 * int64_t(out);
    if (t < 0) t = 0;
  } else {
    t = int64_t(o) * in;
    den = out;
  }
  const int32_t lo = int32_t(t / den);
  const int64_t r = t - lo * den;
  return Source16{lo, lo < in - 1 ? lo + 1 : lo, int32_t((r * 65536 + den / 2) / den)};
}

// PyTorch's adaptive pooling window along one axis: [start, end).
inline void adaptive_window(int32_t i, int32_t in, int32_t out, int32_t* start, int32_t* end) {
  *start = int32_t(int64_t(i) * in / out);
  *end = int32_t((int64_t(i + 1) * in + out - 1) / out);
}

template <typename T>
void adaptive_integer(const T* in, Shape4 in_shape, T* out, Shape4 out_shape, int32_t lo, int32_t hi) {
  const int32_t c_n = in_shape.c;
  const int64_t row = int64_t(in_shape.w) * c_n;
  int32_t acc[s8::kAccChunk];
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const T* in_n = in + n * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      int32_t y0, y1;
      adaptive_window(oy, in_shape.h, out_shape.h, &y0, &y1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        int32_t x0, x1;
        adaptive_window(ox, in_shape.w, out_shape.w, &x0, &x1);
        const int32_t count = (y1 - y0) * (x1 - x0);
        const int32_t half = count / 2;
        for (int32_t c0 = 0; c0 < c_n; c0 += s8::kAccChunk) {
          const int32_t cn = c_n - c0 < s8::kAccChunk ? c_n - c0 : s8::kAccChunk;
          for (int32_t c = 0; c < cn; ++c) acc[c] = 0;
          for (int32_t iy = y0; iy < y1; ++iy) {
            const T* x = in_n + iy * row + x0 * c_n + c0;
            for (int32_t ix = x0; ix < x1; ++ix, x += c_n) {
              for (int32_t c = 0; c < cn; ++c) acc[c] += x[c];
            }
          }
          for (int32_t c = 0; c < cn; ++c) {
            int32_t v = (acc[c] > 0 ? acc[c] + half : acc[c] - half) / count;
            v = v < lo ? lo : v;
            v = v > hi ? hi : v;
            out[c0 + c] = static_cast<T>(v);
          }
        }
        out += c_n;
      }
    }
  }
}

}  // namespace

void resize_nearest(const void* in, Shape4 in_shape, void* out, Shape4 out_shape, size_t elem_size,
                    bool half_pixel_centers) {
  const size_t pixel = size_t(in_shape.c) * elem_size;
  const size_t row = size_t(in_shape.w) * pixel;
  const uint8_t* src = static_cast<const uint8_t*>(in);
  uint8_t* dst = static_cast<uint8_t*>(out);
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const uint8_t* in_n = src + size_t(n) * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const uint8_t* r = in_n + size_t(nearest(oy, in_shape.h, out_shape.h, half_pixel_centers)) * row;
      for (int32_t ox = 0; ox < out_shape.w; ++ox, dst += pixel) {
        std::memcpy(dst, r + size_t(nearest(ox, in_shape.w, out_shape.w, half_pixel_centers)) * pixel, pixel);
      }
    }
  }
}

void resize_bilinear_f32(const float* in, Shape4 in_shape, float* out, Shape4 out_shape, bool align_corners) {
  const int32_t c_n = in_shape.c;
  const int64_t row = int64_t(in_shape.w) * c_n;
  // PyTorch's area_pixel_compute_scale / area_pixel_compute_source_index.
  auto scale = [&](int32_t i, int32_t o) {
    if (align_corners) return o > 1 ? static_cast<float>(i - 1) / static_cast<float>(o - 1) : 0.0f;
    return static_cast<float>(i) / static_cast<float>(o);
  };
  auto source = [&](float s, int32_t o) {
    if (align_corners) return s * static_cast<float>(o);
    const float v = s * (static_cast<float>(o) + 0.5f) - 0.5f;
    return v < 0.0f ? 0.0f : v;
  };
  const float sh = scale(in_shape.h, out_shape.h), sw = scale(in_shape.w, out_shape.w);
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n = in + n * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const float fy = source(sh, oy);
      const int32_t y0 = static_cast<int32_t>(fy);
      const int32_t y1 = y0 + (y0 < in_shape.h - 1 ? 1 : 0);
      const float ly1 = fy - static_cast<float>(y0), ly0 = 1.0f - ly1;
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const float fx = source(sw, ox);
        const int32_t x0 = static_cast<int32_t>(fx);
        const int32_t x1 = x0 + (x0 < in_shape.w - 1 ? 1 : 0);
        const float lx1 = fx - static_cast<float>(x0), lx0 = 1.0f - lx1;
        const float* a = in_n + y0 * row + x0 * c_n;
        const float* b = in_n + y0 * row + x1 * c_n;
        const float* c = in_n + y1 * row + x0 * c_n;
        const float* d = in_n + y1 * row + x1 * c_n;
        for (int32_t ch = 0; ch < c_n; ++ch) {
          *out++ = ly0 * (lx0 * a[ch] + lx1 * b[ch]) + ly1 * (lx0 * c[ch] + lx1 * d[ch]);
        }
      }
    }
  }
}

void resize_bilinear_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape, bool align_corners,
                        bool half_pixel_centers) {
  bilinear_s8(in, in_shape, out, out_shape, align_corners, half_pixel_centers);
}

// int16: the exact source positions of source16, the four weights' products
// in 1/2^32 units, the int64 sum divided by 2^32 rounding half away from zero.
void resize_bilinear_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                         bool align_corners, bool half_pixel_centers) {
  const int32_t c_n = in_shape.c;
  const int64_t row = int64_t(in_shape.w) * c_n;
  constexpr int64_t kOne = 1 << 16;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int16_t* in_n = in + n * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      const Source16 y = source16(oy, in_shape.h, out_shape.h, align_corners, half_pixel_centers);
      const int16_t* r0 = in_n + y.lo * row;
      const int16_t* r1 = in_n + y.hi * row;
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        const Source16 x = source16(ox, in_shape.w, out_shape.w, align_corners, half_pixel_centers);
        const int64_t w00 = (kOne - y.f) * (kOne - x.f), w10 = y.f * (kOne - x.f);
        const int64_t w01 = (kOne - y.f) * x.f, w11 = int64_t(y.f) * x.f;
        const int16_t* a = r0 + x.lo * c_n;
        const int16_t* b = r1 + x.lo * c_n;
        const int16_t* c = r0 + x.hi * c_n;
        const int16_t* d = r1 + x.hi * c_n;
        for (int32_t ch = 0; ch < c_n; ++ch) {
          const int64_t acc = a[ch] * w00 + b[ch] * w10 + c[ch] * w01 + d[ch] * w11;  // |acc| < 2^48
          const int64_t round = acc > 0 ? (int64_t{1} << 31) : -(int64_t{1} << 31);
          *out++ = static_cast<int16_t>((acc + round) / (int64_t{1} << 32));
        }
      }
    }
  }
}

void adaptive_avg_pool2d_f32(const float* in, Shape4 in_shape, float* out, Shape4 out_shape, ActRange act) {
  const int32_t c_n = in_shape.c;
  const int64_t row = int64_t(in_shape.w) * c_n;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const float* in_n = in + n * in_shape.h * row;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      int32_t y0, y1;
      adaptive_window(oy, in_shape.h, out_shape.h, &y0, &y1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox) {
        int32_t x0, x1;
        adaptive_window(ox, in_shape.w, out_shape.w, &x0, &x1);
        for (int32_t c = 0; c < c_n; ++c) out[c] = 0.0f;
        for (int32_t iy = y0; iy < y1; ++iy) {
          const float* x = in_n + iy * row + x0 * c_n;
          for (int32_t ix = x0; ix < x1; ++ix, x += c_n) {
            for (int32_t c = 0; c < c_n; ++c) out[c] += x[c];
          }
        }
        const float count = static_cast<float>((y1 - y0) * (x1 - x0));
        for (int32_t c = 0; c < c_n; ++c) {
          float v = out[c] / count;
          v = v < act.min ? act.min : v;
          out[c] = v > act.max ? act.max : v;
        }
        out += c_n;
      }
    }
  }
}

void adaptive_avg_pool2d_s8(const int8_t* in, Shape4 in_shape, int8_t* out, Shape4 out_shape,
                            int32_t act_min, int32_t act_max) {
  adaptive_integer(in, in_shape, out, out_shape, act_min, act_max);
}

void adaptive_avg_pool2d_s16(const int16_t* in, Shape4 in_shape, int16_t* out, Shape4 out_shape,
                             int32_t act_min, int32_t act_max) {
  adaptive_integer(in, in_shape, out, out_shape, act_min, act_max);
}

}  // namespace portable
}  // namespace torchmcu
