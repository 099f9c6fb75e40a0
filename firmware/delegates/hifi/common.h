// Internal to the HiFi kernels: nnlib's API header and what the kernels share.
#ifndef TORCHMCU_DELEGATES_HIFI_COMMON_H_
#define TORCHMCU_DELEGATES_HIFI_COMMON_H_

#include <cstdint>

#include "core/kernel.h"
#include "kernels/portable/kernels.h"
#include "kernels/portable/common/requantize.h"
#include "xa_nnlib_api.h"

namespace torchmcu {
namespace hifi {

/// Operand index of the convolutions' scratch (x, w, bias, multiplier, shift, scratch).
constexpr uint32_t kScratch = 5;

/// nnlib returns 0 on success and -1 when it refuses its arguments.
inline Error status(WORD32 rc) { return rc == 0 ? Error::Ok : Error::DelegateFailed; }

/// Bias, multipliers and shifts (tensor values, read each run as the portable
/// kernels do) are ones the portable kernel computes with: multiplier in
/// [0, 2^31), shift in [-31, 30], a bias the accumulator has room for. There
/// nnlib's requantization (double-rounding build) is the reference's, bit for
/// bit (aot/torchmcu/backends/hifi/nnlib.py); elsewhere the portable kernel outputs
/// zeros, and so must this kernel: it then runs the portable one.
/// `terms * per_term` bounds the accumulator's products, as for the portable kernel.
inline bool requant_exact(const OpContext& ctx, int32_t channels, int32_t num_requant, int64_t terms,
                          int64_t per_term) {
  return portable::s8::requant_in_range(ctx.in<const int32_t>(2), ctx.in<const int32_t>(3),
                                        ctx.in<const int32_t>(4), channels, num_requant, terms, per_term);
}

/// The scratch operand's bytes (null and 0 when absent).
inline void* scratch(const OpContext& ctx, uint32_t* nbytes) {
  if (ctx.num_inputs() > kScratch && OpContext::present(ctx.input(kScratch))) {
    *nbytes = ctx.input(kScratch).nbytes;
    return ctx.in<void>(kScratch);
  }
  *nbytes = 0;
  return nullptr;
}

/// nnlib's precision codes (its xa_nnlib_standards.h enum, which also pulls in
/// the core's configuration header): 8-bit asymmetric data, symmetric weights.
constexpr WORD32 kPrecAsym8s = -4;
constexpr WORD32 kPrecSym8s = -5;

/// nnlib's int8 convolutions and matmuls take no activation range: the fused
/// clamp is a second pass over the output, in place. It is a plain loop:
/// xa_nn_vec_activation_min_max_8_8 restrict-qualifies its input and output,
/// so it must not run in place, and a copy would need memory the plan does
/// not have. Clamping the [-128, 127] result to [min, max] is the reference's
/// single clamp.
inline void activation(int8_t* y, int32_t n, int32_t act_min, int32_t act_max) {
  if (act_min <= -128 && act_max >= 127) return;
  for (int32_t i = 0; i < n; ++i) {
    y[i] = int8_t(y[i] < act_min ? act_min : y[i] > act_max ? act_max : y[i]);
  }
}

}  // namespace hifi
}  // namespace torchmcu

#endif  // TORCHMCU_DELEGATES_HIFI_COMMON_H_
