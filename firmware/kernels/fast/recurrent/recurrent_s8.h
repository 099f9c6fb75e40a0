// Fast paths of lstm_s8 and gru_s8 (see fast.h), included by
// portable/recurrent/recurrent_s8.cc only; both weight schemes (per gate,
// per row), the arithmetic of recurrent.h and reference/recurrent.py.
//
// MVE: a step's hidden units in blocks of 4 (the H % 4 tail predicated),
// each unit a lane. A gate's 4 weight rows of the block are consecutive
// rows of w_ih and w_hh: their dot products with x_t (and h_{t-1}) go
// through the vector together (one input load feeds 4 VMLADAVAs of 16 MACs),
// then the block's requantization, sigmoid and tanh (the 256-entry table
// read by gathers), cell update and output run on the 4 lanes at once.
// requant_v is requantize() where x * 2^shift fits int32; a block whose
// gate accumulators leave that (positive shifts) is requantized per lane.
// The elementwise requantizations (cell, output, GRU r * hn and blend) take
// shifts <= 0 only (a compiler's always are: their real multipliers are
// powers of two below 1 over scales), else the generic kernel runs.
//
// DSP: each unit's 4 gates' rows against x_t and h_{t-1} by SMLAD on the
// vectors expanded once per step into SXTB16 halfword pairs (on the stack,
// up to kRnDspMax inputs), the rest per unit as the generic kernel.
//
// int8 accumulators: at most 2^16 products of at most 2^14 (the load-time
// checks bound I and H), so they fit int32 and the bias is added with
// saturation, as the generic kernel's sat32(bias + product).
#ifndef TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_H_
#define TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include "kernels/portable/common/requantize.h"
#include "kernels/portable/recurrent/recurrent.h"

// Compiled for speed whatever the image's -O (see conv/conv2d_s8.h).
#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

#if TMCU_S8_MVE

// The products of `rows` (1..4) consecutive weight rows of n int8s with v
// (or, kZp, with n copies of zp: the hidden state at its zero point), one
// lane per row; lanes from `rows` on repeat row 0.
template <bool kZp>
[[gnu::always_inline]] inline int32x4_t rn_dots(const int8_t* v, int8_t zp, const int8_t* w, int32_t n,
                                                int32_t rows) {
  const int8_t* w0 = w;
  const int8_t* w1 = rows > 1 ? w + n : w;
  const int8_t* w2 = rows > 2 ? w + 2 * n : w;
  const int8_t* w3 = rows > 3 ? w + 3 * n : w;
  const int8x16_t zv = vdupq_n_s8(zp);
  int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int32_t k = n >> 4; k > 0; --k) {
    const int8x16_t xv = kZp ? zv : vldrbq_s8(v);
    v += 16;
    a0 = vmladavaq_s8(a0, xv, vldrbq_s8(w0));
    a1 = vmladavaq_s8(a1, xv, vldrbq_s8(w1));
    a2 = vmladavaq_s8(a2, xv, vldrbq_s8(w2));
    a3 = vmladavaq_s8(a3, xv, vldrbq_s8(w3));
    w0 += 16;
    w1 += 16;
    w2 += 16;
    w3 += 16;
  }
  if ((n & 15) != 0) {  // the weights' tail lanes zero
    const mve_pred16_t p = vctp8q(static_cast<uint32_t>(n & 15));
    const int8x16_t xv = kZp ? zv : vldrbq_z_s8(v, p);
    a0 = vmladavaq_s8(a0, xv, vldrbq_z_s8(w0, p));
    a1 = vmladavaq_s8(a1, xv, vldrbq_z_s8(w1, p));
    a2 = vmladavaq_s8(a2, xv, vldrbq_z_s8(w2, p));
    a3 = vmladavaq_s8(a3, xv, vldrbq_z_s8(w3, p));
  }
  int32x4_t r = vdupq_n_s32(a0);
  r = vsetq_lane_s32(a1, r, 1);
  r = vsetq_lane_s32(a2, r, 2);
  return vsetq_lane_s32(a3, r, 3);
}

[[gnu::always_inline]] inline int32x4_t rn_sat16(int32x4_t v) {
  return vmaxq_s32(vminq_s32(v, vdupq_n_s32(32767)), vdupq_n_s32(-32768));
}

[[gnu::noinline]] int32x4_t rn_requant_lanes(int32x4_t acc, int32x4_t m, int32x4_t s) {
  int32_t a[4], mv[4], sv[4];
  vst1q_s32(a, acc);
  vst1q_s32(mv, m);
  vst1q_s32(sv, s);
  for (int j = 0; j < 4; ++j) a[j] = s8::requantize(a[j], mv[j], sv[j]);
  return vld1q_s32(a);
}

// requantize() of 4 lanes, any shift.
[[gnu::always_inline]] inline int32x4_t rn_requant(int32x4_t acc, int32x4_t m, int32x4_t s) {
  const int32x4_t up = vmaxq_s32(s, vdupq_n_s32(0));
  if (vcmpneq_s32(vqshlq_s32(acc, up), vshlq_s32(acc, up)) != 0) return rn_requant_lanes(acc, m, s);
  return requant_v(acc, m, s);
}

// One gate's 4 lanes: gate_sum of its two requantized sides (recurrent_s8.cc).
struct RnGateV {
  const int8_t* x;
  const int8_t* h;  // null: the zero point
  int32_t I, H, G, zp;
  const int32_t* bias;
  const GateQuant* q;
  // Requantized input side (and *gh the hidden side) of gate k, units j.. (rows lanes).
  [[gnu::always_inline]] int32x4_t sides(const int8_t* w_ih, const int8_t* w_hh, int32_t k, int32_t j, int32_t rows,
                  mve_pred16_t pr, int32x4_t* gh) const {
    const int32_t row = k * H + j;
    const int32x4_t ax = vqaddq_s32(rn_dots<false>(x, 0, w_ih + row * I, I, rows), vldrwq_z_s32(bias + row, pr));
    const int8_t* wh = w_hh + row * H;
    const int32x4_t dh = h != nullptr ? rn_dots<false>(h, 0, wh, H, rows) : rn_dots<true>(nullptr, int8_t(zp), wh, H, rows);
    const int32x4_t ah = vqaddq_s32(dh, vldrwq_z_s32(bias + G + row, pr));
    int32x4_t xm, xs, hm, hs;
    if (q->per_row) {
      xm = vldrwq_z_s32(q->x_multiplier + row, pr);
      xs = vldrwq_z_s32(q->x_shift + row, pr);
      hm = vldrwq_z_s32(q->h_multiplier + row, pr);
      hs = vldrwq_z_s32(q->h_shift + row, pr);
    } else {
      xm = vdupq_n_s32(q->x_multiplier[k]);
      xs = vdupq_n_s32(q->x_shift[k]);
      hm = vdupq_n_s32(q->h_multiplier[k]);
      hs = vdupq_n_s32(q->h_shift[k]);
    }
    *gh = rn_requant(ah, hm, hs);
    return rn_requant(ax, xm, xs);
  }
  int32x4_t sum(int32x4_t gx, int32x4_t gh) const {
    return q->per_row ? rn_sat16(vqaddq_s32(gx, gh)) : rn_sat16(vaddq_s32(rn_sat16(gx), rn_sat16(gh)));
  }
  int32x4_t pre(const int8_t* w_ih, const int8_t* w_hh, int32_t k, int32_t j, int32_t rows, mve_pred16_t pr) const {
    int32x4_t gh;
    const int32x4_t gx = sides(w_ih, w_hh, k, j, rows, pr, &gh);
    return sum(gx, gh);
  }
};

// sigmoid_s16(x, 0) of 4 lanes in the int16 range (|3x| >> 9 <= 192: the
// table's top is never reached).
[[gnu::always_inline]] inline int32x4_t rn_sigmoid(int32x4_t x, const uint16_t* table) {
  const int32x4_t v = vmulq_n_s32(x, 3);
  const int32x4_t a = vabsq_s32(v);
  const uint32x4_t uh = vreinterpretq_u32_s32(vshrq_n_s32(a, 9));
  const int32x4_t ua = vreinterpretq_s32_u32(vldrhq_gather_shifted_offset_u32(table, uh));
  const int32x4_t ub = vreinterpretq_s32_u32(vldrhq_gather_shifted_offset_u32(table + 1, uh));
  const int32x4_t r = vaddq_s32(vshlq_n_s32(ua, 9), vmulq_s32(vandq_s32(a, vdupq_n_s32(0x1FF)), vsubq_s32(ub, ua)));
  const int32x4_t pos = vaddq_n_s32(r, 1 << 9);
  const int32x4_t neg = vsubq_s32(vdupq_n_s32((1 << 25) + (1 << 9) - 1), r);
  return vshrq_n_s32(vpselq_s32(pos, neg, vcmpgeq_n_s32(v, 0)), 10);
}

// tanh_s16(x, left_shift) of 4 lanes.
[[gnu::always_inline]] inline int32x4_t rn_tanh(int32x4_t x, int32_t left_shift, const uint16_t* table) {
  const int32x4_t v = left_shift >= 0 ? vmulq_n_s32(x, 3 << left_shift)
                                      : vrshlq_s32(vmulq_n_s32(x, 3), vdupq_n_s32(left_shift));
  const int32x4_t a = vabsq_s32(v);
  const int32x4_t uh = vshrq_n_s32(a, 8);
  const uint32x4_t idx = vreinterpretq_u32_s32(vminq_s32(uh, vdupq_n_s32(254)));
  const int32x4_t ua = vreinterpretq_s32_u32(vldrhq_gather_shifted_offset_u32(table, idx));
  const int32x4_t ub = vreinterpretq_s32_u32(vldrhq_gather_shifted_offset_u32(table + 1, idx));
  int32x4_t r = vaddq_s32(vshlq_n_s32(ua, 8), vmulq_s32(vandq_s32(a, vdupq_n_s32(0xFF)), vsubq_s32(ub, ua)));
  r = vpselq_s32(vdupq_n_s32(int32_t(0xFFFFu << 8)), r, vcmpgeq_n_s32(uh, 255));
  const int32x4_t pos = vaddq_n_s32(r, -(1 << 23) + (1 << 7));
  const int32x4_t neg = vsubq_s32(vdupq_n_s32((1 << 23) + (1 << 7) - 1), r);
  return vshrq_n_s32(vpselq_s32(pos, neg, vcmpgeq_n_s32(v, 0)), 8);  // in the int16 range
}

inline bool rn_shift_down(int32_t s) { return s <= 0; }

bool lstm_s8_mve(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
                 const int16_t* c0, int8_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q,
                 const uint16_t* table) {
  if (!rn_shift_down(q.output_shift) || (!q.gates.per_row && (!rn_shift_down(q.forget_shift) ||
                                                              !rn_shift_down(q.cell_shift)))) {
    return false;
  }
  const int32_t Bt = s.batch, I = s.input_size, H = s.hidden_size, G = 4 * H;
  for (int32_t k = 0; k < Bt * H; ++k) c[k] = c0 != nullptr ? c0[k] : 0;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  const int32_t p = q.cell_scale_power;
  const int32_t e = p < -12 ? p : -12;
  // The fine cell's rounding shifts (recurrent_s8.cc Cell), as VRSHL counts.
  const int32x4_t sh_fc = vdupq_n_s32(-(15 + e - p)), sh_ig = vdupq_n_s32(-(30 + e));
  const int32x4_t sh_q312 = vdupq_n_s32(12 + e), sh_state = vdupq_n_s32(e - p);
  const int32_t lim = q.cell_clip << (p - e);
  const int32x4_t om = vdupq_n_s32(q.output_multiplier), os = vdupq_n_s32(q.output_shift);
  const int32x4_t fm = vdupq_n_s32(q.forget_multiplier), fs = vdupq_n_s32(q.forget_shift);
  const int32x4_t cm = vdupq_n_s32(q.cell_multiplier), cs = vdupq_n_s32(q.cell_shift);
  const int32_t lo = -128 - q.output_offset, hi = 127 - q.output_offset;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const int8_t* hp = t == first ? h0 : y + (t - dir) * Bt * H;
    for (int32_t b = 0; b < Bt; ++b) {
      const RnGateV gate{x + (t * Bt + b) * I, hp != nullptr ? hp + b * H : nullptr, I, H, G, q.output_offset,
                         bias, &q.gates};
      int8_t* yt = y + (t * Bt + b) * H;
      int16_t* cb = c + b * H;
      for (int32_t j = 0; j < H; j += 4) {
        const int32_t rows = H - j < 4 ? H - j : 4;
        const mve_pred16_t pr = vctp32q(static_cast<uint32_t>(rows));
        const int32x4_t f = rn_sigmoid(gate.pre(w_ih, w_hh, 1, j, rows, pr), table);
        const int32x4_t i = rn_sigmoid(gate.pre(w_ih, w_hh, 0, j, rows, pr), table);
        const int32x4_t g = rn_tanh(gate.pre(w_ih, w_hh, 2, j, rows, pr), 0, table);
        const int32x4_t cell = vldrhq_z_s32(cb + j, pr);
        int32x4_t tc, cv;
        if (q.gates.per_row) {
          int32x4_t v = vaddq_s32(vrshlq_s32(vmulq_s32(f, cell), sh_fc), vrshlq_s32(vmulq_s32(i, g), sh_ig));
          if (q.cell_clip > 0) v = vmaxq_s32(vminq_s32(v, vdupq_n_s32(lim)), vdupq_n_s32(-lim));
          tc = rn_tanh(rn_sat16(vrshlq_s32(v, sh_q312)), 0, table);
          cv = rn_sat16(vrshlq_s32(v, sh_state));
        } else {
          cv = rn_sat16(requant_v(vmulq_s32(f, cell), fm, fs));
          cv = rn_sat16(vaddq_s32(cv, rn_sat16(requant_v(vmulq_s32(i, g), cm, cs))));
          if (q.cell_clip > 0) cv = vmaxq_s32(vminq_s32(cv, vdupq_n_s32(q.cell_clip)), vdupq_n_s32(-q.cell_clip));
          tc = rn_tanh(cv, p + 12, table);
        }
        vstrhq_p_s32(cb + j, cv, pr);
        const int32x4_t o = rn_sigmoid(gate.pre(w_ih, w_hh, 3, j, rows, pr), table);
        const int32x4_t h = requant_v(vmulq_s32(tc, o), om, os);
        const int32x4_t hv = vminq_s32(vmaxq_s32(h, vdupq_n_s32(lo)), vdupq_n_s32(hi));
        vstrbq_p_s32(yt + j, vaddq_n_s32(hv, q.output_offset), pr);
      }
    }
  }
  return true;
}

bool gru_s8_mve(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
                int8_t* y, const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
  // The blend's two terms then stay below 2^30 and 2^31 - 2^30: their sum fits.
  if (!rn_shift_down(q.rh_shift) || q.blend_n_shift >= 0 || q.blend_h_shift >= 0) return false;
  const int32_t Bt = s.batch, I = s.input_size, H = s.hidden_size, G = 3 * H;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  const int32_t zp = q.output_offset;
  const int32x4_t rm = vdupq_n_s32(q.rh_multiplier), rs = vdupq_n_s32(q.rh_shift);
  const int32x4_t nm = vdupq_n_s32(q.blend_n_multiplier), ns = vdupq_n_s32(q.blend_n_shift);
  const int32x4_t bm = vdupq_n_s32(q.blend_h_multiplier), bs = vdupq_n_s32(q.blend_h_shift);
  const int32_t lo = -128 - zp, hi = 127 - zp;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const int8_t* hp = t == first ? h0 : y + (t - dir) * Bt * H;
    for (int32_t b = 0; b < Bt; ++b) {
      const int8_t* hb = hp != nullptr ? hp + b * H : nullptr;
      const RnGateV gate{x + (t * Bt + b) * I, hb, I, H, G, zp, bias, &q.gates};
      int8_t* yt = y + (t * Bt + b) * H;
      for (int32_t j = 0; j < H; j += 4) {
        const int32_t rows = H - j < 4 ? H - j : 4;
        const mve_pred16_t pr = vctp32q(static_cast<uint32_t>(rows));
        const int32x4_t r = rn_sigmoid(gate.pre(w_ih, w_hh, 0, j, rows, pr), table);
        const int32x4_t z = rn_sigmoid(gate.pre(w_ih, w_hh, 1, j, rows, pr), table);
        int32x4_t gh;
        const int32x4_t xn = gate.sides(w_ih, w_hh, 2, j, rows, pr, &gh);
        const int32x4_t rhn = rn_sat16(requant_v(vmulq_s32(r, rn_sat16(gh)), rm, rs));
        const int32x4_t nn = rn_tanh(gate.sum(xn, rhn), 0, table);
        const int32x4_t hprev = hb != nullptr ? vsubq_n_s32(vldrbq_z_s32(hb + j, pr), zp) : vdupq_n_s32(0);
        const int32x4_t blend = vaddq_s32(requant_v(vmulq_s32(vsubq_s32(vdupq_n_s32(32768), z), nn), nm, ns),
                                          requant_v(vmulq_s32(z, hprev), bm, bs));
        const int32x4_t hv = vminq_s32(vmaxq_s32(blend, vdupq_n_s32(lo)), vdupq_n_s32(hi));
        vstrbq_p_s32(yt + j, vaddq_n_s32(hv, zp), pr);
      }
    }
  }
  return true;
}

#endif  // TMCU_S8_MVE

}  // namespace

/// lstm_s8 and gru_s8 of recurrent.h; table: the sigmoid table
/// (recurrent_s8.cc kSigmoidTable, 256 entries).
inline bool lstm_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
                    const int16_t* c0, int8_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q,
                    const uint16_t* table) {
#if TMCU_S8_MVE
  return lstm_s8_mve(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, table);
#else
  (void)x, (void)w_ih, (void)w_hh, (void)bias, (void)h0, (void)c0, (void)y, (void)c, (void)s, (void)q, (void)table;
  return false;
#endif
}

inline bool gru_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
                   int8_t* y, const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
#if TMCU_S8_MVE
  return gru_s8_mve(x, w_ih, w_hh, bias, h0, y, s, q, table);
#else
  (void)x, (void)w_ih, (void)w_hh, (void)bias, (void)h0, (void)y, (void)s, (void)q, (void)table;
  return false;
#endif
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_H_
