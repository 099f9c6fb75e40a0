// The recurrent layers as the executor sees them (LSTM/GRU/RNN, float and
// integer; see recurrent.h): load-time checks of operands and
// arguments, and run functions calling the math.
//
// Operands, in order: x [T, B, I], w_ih [G*H, I], w_hh [G*H, H], bias (or
// absent), h0 [B, H] (or absent), for the LSTMs c0 [B, H] (or absent), for
// the integer ops an optional scratch (CMSIS-NN's working memory; the
// portable kernels need none), for the integer LSTM and GRU an optional
// per-row requantization table (see gates_ok); outputs y [T, B, H] and, for the LSTMs, c [B, H].
#include "kernels/portable/common/glue.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/recurrent/recurrent.h"

namespace torchmcu {
namespace portable {
namespace {

// Shapes stay small, so that no index or size product leaves 32 bits.
TMCU_INLINE bool dim_ok(int32_t v) { return v >= 1 && v <= (1 << 16); }
TMCU_INLINE bool requant_ok(int32_t m, int32_t s) { return m >= 0 && shift_ok(s); }

// The per-row requantization table's operand (after the optional scratch).
constexpr uint32_t kLstmTable = 7;
constexpr uint32_t kGruTable = 6;

/// The shapes every recurrent op shares: x, w_ih, w_hh, y, and the optional
/// h0 (input 4) of `act` dtype, for G gates.
template <typename A>
Error shapes(const OpContext& ctx, const A& a, DType act, DType weight, int32_t G) {
  TMCU_CHECK(dim_ok(a.time_steps) && dim_ok(a.batch) && dim_ok(a.input_size) && dim_ok(a.hidden_size) &&
                 (a.reverse == 0 || a.reverse == 1),
             Error::InvalidOp);
  const int32_t T = a.time_steps, B = a.batch, I = a.input_size, H = a.hidden_size;
  const int32_t x_dims[3] = {T, B, I};
  const int32_t wi_dims[2] = {G * H, I};
  const int32_t wh_dims[2] = {G * H, H};
  const int32_t y_dims[3] = {T, B, H};
  const int32_t state[2] = {B, H};
  const Operand& x = ctx.input(0);
  const Operand& y = ctx.output(0);
  TMCU_CHECK(check::is(x, act, 3) && check::is(ctx.input(1), weight, 2) && check::is(ctx.input(2), weight, 2) &&
                 check::is(y, act, 3),
             Error::InvalidOp);
  TMCU_TRY(check::holds(x, x_dims));
  TMCU_TRY(check::holds(ctx.input(1), wi_dims));
  TMCU_TRY(check::holds(ctx.input(2), wh_dims));
  TMCU_TRY(check::holds(y, y_dims));
  const Operand& h0 = ctx.input(4);
  if (OpContext::present(h0)) {
    TMCU_CHECK(check::is(h0, act, 2), Error::InvalidOp);
    TMCU_TRY(check::holds(h0, state));
  }
  return Error::Ok;
}

/// An optional [B, H] operand of `dtype`.
Error state_ok(const Operand& o, DType dtype, int32_t B, int32_t H) {
  if (!OpContext::present(o)) return Error::Ok;
  const int32_t dims[2] = {B, H};
  TMCU_CHECK(check::is(o, dtype, 2), Error::InvalidOp);
  return check::holds(o, dims);
}

/// The bias: absent, or `rows` rows of G*H values of `dtype` (rank 1 for
/// one row).
Error bias_ok(const Operand& b, DType dtype, int32_t rows, int32_t n, bool optional) {
  if (!OpContext::present(b)) return optional ? Error::Ok : Error::InvalidOp;
  if (rows == 1) return check::vector(b, dtype, n) ? Error::Ok : Error::InvalidOp;
  const int32_t dims[2] = {rows, n};
  TMCU_CHECK(check::is(b, dtype, 2), Error::InvalidOp);
  return check::holds(b, dims);
}

RecurrentShape shape_of(int32_t T, int32_t B, int32_t I, int32_t H, int32_t reverse) {
  return RecurrentShape{T, B, I, H, reverse != 0};
}

// ---- float --------------------------------------------------------------------

Error float_check(const OpContext& ctx, int32_t G, int32_t bias_rows, bool lstm) {
  TMCU_CHECK(check::counts(ctx, lstm ? 6 : 5, lstm ? 6 : 5, lstm ? 2 : 1) &&
                 check::args<schema::RecurrentArgs>(ctx, OpParams::RecurrentParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::RecurrentArgs>();
  TMCU_TRY(shapes(ctx, a, DType::F32, DType::F32, G));
  TMCU_CHECK(a.activation == 0 || (a.activation == 1 && G == 1), Error::InvalidOp);
  TMCU_TRY(bias_ok(ctx.input(3), DType::F32, bias_rows, G * a.hidden_size, true));
  if (lstm) {
    TMCU_TRY(state_ok(ctx.input(5), DType::F32, a.batch, a.hidden_size));
    const Operand& c = ctx.output(1);
    TMCU_CHECK(OpContext::present(c), Error::InvalidOp);
    TMCU_TRY(state_ok(c, DType::F32, a.batch, a.hidden_size));
  }
  return Error::Ok;
}

Error lstm_f32_check(const OpContext& ctx) { return float_check(ctx, 4, 1, true); }
Error gru_f32_check(const OpContext& ctx) { return float_check(ctx, 3, 2, false); }
Error rnn_f32_check(const OpContext& ctx) { return float_check(ctx, 1, 1, false); }

void lstm_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::RecurrentArgs>();
  lstm_f32(ctx.in<const float>(0), ctx.in<const float>(1), ctx.in<const float>(2), ctx.in<const float>(3),
           ctx.in<const float>(4), ctx.in<const float>(5), ctx.out<float>(0), ctx.out<float>(1),
           shape_of(a.time_steps, a.batch, a.input_size, a.hidden_size, a.reverse));
}

void gru_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::RecurrentArgs>();
  gru_f32(ctx.in<const float>(0), ctx.in<const float>(1), ctx.in<const float>(2), ctx.in<const float>(3),
          ctx.in<const float>(4), ctx.out<float>(0),
          shape_of(a.time_steps, a.batch, a.input_size, a.hidden_size, a.reverse));
}

void rnn_f32_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::RecurrentArgs>();
  rnn_f32(ctx.in<const float>(0), ctx.in<const float>(1), ctx.in<const float>(2), ctx.in<const float>(3),
          ctx.in<const float>(4), ctx.out<float>(0),
          shape_of(a.time_steps, a.batch, a.input_size, a.hidden_size, a.reverse), a.activation == 1);
}

// ---- integer ------------------------------------------------------------------

/// The gates' requantization: per gate, the params' four vectors of G
/// entries; per row, the params' vectors empty and the operand at
/// `table` (after the scratch) an int32 [4, G*H] of x multipliers, x shifts,
/// h multipliers, h shifts (a constant). Each pair in range.
template <typename A>
Error gates_ok(const OpContext& ctx, const A& a, int32_t G, uint32_t table) {
  const bool per_row = ctx.num_inputs() > table && OpContext::present(ctx.input(table));
  const int32_t n = per_row ? 0 : G;
  TMCU_CHECK(a.x_multiplier_size == n && a.x_shift_size == n && a.h_multiplier_size == n && a.h_shift_size == n,
             Error::InvalidOp);
  for (int32_t g = 0; g < n; ++g) {
    TMCU_CHECK(requant_ok(a.x_multiplier[g], a.x_shift[g]) && requant_ok(a.h_multiplier[g], a.h_shift[g]),
               Error::InvalidOp);
  }
  if (!per_row) return Error::Ok;
  const Operand& t = ctx.input(table);
  const int32_t rows = G * a.hidden_size;
  const int32_t dims[2] = {4, rows};
  TMCU_CHECK(check::is(t, DType::I32, 2), Error::InvalidOp);
  TMCU_TRY(check::holds(t, dims));
  const int32_t* v = ctx.in<const int32_t>(table);
  if (v == nullptr) return Error::InvalidOp;
  for (int32_t e = 0; e < rows; ++e) {
    TMCU_CHECK(requant_ok(v[e], v[rows + e]) && requant_ok(v[2 * rows + e], v[3 * rows + e]), Error::InvalidOp);
  }
  return Error::Ok;
}

template <typename A>
GateQuant gate_quant(const OpContext& ctx, const A& a, int32_t G, uint32_t table) {
  if (ctx.num_inputs() > table && OpContext::present(ctx.input(table))) {
    const int32_t* v = ctx.in<const int32_t>(table);
    const int32_t rows = G * a.hidden_size;
    return GateQuant{v, v + rows, v + 2 * rows, v + 3 * rows, a.hidden_size, true};
  }
  return GateQuant{a.x_multiplier, a.x_shift, a.h_multiplier, a.h_shift, a.hidden_size, false};
}

/// The optional scratch after the state inputs: int16, any size.
Error scratch_ok(const OpContext& ctx, uint32_t index) {
  if (ctx.num_inputs() <= index || !OpContext::present(ctx.input(index))) return Error::Ok;
  return check::is(ctx.input(index), DType::I16, 1) ? Error::Ok : Error::InvalidOp;
}

/// The output offset a T value, the input offset a negated one (the
/// recurrent ops take int16 offsets too).
template <typename T>
TMCU_INLINE bool offsets_ok(int32_t input_offset, int32_t output_offset) {
  return output_offset >= QType<T>::kMin && output_offset <= QType<T>::kMax && input_offset >= -QType<T>::kMax &&
         input_offset <= -QType<T>::kMin;
}

template <typename T>
Error lstm_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 6, 8, 2) && check::args<schema::QuantLstmArgs>(ctx, OpParams::QuantLstmParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantLstmArgs>();
  TMCU_TRY(shapes(ctx, a, QType<T>::kDType, DType::I8, 4));
  TMCU_TRY(gates_ok(ctx, a, 4, kLstmTable));
  const bool per_row = ctx.num_inputs() > kLstmTable && OpContext::present(ctx.input(kLstmTable));
  TMCU_CHECK(!per_row || a.cell_scale_power >= -15, Error::InvalidOp);  // the fine cell's shifts stay positive
  TMCU_CHECK(requant_ok(a.forget_multiplier, a.forget_shift) &&
                 requant_ok(a.cell_multiplier, a.cell_shift) && requant_ok(a.output_multiplier, a.output_shift) &&
                 offsets_ok<T>(a.input_offset, a.output_offset) && a.cell_scale_power >= -31 &&
                 a.cell_scale_power <= 2 && a.cell_clip >= 0 && a.cell_clip <= 32767,
             Error::InvalidOp);
  TMCU_TRY(bias_ok(ctx.input(3), QType<T>::kBias, 2, 4 * a.hidden_size, false));
  TMCU_TRY(state_ok(ctx.input(5), DType::I16, a.batch, a.hidden_size));
  TMCU_TRY(scratch_ok(ctx, 6));
  const Operand& c = ctx.output(1);
  TMCU_CHECK(OpContext::present(c), Error::InvalidOp);
  return state_ok(c, DType::I16, a.batch, a.hidden_size);
}

LstmQuant lstm_quant(const OpContext& ctx, const schema::QuantLstmArgs& a) {
  LstmQuant q{};
  q.gates = gate_quant(ctx, a, 4, kLstmTable);
  q.forget_multiplier = a.forget_multiplier;
  q.forget_shift = a.forget_shift;
  q.cell_multiplier = a.cell_multiplier;
  q.cell_shift = a.cell_shift;
  q.output_multiplier = a.output_multiplier;
  q.output_shift = a.output_shift;
  q.output_offset = a.output_offset;
  q.cell_scale_power = a.cell_scale_power;
  q.cell_clip = a.cell_clip;
  return q;
}

template <typename T, void (*Fn)(const T*, const int8_t*, const int8_t*, const typename QType<T>::Bias*, const T*,
                                 const int16_t*, T*, int16_t*, const RecurrentShape&, const LstmQuant&)>
void lstm_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLstmArgs>();
  Fn(ctx.in<const T>(0), ctx.in<const int8_t>(1), ctx.in<const int8_t>(2), ctx.in<const typename QType<T>::Bias>(3),
     ctx.in<const T>(4), ctx.in<const int16_t>(5), ctx.out<T>(0), ctx.out<int16_t>(1),
     shape_of(a.time_steps, a.batch, a.input_size, a.hidden_size, a.reverse), lstm_quant(ctx, a));
}

template <typename T>
Error gru_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 5, 7, 1) && check::args<schema::QuantGruArgs>(ctx, OpParams::QuantGruParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantGruArgs>();
  TMCU_TRY(shapes(ctx, a, QType<T>::kDType, DType::I8, 3));
  TMCU_TRY(gates_ok(ctx, a, 3, kGruTable));
  TMCU_CHECK(requant_ok(a.rh_multiplier, a.rh_shift) &&
                 requant_ok(a.blend_n_multiplier, a.blend_n_shift) &&
                 requant_ok(a.blend_h_multiplier, a.blend_h_shift) && offsets_ok<T>(a.input_offset, a.output_offset),
             Error::InvalidOp);
  TMCU_TRY(bias_ok(ctx.input(3), QType<T>::kBias, 2, 3 * a.hidden_size, false));
  return scratch_ok(ctx, 5);
}

GruQuant gru_quant(const OpContext& ctx, const schema::QuantGruArgs& a) {
  GruQuant q{};
  q.gates = gate_quant(ctx, a, 3, kGruTable);
  q.rh_multiplier = a.rh_multiplier;
  q.rh_shift = a.rh_shift;
  q.blend_n_multiplier = a.blend_n_multiplier;
  q.blend_n_shift = a.blend_n_shift;
  q.blend_h_multiplier = a.blend_h_multiplier;
  q.blend_h_shift = a.blend_h_shift;
  q.output_offset = a.output_offset;
  return q;
}

// GRU and RNN: x, w_ih, w_hh, bias, h0 -> y.
template <typename T, typename Q, void (*Fn)(const T*, const int8_t*, const int8_t*, const typename QType<T>::Bias*,
                                             const T*, T*, const RecurrentShape&, const Q&),
          typename A, Q (*Quant)(const OpContext&, const A&)>
void gru_rnn_q_run(const OpContext& ctx) {
  const auto& a = ctx.args<A>();
  Fn(ctx.in<const T>(0), ctx.in<const int8_t>(1), ctx.in<const int8_t>(2), ctx.in<const typename QType<T>::Bias>(3),
     ctx.in<const T>(4), ctx.out<T>(0), shape_of(a.time_steps, a.batch, a.input_size, a.hidden_size, a.reverse),
     Quant(ctx, a));
}

template <typename T>
Error rnn_q_check(const OpContext& ctx) {
  TMCU_CHECK(check::counts(ctx, 5, 6, 1) && check::args<schema::QuantRnnArgs>(ctx, OpParams::QuantRnnParams),
             Error::InvalidOp);
  const auto& a = ctx.args<schema::QuantRnnArgs>();
  TMCU_TRY(shapes(ctx, a, QType<T>::kDType, DType::I8, 1));
  TMCU_CHECK((a.activation == 0 || a.activation == 1) && requant_ok(a.x_multiplier, a.x_shift) &&
                 requant_ok(a.h_multiplier, a.h_shift) && requant_ok(a.output_multiplier, a.output_shift) &&
                 offsets_ok<T>(a.input_offset, a.output_offset),
             Error::InvalidOp);
  TMCU_TRY(bias_ok(ctx.input(3), QType<T>::kBias, 2, a.hidden_size, false));
  return scratch_ok(ctx, 5);
}

RnnQuant rnn_quant(const OpContext&, const schema::QuantRnnArgs& a) {
  return RnnQuant{a.x_multiplier, a.x_shift,  a.h_multiplier, a.h_shift, a.output_multiplier, a.output_shift,
                  a.output_offset, a.activation == 1};
}


}  // namespace

const Kernel kLstmF32 = {lstm_f32_check, lstm_f32_run};
const Kernel kGruF32 = {gru_f32_check, gru_f32_run};
const Kernel kRnnF32 = {rnn_f32_check, rnn_f32_run};
const Kernel kLstmS8 = {lstm_q_check<int8_t>, lstm_q_run<int8_t, lstm_s8>};
const Kernel kLstmS16 = {lstm_q_check<int16_t>, lstm_q_run<int16_t, lstm_s16>};
const Kernel kGruS8 = {gru_q_check<int8_t>,
                       gru_rnn_q_run<int8_t, GruQuant, gru_s8, schema::QuantGruArgs, gru_quant>};
const Kernel kRnnS8 = {rnn_q_check<int8_t>,
                       gru_rnn_q_run<int8_t, RnnQuant, rnn_s8, schema::QuantRnnArgs, rnn_quant>};
const Kernel kGruS16 = {gru_q_check<int16_t>,
                        gru_rnn_q_run<int16_t, GruQuant, gru_s16, schema::QuantGruArgs, gru_quant>};
const Kernel kRnnS16 = {rnn_q_check<int16_t>,
                        gru_rnn_q_run<int16_t, RnnQuant, rnn_s16, schema::QuantRnnArgs, rnn_quant>};

}  // namespace portable
}  // namespace torchmcu
