// Fast paths of lstm_s8 and gru_s8, and of lstm_s16 and gru_s16 (a16w8: on
// MVE the gate rows' products by VMLALDAVA in 64 bits, on the DSP by SMLAD in
// 32, requantize_s64 per row, then the int8 path's elementwise part) (see fast.h), included by
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
// DSP: each gate's rows, two at a time, against x_t and h_{t-1} by SMLAD on
// the vectors expanded once per step into halfword pairs (on the stack, up to
// kRnDspMax inputs; a16w8's always: lstm_s16 and gru_s16 take no longer
// ones), then their requantization, then the rest per unit as the generic
// kernel. An a16w8 row's n <= kRnDspMax products of at most 2^22 sum exactly
// in int32.
//
// int8 accumulators: at most 2^16 products of at most 2^14 (the load-time
// checks bound I and H), so they fit int32 and the bias is added with
// saturation, as the generic kernel's sat32(bias + product).
#ifndef TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_H_
#define TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include <cstring>

#include "kernels/portable/common/requantize.h"
#include "kernels/portable/recurrent/recurrent.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

// Compiled for speed whatever the image's -O (see conv/conv2d_s8.h).
#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// Units per pass of a step: the pass's pre-activations wait on the stack,
// [G][kRnChunk] int16.
constexpr int32_t kRnChunk = 64;

// The op's steps t (in its order) and batch rows b: pass(xt, h, yt, b) with
// xt = x_t's row, h = h_{t-1}'s (null: h0 absent, at the first step), yt =
// y_t's row; in each, chunk(j0, n) for the passes of n <= kRnChunk units.
template <typename A, typename Pass>
[[gnu::always_inline]] inline void rn_steps(const RecurrentShape& s, const A* x, const A* h0, A* y, const Pass& pass) {
  const int32_t Bt = s.batch, I = s.input_size, H = s.hidden_size;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const A* hp = t == first ? h0 : y + (t - dir) * Bt * H;
    for (int32_t b = 0; b < Bt; ++b) {
      pass(x + (t * Bt + b) * I, hp != nullptr ? hp + b * H : nullptr, y + (t * Bt + b) * H, b);
    }
  }
}

template <typename Chunk>
[[gnu::always_inline]] inline void rn_chunks(int32_t H, const Chunk& chunk) {
  for (int32_t j0 = 0; j0 < H; j0 += kRnChunk) chunk(j0, H - j0 < kRnChunk ? H - j0 : kRnChunk);
}

[[gnu::always_inline]] inline int32_t rn_clamp(int64_t v, int32_t lim) {
  return int32_t(v < -lim - 1 ? -lim - 1 : (v > lim ? lim : v));
}

// One row's two requantized sides, stored as a pass keeps them: the gate's
// pre-activation (gate_sum) in *pre, or with xn (the GRU's n gate) the hidden
// side saturated in *pre and the input side clamped to +-2^17 in *xn (which
// leaves gate_sum with any int16 unchanged).
template <bool kPerRow>
[[gnu::always_inline]] inline void rn_store_sides(int32_t gx, int32_t gh, int16_t* pre, int32_t* xn) {
  if (xn != nullptr) {
    *pre = int16_t(rn_clamp(gh, 32767));
    *xn = gx < -(1 << 17) ? -(1 << 17) : (gx > (1 << 17) ? (1 << 17) : gx);
  } else {
    *pre = int16_t(kPerRow ? rn_clamp(int64_t(gx) + gh, 32767) : rn_clamp(rn_clamp(gx, 32767) + rn_clamp(gh, 32767), 32767));
  }
}

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

// The first step's hidden side when h0 is absent.
[[gnu::noinline]] int32x4_t rn_dots_zp(int32_t zp, const int8_t* w, int32_t n, int32_t rows) {
  return rn_dots<true>(nullptr, int8_t(zp), w, n, rows);
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

// requantize() of 4 lanes; check: a shift may be positive (the lanes whose
// x * 2^shift leaves int32 then take requantize() itself).
[[gnu::always_inline]] inline int32x4_t rn_requant(int32x4_t acc, int32x4_t m, int32x4_t s, bool check) {
  if (check) {
    const int32x4_t up = vmaxq_s32(s, vdupq_n_s32(0));
    if (vcmpneq_s32(vqshlq_s32(acc, up), vshlq_s32(acc, up)) != 0) return rn_requant_lanes(acc, m, s);
  }
  return requant_v(acc, m, s);
}

// The lanes of a block of units: the first `rows` (1..4; 4: unpredicated).
struct RnLanes {
  int32_t rows;
  mve_pred16_t pr;
  explicit RnLanes(int32_t n) : rows(n), pr(vctp32q(static_cast<uint32_t>(n))) {}
  int32x4_t ld(const int32_t* p) const { return rows == 4 ? vldrwq_s32(p) : vldrwq_z_s32(p, pr); }
  int32x4_t ld(const int16_t* p) const { return rows == 4 ? vldrhq_s32(p) : vldrhq_z_s32(p, pr); }
  int32x4_t ld(const int8_t* p) const { return rows == 4 ? vldrbq_s32(p) : vldrbq_z_s32(p, pr); }
  void st(int16_t* p, int32x4_t v) const {
    if (rows == 4) {
      vstrhq_s32(p, v);
    } else {
      vstrhq_p_s32(p, v, pr);
    }
  }
  void st(int8_t* p, int32x4_t v) const {
    if (rows == 4) {
      vstrbq_s32(p, v);
    } else {
      vstrbq_p_s32(p, v, pr);
    }
  }
};

// One step of one batch row: its input, previous hidden state (null: the
// zero point) and the op's weights, bias [2][G*H] and gate requantization.
template <typename A, typename B>
struct RnStepT {
  const A* x;
  const A* h;
  const int8_t* w_ih;
  const int8_t* w_hh;
  const B* bias;
  const GateQuant* q;
  int32_t I, H, G, zp;
  bool check_x, check_h;  // rn_requant's check, per side (rn_side_check)
};
using RnStep = RnStepT<int8_t, int32_t>;
using RnStep16 = RnStepT<int16_t, int64_t>;  // a16w8 (check_x, check_h unused)

// gate_sum (recurrent_s8.cc) of 4 lanes.
template <bool kPerRow>
[[gnu::always_inline]] inline int32x4_t rn_sum(int32x4_t gx, int32x4_t gh) {
  return kPerRow ? rn_sat16(vqaddq_s32(gx, gh)) : rn_sat16(vaddq_s32(rn_sat16(gx), rn_sat16(gh)));
}

// One gate's rows of a pass: their weights, bias and requantization from
// the pass's first row on (per gate: the gate's one multiplier and shift).
struct RnRows {
  const int8_t* wx;
  const int8_t* wh;
  const int32_t* bx;
  const int32_t* bh;
  const int32_t* xm;
  const int32_t* xs;
  const int32_t* hm;
  const int32_t* hs;
};

// Gate rows r.. (l.rows of them) of a pass: both sides requantized (*gh the
// hidden one).
template <bool kPerRow>
[[gnu::always_inline]] inline int32x4_t rn_sides(const RnStep& st, const RnRows& g, int32_t r, const RnLanes& l,
                                                 int32x4_t* gh) {
  const int32x4_t ax = vqaddq_s32(rn_dots<false>(st.x, 0, g.wx + r * st.I, st.I, l.rows), l.ld(g.bx + r));
  const int8_t* wh = g.wh + r * st.H;
  const int32x4_t dh = st.h != nullptr ? rn_dots<false>(st.h, 0, wh, st.H, l.rows) : rn_dots_zp(st.zp, wh, st.H, l.rows);
  const int32x4_t ah = vqaddq_s32(dh, l.ld(g.bh + r));
  const int32x4_t hm = kPerRow ? l.ld(g.hm + r) : vdupq_n_s32(*g.hm);
  const int32x4_t hs = kPerRow ? l.ld(g.hs + r) : vdupq_n_s32(*g.hs);
  *gh = rn_requant(ah, hm, hs, st.check_h);
  const int32x4_t xm = kPerRow ? l.ld(g.xm + r) : vdupq_n_s32(*g.xm);
  const int32x4_t xs = kPerRow ? l.ld(g.xs + r) : vdupq_n_s32(*g.xs);
  return rn_requant(ax, xm, xs, st.check_x);
}

template <bool kPerRow>
[[gnu::always_inline]] inline void rn_gate_group(const RnStep& st, const RnRows& g, int32_t r, const RnLanes& l,
                                                 int16_t* pre, int32_t* xn) {
  int32x4_t gh;
  const int32x4_t gx = rn_sides<kPerRow>(st, g, r, l, &gh);
  if (xn == nullptr) {
    l.st(pre + r, rn_sum<kPerRow>(gx, gh));
  } else {
    l.st(pre + r, rn_sat16(gh));
    const int32x4_t v = vmaxq_s32(vminq_s32(gx, vdupq_n_s32(1 << 17)), vdupq_n_s32(-(1 << 17)));
    if (l.rows == 4) {
      vstrwq_s32(xn + r, v);
    } else {
      vstrwq_p_s32(xn + r, v, l.pr);
    }
  }
}

// Gate k's pre-activations (gate_sum) of units [j0, j0 + n) into pre[0, n);
// with xn (the GRU's n gate) its sides instead: the hidden side saturated in
// pre, the input side in xn clamped to +-2^17 (which leaves gate_sum with
// any int16 unchanged).
template <bool kPerRow>
[[gnu::noinline]] void rn_gate_rows(const RnStep& st, int32_t k, int32_t j0, int32_t n, int16_t* pre, int32_t* xn) {
  const int32_t row = k * st.H + j0;
  const GateQuant& q = *st.q;
  const int32_t e = kPerRow ? row : k;
  const RnRows g{st.w_ih + row * st.I, st.w_hh + row * st.H, st.bias + row, st.bias + st.G + row,
                 q.x_multiplier + e, q.x_shift + e, q.h_multiplier + e, q.h_shift + e};
  int32_t r = 0;
  for (; r + 4 <= n; r += 4) rn_gate_group<kPerRow>(st, g, r, RnLanes(4), pre, xn);
  if (r < n) rn_gate_group<kPerRow>(st, g, r, RnLanes(n - r), pre, xn);
}

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

// The largest shift of s[0, n), at least 0.
inline int32_t rn_max_up(const int32_t* s, int32_t n) {
  int32_t top = 0, k = 0;
  for (; k + 4 <= n; k += 4) top = vmaxvq_s32(top, vldrwq_s32(s + k));
  for (; k < n; ++k) top = s[k] > top ? s[k] : top;
  return top;
}

// Whether rn_requant must check one side's accumulators: a shift of its n
// requantizations is positive and |bias| + K * 128 * 128 (bias [rows])
// shifted by it may leave int32.
inline bool rn_side_check(const int32_t* shift, int32_t n, const int32_t* bias, int32_t rows, int32_t K) {
  const int32_t up = rn_max_up(shift, n);
  if (up == 0) return false;
  uint32_t top = 0;
  int32_t k = 0;
  for (; k + 4 <= rows; k += 4) top = vmaxavq_s32(top, vldrwq_s32(bias + k));
  for (; k < rows; ++k) {
    const uint32_t a = bias[k] < 0 ? 0u - uint32_t(bias[k]) : uint32_t(bias[k]);
    top = a > top ? a : top;
  }
  return ((int64_t(top) + int64_t(K) * 128 * 128) << up) > INT32_MAX;
}

// The LSTM's elementwise constants, as lanes.
struct RnLstm {
  int32x4_t sh_fc, sh_ig, sh_q312, sh_state;  // the fine cell's rounding shifts (Cell), as VRSHL counts
  int32x4_t om, os, fm, fs, cm, cs;
  int32_t lim, clip, cell_left, zp, lo, hi;
  RnLstm(const LstmQuant& q, int32_t act_min, int32_t act_max) {
    const int32_t p = q.cell_scale_power;
    const int32_t e = p < -12 ? p : -12;
    sh_fc = vdupq_n_s32(-(15 + e - p));
    sh_ig = vdupq_n_s32(-(30 + e));
    sh_q312 = vdupq_n_s32(12 + e);
    sh_state = vdupq_n_s32(e - p);
    om = vdupq_n_s32(q.output_multiplier);
    os = vdupq_n_s32(q.output_shift);
    fm = vdupq_n_s32(q.forget_multiplier);
    fs = vdupq_n_s32(q.forget_shift);
    cm = vdupq_n_s32(q.cell_multiplier);
    cs = vdupq_n_s32(q.cell_shift);
    lim = q.cell_clip << (p - e);
    clip = q.cell_clip;
    cell_left = p + 12;
    zp = q.output_offset;
    lo = act_min - zp;
    hi = act_max - zp;
  }
};

// Units j.. of one LSTM step: gates, cell cb[j..] and output yt[j..].
// Units j.. of one LSTM step from their pre-activations (pre [4][kRnChunk]
// at the block): cell cb[j..] and output yt[j..].
template <bool kPerRow, typename A>
[[gnu::always_inline]] inline void rn_lstm_block(const int16_t* pre, const RnLstm& k, int32_t j, const RnLanes& l,
                                                 int16_t* cb, A* yt, const uint16_t* table) {
  const int32x4_t f = rn_sigmoid(l.ld(pre + kRnChunk), table);
  const int32x4_t i = rn_sigmoid(l.ld(pre), table);
  const int32x4_t g = rn_tanh(l.ld(pre + 2 * kRnChunk), 0, table);
  const int32x4_t cell = l.ld(cb + j);
  int32x4_t tc, cv;
  if (kPerRow) {
    int32x4_t v = vaddq_s32(vrshlq_s32(vmulq_s32(f, cell), k.sh_fc), vrshlq_s32(vmulq_s32(i, g), k.sh_ig));
    if (k.clip > 0) v = vmaxq_s32(vminq_s32(v, vdupq_n_s32(k.lim)), vdupq_n_s32(-k.lim));
    tc = rn_tanh(rn_sat16(vrshlq_s32(v, k.sh_q312)), 0, table);
    cv = rn_sat16(vrshlq_s32(v, k.sh_state));
  } else {
    cv = rn_sat16(requant_v(vmulq_s32(f, cell), k.fm, k.fs));
    cv = rn_sat16(vaddq_s32(cv, rn_sat16(requant_v(vmulq_s32(i, g), k.cm, k.cs))));
    if (k.clip > 0) cv = vmaxq_s32(vminq_s32(cv, vdupq_n_s32(k.clip)), vdupq_n_s32(-k.clip));
    tc = rn_tanh(cv, k.cell_left, table);
  }
  l.st(cb + j, cv);
  const int32x4_t o = rn_sigmoid(l.ld(pre + 3 * kRnChunk), table);
  const int32x4_t h = requant_v(vmulq_s32(tc, o), k.om, k.os);
  l.st(yt + j, vaddq_n_s32(vminq_s32(vmaxq_s32(h, vdupq_n_s32(k.lo)), vdupq_n_s32(k.hi)), k.zp));
}

// a16w8: the products of `rows` (1..4) consecutive rows of n int8 weights
// with the int16 v, 64-bit (VMLALDAVA over the weights widened to int16).
inline void rn_dots16(const int16_t* v, const int8_t* w, int32_t n, int32_t rows, int64_t* out) {
  const int8_t* w1 = rows > 1 ? w + n : w;
  const int8_t* w2 = rows > 2 ? w + 2 * n : w;
  const int8_t* w3 = rows > 3 ? w + 3 * n : w;
  int64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int32_t k = 0; k < n; k += 8) {
    const mve_pred16_t p = vctp16q(static_cast<uint32_t>(n - k));
    const int16x8_t xv = vldrhq_z_s16(v + k, p);  // zero past the tail
    a0 = vmlaldavaq_s16(a0, xv, vldrbq_z_s16(w + k, p));
    a1 = vmlaldavaq_s16(a1, xv, vldrbq_z_s16(w1 + k, p));
    a2 = vmlaldavaq_s16(a2, xv, vldrbq_z_s16(w2 + k, p));
    a3 = vmlaldavaq_s16(a3, xv, vldrbq_z_s16(w3 + k, p));
  }
  out[0] = a0;
  out[1] = a1;
  out[2] = a2;
  out[3] = a3;
}

// bias + product, wrapping in 64 bits (recurrent_s8.cc plus).
[[gnu::always_inline]] inline int64_t rn_plus(int64_t b, int64_t v) { return int64_t(uint64_t(b) + uint64_t(v)); }

// rn_gate_rows at a16w8: the products by rn_dots16, each requantized by
// requantize_s64 (as LSTM_S16's generic kernel).
template <bool kPerRow>
[[gnu::noinline]] void rn_gate_rows(const RnStep16& st, int32_t k, int32_t j0, int32_t n, int16_t* pre, int32_t* xn) {
  const int32_t I = st.I, H = st.H;
  const GateQuant& q = *st.q;
  for (int32_t r = 0; r < n; r += 4) {
    const int32_t rows = n - r < 4 ? n - r : 4;
    const int32_t row = k * H + j0 + r;
    int64_t ax[4], ah[4];
    rn_dots16(st.x, st.w_ih + row * I, I, rows, ax);
    if (st.h != nullptr) {
      rn_dots16(st.h, st.w_hh + row * H, H, rows, ah);
    } else {  // the hidden state at its zero point
      for (int32_t u = 0; u < rows; ++u) {
        const int8_t* w = st.w_hh + (row + u) * H;
        int64_t sum = 0;
        for (int32_t i = 0; i < H; ++i) sum += w[i];
        ah[u] = int64_t(st.zp) * sum;
      }
    }
    for (int32_t u = 0; u < rows; ++u) {
      const int32_t e = kPerRow ? row + u : k;
      rn_store_sides<kPerRow>(requantize_s64(rn_plus(st.bias[row + u], ax[u]), q.x_multiplier[e], q.x_shift[e]),
                              requantize_s64(rn_plus(st.bias[st.G + row + u], ah[u]), q.h_multiplier[e], q.h_shift[e]),
                              pre + r + u, xn != nullptr ? xn + r + u : nullptr);
    }
  }
}

// The checks of rn_requant (int8: rn_side_check; a16w8 takes none).
template <typename B>
inline void rn_checks(const GateQuant& q, const B* bias, int32_t gates, int32_t I, int32_t H, bool* cx, bool* ch) {
  *cx = *ch = false;
  if constexpr (sizeof(B) == 4) {
    const int32_t G = gates * H, nq = q.per_row ? G : gates;
    *cx = rn_side_check(q.x_shift, nq, bias, G, I);
    *ch = rn_side_check(q.h_shift, nq, bias + G, G, H);
  }
}

template <bool kPerRow, typename A, typename B>
void rn_lstm(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y, int16_t* c,
             const RecurrentShape& s, const LstmQuant& q, const uint16_t* table) {
  const int32_t I = s.input_size, H = s.hidden_size, G = 4 * H;
  const RnLstm k(q, sizeof(A) == 1 ? -128 : -32768, sizeof(A) == 1 ? 127 : 32767);
  bool check_x, check_h;
  rn_checks(q.gates, bias, 4, I, H, &check_x, &check_h);
  rn_steps(s, x, h0, y, [&](const A* xt, const A* hb, A* yt, int32_t b) {
    const RnStepT<A, B> st{xt, hb, w_ih, w_hh, bias, &q.gates, I, H, G, q.output_offset, check_x, check_h};
    int16_t* cb = c + b * H;
    rn_chunks(H, [&](int32_t j0, int32_t n) {
      int16_t pre[4 * kRnChunk];
      for (int32_t g = 0; g < 4; ++g) rn_gate_rows<kPerRow>(st, g, j0, n, pre + g * kRnChunk, nullptr);
      int32_t u = 0;
      for (; u + 4 <= n; u += 4) rn_lstm_block<kPerRow>(pre + u, k, j0 + u, RnLanes(4), cb, yt, table);
      if (u < n) rn_lstm_block<kPerRow>(pre + u, k, j0 + u, RnLanes(n - u), cb, yt, table);
    });
  });
}

inline bool rn_shift_down(int32_t s) { return s <= 0; }

template <typename A, typename B>
bool lstm_mve(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, const int16_t* c0, A* y,
              int16_t* c, const RecurrentShape& s, const LstmQuant& q, const uint16_t* table) {
  if (!rn_shift_down(q.output_shift) || (!q.gates.per_row && (!rn_shift_down(q.forget_shift) ||
                                                              !rn_shift_down(q.cell_shift)))) {
    return false;
  }
  const int32_t nc = s.batch * s.hidden_size;
  for (int32_t k = 0; k < nc; k += 8) {
    const mve_pred16_t p = vctp16q(static_cast<uint32_t>(nc - k));
    vstrhq_p_s16(c + k, c0 != nullptr ? vldrhq_z_s16(c0 + k, p) : vdupq_n_s16(0), p);
  }
  if (q.gates.per_row) {
    rn_lstm<true>(x, w_ih, w_hh, bias, h0, y, c, s, q, table);
  } else {
    rn_lstm<false>(x, w_ih, w_hh, bias, h0, y, c, s, q, table);
  }
  return true;
}

// The GRU's elementwise constants, as lanes.
struct RnGru {
  int32x4_t rm, rs, nm, ns, bm, bs;
  int32_t zp, lo, hi;
  RnGru(const GruQuant& q, int32_t act_min, int32_t act_max)
      : rm(vdupq_n_s32(q.rh_multiplier)), rs(vdupq_n_s32(q.rh_shift)), nm(vdupq_n_s32(q.blend_n_multiplier)),
        ns(vdupq_n_s32(q.blend_n_shift)), bm(vdupq_n_s32(q.blend_h_multiplier)), bs(vdupq_n_s32(q.blend_h_shift)),
        zp(q.output_offset), lo(act_min - q.output_offset), hi(act_max - q.output_offset) {}
};

// Units j.. of one GRU step from their pre-activations (pre [3][kRnChunk]
// at the block: r, z, hn; xn [kRnChunk]), h the previous hidden state.
template <bool kPerRow, typename A>
[[gnu::always_inline]] inline void rn_gru_block(const int16_t* pre, const int32_t* xn, const A* h, const RnGru& k,
                                                int32_t j, const RnLanes& l, A* yt, const uint16_t* table) {
  const int32x4_t r = rn_sigmoid(l.ld(pre), table);
  const int32x4_t z = rn_sigmoid(l.ld(pre + kRnChunk), table);
  const int32x4_t rhn = rn_sat16(requant_v(vmulq_s32(r, l.ld(pre + 2 * kRnChunk)), k.rm, k.rs));
  const int32x4_t nn = rn_tanh(rn_sum<kPerRow>(l.ld(xn), rhn), 0, table);
  const int32x4_t hprev = h != nullptr ? vsubq_n_s32(l.ld(h + j), k.zp) : vdupq_n_s32(0);
  const int32x4_t blend = vaddq_s32(requant_v(vmulq_s32(vsubq_s32(vdupq_n_s32(32768), z), nn), k.nm, k.ns),
                                    requant_v(vmulq_s32(z, hprev), k.bm, k.bs));
  l.st(yt + j, vaddq_n_s32(vminq_s32(vmaxq_s32(blend, vdupq_n_s32(k.lo)), vdupq_n_s32(k.hi)), k.zp));
}

template <bool kPerRow, typename A, typename B>
void rn_gru(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y,
            const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
  const int32_t I = s.input_size, H = s.hidden_size, G = 3 * H;
  const RnGru k(q, sizeof(A) == 1 ? -128 : -32768, sizeof(A) == 1 ? 127 : 32767);
  bool check_x, check_h;
  rn_checks(q.gates, bias, 3, I, H, &check_x, &check_h);
  rn_steps(s, x, h0, y, [&](const A* xt, const A* hb, A* yt, int32_t) {
    const RnStepT<A, B> st{xt, hb, w_ih, w_hh, bias, &q.gates, I, H, G, q.output_offset, check_x, check_h};
    rn_chunks(H, [&](int32_t j0, int32_t n) {
      int16_t pre[3 * kRnChunk];
      int32_t xn[kRnChunk];
      for (int32_t g = 0; g < 3; ++g) rn_gate_rows<kPerRow>(st, g, j0, n, pre + g * kRnChunk, g == 2 ? xn : nullptr);
      int32_t u = 0;
      for (; u + 4 <= n; u += 4) rn_gru_block<kPerRow>(pre + u, xn + u, hb, k, j0 + u, RnLanes(4), yt, table);
      if (u < n) rn_gru_block<kPerRow>(pre + u, xn + u, hb, k, j0 + u, RnLanes(n - u), yt, table);
    });
  });
}

template <typename A, typename B>
bool gru_mve(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y,
             const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
  // The blend's two terms then stay below 2^29 + 1 and 2^30: their sum fits.
  if (!rn_shift_down(q.rh_shift) || q.blend_n_shift >= 0 || q.blend_h_shift >= 0) return false;
  if (q.gates.per_row) {
    rn_gru<true>(x, w_ih, w_hh, bias, h0, y, s, q, table);
  } else {
    rn_gru<false>(x, w_ih, w_hh, bias, h0, y, s, q, table);
  }
  return true;
}

#endif  // TMCU_S8_MVE

#if !TMCU_S8_MVE
#include "kernels/fast/recurrent/recurrent_s8_dsp.h"  // the DSP half, inside this namespace
#endif

}  // namespace

/// lstm_s8 and gru_s8 of recurrent.h; table: the sigmoid table
/// (recurrent_s8.cc kSigmoidTable, 256 entries).
inline bool lstm_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
                    const int16_t* c0, int8_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q,
                    const uint16_t* table) {
#if TMCU_S8_MVE
  return lstm_mve(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, table);
#else
  return lstm_dsp(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, table);
#endif
}

inline bool gru_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
                   int8_t* y, const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
#if TMCU_S8_MVE
  return gru_mve(x, w_ih, w_hh, bias, h0, y, s, q, table);
#else
  return gru_dsp(x, w_ih, w_hh, bias, h0, y, s, q, table);
#endif
}

/// lstm_s16 and gru_s16 of recurrent.h (false where the fast path cannot take them).
inline bool lstm_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias,
                     const int16_t* h0, const int16_t* c0, int16_t* y, int16_t* c, const RecurrentShape& s,
                     const LstmQuant& q, const uint16_t* table) {
#if TMCU_S8_MVE
  return lstm_mve(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, table);
#else
  return lstm_dsp(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, table);
#endif
}

inline bool gru_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias,
                    const int16_t* h0, int16_t* y, const RecurrentShape& s, const GruQuant& q,
                    const uint16_t* table) {
#if TMCU_S8_MVE
  return gru_mve(x, w_ih, w_hh, bias, h0, y, s, q, table);
#else
  return gru_dsp(x, w_ih, w_hh, bias, h0, y, s, q, table);
#endif
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_H_
