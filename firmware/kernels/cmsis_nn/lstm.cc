// LSTM_S8 / LSTM_S16 on arm_lstm_unidirectional_s8 / _s16 (TFLite's integer
// LSTM, as TFLM's cmsis_nn kernel calls them), time-major.
//
// The program's bias rows are CMSIS-NN's effective biases already (the input
// side with the input offset's kernel sums folded in, the hidden side
// -zero_point * sum(w_hh)). The cell state is the op's output c, set from c0
// (or zeros) first; CMSIS-NN reads the initial hidden state from, and writes
// the final one back to, its context's hidden_state: a copy of h0 in the
// scratch (the op's inputs are read only). Without h0 and c0 the context's
// hidden_state is null, CMSIS-NN's own zero start.
//
// CMSIS-NN adds a gate's hidden-side product to the input side's before
// saturating it, TFLite after saturating each: the compiler marks the ops
// where a hidden-side product could leave int16 on its own (may_saturate),
// and those run on the portable kernel, as do reversed directions (CMSIS-NN
// runs forward) and cell scales below 2^-15 (where i * g alone could leave
// int16). Same bits as the portable kernel in every case.
#include <cstring>

#include "kernels/cmsis_nn/common.h"
#include "kernels/cmsis_nn/kernels.h"

namespace torchmcu {
namespace cmsis_nn {
namespace {

constexpr uint32_t kLstmScratch = 6;

template <typename A>
int32_t scratch_need(const schema::QuantLstmArgs& a) {
  return 2 * a.batch * a.hidden_size * int32_t(sizeof(int16_t)) + a.batch * a.hidden_size * int32_t(sizeof(A));
}

bool cmsis_runs(const schema::QuantLstmArgs& a) {
  // CMSIS-NN's gates take one multiplier each: TFLite's per-gate weights only.
  return a.may_saturate == 0 && a.reverse == 0 && a.cell_scale_power >= -15 && a.x_multiplier_size == 4;
}

template <typename A>
Error lstm_check(const OpContext& ctx, const Kernel& portable) {
  TMCU_TRY(portable.check(ctx));
  const auto& a = ctx.args<schema::QuantLstmArgs>();
  if (cmsis_runs(a)) {
    TMCU_CHECK(scratch(ctx, kLstmScratch).size >= scratch_need<A>(a), Error::InvalidOp);
  }
  return Error::Ok;
}

template <typename B>
cmsis_nn_lstm_gate gate(const OpContext& ctx, const schema::QuantLstmArgs& a, int32_t g,
                        arm_nn_activation_type activation) {
  const int32_t H = a.hidden_size;
  const B* bias = ctx.in<const B>(3);
  cmsis_nn_lstm_gate q;
  q.input_multiplier = a.x_multiplier[g];
  q.input_shift = a.x_shift[g];
  q.input_weights = ctx.in<const int8_t>(1) + int64_t(g) * H * a.input_size;
  q.input_effective_bias = bias + g * H;
  q.hidden_multiplier = a.h_multiplier[g];
  q.hidden_shift = a.h_shift[g];
  q.hidden_weights = ctx.in<const int8_t>(2) + int64_t(g) * H * H;
  q.hidden_effective_bias = bias + 4 * H + g * H;
  q.bias = nullptr;  // folded into the effective biases
  q.activation_type = activation;
  return q;
}

template <typename A, typename B>
bool lstm_cmsis(const OpContext& ctx) {
  const auto& a = ctx.args<schema::QuantLstmArgs>();
  if (!cmsis_runs(a)) return false;
  const int32_t state = a.batch * a.hidden_size;
  int16_t* const c = ctx.out<int16_t>(1);
  const int16_t* const c0 = ctx.in<const int16_t>(5);
  const A* const h0 = ctx.in<const A>(4);
  int16_t* const temp = ctx.in<int16_t>(kLstmScratch);
  A* const hidden = reinterpret_cast<A*>(temp + 2 * state);
  cmsis_nn_lstm_context buffers;
  buffers.temp1 = temp;
  buffers.temp2 = temp + state;
  buffers.cell_state = c;
  buffers.hidden_state = nullptr;  // both zero: CMSIS-NN clears the cell state itself
  if (h0 != nullptr || c0 != nullptr) {
    for (int32_t k = 0; k < state; ++k) {
      hidden[k] = h0 != nullptr ? h0[k] : A(a.output_offset);
      c[k] = c0 != nullptr ? c0[k] : 0;
    }
    buffers.hidden_state = hidden;
  }
  cmsis_nn_lstm_params p;
  p.time_major = 1;
  p.batch_size = a.batch;
  p.time_steps = a.time_steps;
  p.input_size = a.input_size;
  p.hidden_size = a.hidden_size;
  p.input_offset = a.input_offset;
  p.forget_to_cell_multiplier = a.forget_multiplier;
  p.forget_to_cell_shift = a.forget_shift;
  p.input_to_cell_multiplier = a.cell_multiplier;
  p.input_to_cell_shift = a.cell_shift;
  p.cell_clip = a.cell_clip;
  p.cell_scale_power = a.cell_scale_power;
  p.output_multiplier = a.output_multiplier;
  p.output_shift = a.output_shift;
  p.output_offset = a.output_offset;
  p.input_gate = gate<B>(ctx, a, 0, ARM_SIGMOID);
  p.forget_gate = gate<B>(ctx, a, 1, ARM_SIGMOID);
  p.cell_gate = gate<B>(ctx, a, 2, ARM_TANH);
  p.output_gate = gate<B>(ctx, a, 3, ARM_SIGMOID);
  arm_cmsis_nn_status s;
  if (sizeof(A) == 1) {
    s = arm_lstm_unidirectional_s8(ctx.in<const int8_t>(0), ctx.out<int8_t>(0), &p, &buffers);
  } else {
    s = arm_lstm_unidirectional_s16(ctx.in<const int16_t>(0), ctx.out<int16_t>(0), &p, &buffers);
  }
  return s == ARM_CMSIS_NN_SUCCESS;
}

Error lstm_s8_check(const OpContext& ctx) { return lstm_check<int8_t>(ctx, portable::kLstmS8); }
Error lstm_s16_check(const OpContext& ctx) { return lstm_check<int16_t>(ctx, portable::kLstmS16); }

void lstm_s8_run(const OpContext& ctx) {
  if (!lstm_cmsis<int8_t, int32_t>(ctx)) portable::kLstmS8.run(ctx);
}

void lstm_s16_run(const OpContext& ctx) {
  if (!lstm_cmsis<int16_t, int64_t>(ctx)) portable::kLstmS16.run(ctx);
}

}  // namespace

const Kernel kLstmS8 = {lstm_s8_check, lstm_s8_run};
const Kernel kLstmS16 = {lstm_s16_check, lstm_s16_run};

}  // namespace cmsis_nn
}  // namespace torchmcu
