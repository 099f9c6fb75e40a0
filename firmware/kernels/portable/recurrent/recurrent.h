// Recurrent layers: one layer and one direction of an LSTM, GRU or RNN over a
// time-major sequence, x [T][B][I] -> y [T][B][H]. Weights are PyTorch's,
// [G*H][I] and [G*H][H] with the gates in its order (LSTM i, f, g, o; GRU r,
// z, n). The hidden state of step t is y[t] (reverse: the steps run from T-1
// down to 0), so the kernels keep no state of their own; the LSTM's cell
// state is its second output, c [B][H], which starts as c0 (or zeros).
// An absent h0 or c0 (null) is zeros.
//
// Each hidden unit of a step is computed whole (its gates' products, then its
// cell and output) before the next: every element of a step depends only on
// the previous step's hidden state and its own unit, so this is the same
// arithmetic as computing gate by gate (TFLite's order), without scratch.
//
// The integer kernels are TensorFlow Lite's integer LSTM (TFLM's
// UNIDIRECTIONAL_SEQUENCE_LSTM, int8 and int16 activations) and torchmcu's
// GRU and RNN in the same scheme; aot/torchmcu/reference/recurrent.py is the
// NumPy twin and documents the arithmetic.
#ifndef TORCHMCU_KERNELS_PORTABLE_RECURRENT_RECURRENT_H_
#define TORCHMCU_KERNELS_PORTABLE_RECURRENT_RECURRENT_H_

#include <cstdint>

namespace torchmcu {
namespace portable {

struct RecurrentShape {
  int32_t time_steps, batch, input_size, hidden_size;
  bool reverse;
};

/// bias: [4H] (b_ih + b_hh) or null.
void lstm_f32(const float* x, const float* w_ih, const float* w_hh, const float* bias, const float* h0,
              const float* c0, float* y, float* c, const RecurrentShape& s);

/// bias: [2][3H] (b_ih; b_hh) or null.
void gru_f32(const float* x, const float* w_ih, const float* w_hh, const float* bias, const float* h0, float* y,
             const RecurrentShape& s);

/// bias: [H] (b_ih + b_hh) or null. relu: max(., 0) instead of tanh.
void rnn_f32(const float* x, const float* w_ih, const float* w_hh, const float* bias, const float* h0, float* y,
             const RecurrentShape& s, bool relu);

/// TFLite's int16 sigmoid and tanh (256-entry table, interpolated): the
/// input is x * 3 * 2^left_shift (or (x * 3) >> -left_shift, rounded), Q3.12
/// for left_shift 0; the output is Q0.15.
int16_t sigmoid_s16(int32_t x, int32_t left_shift);
int16_t tanh_s16(int32_t x, int32_t left_shift);

/// The requantization of the gates' input-side and hidden-side products into
/// Q3.12: one multiplier and shift per gate (TFLite's scheme: the weights
/// per tensor per gate), or per row of the weights (torchmcu's: per output
/// channel; per_row true, G * H entries, gate k's row j at k * H + j). The
/// vectors are the program's own.
struct GateQuant {
  const int32_t* x_multiplier;
  const int32_t* x_shift;
  const int32_t* h_multiplier;
  const int32_t* h_shift;
  int32_t hidden;  // H
  bool per_row;
  /// The entry of gate k, row j.
  int32_t at(int32_t k, int32_t j) const { return per_row ? k * hidden + j : k; }
};

/// QuantLstmParams (aot/torchmcu/program/schema/program.fbs).
struct LstmQuant {
  GateQuant gates;
  int32_t forget_multiplier, forget_shift;  // f * c -> c
  int32_t cell_multiplier, cell_shift;      // i * g -> c
  int32_t output_multiplier, output_shift;  // o * tanh(c) -> h
  int32_t output_offset;                    // h's zero point
  int32_t cell_scale_power;                 // c's scale is 2^cell_scale_power
  int32_t cell_clip;                        // > 0: c clipped to +-cell_clip
};

/// LSTM_S8: x, h0, y int8; bias [2][4H] int32 (input side with the input
/// offset's kernel sums folded in; hidden side -zero_point * sum(w_hh)).
void lstm_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
             const int16_t* c0, int8_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q);

/// LSTM_S16: x, h0, y int16 (zero point 0); bias [2][4H] int64.
void lstm_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias, const int16_t* h0,
              const int16_t* c0, int16_t* y, int16_t* c, const RecurrentShape& s, const LstmQuant& q);

struct GruQuant {
  GateQuant gates;
  int32_t rh_multiplier, rh_shift;            // r * hn -> Q3.12
  int32_t blend_n_multiplier, blend_n_shift;  // (1 - z) * n -> h
  int32_t blend_h_multiplier, blend_h_shift;  // z * (h - zero point) -> h
  int32_t output_offset;
};

/// GRU_S8: bias [2][3H] int32 (the hidden side holds b_hn).
void gru_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
            int8_t* y, const RecurrentShape& s, const GruQuant& q);

/// GRU_S16: int16 activations (zero point 0), bias int64.
void gru_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias, const int16_t* h0,
             int16_t* y, const RecurrentShape& s, const GruQuant& q);

struct RnnQuant {
  int32_t x_multiplier, x_shift, h_multiplier, h_shift;
  int32_t output_multiplier, output_shift, output_offset;
  bool relu;
};

/// RNN_S8: bias [2][H] int32.
void rnn_s8(const int8_t* x, const int8_t* w_ih, const int8_t* w_hh, const int32_t* bias, const int8_t* h0,
            int8_t* y, const RecurrentShape& s, const RnnQuant& q);

/// RNN_S16: int16 activations (zero point 0), bias int64.
void rnn_s16(const int16_t* x, const int8_t* w_ih, const int8_t* w_hh, const int64_t* bias, const int16_t* h0,
             int16_t* y, const RecurrentShape& s, const RnnQuant& q);

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_RECURRENT_RECURRENT_H_
