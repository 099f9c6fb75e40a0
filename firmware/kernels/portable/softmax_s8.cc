#include "portable_s8.h"

namespace torchmcu {
namespace portable {
namespace {

// The fixed-point helpers of arm_softmax_s8 (gemmlowp's, as TFLM's reference
// softmax uses them), for 5 integer bits in the scaled differences and 12 in
// the sum of exponentials.
constexpr int32_t kAccumBits = 12;

// Saturating rounding doubling high multiply (arm_nn_doubling_high_mult):
// floor((a * b + 2^30) / 2^31), INT32_MAX for INT32_MIN * INT32_MIN.
inline int32_t mul_sat(int32_t a, int32_t b) {
  if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
  return static_cast<int32_t>((static_cast<int64_t>(a) * b + (int64_t{1} << 30)) >> 31);
}

// Rounding (half away from zero) division by 2^e, 0 <= e <= 31.
inline int32_t div_pow2(int32_t x, int32_t e) {
  const int32_t mask = static_cast<int32_t>((uint32_t{1} << e) - 1u);
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> e) + ((x & mask) > threshold ? 1 : 0);
}

// Saturating multiplication by 2^e.
inline int32_t mul_pow2(int32_t x, int32_t e) {
  const int32_t thresh = static_cast<int32_t>((uint32_t{1} << (31 - e)) - 1u);
  if (x > thresh) return INT32_MAX;
  if (x < -thresh) return INT32_MIN;
  return static_cast<int32_t>(static_cast<uint32_t>(x) << e);
}

// exp(x) for x <= 0 in Q5.26, result in Q0.31.
int32_t exp_on_negative_values(int32_t val) {
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

// 1 / (1 + x) for x in [0, 1) in Q0.31, by three Newton-Raphson steps.
int32_t one_over_one_plus_x(int32_t val) {
  const int64_t sum = static_cast<int64_t>(val) + INT32_MAX;
  const int32_t half_denominator = static_cast<int32_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
  int32_t x = 1515870810 + mul_sat(half_denominator, -1010580540);
  const int32_t one_quarter = 1 << 29;
  for (int32_t i = 0; i < 3; ++i) {
    x += mul_pow2(mul_sat(x, one_quarter - mul_sat(half_denominator, x)), 2);
  }
  return mul_pow2(x, 1);
}

}  // namespace

// arm_softmax_s8's scalar path. The sum of exponentials is accumulated in 32
// unsigned bits (exact for rows below 8192 values); a sum of 2^28 or more
// (only reachable with 512+ values near the row maximum) makes every output
// round to -128, which is written directly: CMSIS-NN and TFLM would shift by
// more than 31 there.
void softmax_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t input_multiplier,
                int32_t input_left_shift, int32_t diff_min, int8_t* out) {
  const int32_t scale = static_cast<int32_t>(uint32_t{1} << input_left_shift);
  for (int32_t r = 0; r < num_rows; ++r, in += row_size, out += row_size) {
    int32_t max = in[0];
    for (int32_t c = 1; c < row_size; ++c) max = in[c] > max ? in[c] : max;
    uint32_t sum = 0;
    for (int32_t c = 0; c < row_size; ++c) {
      const int32_t diff = in[c] - max;
      if (diff >= diff_min) {
        sum += static_cast<uint32_t>(div_pow2(
            exp_on_negative_values(mul_sat(diff * scale, input_multiplier)), kAccumBits));
      }
    }
    const int32_t headroom = __builtin_clz(sum);  // sum >= 2^19: the maximum's term
    const int32_t bits_over_unit = kAccumBits - headroom + 23;
    if (bits_over_unit > 31) {
      for (int32_t c = 0; c < row_size; ++c) out[c] = -128;
      continue;
    }
    const int32_t shifted_scale =
        one_over_one_plus_x(static_cast<int32_t>((sum << headroom) - 0x80000000u));
    for (int32_t c = 0; c < row_size; ++c) {
      const int32_t diff = in[c] - max;
      int32_t res = -128;
      if (diff >= diff_min) {
        const int32_t e = exp_on_negative_values(mul_sat(diff * scale, input_multiplier));
        res = div_pow2(mul_sat(shifted_scale, e), bits_over_unit) - 128;
        res = res > 127 ? 127 : res;
        res = res < -128 ? -128 : res;
      }
      out[c] = static_cast<int8_t>(res);
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
