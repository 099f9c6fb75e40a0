// The row paths of depthwise_conv2d_s8's fast path (conv/dwconv_s8.h, which
// tries them first and falls back to its per-pixel paths): MVE (Cortex-M55)
// and DSP (Cortex-M4, M33) kernels that keep a channel's weights in
// registers across the output pixels of its rows.
#ifndef TORCHMCU_KERNELS_FAST_CONV_DWCONV_S8_ROWS_H_
#define TORCHMCU_KERNELS_FAST_CONV_DWCONV_S8_ROWS_H_

#include <new>

#include "kernels/fast/conv/conv2d_s8.h"

#if TMCU_S8_FAST

#pragma GCC push_options
#if !TMCU_FAST_OS
#pragma GCC optimize("O2")
#endif

namespace torchmcu {
namespace portable {
namespace fast {

#if TMCU_S8_MVE

// The row-group path (depth multiplier 1, kernels up to 4x4, stride_w 1 or
// 2, no width dilation): per channel, four output rows at a time, one per
// int32 lane. Each output row gets a buffer row of column words: word bc
// holds the channel's input at column bc - pad_left of the window's rows
// (byte ky: row ky, kernel_h <= ky < 4 repeats the last one), the zero
// point where outside the input. The window of output column ox is then
// the 16 contiguous bytes at word ox * stride_w, and one VMLADAV against the
// channel's weights in the same [kx][ky] order (zero where kx >= kernel_w
// or ky >= kernel_h) is its sum. The buffer rows come from the NHWC input
// by byte gathers (8 lanes: two columns). Padded taps hold the zero point,
// so the input offset folds into the bias once per channel: bias +
// offset * (sum of the weights). Requantization is of 4 rows of one
// channel: scalar multiplier and shift (VQRDMULH, VRSHL by a register).
namespace dw {

constexpr int32_t kRows = 4;        // output rows per group: the int32 lanes
constexpr int32_t kMaxCols = 64;    // columns of a buffer row (words)
constexpr int32_t kRowBytes = 256;  // buffer row stride: VLDRW's immediate offsets reach 2 rows
// The scratch the row path takes: the row buffer, 16 bytes the windows may
// read past it, then the Plan below (aot/torchmcu/backends/portable/scratch.py
// plans it; the Plan is there, not on the stack, for the same reason).
constexpr int32_t kRowBufBytes = kRows * kRowBytes + 16;
constexpr int32_t kPlanBytes = 704;
constexpr int32_t kRowsScratch = kRowBufBytes + kPlanBytes;

// Four scalars into the four lanes: two VMOVs of two lanes each (GCC builds
// a vector from scalars one lane at a time or through the stack). Which of
// the VMOV's two lanes gets which register is left to the instruction:
// the outputs' store offsets go through the same function, so a row's
// result and its offset share a lane either way.
[[gnu::always_inline]] inline int32x4_t lanes4(int32_t a0, int32_t a1, int32_t a2, int32_t a3) {
  int32x4_t v;
  __asm__("vmov %q0[2], %q0[0], %3, %1\n\tvmov %q0[3], %q0[1], %4, %2"
          : "=&w"(v)
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3));
  return v;
}

// The window at p + kOff (word aligned: VLDRW, whose offsets reach a row
// further), p advancing kInc bytes after it: in asm, as GCC 12 keeps one
// pointer per load or recomputes the addresses.
template <int kOff, int kInc>
[[gnu::always_inline]] inline int8x16_t window(const int8_t*& p) {
  int8x16_t x;
  if constexpr (kInc == 0) {
    __asm__("vldrw.u32 %q1, [%0, #%c2]" : "+r"(p), "=w"(x) : "i"(kOff) : "memory");
  } else {
    __asm__("vldrw.u32 %q1, [%0], #%c2" : "+r"(p), "=w"(x) : "i"(kInc) : "memory");
  }
  return x;
}

// The outputs of `n` columns of the four buffer rows at buf (windows
// advancing 4 * kStride bytes per column) of one channel: VMLADAV, bias,
// requantize() (kNeg: shift < 0, t = hi - (hi < 0) rounded by VRSHL as
// requant_v; else the left shift saturating before VQRDMULH), clamp,
// offset, and a scatter store of the 4 rows' bytes (row offsets in offs).
template <bool kNeg, int kStride>
[[gnu::always_inline]] inline void columns(const int8_t* buf, int8x16_t wv, int32_t bias, int32_t m, int32_t s,
                                           int8_t* o, uint32x4_t offs, int32_t c_n, int32_t n, int32x4_t lo,
                                           int32x4_t hi, int32_t zp) {
  const int8_t* p = buf;
  const int8_t* q = buf + 2 * kRowBytes;
  for (int32_t i = 0; i < n; ++i) {
    const int8x16_t x1 = window<kRowBytes, 0>(p);
    const int32_t a1 = vmladavq_s8(x1, wv);
    const int8x16_t x0 = window<0, 4 * kStride>(p);
    const int32_t a0 = vmladavq_s8(x0, wv);
    const int8x16_t x3 = window<kRowBytes, 0>(q);
    const int32_t a3 = vmladavq_s8(x3, wv);
    const int8x16_t x2 = window<0, 4 * kStride>(q);
    const int32_t a2 = vmladavq_s8(x2, wv);
    const int32x4_t acc = vaddq_n_s32(lanes4(a0, a1, a2, a3), bias);
    int32x4_t r;
    if constexpr (kNeg) {
      const int32x4_t h = vqrdmulhq_n_s32(acc, m);
      r = vrshlq_n_s32(vaddq_s32(h, vshrq_n_s32(h, 31)), s);
    } else {
      r = vqrdmulhq_n_s32(vqshlq_r_s32(acc, s), m);
    }
    vstrbq_scatter_offset_s32(o, offs, vaddq_n_s32(vminq_s32(vmaxq_s32(r, lo), hi), zp));
    o += c_n;
  }
}

// Gather offsets of a buffer row: lane k (two columns of 4 rows) reads
// column k / 4, input row ky = min(k % 4, kernel_h - 1) of the window,
// relative to the group's first row inside the input; `pred` holds the lanes
// whose row is inside (the others get the zero point).
struct Slot {
  uint16x8_t offs;
  mve_pred16_t pred;
};

// Two input columns of the four buffer rows (at d0..d3, each advancing 8
// bytes) from src: gathers of the slots' offsets, in asm (volatile: it
// stores) as GCC 12 reloads the offsets and recomputes the addresses each
// time. kBorder: the lanes
// of rows outside the input predicated off and set to the zero point.
template <bool kBorder>
[[gnu::always_inline]] inline void gather4(const int8_t* src, int8_t*& d0, int8_t*& d1, int8_t*& d2, int8_t*& d3,
                                           const uint16x8_t (&o)[kRows], const uint32_t (&pr)[kRows],
                                           int16x8_t padv) {
  int16x8_t t;
  if constexpr (!kBorder) {
    (void)pr;
    (void)padv;
    __asm__ volatile(
        "vldrb.s16 %q4, [%5, %q6]\n\tvstrb.16 %q4, [%0], #8\n\t"
        "vldrb.s16 %q4, [%5, %q7]\n\tvstrb.16 %q4, [%1], #8\n\t"
        "vldrb.s16 %q4, [%5, %q8]\n\tvstrb.16 %q4, [%2], #8\n\t"
        "vldrb.s16 %q4, [%5, %q9]\n\tvstrb.16 %q4, [%3], #8"
        : "+l"(d0), "+l"(d1), "+l"(d2), "+l"(d3), "=&w"(t)
        : "r"(src), "w"(o[0]), "w"(o[1]), "w"(o[2]), "w"(o[3])
        : "memory");
  } else {
    int8_t** d[kRows] = {&d0, &d1, &d2, &d3};
#pragma GCC unroll 4
    for (int j = 0; j < kRows; ++j) {
      __asm__ volatile(
          "vmsr p0, %3\n\tvpst\n\tvldrbt.s16 %q1, [%2, %q4]\n\t"
          "vpsel %q1, %q1, %q5\n\tvstrb.16 %q1, [%0], #8"
          : "+l"(*d[j]), "=&w"(t)
          : "r"(src), "r"(pr[j]), "w"(o[j]), "w"(padv)
          : "memory", "p0");
    }
  }
}

// The input columns of the four buffer rows at buf (the padding columns
// hold the zero point for good), from src: two columns per gather, an odd
// last column with the one before it again.
template <bool kBorder>
[[gnu::always_inline]] inline void build_rows(const int8_t* src, int32_t c_n, int32_t n_in, int8_t* buf,
                                              const uint16x8_t (&o)[kRows], const uint32_t (&pr)[kRows],
                                              int16x8_t padv) {
  int8_t* d0 = buf;
  int8_t* d1 = buf + kRowBytes;
  int8_t* d2 = buf + 2 * kRowBytes;
  int8_t* d3 = buf + 3 * kRowBytes;
  const int32_t step = 2 * c_n;
  // In registers: the gathers' asm clobbers memory, which would reload them.
  const uint16x8_t ol[kRows] = {o[0], o[1], o[2], o[3]};
  const uint32_t pl[kRows] = {pr[0], pr[1], pr[2], pr[3]};
  int32_t k = n_in;
  for (; k >= 2; k -= 2, src += step) gather4<kBorder>(src, d0, d1, d2, d3, ol, pl, padv);
  if (k == 0) return;
  if (n_in >= 3) {
    d0 -= 4;
    d1 -= 4;
    d2 -= 4;
    d3 -= 4;
    gather4<kBorder>(src - c_n, d0, d1, d2, d3, ol, pl, padv);
    return;
  }
  const mve_pred16_t col0 = vctp16q(4);  // not a constant: GCC 12 takes a constant 0x00FF for all lanes
  for (int j = 0; j < kRows; ++j) {
    const mve_pred16_t pj = kBorder ? static_cast<mve_pred16_t>(pr[j]) : vctp16q(8);
    vstrbq_p_s16(buf + j * kRowBytes, vpselq_s16(vldrbq_gather_offset_z_s16(src, o[j], pj & col0), padv, pj), col0);
  }
}

// A row group whose window rows are not all inside the input, or a tail
// group: its own offsets, lanes and output offsets.
struct BorderGroup {
  uint16x8_t o[kRows];  // gather offsets of the slots, from input row `first`
  uint32x4_t offs4;     // output offsets of the slots
  uint32_t pr[kRows];   // lanes inside the input
  int32_t first, oy0;
  bool pred;            // some lane outside the input
};
constexpr int32_t kMaxBorder = 4;

// What the channels share.
struct Plan {
  uint16x8_t io[kRows];  // gather offsets of an interior group (slot j: j rows further)
  uint16x8_t woe, woo;   // the weights' gather offsets, even and odd window lanes
  int16x8_t padv;        // the zero point in each lane
  uint32x4_t offs4;      // output offsets of a full group
  int32x4_t lo, hi;      // clamp, before the output offset
  BorderGroup bg[kMaxBorder];
  uint32_t pe, po;       // the weights' lanes inside the kernel
  int8_t* buf;           // the 4 buffer rows
  int32_t groups, n_border, g_lo, g_hi;  // border groups: bg[0, g_lo) above [g_lo, g_hi), the rest below
  int32_t pad_left, pad_top, c_n, n_in, ow, zp, row_stride, out_row, stride_h;
};
static_assert(sizeof(Plan) <= kPlanBytes && alignof(Plan) <= 16 && kRowBufBytes % 16 == 0,
              "the Plan fits the scratch after the row buffer (scratch.py: DW_MVE_ROWS)");

// One channel, all its row groups: the weights' window vector and folded
// bias, then per group its buffer rows and outputs (one loop, so that the
// column loop is compiled once per variant).
template <int kStride, bool kNeg>
[[gnu::noinline]] void channel(const Plan& P, const int8_t* in_c, const int8_t* w_c, int32_t b, int32_t in_off,
                               int32_t m, int32_t s, int8_t* out_c) {
  const int16x8_t e = vldrbq_gather_offset_z_s16(w_c, P.woe, static_cast<mve_pred16_t>(P.pe));
  const int16x8_t o = vldrbq_gather_offset_z_s16(w_c, P.woo, static_cast<mve_pred16_t>(P.po));
  const int8x16_t wv = vreinterpretq_s8_s16(vorrq_s16(vandq_s16(e, vdupq_n_s16(0xFF)), vshlq_n_s16(o, 8)));
  const int32_t bias =
      static_cast<int32_t>(static_cast<uint32_t>(b) + static_cast<uint32_t>(in_off) * static_cast<uint32_t>(vaddvq_s8(wv)));
  int8_t* const d = P.buf + P.pad_left * 4;
  const int32_t n_mid = P.g_hi - P.g_lo;
  for (int32_t g = 0; g < P.groups; ++g) {
    const bool mid = g >= P.g_lo && g < P.g_hi;
    const BorderGroup* bg = P.bg + (g < P.g_lo ? g : g - n_mid);  // read where !mid
    const int8_t* src;
    int8_t* out;
    uint32x4_t offs4;
    if (mid) {
      src = in_c + (g * kRows * P.stride_h - P.pad_top) * P.row_stride;
      out = out_c + g * kRows * P.out_row;
      offs4 = P.offs4;
      build_rows<false>(src, P.c_n, P.n_in, d, P.io, P.bg[0].pr, P.padv);
    } else {
      src = in_c + bg->first * P.row_stride;
      out = out_c + bg->oy0 * P.out_row;
      offs4 = bg->offs4;
      if (bg->pred) {
        build_rows<true>(src, P.c_n, P.n_in, d, bg->o, bg->pr, P.padv);
      } else {
        build_rows<false>(src, P.c_n, P.n_in, d, bg->o, bg->pr, P.padv);
      }
    }
    columns<kNeg, kStride>(P.buf, wv, bias, m, s, out, offs4, P.c_n, P.ow, P.lo, P.hi, P.zp);
  }
}

inline bool depthwise_rows(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kh, int32_t kw,
                           const int32_t* bias, const int32_t* multiplier, const int32_t* shift, int8_t* out,
                           Shape4 out_shape, const QuantConvParams& p) {
  const int32_t c_n = in_shape.c, ow = out_shape.w, oh = out_shape.h, in_h = in_shape.h;
  const int32_t sw = p.stride_w, sh = p.stride_h, dh = p.dilation_h;
  if (kh > 4 || kw > 4 || p.dilation_w != 1 || (sw != 1 && sw != 2)) return false;
  if ((sw == 1 && !TMCU_FAST_DW_S1) || (sw == 2 && !TMCU_FAST_DW_S2)) return false;
  // Below 16 outputs per channel the per-channel work (weights, buffer
  // rows of a group) costs more than the per-pixel path.
  if (oh * ow < 16) return false;
  const int32_t cols = (ow - 1) * sw + kw;
  const int32_t row_stride = in_shape.w * c_n;
  const int32_t in_off = p.input_offset;
  if (cols > kMaxCols || in_off < -127 || in_off > 128) return false;
  // The row buffer is the op's planned scratch (never the stack).
  if (!scratch_fits(p, kRowsScratch)) return false;
  // Gather offsets span a window's rows and the group's 4 rows, and the
  // weights' 16 taps: 16 bits.
  if (c_n + ((kh - 1) * dh + 3 * sh) * row_stride > 65535 || 16 * c_n > 65535) return false;
  // Row groups: interior ones [g_lo, g_hi) (all window rows inside the
  // input), at most kMaxBorder others.
  const int32_t groups = (oh + kRows - 1) / kRows;
  int32_t g_lo = 0;
  while (g_lo < groups && g_lo * kRows * sh - p.pad_top < 0) ++g_lo;
  int32_t g_hi = g_lo;
  while (g_hi < groups && g_hi * kRows + kRows <= oh &&
         (g_hi * kRows + kRows - 1) * sh - p.pad_top + (kh - 1) * dh < in_h) {
    ++g_hi;
  }
  if (groups - (g_hi - g_lo) > kMaxBorder) return false;
  if (!requant_vector_ok(multiplier, shift, c_n)) return false;
  const int8_t pad = static_cast<int8_t>(-in_off);
  int8_t* const buf = p.scratch;  // kRowsScratch bytes: checked above
  Plan& P = *new (buf + kRowBufBytes) Plan;
  const uint16x8_t lane = vidupq_n_u16(0, 1);
  const uint16x8_t ky_lane = vminq_u16(vandq_u16(lane, vdupq_n_u16(3)), vdupq_n_u16(static_cast<uint16_t>(kh - 1)));
  const uint16x8_t offs = vaddq_u16(vmulq_n_u16(vshrq_n_u16(lane, 2), static_cast<uint16_t>(c_n)),
                                    vmulq_n_u16(ky_lane, static_cast<uint16_t>(dh * row_stride)));
  for (int32_t j = 0; j < kRows; ++j) P.io[j] = vaddq_n_u16(offs, static_cast<uint16_t>(j * sh * row_stride));
  // Weight taps of window lanes 2i (even) and 2i + 1 (odd): kx = lane / 4,
  // ky = lane % 4, read where kx < kernel_w and ky < kernel_h.
  const uint16x8_t we = vshlq_n_u16(lane, 1), wo = vaddq_n_u16(we, 1);
  const uint16x8_t kxe = vshrq_n_u16(we, 2), kye = vandq_u16(we, vdupq_n_u16(3));
  const uint16x8_t kxo = vshrq_n_u16(wo, 2), kyo = vandq_u16(wo, vdupq_n_u16(3));
  const uint16_t ukh = static_cast<uint16_t>(kh), ukw = static_cast<uint16_t>(kw), uc = static_cast<uint16_t>(c_n);
  P.pe = vcmphiq_u16(vdupq_n_u16(ukh), kye) & vcmphiq_u16(vdupq_n_u16(ukw), kxe);
  P.po = vcmphiq_u16(vdupq_n_u16(ukh), kyo) & vcmphiq_u16(vdupq_n_u16(ukw), kxo);
  P.woe = vmulq_n_u16(vmlaq_n_u16(kxe, kye, ukw), uc);
  P.woo = vmulq_n_u16(vmlaq_n_u16(kxo, kyo, ukw), uc);
  P.padv = vdupq_n_s16(pad);
  P.pad_left = p.pad_left;
  P.pad_top = p.pad_top;
  P.c_n = c_n;
  P.n_in = in_shape.w < cols - p.pad_left ? in_shape.w : cols - p.pad_left;
  P.ow = ow;
  P.row_stride = row_stride;
  P.stride_h = sh;
  const int32_t out_row = ow * c_n;
  P.out_row = out_row;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  P.lo = vdupq_n_s32(quant.lo);
  P.hi = vdupq_n_s32(quant.hi);
  P.zp = quant.offset;
  P.offs4 = vreinterpretq_u32_s32(lanes4(0, out_row, 2 * out_row, 3 * out_row));
  P.g_lo = g_lo;
  P.g_hi = g_hi;
  P.groups = groups;
  P.n_border = groups - (g_hi - g_lo);
  for (int32_t k = 0; k < P.n_border; ++k) {
    // Slot j: output row oy0 + j (a tail group repeats its last row,
    // whose bytes it stores twice). Offsets from the first input row any
    // slot has inside.
    BorderGroup& b = P.bg[k];
    const int32_t g = k < g_lo ? k : g_hi + (k - g_lo);
    b.oy0 = g * kRows;
    const int32_t nr = oh - b.oy0 < kRows ? oh - b.oy0 : kRows;
    int32_t iy0[kRows], ky0[kRows], ky1[kRows];
    int32_t first = in_h;
    for (int32_t j = 0; j < kRows; ++j) {
      iy0[j] = (b.oy0 + (j < nr ? j : nr - 1)) * sh - p.pad_top;
      int32_t a = 0, e = kh;
      while (a < kh && iy0[j] + a * dh < 0) ++a;
      while (e > a && iy0[j] + (e - 1) * dh >= in_h) --e;
      ky0[j] = a;
      ky1[j] = e;
      if (a < e && iy0[j] + a * dh < first) first = iy0[j] + a * dh;
    }
    if (first == in_h) first = 0;  // no row inside: all lanes off
    b.first = first;
    b.pred = false;
    for (int32_t j = 0; j < kRows; ++j) {
      const int16x8_t ky = vreinterpretq_s16_u16(ky_lane);
      b.pr[j] = vcmpgeq_n_s16(ky, static_cast<int16_t>(ky0[j])) & vcmpltq_n_s16(ky, static_cast<int16_t>(ky1[j]));
      b.o[j] = vaddq_n_u16(offs, static_cast<uint16_t>((iy0[j] - first) * row_stride));
      b.pred |= ky0[j] != 0 || ky1[j] != kh;
    }
    b.offs4 = vreinterpretq_u32_s32(
        lanes4(0, (nr > 1 ? 1 : 0) * out_row, (nr > 2 ? 2 : nr - 1) * out_row, (nr - 1) * out_row));
  }
  // The padding columns hold the zero point for good; the windows read up
  // to 12 bytes past a row's columns, against zero weights: defined bytes.
  for (int32_t i = 0; i < kRowBufBytes; i += 16) vstrbq_s8(buf + i, vdupq_n_s8(pad));
  P.buf = buf;
  // Per channel: shift < 0 (requant_v's rounding right shift) or not.
  // A stride the image leaves out (returned above) instantiates the other's.
  constexpr int S1 = TMCU_FAST_DW_S1 ? 1 : TMCU_FAST_DW_S2 ? 2 : 1, S2 = TMCU_FAST_DW_S2 ? 2 : S1;
  const auto neg = sw == 1 ? channel<S1, true> : channel<S2, true>;
  const auto nonneg = sw == 1 ? channel<S1, false> : channel<S2, false>;
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_h * row_stride;
    int8_t* out_n = out + n * oh * out_row;
    for (int32_t c = 0; c < c_n; ++c) {
      (shift[c] < 0 ? neg : nonneg)(P, in_n + c, w + c, bias ? bias[c] : 0, in_off, multiplier[c], shift[c], out_n + c);
    }
  }
  return true;
}

}  // namespace dw

#else  // DSP

// The row path of 3x3 kernels (depth multiplier 1, stride_w 1 or 2, no
// width dilation): per channel and output row, a buffer of the window rows'
// input columns as two words per column, rows 0 and 1 as a halfword pair
// and row 2 alone (the zero point where outside the input), so that an
// output is 3 SMLADs on the pairs and 3 SMLABBs. Padded taps hold the zero
// point, so the input offset folds into the bias per channel. The weights
// are doubled (within int16) and so is the bias: the accumulator is
// 2 * acc, and SMMLAR's (2 * acc * m + 2^31) >> 32 is requantize()'s high
// multiply floor((acc * m + 2^30) / 2^31); SMMLAR adds K = 2^(e-1) +
// (zp << e) - (acc < 0) in the same instruction, so one ASR by e finishes
// the rounding (t = hi - (hi < 0), (t + 2^(e-1)) >> e: requantize()'s,
// with acc's sign for hi's, the same result where they differ as hi is 0
// there) and adds the output offset. Requires per channel shift < 0
// (e <= 20), an input offset within [-128, 128] and |bias| < 2^29 - 2^18
// (so |bias + offset * sum w| < 2^29: 2 * acc and K + hi fit int32), and
// at least 4 outputs per channel; otherwise the per-pixel path.
namespace dw {

constexpr int32_t kMaxCols = 64;      // buffer columns
constexpr int32_t kMaxPadRow = 768;  // bytes of the zero-point row that rows outside the input read

// The scratch the row path takes: the zero-point row (row_stride bytes,
// rounded to 16), then two words per buffer column, and 16 bytes of slack
// (aot/torchmcu/backends/portable/scratch.py plans it).
constexpr int32_t rows_scratch_bytes(int32_t row_stride, int32_t cols) {
  return ((row_stride + 15) & ~15) + 8 * cols + 16;
}

inline int32_t smmlar(int32_t a, int32_t b, int32_t acc) {
  int32_t r;
  __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
  return r;
}

inline int32_t pkhbt16(int32_t lo, int32_t hi) {  // lo's bottom half, hi's bottom half on top
  int32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
  return r;
}

struct Row {        // one channel
  int32_t w0, w1, w2;  // doubled weights of column kx, rows 0 and 1 as a halfword pair
  int32_t v01, v2;     // doubled weights of row 2: columns 0 and 1 as a pair, column 2
  int32_t bias2, m, e, k0;  // 2 * folded bias, multiplier, right shift, 2^(e-1) + (zp << e)
};

struct RowCtx {  // what the channels of an output row share
  int32_t* cb;     // the column buffer
  int32_t* cb_in;  // its first input column
  int32_t d1, d2;  // input rows 1 and 2 from row 0 (bytes)
  int32_t c_n, n_in, ow, lo, hi;
};

// One output row of one channel: the column buffer from x0 (row 0 of the
// window, input column 0), then the outputs.
template <int kStride, bool kClamp>
[[gnu::noinline]] void row_channel(const RowCtx& R, const Row& r, const int8_t* x0, int8_t* out) {
  const int32_t c_n = R.c_n, d1 = R.d1, d2 = R.d2;
  int32_t* d = R.cb_in;
  for (int32_t* const end = d + 2 * R.n_in; d != end; d += 2, x0 += c_n) {
    d[0] = pkhbt16(x0[0], x0[d1]);
    d[1] = x0[d2];
  }
  const int32_t w0 = r.w0, w1 = r.w1, w2 = r.w2, v01 = r.v01, v2 = r.v2;
  const int32_t bias2 = r.bias2, m = r.m, e = r.e, k0 = r.k0;
  const int32_t* cb = R.cb;
  for (int8_t* const end = out + R.ow * c_n; out != end; cb += 2 * kStride, out += c_n) {
    int32_t acc = __smlad(cb[0], w0, bias2);
    acc = __smlabb(cb[1], v01, acc);
    acc = __smlad(cb[2], w1, acc);
    acc = __smlabt(cb[3], v01, acc);
    acc = __smlad(cb[4], w2, acc);
    acc = __smlabb(cb[5], v2, acc);
    int32_t y = __ssat(smmlar(acc, m, k0 + (acc >> 31)) >> e, 8);
    if constexpr (kClamp) {
      y = y < R.lo ? R.lo : y;
      y = y > R.hi ? R.hi : y;
    }
    *out = static_cast<int8_t>(y);
  }
}

constexpr int32_t kChunk = 8;  // channels whose Row is computed at a time

inline bool depthwise_rows(const int8_t* in, Shape4 in_shape, const int8_t* w, int32_t kh, int32_t kw,
                           const int32_t* bias, const int32_t* multiplier, const int32_t* shift, int8_t* out,
                           Shape4 out_shape, const QuantConvParams& p) {
  const int32_t c_n = in_shape.c, ow = out_shape.w, oh = out_shape.h, in_h = in_shape.h;
  const int32_t sw = p.stride_w, sh = p.stride_h, dh = p.dilation_h;
  if (kh != 3 || kw != 3 || p.dilation_w != 1 || (sw != 1 && sw != 2)) return false;
  if ((sw == 1 && !TMCU_FAST_DW_S1) || (sw == 2 && !TMCU_FAST_DW_S2)) return false;
  // Below 4 outputs per channel the per-channel and per-row work costs more
  // than the per-pixel path.
  if (oh * ow < 4) return false;
  const int32_t cols = (ow - 1) * sw + kw;
  const int32_t row_stride = in_shape.w * c_n;
  const int32_t in_off = p.input_offset;
  if (cols > kMaxCols || row_stride > kMaxPadRow || in_off < -128 || in_off > 128) return false;
  const int32_t zp = p.output_offset;
  // |offset * sum w| <= 128 * 9 * 128 < 2^18: a bias within 2^29 - 2^18
  // keeps the folded one within 2^29.
  for (int32_t c = 0; c < c_n; ++c) {
    const int32_t s = shift[c];
    const int32_t b = bias ? bias[c] : 0;
    if (s >= 0 || s < -20 || b <= -(1 << 29) + (1 << 18) || b >= (1 << 29) - (1 << 18)) return false;
  }
  const int32_t pad = -in_off;
  const bool clamp = p.act_min > -128 || p.act_max < 127;
  // The zero-point row and the column buffer are the op's planned scratch
  // (never the stack): rows_scratch_bytes.
  if (!scratch_fits(p, rows_scratch_bytes(row_stride, cols))) return false;
  int8_t* const padrow = p.scratch;
  for (int32_t i = 0; i < row_stride; ++i) padrow[i] = static_cast<int8_t>(pad);
  int32_t* const cb = reinterpret_cast<int32_t*>(p.scratch + ((row_stride + 15) & ~15));
  const int32_t pair_pad = static_cast<int32_t>((static_cast<uint32_t>(pad) & 0xFFFFu) * 0x10001u);
  for (int32_t bc = 0; bc < cols; ++bc) {  // the padding columns, for good
    cb[2 * bc] = pair_pad;
    cb[2 * bc + 1] = pad;
  }
  RowCtx R;
  R.cb = cb;
  R.cb_in = cb + 2 * p.pad_left;
  R.c_n = c_n;
  R.n_in = in_shape.w < cols - p.pad_left ? in_shape.w : cols - p.pad_left;
  R.ow = ow;
  R.lo = p.act_min;
  R.hi = p.act_max;
  constexpr int S1 = TMCU_FAST_DW_S1 ? 1 : TMCU_FAST_DW_S2 ? 2 : 1, S2 = TMCU_FAST_DW_S2 ? 2 : S1;  // as above
  const auto fn = sw == 1 ? (clamp ? row_channel<S1, true> : row_channel<S1, false>)
                          : (clamp ? row_channel<S2, true> : row_channel<S2, false>);
  Row rows[kChunk];
  for (int32_t n = 0; n < out_shape.n; ++n) {
    const int8_t* in_n = in + n * in_h * row_stride;
    int8_t* out_n = out + n * oh * ow * c_n;
    for (int32_t c0 = 0; c0 < c_n; c0 += kChunk) {
      const int32_t cn = c_n - c0 < kChunk ? c_n - c0 : kChunk;
      for (int32_t j = 0; j < cn; ++j) {
        const int32_t c = c0 + j;
        Row& r = rows[j];
        int32_t a[3], b[3], d[3], sum = 0;
        for (int32_t kx = 0; kx < 3; ++kx) {
          a[kx] = 2 * w[kx * c_n + c];
          b[kx] = 2 * w[(3 + kx) * c_n + c];
          d[kx] = 2 * w[(6 + kx) * c_n + c];
          sum += a[kx] + b[kx] + d[kx];
        }
        r.w0 = pkhbt16(a[0], b[0]);
        r.w1 = pkhbt16(a[1], b[1]);
        r.w2 = pkhbt16(a[2], b[2]);
        r.v01 = pkhbt16(d[0], d[1]);
        r.v2 = d[2];
        r.bias2 = 2 * (bias ? bias[c] : 0) + in_off * sum;
        r.m = multiplier[c];
        r.e = -shift[c];
        r.k0 = (1 << (r.e - 1)) + zp * (1 << r.e);
      }
      for (int32_t oy = 0; oy < oh; ++oy) {
        const int32_t iy0 = oy * sh - p.pad_top;
        const int8_t* x[3];
        for (int32_t ky = 0; ky < 3; ++ky) {
          const int32_t iy = iy0 + ky * dh;
          x[ky] = iy >= 0 && iy < in_h ? in_n + iy * row_stride : padrow;
        }
        R.d1 = static_cast<int32_t>(x[1] - x[0]);
        R.d2 = static_cast<int32_t>(x[2] - x[0]);
        const int8_t* x0 = x[0] + c0;
        int8_t* o = out_n + oy * ow * c_n + c0;
        for (int32_t j = 0; j < cn; ++j) fn(R, rows[j], x0++, o++);
      }
    }
  }
  return true;
}

}  // namespace dw

#endif

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_CONV_DWCONV_S8_ROWS_H_
