#include "kernels/fast/recurrent/recurrent_s8.h"
#include "kernels/portable/recurrent/recurrent.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// sigmoid(i / 24) in 0.16 fixed point, i = 0..255: each sample nudged by
// half the error of linear interpolation at the middle of its step, the
// last 0xFFFF (TFLite's table; aot/torchmcu/reference/recurrent.py
// sigmoid_table_u16 computes it, tests/test_recurrent.py compares).
constexpr uint16_t kSigmoidTable[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535};

int32_t sat16(int64_t v) { return v < -32768 ? -32768 : (v > 32767 ? 32767 : int32_t(v)); }

// bias + product: wraps in 64 bits (an int64 bias is any value).
int64_t plus(int64_t bias, int64_t product) { return int64_t(uint64_t(bias) + uint64_t(product)); }
int32_t sat32(int64_t v) { return v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : int32_t(v)); }

// x * 3 * 2^left_shift, or (x * 3 + rounding) >> -left_shift.
int32_t scaled(int32_t x, int32_t left_shift) {
  if (left_shift >= 0) return x * (3 << left_shift);
  const int32_t right = -left_shift;
  return (x * 3 + (1 << (right - 1))) >> right;
}

// The requantization of a gate's product: 32-bit (int8 activations) or
// 64-bit (int16 activations, CMSIS-NN's arm_nn_requantize_s64).
int32_t requant(int64_t acc, int32_t m, int32_t s, bool wide) {
  return wide ? requantize_s64(acc, m, s) : s8::requantize(sat32(acc), m, s);
}

// A product's accumulator: 32 bits for int8 activations (n <= 2^16 terms of
// at most 2^14), 64 bits for int16 ones.
template <typename A>
struct Acc {
  using T = int64_t;
};
template <>
struct Acc<int8_t> {
  using T = int32_t;
};

template <typename A>
int64_t dot(const A* a, const int8_t* w, int32_t n) {
  typename Acc<A>::T acc = 0;
  for (int32_t k = 0; k < n; ++k) acc += int32_t(a[k]) * int32_t(w[k]);
  return acc;
}

#if TMCU_S8_DSP && !TMCU_S8_MVE
// SMLAD (kernels/fast/recurrent/recurrent_s8.h).
template <>
int64_t dot<int8_t>(const int8_t* a, const int8_t* w, int32_t n) {
  return fast::dot_s8(a, w, n);
}
#endif

// Four weight rows `stride` apart against one vector, in one pass over it:
// a unit's four gates.
template <typename A>
void dot4(const A* a, const int8_t* w, int64_t stride, int32_t n, int64_t* out) {
  typename Acc<A>::T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  const int8_t* w0 = w;
  const int8_t* w1 = w0 + stride;
  const int8_t* w2 = w1 + stride;
  const int8_t* w3 = w2 + stride;
  for (int32_t k = 0; k < n; ++k) {
    const int32_t v = a[k];
    a0 += v * w0[k];
    a1 += v * w1[k];
    a2 += v * w2[k];
    a3 += v * w3[k];
  }
  out[0] = a0;
  out[1] = a1;
  out[2] = a2;
  out[3] = a3;
}

#if TMCU_S8_DSP && !TMCU_S8_MVE
template <>
void dot4<int8_t>(const int8_t* a, const int8_t* w, int64_t stride, int32_t n, int64_t* out) {
  int32_t acc[4];
  fast::dot4_s8(a, w, int32_t(stride), n, acc);
  for (int k = 0; k < 4; ++k) out[k] = acc[k];
}
#endif

int64_t row_sum(const int8_t* w, int32_t n) {
  int64_t acc = 0;
  for (int32_t k = 0; k < n; ++k) acc += w[k];
  return acc;
}

// The sum of a gate's input-side and hidden-side products, each
// requantized into Q3.12: TFLite's scheme (per-gate weights) saturates
// each to int16 before the sum, torchmcu's (per-row weights) only the sum,
// so that a large product the other side cancels stays exact.
inline int32_t gate_sum(int32_t gx, int32_t gh, bool per_row) {
  return per_row ? sat16(int64_t(gx) + gh) : sat16(sat16(gx) + sat16(gh));
}

// One gate's pre-activation in Q3.12 (gate_sum). A null h is the hidden
// state at its zero point.
template <typename A, typename B>
struct Gate {
  const A* xt;
  const A* h;
  int32_t I, H, zp_h;
  bool wide, per_row;
  int32_t operator()(const int8_t* w_ih, const int8_t* w_hh, const B* bias, int32_t row, int32_t G, int32_t xm,
                     int32_t xs, int32_t hm, int32_t hs) const {
    const int32_t gx = requant(plus(bias[row], dot(xt, w_ih + int64_t(row) * I, I)), xm, xs, wide);
    const int8_t* wr = w_hh + int64_t(row) * H;
    const int64_t acc = plus(bias[G + row], h != nullptr ? dot(h, wr, H) : int64_t(zp_h) * row_sum(wr, H));
    return gate_sum(gx, requant(acc, hm, hs, wide), per_row);
  }
};

// (v + 2^(s-1)) >> s for s > 0: a rounding arithmetic shift.
inline int64_t round_shift(int64_t v, int32_t s) { return s > 0 ? (v + (int64_t(1) << (s - 1))) >> s : v; }

// torchmcu's cell update (per-row weights): c' = f * c + i * g summed at the
// finer of the state's scale 2^p and Q3.12 (2^e, e = min(p, -12)), rounded
// once into the int16 state; tanh reads c' at Q3.12 before that rounding.
// TFLite's (per gate) rounds f * c and i * g into the state on their own and
// reads tanh from the state.
struct Cell {
  int32_t p, e, clip;
  // Returns the new state; *q312 is c' in Q3.12 for tanh.
  int16_t update(int32_t f, int32_t c, int32_t i, int32_t g, int32_t* q312) const {
    int64_t v = round_shift(int64_t(f) * c, 15 + e - p) + round_shift(int64_t(i) * g, 30 + e);
    if (clip > 0) {
      const int64_t lim = int64_t(clip) << (p - e);
      v = v < -lim ? -lim : (v > lim ? lim : v);
    }
    *q312 = sat16(round_shift(v, -12 - e));
    return int16_t(sat16(round_shift(v, p - e)));
  }
};

template <typename A, typename B>
void lstm_int(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, const int16_t* c0,
              A* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q, int32_t lo, int32_t hi, bool wide) {
  const int32_t Bt = s.batch, I = s.input_size, H = s.hidden_size, G = 4 * H;
  for (int32_t k = 0; k < Bt * H; ++k) c[k] = c0 != nullptr ? c0[k] : 0;
  const GateQuant& g = q.gates;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  const int32_t cell_shift = q.cell_scale_power + 12;
  const int32_t p = q.cell_scale_power;
  const Cell fine{p, p < -12 ? p : -12, q.cell_clip};
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const A* hp = t == first ? h0 : y + int64_t(t - dir) * Bt * H;
    for (int32_t b = 0; b < Bt; ++b) {
      const Gate<A, B> gate{x + (int64_t(t) * Bt + b) * I, hp != nullptr ? hp + b * H : nullptr, I, H,
                            q.output_offset, wide, g.per_row};
      A* yt = y + (int64_t(t) * Bt + b) * H;
      for (int32_t j = 0; j < H; ++j) {
        int64_t ax[4], ah[4];
        dot4(gate.xt, w_ih + int64_t(j) * I, int64_t(H) * I, I, ax);
        if (gate.h != nullptr) {
          dot4(gate.h, w_hh + int64_t(j) * H, int64_t(H) * H, H, ah);
        } else {  // the hidden state at its zero point
          for (int32_t k = 0; k < 4; ++k) ah[k] = int64_t(q.output_offset) * row_sum(w_hh + int64_t(k * H + j) * H, H);
        }
        auto pre = [&](int32_t k) {
          const int32_t row = k * H + j;
          const int32_t e = g.at(k, j);
          return gate_sum(requant(plus(bias[row], ax[k]), g.x_multiplier[e], g.x_shift[e], wide),
                          requant(plus(bias[G + row], ah[k]), g.h_multiplier[e], g.h_shift[e], wide), g.per_row);
        };
        int16_t& cell = c[b * H + j];
        const int32_t f = sigmoid_s16(pre(1), 0);
        const int32_t i = sigmoid_s16(pre(0), 0);
        const int32_t gg = tanh_s16(pre(2), 0);
        int32_t tc;
        if (g.per_row) {
          int32_t c312;
          cell = fine.update(f, cell, i, gg, &c312);
          tc = tanh_s16(c312, 0);
        } else {
          int32_t cv = sat16(s8::requantize(f * int32_t(cell), q.forget_multiplier, q.forget_shift));
          cv = sat16(cv + sat16(s8::requantize(i * gg, q.cell_multiplier, q.cell_shift)));
          if (q.cell_clip > 0) cv = cv < -q.cell_clip ? -q.cell_clip : (cv > q.cell_clip ? q.cell_clip : cv);
          cell = int16_t(cv);
          tc = tanh_s16(cv, cell_shift);
        }
        const int32_t o = sigmoid_s16(pre(3), 0);
        const int64_t h = int64_t(q.output_offset) + s8::requantize(tc * o, q.output_multiplier, q.output_shift);
        yt[j] = A(h < lo ? lo : (h > hi ? hi : h));
      }
    }
  }
}

}  // namespace

int16_t sigmoid_s16(int32_t x, int32_t left_shift) {
  const int32_t v = scaled(x, left_shift);
  const uint32_t a = uint32_t(v >= 0 ? v : -v);
  const uint32_t uh = a >> 9;
  uint32_t r;
  if (uh >= 255) {
    r = 0x7FFFu << 10;
  } else {
    const uint32_t ua = kSigmoidTable[uh];
    const uint32_t ub = kSigmoidTable[uh + 1];
    r = (ua << 9) + (a & 0x1FFu) * (ub - ua);
  }
  r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
  return int16_t(r >> 10);
}

int16_t tanh_s16(int32_t x, int32_t left_shift) {
  const int32_t v = scaled(x, left_shift);
  const uint32_t a = uint32_t(v >= 0 ? v : -v);
  const uint32_t uh = a >> 8;
  int32_t r;
  if (uh >= 255) {
    r = int32_t(0xFFFFu << 8);
  } else {
    const uint32_t ua = kSigmoidTable[uh];
    const uint32_t ub = kSigmoidTable[uh + 1];
    r = int32_t((ua << 8) + (a & 0xFFu) * (ub - ua));
  }
  r = v >= 0 ? r - (1 << 23) + (1 << 7) : -r + (1 << 23) + (1 << 7) - 1;
  return int16_t(uint32_t(r >> 8) & 0xFFFFu);
}

void lstm_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
             const int16_t* c0, int8_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q) {
#if TMCU_S8_FAST
  if (fast::lstm_s8(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, kSigmoidTable)) return;
#endif
  lstm_int(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, -128, 127, false);
}

void lstm_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias, const int16_t* h0,
              const int16_t* c0, int16_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q) {
#if TMCU_S8_FAST
  if (fast::lstm_s16(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, kSigmoidTable)) return;
#endif
  lstm_int(x, w_ih, w_hh, bias, h0, c0, y, c, s, q, -32768, 32767, true);
}

namespace {

template <typename A, typename B>
void gru_int(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y,
             const RecurrentShape& s, const GruQuant& q, int32_t lo, int32_t hi, bool wide) {
  const int32_t Bt = s.batch, I = s.input_size, H = s.hidden_size, G = 3 * H;
  const GateQuant& g = q.gates;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  const int32_t zp = q.output_offset;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const A* hp = t == first ? h0 : y + int64_t(t - dir) * Bt * H;
    for (int32_t b = 0; b < Bt; ++b) {
      const A* xt = x + (int64_t(t) * Bt + b) * I;
      const A* hb = hp != nullptr ? hp + b * H : nullptr;
      const Gate<A, B> gate{xt, hb, I, H, zp, wide, g.per_row};
      A* yt = y + (int64_t(t) * Bt + b) * H;
      for (int32_t j = 0; j < H; ++j) {
        const int32_t er = g.at(0, j), ez = g.at(1, j), en = g.at(2, j);
        const int32_t r = sigmoid_s16(gate(w_ih, w_hh, bias, j, G, g.x_multiplier[er], g.x_shift[er],
                                           g.h_multiplier[er], g.h_shift[er]), 0);
        const int32_t z = sigmoid_s16(gate(w_ih, w_hh, bias, H + j, G, g.x_multiplier[ez], g.x_shift[ez],
                                           g.h_multiplier[ez], g.h_shift[ez]), 0);
        const int32_t row = 2 * H + j;
        const int8_t* wr = w_hh + int64_t(row) * H;
        const int64_t acc_h = plus(bias[G + row], hb != nullptr ? dot(hb, wr, H) : int64_t(zp) * row_sum(wr, H));
        const int32_t hn = sat16(requant(acc_h, g.h_multiplier[en], g.h_shift[en], wide));
        const int32_t rhn = sat16(s8::requantize(r * hn, q.rh_multiplier, q.rh_shift));
        const int64_t acc_x = plus(bias[row], dot(xt, w_ih + int64_t(row) * I, I));
        const int32_t xn = requant(acc_x, g.x_multiplier[en], g.x_shift[en], wide);
        const int32_t nn = tanh_s16(gate_sum(xn, rhn, g.per_row), 0);
        const int32_t hprev = hb != nullptr ? hb[j] - zp : 0;
        const int64_t h = int64_t(zp) + s8::requantize((32768 - z) * nn, q.blend_n_multiplier, q.blend_n_shift) +
                          s8::requantize(z * hprev, q.blend_h_multiplier, q.blend_h_shift);
        yt[j] = A(h < lo ? lo : (h > hi ? hi : h));
      }
    }
  }
}

template <typename A, typename B>
void rnn_int(const A* x, const int8_t* w_ih, const int8_t* w_hh, const B* bias, const A* h0, A* y,
             const RecurrentShape& s, const RnnQuant& q, int32_t lo, int32_t hi, bool wide) {
  const int32_t Bt = s.batch, I = s.input_size, H = s.hidden_size;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const A* hp = t == first ? h0 : y + int64_t(t - dir) * Bt * H;
    for (int32_t b = 0; b < Bt; ++b) {
      const Gate<A, B> gate{x + (int64_t(t) * Bt + b) * I, hp != nullptr ? hp + b * H : nullptr, I, H,
                            q.output_offset, wide, false};
      A* yt = y + (int64_t(t) * Bt + b) * H;
      for (int32_t j = 0; j < H; ++j) {
        const int32_t pre = gate(w_ih, w_hh, bias, j, H, q.x_multiplier, q.x_shift, q.h_multiplier, q.h_shift);
        const int32_t v = q.relu ? (pre > 0 ? pre : 0) : tanh_s16(pre, 0);
        const int64_t h = int64_t(q.output_offset) + s8::requantize(v, q.output_multiplier, q.output_shift);
        yt[j] = A(h < lo ? lo : (h > hi ? hi : h));
      }
    }
  }
}

}  // namespace

void gru_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
            int8_t* y, const RecurrentShape& s, const GruQuant& q) {
#if TMCU_S8_FAST
  if (fast::gru_s8(x, w_ih, w_hh, bias, h0, y, s, q, kSigmoidTable)) return;
#endif
  gru_int(x, w_ih, w_hh, bias, h0, y, s, q, -128, 127, false);
}

void gru_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias, const int16_t* h0,
             int16_t* y, const RecurrentShape& s, const GruQuant& q) {
#if TMCU_S8_FAST
  if (fast::gru_s16(x, w_ih, w_hh, bias, h0, y, s, q, kSigmoidTable)) return;
#endif
  gru_int(x, w_ih, w_hh, bias, h0, y, s, q, -32768, 32767, true);
}

void rnn_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
            int8_t* y, const RecurrentShape& s, const RnnQuant& q) {
  rnn_int(x, w_ih, w_hh, bias, h0, y, s, q, -128, 127, false);
}

void rnn_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias, const int16_t* h0,
             int16_t* y, const RecurrentShape& s, const RnnQuant& q) {
  rnn_int(x, w_ih, w_hh, bias, h0, y, s, q, -32768, 32767, true);
}

}  // namespace portable
}  // namespace torchmcu
