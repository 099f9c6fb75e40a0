// The DSP half of recurrent_s8.h's fast paths (SMLAD on the step's inputs
// expanded once into SXTB16 halfword pairs; see that file's comment),
// included by recurrent_s8.h only (DSP builds), inside its namespace
// torchmcu::portable::fast::{anonymous}, where rn_steps and the other shared
// helpers are declared: not a header of its own. dot4_s8 and dot_s8 (the
// generic kernel's SMLAD dots) are outside the anonymous namespace.
#ifndef TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_DSP_H_
#define TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_DSP_H_

[[gnu::always_inline]] inline int32_t rn_word(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Bytes 1 and 3 of v sign-extended to halfwords.
[[gnu::always_inline]] inline int16x2_t rn_sxtb16_ror8(int32_t v) {
  int16x2_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}

// acc + 4 bytes of a row against the input's 4 bytes as SXTB16 pairs.
[[gnu::always_inline]] inline int32_t rn_mac4(int32_t acc, int16x2_t ve, int16x2_t vo, const int8_t* w) {
  const int32_t u = rn_word(w);
  return __smlad(vo, rn_sxtb16_ror8(u), __smlad(ve, __sxtb16(u), acc));
}

}  // namespace

/// The products of 4 weight rows `stride` apart (n int8s each) with v, by
/// SMLAD: each 4 bytes of v expanded once for the 4 rows (the generic
/// kernel's dot4 of recurrent_s8.cc; the sums wrap as the exact int32 ones).
inline void dot4_s8(const int8_t* v, const int8_t* w, int32_t stride, int32_t n, int32_t* out) {
  int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  const int8_t* w1 = w + stride;
  const int8_t* w2 = w1 + stride;
  const int8_t* w3 = w2 + stride;
  int32_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const int32_t x = rn_word(v + k);
    const int16x2_t ve = __sxtb16(x), vo = rn_sxtb16_ror8(x);
    a0 = rn_mac4(a0, ve, vo, w + k);
    a1 = rn_mac4(a1, ve, vo, w1 + k);
    a2 = rn_mac4(a2, ve, vo, w2 + k);
    a3 = rn_mac4(a3, ve, vo, w3 + k);
  }
  for (; k < n; ++k) {
    const int32_t x = v[k];
    a0 += x * w[k];
    a1 += x * w1[k];
    a2 += x * w2[k];
    a3 += x * w3[k];
  }
  out[0] = a0;
  out[1] = a1;
  out[2] = a2;
  out[3] = a3;
}

/// One row's product with v (the generic kernel's dot).
inline int32_t dot_s8(const int8_t* v, const int8_t* w, int32_t n) {
  int32_t a = 0, k = 0;
  for (; k + 4 <= n; k += 4) {
    const int32_t x = rn_word(v + k);
    a = rn_mac4(a, __sxtb16(x), rn_sxtb16_ror8(x), w + k);
  }
  for (; k < n; ++k) a += v[k] * w[k];
  return a;
}

namespace {

// The inputs a step expands into SXTB16 pairs on the stack (x_t and h_{t-1}
// each); longer int8 vectors take dot_s8 as they are, longer int16 ones the
// generic kernel.
constexpr int32_t kRnDspMax = 128;

// v's 4-byte groups as SXTB16 pairs: vp[2i] = bytes 0 and 2 of group i,
// vp[2i + 1] = bytes 1 and 3 (the n % 4 tail left out).
inline void rn_expand(const int8_t* v, int32_t n, int16x2_t* vp) {
  for (int32_t k = 0; k + 4 <= n; k += 4, vp += 2) {
    const int32_t x = rn_word(v + k);
    vp[0] = __sxtb16(x);
    vp[1] = rn_sxtb16_ror8(x);
  }
}

// The same pairs of int16 inputs (a16w8): vp[2i] = inputs 4i and 4i + 2,
// vp[2i + 1] = 4i + 1 and 4i + 3, as SXTB16 pairs the weights.
inline void rn_expand(const int16_t* v, int32_t n, int16x2_t* vp) {
  for (int32_t k = 0; k + 4 <= n; k += 4, vp += 2) {
    uint32_t lo, hi;
    std::memcpy(&lo, v + k, 4);
    std::memcpy(&hi, v + k + 2, 4);
    vp[0] = int16x2_t((lo & 0xFFFFu) | (hi << 16));
    vp[1] = int16x2_t((lo >> 16) | (hi & 0xFFFF0000u));
  }
}

// Two rows' products with v, given also expanded (vp): 8 inputs of both
// rows per step by hand-scheduled SMLADs (the 8 pairs by one LDM, each
// row's 8 weights by two LDRs: 21 instructions per 16 MACs), then 4, then
// the n % 4 rest. With int16 inputs (a16w8, n <= kRnDspMax) the int32 sums
// are exact too: n products of at most 2^22.
template <typename A>
[[gnu::always_inline]] inline void rn_dot2_pairs(const int16x2_t* vp, const A* v, const int8_t* w0,
                                                 const int8_t* w1, int32_t n, int32_t* o0, int32_t* o1) {
  int32_t a0 = 0, a1 = 0;
  int32_t k = n & ~7;
  if (k > 0) {
    int32_t steps = k >> 3, lo, hi, u;
    __asm__ volatile(
        "1:\n\t"
        "ldmia  %[vp]!, {r8, r9, r10, r11}\n\t"
        "ldr    %[lo], [%[w0]], #4\n\t"
        "ldr    %[hi], [%[w0]], #4\n\t"
        "sxtb16 %[u], %[lo]\n\t"
        "smlad  %[a0], r8, %[u], %[a0]\n\t"
        "sxtb16 %[lo], %[lo], ror #8\n\t"
        "smlad  %[a0], r9, %[lo], %[a0]\n\t"
        "sxtb16 %[u], %[hi]\n\t"
        "smlad  %[a0], r10, %[u], %[a0]\n\t"
        "sxtb16 %[hi], %[hi], ror #8\n\t"
        "smlad  %[a0], r11, %[hi], %[a0]\n\t"
        "ldr    %[lo], [%[w1]], #4\n\t"
        "ldr    %[hi], [%[w1]], #4\n\t"
        "sxtb16 %[u], %[lo]\n\t"
        "smlad  %[a1], r8, %[u], %[a1]\n\t"
        "sxtb16 %[lo], %[lo], ror #8\n\t"
        "smlad  %[a1], r9, %[lo], %[a1]\n\t"
        "sxtb16 %[u], %[hi]\n\t"
        "smlad  %[a1], r10, %[u], %[a1]\n\t"
        "sxtb16 %[hi], %[hi], ror #8\n\t"
        "smlad  %[a1], r11, %[hi], %[a1]\n\t"
        "subs   %[steps], %[steps], #1\n\t"
        "bne    1b\n\t"
        : [a0] "+r"(a0), [a1] "+r"(a1), [vp] "+r"(vp), [w0] "+r"(w0), [w1] "+r"(w1), [steps] "+r"(steps),
          [lo] "=&r"(lo), [hi] "=&r"(hi), [u] "=&r"(u)
        :
        : "r8", "r9", "r10", "r11", "cc", "memory");
  }
  if (k + 4 <= n) {
    a0 = rn_mac4(a0, vp[0], vp[1], w0);
    a1 = rn_mac4(a1, vp[0], vp[1], w1);
    w0 += 4;
    w1 += 4;
    k += 4;
  }
  for (int32_t r = 0; k + r < n; ++r) {
    a0 += v[k + r] * w0[r];
    a1 += v[k + r] * w1[r];
  }
  *o0 = a0;
  *o1 = a1;
}

// rn_dot2_pairs, or with vp null (v longer than kRnDspMax) dot_s8 on each row.
[[gnu::always_inline]] inline void rn_dot2(const int16x2_t* vp, const int8_t* v, const int8_t* w0, const int8_t* w1,
                                           int32_t n, int32_t* o0, int32_t* o1) {
  if (vp != nullptr) {
    rn_dot2_pairs(vp, v, w0, w1, n, o0, o1);
  } else {
    *o0 = dot_s8(v, w0, n);
    *o1 = dot_s8(v, w1, n);
  }
}

[[gnu::always_inline]] inline int32_t rn_sat16(int32_t v) { return __ssat(v, 16); }

// (v + 2^(s-1)) >> s, or v for s = 0.
[[gnu::always_inline]] inline int32_t rn_round_shift(int32_t v, int32_t s) {
  return s > 0 ? (v + (1 << (s - 1))) >> s : v;
}

// zp times the sum of a row: its product with the hidden state at its zero point.
inline int32_t rn_zp_dot(int32_t zp, const int8_t* w, int32_t n) {
  int32_t a = 0;
  for (int32_t k = 0; k < n; ++k) a += w[k];
  return zp * a;
}

// sigmoid_s16 and tanh_s16 (recurrent_s8.cc) inline, on its table.
[[gnu::always_inline]] inline int32_t rn_scaled(int32_t x, int32_t left_shift) {
  if (left_shift >= 0) return x * (3 << left_shift);
  const int32_t right = -left_shift;
  return (x * 3 + (1 << (right - 1))) >> right;
}

[[gnu::always_inline]] inline int32_t rn_sigmoid_dsp(int32_t x, const uint16_t* table) {
  const int32_t v = x * 3;
  const uint32_t a = uint32_t(v >= 0 ? v : -v);
  const uint32_t uh = a >> 9;
  uint32_t r;
  if (uh >= 255) {
    r = 0x7FFFu << 10;
  } else {
    const uint32_t ua = table[uh], ub = table[uh + 1];
    r = (ua << 9) + (a & 0x1FFu) * (ub - ua);
  }
  r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
  return int16_t(r >> 10);
}

[[gnu::always_inline]] inline int32_t rn_tanh_dsp(int32_t x, int32_t left_shift, const uint16_t* table) {
  const int32_t v = rn_scaled(x, left_shift);
  const uint32_t a = uint32_t(v >= 0 ? v : -v);
  const uint32_t uh = a >> 8;
  int32_t r;
  if (uh >= 255) {
    r = int32_t(0xFFFFu << 8);
  } else {
    const uint32_t ua = table[uh], ub = table[uh + 1];
    r = int32_t((ua << 8) + (a & 0xFFu) * (ub - ua));
  }
  r = v >= 0 ? r - (1 << 23) + (1 << 7) : -r + (1 << 23) + (1 << 7) - 1;
  return int16_t(uint32_t(r >> 8) & 0xFFFFu);
}

// One step's operands (as the MVE path's RnStep): A the activations' type,
// B the bias's (int8, int32 or a16w8, int64).
template <typename A, typename B>
struct RnDspStep {
  const A* x;
  const A* h;  // null: the zero point
  const int16x2_t* xp;  // x and h expanded (rn_expand), or null (int8 only)
  const int16x2_t* hp;
  const int8_t* w_ih;
  const int8_t* w_hh;
  const B* bias;
  const GateQuant* q;
  int32_t I, H, G, zp;
};

// requantize(x, m, s) (requantize.h), its shift <= 0 case inline.
[[gnu::always_inline]] inline int32_t rn_requant(int32_t x, int32_t m, int32_t s) {
  if (s > 0) return s8::requantize(x, m, s);
  const int32_t hi = int32_t((int64_t(x) * m + (int64_t{1} << 30)) >> 31);
  if (s == 0) return hi;
  const int32_t e = -s;
  const int32_t t = hi - int32_t(uint32_t(hi) >> 31);
  return (t >> e) + ((t >> (e - 1)) & 1);
}

// A row's side requantized: requantize(sat32(bias + acc)) (int8) or
// requantize_s64(bias + acc) (a16w8), as recurrent_s8.cc's requant.
[[gnu::always_inline]] inline int32_t rn_side(int32_t bias, int32_t acc, int32_t m, int32_t s) {
  return rn_requant(__qadd(bias, acc), m, s);
}
[[gnu::always_inline]] inline int32_t rn_side(int64_t bias, int32_t acc, int32_t m, int32_t s) {
  return requantize_s64(bias + acc, m, s);
}

// rn_store_sides by SSAT and QADD (a saturated int32 sum is out of int16
// exactly when the int64 one is).
template <bool kPerRow>
[[gnu::always_inline]] inline void rn_put(int32_t gx, int32_t gh, int16_t* pre, int32_t* xn) {
  if (xn != nullptr) {
    rn_store_sides<kPerRow>(gx, gh, pre, xn);
  } else {
    *pre = int16_t(kPerRow ? __ssat(__qadd(gx, gh), 16) : __ssat(__ssat(gx, 16) + __ssat(gh, 16), 16));
  }
}

// Gate k's pre-activations (gate_sum) of units [j0, j0 + n) into pre[0, n);
// with xn (the GRU's n gate) its hidden side saturated in pre, the input
// side clamped to +-2^17 in xn (as the MVE path). kRnDspRows rows at a
// time: their products two rows at a time (an odd count's last pair takes
// its one row twice) into ax and ah, then their requantization in a loop of
// its own, which keeps its pointers in registers (the SMLAD loops take 7).
constexpr int32_t kRnDspRows = 16;

template <bool kPerRow, typename A, typename B>
[[gnu::noinline]] void rn_rows_dsp(const RnDspStep<A, B>& st, int32_t k, int32_t j0, int32_t n, int16_t* pre,
                                   int32_t* xn) {
  const int32_t I = st.I, H = st.H;
  const GateQuant& q = *st.q;
  const int32_t row = k * H + j0, e = kPerRow ? row : k, de = kPerRow ? 1 : 0;
  const B* bx = st.bias + row;
  const B* bh = st.bias + st.G + row;
  const int32_t* xm = q.x_multiplier + e;
  const int32_t* xs = q.x_shift + e;
  const int32_t* hm = q.h_multiplier + e;
  const int32_t* hs = q.h_shift + e;
  for (int32_t r0 = 0; r0 < n; r0 += kRnDspRows) {
    const int32_t m = n - r0 < kRnDspRows ? n - r0 : kRnDspRows;
    int32_t ax[kRnDspRows + 1], ah[kRnDspRows + 1];
    const int8_t* wi = st.w_ih + (row + r0) * I;
    const int8_t* wh = st.w_hh + (row + r0) * H;
    if (st.xp != nullptr && st.hp != nullptr) {  // the usual step: both sides expanded
      const int32_t pairs = m >> 1;
      for (int32_t r = 0; r < 2 * pairs; r += 2, wi += 2 * I, wh += 2 * H) {
        rn_dot2_pairs(st.xp, st.x, wi, wi + I, I, ax + r, ax + r + 1);
        rn_dot2_pairs(st.hp, st.h, wh, wh + H, H, ah + r, ah + r + 1);
      }
      if (m & 1) {
        rn_dot2_pairs(st.xp, st.x, wi, wi, I, ax + m - 1, ax + m);
        rn_dot2_pairs(st.hp, st.h, wh, wh, H, ah + m - 1, ah + m);
      }
    } else {
      for (int32_t r = 0; r < m; r += 2, wi += 2 * I, wh += 2 * H) {
        const int32_t d = r + 1 < m ? 1 : 0;  // the pair's second row: 1, or 0 (the first again)
        if constexpr (sizeof(A) == 1) {
          rn_dot2(st.xp, st.x, wi, wi + d * I, I, ax + r, ax + r + 1);
        } else {
          rn_dot2_pairs(st.xp, st.x, wi, wi + d * I, I, ax + r, ax + r + 1);
        }
        if (st.h != nullptr) {
          if constexpr (sizeof(A) == 1) {
            rn_dot2(st.hp, st.h, wh, wh + d * H, H, ah + r, ah + r + 1);
          } else {
            rn_dot2_pairs(st.hp, st.h, wh, wh + d * H, H, ah + r, ah + r + 1);
          }
        } else {
          ah[r] = rn_zp_dot(st.zp, wh, H);
          ah[r + 1] = rn_zp_dot(st.zp, wh + d * H, H);
        }
      }
    }
    for (int32_t r = 0; r < m; ++r) {
      const int32_t gx = rn_side(bx[r], ax[r], *xm, *xs);
      const int32_t gh = rn_side(bh[r], ah[r], *hm, *hs);
      rn_put<kPerRow>(gx, gh, pre + r, xn != nullptr ? xn + r : nullptr);
      xm += de;
      xs += de;
      hm += de;
      hs += de;
    }
    bx += m;
    bh += m;
    pre += m;
    if (xn != nullptr) xn += m;
  }
}

// pass(st) for each step and batch row (rn_steps), with x_t and h_{t-1}
// expanded when they fit kRnDspMax (int16 ones always do: lstm_s16).
template <typename A, typename B, typename Pass>
[[gnu::always_inline]] inline void rn_steps_dsp(const RecurrentShape& s, const A* x, const A* h0, A* y,
                                                const int8_t* w_ih, const int8_t* w_hh, const B* bias,
                                                const GateQuant& q, int32_t G, int32_t zp, const Pass& pass) {
  const int32_t I = s.input_size, H = s.hidden_size;
  rn_steps(s, x, h0, y, [&](const A* xt, const A* hb, A* yt, int32_t b) {
    int16x2_t xe[kRnDspMax / 2], he[kRnDspMax / 2];
    const bool ex = I <= kRnDspMax, eh = hb != nullptr && H <= kRnDspMax;
    if (ex) rn_expand(xt, I, xe);
    if (eh) rn_expand(hb, H, he);
    const RnDspStep<A, B> st{xt, hb, ex ? xe : nullptr, eh ? he : nullptr, w_ih, w_hh, bias, &q, I, H, G, zp};
    pass(st, yt, b);
  });
}

template <bool kPerRow, typename A, typename B>
void rn_lstm_dsp(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q, const uint16_t* table) {
  const int32_t H = s.hidden_size;
  const int32_t p = q.cell_scale_power;
  const int32_t e = p < -12 ? p : -12;
  const int32_t sh_fc = 15 + e - p, sh_ig = 30 + e, sh_q312 = -12 - e, sh_state = p - e;
  const int32_t lim = q.cell_clip << (p - e);
  constexpr int32_t kLo = sizeof(A) == 1 ? -128 : -32768, kHi = sizeof(A) == 1 ? 127 : 32767;
  const int32_t zp = q.output_offset, lo = kLo - zp, hi = kHi - zp;
  rn_steps_dsp(s, x, h0, y, w_ih, w_hh, bias, q.gates, 4 * H, zp, [&](const RnDspStep<A, B>& st, A* yt, int32_t b) {
    int16_t* cb = c + b * H;
    rn_chunks(H, [&](int32_t j0, int32_t m) {
      int16_t pre[4 * kRnChunk];
      for (int32_t g = 0; g < 4; ++g) rn_rows_dsp<kPerRow>(st, g, j0, m, pre + g * kRnChunk, nullptr);
      for (int32_t u = 0; u < m; ++u) {
        const int32_t f = rn_sigmoid_dsp(pre[kRnChunk + u], table);
        const int32_t i = rn_sigmoid_dsp(pre[u], table);
        const int32_t g = rn_tanh_dsp(pre[2 * kRnChunk + u], 0, table);
        const int32_t cell = cb[j0 + u];
        int32_t tc, cv;
        if (kPerRow) {  // recurrent_s8.cc Cell, in 32 bits: |f c|, |i g| < 2^30, both shifts >= 1
          int32_t v = rn_round_shift(f * cell, sh_fc) + rn_round_shift(i * g, sh_ig);
          if (q.cell_clip > 0) v = v < -lim ? -lim : (v > lim ? lim : v);
          tc = rn_tanh_dsp(rn_sat16(rn_round_shift(v, sh_q312)), 0, table);
          cv = rn_sat16(rn_round_shift(v, sh_state));
        } else {
          cv = rn_sat16(s8::requantize(f * cell, q.forget_multiplier, q.forget_shift));
          cv = rn_sat16(cv + rn_sat16(s8::requantize(i * g, q.cell_multiplier, q.cell_shift)));
          if (q.cell_clip > 0) cv = cv < -q.cell_clip ? -q.cell_clip : (cv > q.cell_clip ? q.cell_clip : cv);
          tc = rn_tanh_dsp(cv, p + 12, table);
        }
        cb[j0 + u] = int16_t(cv);
        const int32_t o = rn_sigmoid_dsp(pre[3 * kRnChunk + u], table);
        const int32_t h = s8::requantize(tc * o, q.output_multiplier, q.output_shift);
        yt[j0 + u] = A((h < lo ? lo : (h > hi ? hi : h)) + zp);
      }
    });
  });
}

template <bool kPerRow, typename A, typename B>
void rn_gru_dsp(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y,
                const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
  const int32_t H = s.hidden_size;
  const int32_t zp = q.output_offset;
  constexpr int32_t kLo = sizeof(A) == 1 ? -128 : -32768, kHi = sizeof(A) == 1 ? 127 : 32767;
  rn_steps_dsp(s, x, h0, y, w_ih, w_hh, bias, q.gates, 3 * H, zp, [&](const RnDspStep<A, B>& st, A* yt, int32_t) {
    const A* hb = st.h;
    rn_chunks(H, [&](int32_t j0, int32_t m) {
      int16_t pre[3 * kRnChunk];
      int32_t xn[kRnChunk];
      for (int32_t g = 0; g < 3; ++g) rn_rows_dsp<kPerRow>(st, g, j0, m, pre + g * kRnChunk, g == 2 ? xn : nullptr);
      for (int32_t u = 0; u < m; ++u) {
        const int32_t r = rn_sigmoid_dsp(pre[u], table);
        const int32_t z = rn_sigmoid_dsp(pre[kRnChunk + u], table);
        const int32_t rhn = rn_sat16(s8::requantize(r * pre[2 * kRnChunk + u], q.rh_multiplier, q.rh_shift));
        const int32_t nn = rn_tanh_dsp(kPerRow ? rn_sat16(xn[u] + rhn) : rn_sat16(rn_sat16(xn[u]) + rhn), 0, table);
        const int32_t hprev = hb != nullptr ? hb[j0 + u] - zp : 0;
        const int64_t h = int64_t(zp) + s8::requantize((32768 - z) * nn, q.blend_n_multiplier, q.blend_n_shift) +
                          s8::requantize(z * hprev, q.blend_h_multiplier, q.blend_h_shift);
        yt[j0 + u] = A(h < kLo ? kLo : (h > kHi ? kHi : h));
      }
    });
  });
}

// The op's DSP path: false for int16 inputs longer than kRnDspMax (they are
// expanded), which take the generic kernel.
template <typename A, typename B>
bool lstm_dsp(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, const int16_t* c0, A* y,
              int16_t* c, const RecurrentShape& s, const LstmQuant& q, const uint16_t* table) {
  if (sizeof(A) == 2 && (s.input_size > kRnDspMax || s.hidden_size > kRnDspMax)) return false;
  for (int32_t k = 0; k < s.batch * s.hidden_size; ++k) c[k] = c0 != nullptr ? c0[k] : 0;
  if (q.gates.per_row) {
    rn_lstm_dsp<true>(x, w_ih, w_hh, bias, h0, y, c, s, q, table);
  } else {
    rn_lstm_dsp<false>(x, w_ih, w_hh, bias, h0, y, c, s, q, table);
  }
  return true;
}

template <typename A, typename B>
bool gru_dsp(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y,
             const RecurrentShape& s, const GruQuant& q, const uint16_t* table) {
  if (sizeof(A) == 2 && (s.input_size > kRnDspMax || s.hidden_size > kRnDspMax)) return false;
  if (q.gates.per_row) {
    rn_gru_dsp<true>(x, w_ih, w_hh, bias, h0, y, s, q, table);
  } else {
    rn_gru_dsp<false>(x, w_ih, w_hh, bias, h0, y, s, q, table);
  }
  return true;
}

#endif  // TORCHMCU_KERNELS_FAST_RECURRENT_RECURRENT_S8_DSP_H_
