#include "kernels/portable/elementwise/elementwise.h"

#include "kernels/portable/common/broadcast.h"
#include "kernels/portable/common/fixedpoint.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {
namespace {

// add_s8's rescaling of each input, the difference requantized to the output.
template <typename T>
struct SubQ {
  QuantAddParams p;
  int32_t lhs(T a) const {
    return s8::requantize((a + p.input1_offset) * (1 << p.left_shift), p.input1_multiplier, p.input1_shift);
  }
  int32_t rhs(T b) const {
    return s8::requantize((b + p.input2_offset) * (1 << p.left_shift), p.input2_multiplier, p.input2_shift);
  }
  T combine(int32_t a, int32_t b) const {
    // Both rescaled inputs lie below 2^30 in magnitude (multipliers < 1): no overflow.
    const int32_t v = s8::requantize(a - b, p.output_multiplier, p.output_shift);
    const int32_t lo = p.act_min - p.output_offset, hi = p.act_max - p.output_offset;
    return static_cast<T>((v < lo ? lo : v > hi ? hi : v) + p.output_offset);
  }
};

struct DivQ {
  QuantDivParams p;
  int32_t lhs(int8_t a) const { return a + p.input1_offset; }
  int32_t rhs(int8_t b) const { return b + p.input2_offset; }
  int8_t combine(int32_t v1, int32_t v2) const {
    int32_t res;
    if (v2 == 0) {
      res = v1 > 0 ? p.act_max : v1 < 0 ? p.act_min : p.output_offset;
    } else {
      if (v2 < 0) {
        v1 = -v1;
        v2 = -v2;
      }
      // GetReciprocal(v2, 31): v2 normalised to [1, 2) as 1 + x, x in Q0.31.
      const int32_t headroom_plus_one = fp::clz32(uint32_t(v2));
      const int32_t recip_shift = 31 - headroom_plus_one;
      const int32_t inv = fp::one_over_one_plus_x(
          static_cast<int32_t>((uint32_t(v2) << headroom_plus_one) - 0x80000000u));
      const int32_t headroom = __builtin_clrsb(v1);  // 31 for 0, as CountLeadingSignBits
      const int32_t q = fp::mul_sat(static_cast<int32_t>(uint32_t(v1) << headroom), inv);
      const int32_t exponent = recip_shift + headroom - p.output_shift;
      const int32_t hi = fp::mul_sat(q, p.output_multiplier);
      res = exponent > 31 ? 0 : fp::div_pow2(hi, exponent);
      res += p.output_offset;
    }
    return static_cast<int8_t>(res < p.act_min ? p.act_min : res > p.act_max ? p.act_max : res);
  }
};

}  // namespace

void sub_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims, int8_t* out,
            const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, SubQ<int8_t>{p});
}

void sub_s16(const int16_t* a, const int32_t* a_dims, const int16_t* b, const int32_t* b_dims,
             int16_t* out, const int32_t* out_dims, int32_t rank, const QuantAddParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, SubQ<int16_t>{p});
}

void div_s8(const int8_t* a, const int32_t* a_dims, const int8_t* b, const int32_t* b_dims, int8_t* out,
            const int32_t* out_dims, int32_t rank, const QuantDivParams& p) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, DivQ{p});
}

}  // namespace portable
}  // namespace torchmcu
