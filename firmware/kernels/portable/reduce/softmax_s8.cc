#include "kernels/fast/reduce/softmax_s8.h"
#include "kernels/portable/common/fixedpoint.h"
#include "kernels/portable/reduce/reduce.h"

namespace torchmcu {
namespace portable {
namespace {

// gemmlowp's helpers (fixedpoint.h), for 5 integer bits in the scaled
// differences and 12 in the sum of exponentials.
constexpr int32_t kAccumBits = 12;
using fp::div_pow2;
using fp::exp_on_negative_values;
using fp::mul_sat;
using fp::one_over_one_plus_x;

}  // namespace

// arm_softmax_s8's scalar path. The sum of exponentials is accumulated in 32
// unsigned bits (exact for rows below 8192 values); a sum of 2^28 or more
// (only reachable with 512+ values near the row maximum) makes every output
// round to -128, which is written directly: CMSIS-NN and TFLM would shift by
// more than 31 there. A mask row (nonzero: left out) takes masked entries out
// of the max and the sum; they output -128, as does a row with none left.
void softmax_rows_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t input_multiplier,
                     int32_t input_left_shift, int32_t diff_min, const uint8_t* mask,
                     int32_t mask_rows, int8_t* out, const int32_t* exp_table) {
#if TMCU_S8_FAST && TMCU_FAST_SOFTMAX
  if (fast::softmax_rows_s8(in, num_rows, row_size, diff_min, mask, mask_rows, out, exp_table)) return;
#endif
  const int32_t scale = static_cast<int32_t>(uint32_t{1} << input_left_shift);
  // exp of a difference >= diff_min: the table's entry (the same value,
  // computed ahead of time), or computed here.
  auto exp_of = [&](int32_t diff) {
    return exp_table ? exp_table[diff + 255] : exp_on_negative_values(mul_sat(diff * scale, input_multiplier));
  };
  for (int32_t r = 0; r < num_rows; ++r, in += row_size, out += row_size) {
    const uint8_t* m = mask ? mask + int64_t(r % mask_rows) * row_size : nullptr;
    int32_t max = -129;
    for (int32_t c = 0; c < row_size; ++c) {
      if (!(m && m[c]) && in[c] > max) max = in[c];
    }
    uint32_t sum = 0;
    for (int32_t c = 0; c < row_size; ++c) {
      const int32_t diff = in[c] - max;
      if (diff >= diff_min && !(m && m[c])) {
        sum += static_cast<uint32_t>(div_pow2(exp_of(diff), kAccumBits));
      }
    }
    // sum >= 2^19 (the maximum's term) unless every entry is masked.
    const int32_t headroom = fp::clz32(sum);
    const int32_t bits_over_unit = kAccumBits - headroom + 23;
    if (sum == 0 || bits_over_unit > 31) {
      for (int32_t c = 0; c < row_size; ++c) out[c] = -128;
      continue;
    }
    const int32_t shifted_scale =
        one_over_one_plus_x(static_cast<int32_t>((sum << headroom) - 0x80000000u));
    for (int32_t c = 0; c < row_size; ++c) {
      const int32_t diff = in[c] - max;
      int32_t res = -128;
      if (diff >= diff_min && !(m && m[c])) {
        const int32_t e = exp_of(diff);
        res = div_pow2(mul_sat(shifted_scale, e), bits_over_unit) - 128;
        res = res > 127 ? 127 : res;
        res = res < -128 ? -128 : res;
      }
      out[c] = static_cast<int8_t>(res);
    }
  }
}

void softmax_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t input_multiplier,
                int32_t input_left_shift, int32_t diff_min, int8_t* out) {
  softmax_rows_s8(in, num_rows, row_size, input_multiplier, input_left_shift, diff_min, nullptr, 1, out, nullptr);
}

}  // namespace portable
}  // namespace torchmcu
