// Internal to the portable kernels: gemmlowp's fixed-point helpers as
// TFLite's and CMSIS-NN's integer softmax, log-softmax and div use them, bit
// for bit (their NumPy twins: aot/torchmcu/reference/quant.py and
// reduce.py). Raw int32 values; FixedPoint<int32, I> products are mul_sat.
#ifndef TORCHMCU_KERNELS_PORTABLE_FIXEDPOINT_H_
#define TORCHMCU_KERNELS_PORTABLE_FIXEDPOINT_H_

#include <cstdint>

namespace torchmcu {
namespace portable {
namespace fp {

/// Saturating rounding doubling high multiply (SaturatingRoundingDoublingHighMul,
/// arm_nn_doubling_high_mult): floor((a * b + 2^30) / 2^31), INT32_MAX for
/// INT32_MIN * INT32_MIN.
inline int32_t mul_sat(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  return static_cast<int32_t>((static_cast<int64_t>(a) * b + (int64_t{1} << 30)) >> 31);
}

/// Rounding (half away from zero) division by 2^e, 0 <= e <= 31 (RoundingDivideByPOT).
inline int32_t div_pow2(int32_t x, int32_t e) {
  const int32_t mask = static_cast<int32_t>((uint32_t{1} << e) - 1u);
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> e) + ((x & mask) > threshold ? 1 : 0);
}

/// Saturating multiplication by 2^e, 0 <= e <= 31 (SaturatingRoundingMultiplyByPOTParam
/// for e >= 0, arm_nn_mult_by_power_of_two).
inline int32_t mul_pow2(int32_t x, int32_t e) {
  if (e == 0) return x;
  const int32_t thresh = static_cast<int32_t>((uint32_t{1} << (31 - e)) - 1u);
  if (x > thresh) return INT32_MAX;
  if (x < -thresh) return INT32_MIN;
  return static_cast<int32_t>(static_cast<uint32_t>(x) << e);
}

/// gemmlowp's raw FixedPoint addition: wraps (in two's complement).
inline int32_t add_wrap(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

inline int32_t sat32(int64_t v) {
  return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : static_cast<int32_t>(v);
}

/// Leading zeros of a 32-bit value (32 for 0).
inline int32_t clz32(uint32_t v) { return v == 0 ? 32 : __builtin_clz(v); }

/// exp(x) for x <= 0 in Q5.26, result in Q0.31 (exp_on_negative_values).
inline int32_t exp_on_negative_values(int32_t val) {
  const int32_t val_mod_minus_quarter = (val & ((1 << 24) - 1)) - (1 << 24);
  const int32_t remainder = val_mod_minus_quarter - val;
  const int32_t x = val_mod_minus_quarter * 32 + (1 << 28);
  const int32_t x2 = mul_sat(x, x);
  const int32_t x3 = mul_sat(x2, x);
  const int32_t x4_over_4 = div_pow2(mul_sat(x2, x2), 2);
  const int32_t poly = div_pow2(mul_sat(x4_over_4 + x3, 715827883) + x2, 1);
  int32_t result = 1895147668 + mul_sat(1895147668, x + poly);
  static constexpr int32_t kFactors[7] = {1672461947, 1302514674, 790015084, 290630308,
                                          39332535,   720401,     242};
  for (int32_t k = 0; k < 7; ++k) {
    if (remainder & (1 << (24 + k))) result = mul_sat(result, kFactors[k]);
  }
  return val == 0 ? INT32_MAX : result;
}

/// 1 / (1 + x) for x in [0, 1) in Q0.31, by three Newton-Raphson steps
/// (one_over_one_plus_x_for_x_in_0_1).
inline int32_t one_over_one_plus_x(int32_t val) {
  const int64_t sum = static_cast<int64_t>(val) + INT32_MAX;
  const int32_t half_denominator = static_cast<int32_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
  int32_t x = 1515870810 + mul_sat(half_denominator, -1010580540);
  const int32_t one_quarter = 1 << 29;
  for (int32_t i = 0; i < 3; ++i) {
    x += mul_pow2(mul_sat(x, one_quarter - mul_sat(half_denominator, x)), 2);
  }
  return mul_pow2(x, 1);
}

}  // namespace fp
}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_FIXEDPOINT_H_
