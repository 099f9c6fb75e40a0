#include <cmath>

#include "kernels/portable/recurrent/recurrent.h"

namespace torchmcu {
namespace portable {
namespace {

float dot(const float* a, const float* b, int32_t n) {
  float acc = 0.0f;
  for (int32_t k = 0; k < n; ++k) acc += a[k] * b[k];
  return acc;
}

// As sigmoid_f32: expf only ever sees a non-positive argument.
float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0.0f ? r : e * r;
}

// The hidden state step t reads: the previous step's output, h0, or none
// (zeros). `step` is the offset of one step of y.
const float* previous(const float* y, const float* h0, int32_t t, int32_t first, int32_t dir, int32_t step) {
  return t == first ? h0 : y + (t - dir) * step;
}

}  // namespace

void lstm_f32(const float* x, const float* w_ih, const float* w_hh, const float* bias, const float* h0,
              const float* c0, float* y, float* c, const RecurrentShape& s) {
  const int32_t B = s.batch, I = s.input_size, H = s.hidden_size;
  for (int32_t k = 0; k < B * H; ++k) c[k] = c0 != nullptr ? c0[k] : 0.0f;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const float* hp = previous(y, h0, t, first, dir, B * H);
    for (int32_t b = 0; b < B; ++b) {
      const float* xt = x + (int64_t(t) * B + b) * I;
      const float* hb = hp != nullptr ? hp + b * H : nullptr;
      float* yt = y + (int64_t(t) * B + b) * H;
      for (int32_t j = 0; j < H; ++j) {
        float g[4];
        for (int32_t q = 0; q < 4; ++q) {
          const int32_t row = q * H + j;
          float v = dot(xt, w_ih + int64_t(row) * I, I) + (bias != nullptr ? bias[row] : 0.0f);
          if (hb != nullptr) v += dot(hb, w_hh + int64_t(row) * H, H);
          g[q] = v;
        }
        float& cell = c[b * H + j];
        cell = sigmoid(g[1]) * cell + sigmoid(g[0]) * tanhf(g[2]);
        yt[j] = sigmoid(g[3]) * tanhf(cell);
      }
    }
  }
}

void gru_f32(const float* x, const float* w_ih, const float* w_hh, const float* bias, const float* h0, float* y,
             const RecurrentShape& s) {
  const int32_t B = s.batch, I = s.input_size, H = s.hidden_size;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const float* hp = previous(y, h0, t, first, dir, B * H);
    for (int32_t b = 0; b < B; ++b) {
      const float* xt = x + (int64_t(t) * B + b) * I;
      const float* hb = hp != nullptr ? hp + b * H : nullptr;
      float* yt = y + (int64_t(t) * B + b) * H;
      for (int32_t j = 0; j < H; ++j) {
        float gx[3], gh[3];
        for (int32_t q = 0; q < 3; ++q) {
          const int32_t row = q * H + j;
          gx[q] = dot(xt, w_ih + int64_t(row) * I, I) + (bias != nullptr ? bias[row] : 0.0f);
          gh[q] = (hb != nullptr ? dot(hb, w_hh + int64_t(row) * H, H) : 0.0f) +
                  (bias != nullptr ? bias[3 * H + row] : 0.0f);
        }
        const float r = sigmoid(gx[0] + gh[0]);
        const float z = sigmoid(gx[1] + gh[1]);
        const float nn = tanhf(gx[2] + r * gh[2]);
        const float hprev = hb != nullptr ? hb[j] : 0.0f;
        yt[j] = (1.0f - z) * nn + z * hprev;
      }
    }
  }
}

void rnn_f32(const float* x, const float* w_ih, const float* w_hh, const float* bias, const float* h0, float* y,
             const RecurrentShape& s, bool relu) {
  const int32_t B = s.batch, I = s.input_size, H = s.hidden_size;
  const int32_t first = s.reverse ? s.time_steps - 1 : 0;
  const int32_t dir = s.reverse ? -1 : 1;
  for (int32_t n = 0, t = first; n < s.time_steps; ++n, t += dir) {
    const float* hp = previous(y, h0, t, first, dir, B * H);
    for (int32_t b = 0; b < B; ++b) {
      const float* xt = x + (int64_t(t) * B + b) * I;
      const float* hb = hp != nullptr ? hp + b * H : nullptr;
      float* yt = y + (int64_t(t) * B + b) * H;
      for (int32_t j = 0; j < H; ++j) {
        float v = dot(xt, w_ih + int64_t(j) * I, I) + (bias != nullptr ? bias[j] : 0.0f);
        if (hb != nullptr) v += dot(hb, w_hh + int64_t(j) * H, H);
        yt[j] = relu ? (v > 0.0f ? v : 0.0f) : tanhf(v);
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
