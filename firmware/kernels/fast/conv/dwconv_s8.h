// Fast paths of depthwise_conv2d_s8 (see fast.h), included by
// portable/conv/conv2d_s8.cc only: the row paths of conv/dwconv_s8_rows.h first, then the
// per-pixel paths here (any kernel, stride and dilation, depth multiplier
// 1); the helpers they share with conv2d_s8's fast path (finish, wrap_add,
// ...) are in conv/conv2d_s8.h.
#ifndef TORCHMCU_KERNELS_FAST_CONV_DWCONV_S8_H_
#define TORCHMCU_KERNELS_FAST_CONV_DWCONV_S8_H_

#include "kernels/fast/conv/conv2d_s8.h"
#include "kernels/fast/conv/dwconv_s8_rows.h"

#if TMCU_S8_FAST

#pragma GCC push_options
#if !TMCU_FAST_OS
#pragma GCC optimize("O2")
#endif

namespace torchmcu {
namespace portable {
namespace fast {

// One output pixel's window: the taps [ky0, ky1) x [kx0, kx1) of its
// kernel that fall inside the input (image in_n, top-left tap at row iy0,
// column ix0), and where tap row ky of channel c starts in the input and in
// the weights (HWC).
struct Window {
  const int8_t* in_n;
  int32_t iy0, ix0, ky0, ky1, kx0, kx1;
  int32_t row_stride, c_n, kernel_w, dil_h, dil_w;

  const int8_t* x(int32_t ky, int32_t c) const {
    return in_n + (iy0 + ky * dil_h) * row_stride + (ix0 + kx0 * dil_w) * c_n + c;
  }
  const int8_t* w(const int8_t* weights, int32_t ky, int32_t c) const {
    return weights + (ky * kernel_w + kx0) * c_n + c;
  }
};

// pixel(window, out) for each output pixel in order, out advancing by the
// channel count: the walk both per-pixel paths (MVE and DSP) take.
template <typename Pixel>
inline void for_each_window(const int8_t* in, Shape4 in_shape, int32_t kernel_h, int32_t kernel_w, int8_t* out,
                            Shape4 out_shape, const QuantConvParams& p, Pixel&& pixel) {
  Window win{};
  win.c_n = in_shape.c;
  win.row_stride = in_shape.w * in_shape.c;
  win.kernel_w = kernel_w;
  win.dil_h = p.dilation_h;
  win.dil_w = p.dilation_w;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    win.in_n = in + n * in_shape.h * win.row_stride;
    for (int32_t oy = 0; oy < out_shape.h; ++oy) {
      win.iy0 = oy * p.stride_h - p.pad_top;
      s8::tap_range(win.iy0, in_shape.h, kernel_h, win.dil_h, &win.ky0, &win.ky1);
      for (int32_t ox = 0; ox < out_shape.w; ++ox, out += win.c_n) {
        win.ix0 = ox * p.stride_w - p.pad_left;
        s8::tap_range(win.ix0, in_shape.w, kernel_w, win.dil_w, &win.kx0, &win.kx1);
        pixel(win, out);  // by value: stores through int8_t* cannot alias the copy
      }
    }
  }
}

#if TMCU_S8_MVE

// Per output pixel, 16 channels (four vectors of 4 int32 lanes; the channel
// tail one vector at a time, predicated) over the window's in-bounds taps: acc += (x + offset) * w.
[[gnu::noinline]] inline bool depthwise_pixels(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kernel_h,
                         int32_t kernel_w, int32_t depth_multiplier, const int32_t* bias,
                         const int32_t* multiplier, const int32_t* shift, int8_t* out, Shape4 out_shape,
                         const QuantConvParams& p) {
  if (depth_multiplier != 1) return false;
  const int32_t c_n = in_shape.c;
  if (!requant_vector_ok(multiplier, shift, c_n)) return false;
  const int32_t in_off = p.input_offset;
  const int32_t x_step = p.dilation_w * c_n;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  for_each_window(in, in_shape, kernel_h, kernel_w, out, out_shape, p, [=](const Window win, int8_t* px) {
    int32_t c = 0;
    for (; c + 16 <= c_n; c += 16) {  // four vectors
      int32x4_t a0, a1, a2, a3;
      if (bias) {
        a0 = vldrwq_s32(bias + c);
        a1 = vldrwq_s32(bias + c + 4);
        a2 = vldrwq_s32(bias + c + 8);
        a3 = vldrwq_s32(bias + c + 12);
      } else {
        a0 = a1 = a2 = a3 = vdupq_n_s32(0);
      }
      for (int32_t ky = win.ky0; ky < win.ky1; ++ky) {
        const int8_t* x = win.x(ky, c);
        const int8_t* wt = win.w(w, ky, c);
        for (int32_t kx = win.kx0; kx < win.kx1; ++kx, x += x_step, wt += c_n) {
          a0 = vaddq_s32(a0, vmulq_s32(vaddq_n_s32(vldrbq_s32(x), in_off), vldrbq_s32(wt)));
          a1 = vaddq_s32(a1, vmulq_s32(vaddq_n_s32(vldrbq_s32(x + 4), in_off), vldrbq_s32(wt + 4)));
          a2 = vaddq_s32(a2, vmulq_s32(vaddq_n_s32(vldrbq_s32(x + 8), in_off), vldrbq_s32(wt + 8)));
          a3 = vaddq_s32(a3, vmulq_s32(vaddq_n_s32(vldrbq_s32(x + 12), in_off), vldrbq_s32(wt + 12)));
        }
      }
      const int32_t* m = multiplier + c;
      const int32_t* s = shift + c;
      vstrbq_s32(px + c, clamp_v(requant_v(a0, vldrwq_s32(m), vldrwq_s32(s)), quant));
      vstrbq_s32(px + c + 4, clamp_v(requant_v(a1, vldrwq_s32(m + 4), vldrwq_s32(s + 4)), quant));
      vstrbq_s32(px + c + 8, clamp_v(requant_v(a2, vldrwq_s32(m + 8), vldrwq_s32(s + 8)), quant));
      vstrbq_s32(px + c + 12, clamp_v(requant_v(a3, vldrwq_s32(m + 12), vldrwq_s32(s + 12)), quant));
    }
    for (; c < c_n; c += 4) {  // one vector, the tail predicated
      const mve_pred16_t pc = vctp32q(static_cast<uint32_t>(c_n - c));
      int32x4_t a0 = bias ? vldrwq_z_s32(bias + c, pc) : vdupq_n_s32(0);
      for (int32_t ky = win.ky0; ky < win.ky1; ++ky) {
        const int8_t* x = win.x(ky, c);
        const int8_t* wt = win.w(w, ky, c);
        for (int32_t kx = win.kx0; kx < win.kx1; ++kx, x += x_step, wt += c_n) {
          a0 = vaddq_s32(a0, vmulq_s32(vaddq_n_s32(vldrbq_z_s32(x, pc), in_off), vldrbq_z_s32(wt, pc)));
        }
      }
      const int32x4_t r =
          clamp_v(requant_v(a0, vldrwq_z_s32(multiplier + c, pc), vldrwq_z_s32(shift + c, pc)), quant);
      vstrbq_p_s32(px + c, r, pc);
    }
  });
  return true;
}



#else  // DSP

// Per output pixel, 4 channels at a time over the window's in-bounds taps:
// the even and the odd bytes of a word of inputs sign-extended to halfword
// pairs, the offset added to both halves (x + offset is within +-255), and
// SMLABB / SMLATT accumulate each channel's product. The channels beyond a
// multiple of 4 in C.
[[gnu::noinline]] inline bool depthwise_pixels(const int8_t* in, Shape4 in_shape, const int8_t* w,
                                                  int32_t kernel_h, int32_t kernel_w, int32_t depth_multiplier,
                                                  const int32_t* bias, const int32_t* multiplier,
                                                  const int32_t* shift, int8_t* out, Shape4 out_shape,
                                                  const QuantConvParams& p) {
  if (depth_multiplier != 1) return false;
  const int32_t c_n = in_shape.c;
  const int32_t in_off = p.input_offset;
  const int32_t off2 = static_cast<int32_t>((static_cast<uint32_t>(in_off) & 0xFFFFu) * 0x00010001u);
  const int32_t x_step = p.dilation_w * c_n;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  for_each_window(in, in_shape, kernel_h, kernel_w, out, out_shape, p, [=](const Window win, int8_t* px) {
    int32_t c = 0;
    for (; c + 4 <= c_n; c += 4) {
      int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      if (bias) {
        a0 = bias[c];
        a1 = bias[c + 1];
        a2 = bias[c + 2];
        a3 = bias[c + 3];
      }
      for (int32_t ky = win.ky0; ky < win.ky1; ++ky) {
        const int8_t* x = win.x(ky, c);
        const int8_t* wt = win.w(w, ky, c);
        for (int32_t kx = win.kx0; kx < win.kx1; ++kx, x += x_step, wt += c_n) {
          const int32_t xv = load32(x);
          const int32_t wv = load32(wt);
          const int16x2_t xe = __sadd16(__sxtb16(xv), off2);     // channels c, c + 2
          const int16x2_t xo = __sadd16(sxtb16_ror8(xv), off2);  // c + 1, c + 3
          const int16x2_t we = __sxtb16(wv);
          const int16x2_t wo = sxtb16_ror8(wv);
          a0 = __smlabb(xe, we, a0);
          a2 = __smlatt(xe, we, a2);
          a1 = __smlabb(xo, wo, a1);
          a3 = __smlatt(xo, wo, a3);
        }
      }
      px[c] = finish(a0, multiplier[c], shift[c], quant);
      px[c + 1] = finish(a1, multiplier[c + 1], shift[c + 1], quant);
      px[c + 2] = finish(a2, multiplier[c + 2], shift[c + 2], quant);
      px[c + 3] = finish(a3, multiplier[c + 3], shift[c + 3], quant);
    }
    for (; c < c_n; ++c) {
      int32_t a0 = bias ? bias[c] : 0;
      for (int32_t ky = win.ky0; ky < win.ky1; ++ky) {
        const int8_t* x = win.x(ky, c);
        const int8_t* wt = win.w(w, ky, c);
        for (int32_t kx = win.kx0; kx < win.kx1; ++kx, x += x_step, wt += c_n) a0 += (*x + in_off) * *wt;
      }
      px[c] = finish(a0, multiplier[c], shift[c], quant);
    }
  });
  return true;
}



#endif

[[gnu::noinline]] inline bool depthwise_conv2d_s8(const int8_t* in, Shape4 in_shape, const int8_t* w,
                                                  int32_t kernel_h, int32_t kernel_w, int32_t depth_multiplier,
                                                  const int32_t* bias, const int32_t* multiplier,
                                                  const int32_t* shift, int8_t* out, Shape4 out_shape,
                                                  const QuantConvParams& p) {
  if (depth_multiplier != 1) return false;
  if (dw::depthwise_rows(in, in_shape, w, kernel_h, kernel_w, bias, multiplier, shift, out, out_shape, p)) {
    return true;
  }
  return depthwise_pixels(in, in_shape, w, kernel_h, kernel_w, depth_multiplier, bias, multiplier, shift, out,
                          out_shape, p);
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_CONV_DWCONV_S8_H_
