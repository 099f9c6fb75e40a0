// Requantization, shared by every family's integer kernels: requantize() and
// requantize_s64() (a16w8), and the inline int8 helpers (namespace s8) the
// hot loops inline; the fast tier (kernels/fast/) and the HiFi delegate use
// them too.
#ifndef TORCHMCU_KERNELS_PORTABLE_COMMON_REQUANTIZE_H_
#define TORCHMCU_KERNELS_PORTABLE_COMMON_REQUANTIZE_H_

#include <cstdint>

namespace torchmcu {
namespace portable {
namespace s8 {

// requantize() below. The doubling high multiply of x * 2^left by
// m is floor((x * m * 2^left + 2^30) / 2^31) (ties go up, which is what both
// arm_nn_doubling_high_mult_no_sat and gemmlowp's nudged division compute),
// evaluated exactly in 64 bits: floor((x * m + 2^(30 - left)) / 2^(31 - left)).
// So a left shift never wraps (CMSIS-NN and TFLM wrap x * 2^left in 32 bits;
// the exact result is only different where theirs overflowed) and the result
// saturates to int32. The right shift rounds half away from zero as
// arm_nn_divide_by_power_of_two: with t = hi - (hi < 0), t >> e plus bit
// e - 1 of t. hi is never INT32_MIN for m in [0, 2^31), so t cannot wrap.
inline int32_t requantize(int32_t x, int32_t multiplier, int32_t shift) {
  const int64_t prod = static_cast<int64_t>(x) * multiplier;
  if (shift > 0) {
    const int32_t total = 31 - shift;
    const int64_t r = (prod + (int64_t{1} << (total - 1))) >> total;
    if (r > INT32_MAX) return INT32_MAX;
    if (r < INT32_MIN) return INT32_MIN;
    return static_cast<int32_t>(r);
  }
  const int32_t hi = static_cast<int32_t>((prod + (int64_t{1} << 30)) >> 31);
  if (shift == 0) return hi;
  const int32_t e = -shift;
  const int32_t t = hi - (hi < 0 ? 1 : 0);
  return (t >> e) + ((t >> (e - 1)) & 1);
}

// Per-channel multipliers and shifts, and biases, are tensor values, which no
// load-time check reads: the glue of the kernels that take them looks at them
// each time the op runs (a pass over the channels, before the real work) and
// outputs zeros instead should requantize() or the accumulator be unable to
// take them. In range: multiplier in [0, 2^31), shift in [-31, 30], bias
// within room = INT32_MAX - terms * per_term of zero, where the accumulator
// adds `terms` products of at most per_term each (the load-time checks bound
// terms * per_term by INT32_MAX), so it cannot overflow. Values a compiler
// emits are always in range.
inline bool requant_in_range(const int32_t* bias, const int32_t* multiplier, const int32_t* shift,
                             int32_t channels, int32_t num_requant, int64_t terms, int64_t per_term) {
  const int32_t room = static_cast<int32_t>(INT32_MAX - terms * per_term);
  for (int32_t c = 0; c < channels; ++c) {
    const int32_t b = bias ? bias[c] : 0;
    if (b < -room || b > room) return false;
  }
  for (int32_t c = 0; c < num_requant; ++c) {
    if (multiplier[c] < 0 || shift[c] < -31 || shift[c] > 30) return false;
  }
  return true;
}

// Requantize an accumulator and produce the int8 output: the clamp runs
// before the output offset is added, against bounds lo = act_min - offset and
// hi = act_max - offset, so a saturated value cannot overflow the addition.
struct OutQuant {
  int32_t offset, lo, hi;
  OutQuant(int32_t output_offset, int32_t act_min, int32_t act_max)
      : offset(output_offset), lo(act_min - output_offset), hi(act_max - output_offset) {}
  int8_t operator()(int32_t v) const {
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return static_cast<int8_t>(v + offset);
  }
};

// Number of int32 accumulators the channel-chunked kernels keep on the stack.
constexpr int32_t kAccChunk = 64;

// Kernel taps [lo, hi) whose input coordinate start + k * dilation lies in
// [0, size).
inline void tap_range(int32_t start, int32_t size, int32_t kernel, int32_t dilation, int32_t* lo,
                      int32_t* hi) {
  int32_t l = start < 0 ? (-start + dilation - 1) / dilation : 0;
  int32_t h = size - start <= 0 ? 0 : (size - start + dilation - 1) / dilation;
  if (h > kernel) h = kernel;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

}  // namespace s8

/// x * 2^max(shift, 0), then the rounding doubling high multiply by
/// `multiplier` (floor((v * multiplier + 2^30) / 2^31): ties round up, as
/// arm_nn_doubling_high_mult_no_sat and TFLite's
/// SaturatingRoundingDoublingHighMul), then a rounding right shift by
/// max(-shift, 0) (round half away from zero, as
/// arm_nn_divide_by_power_of_two). Exact for every int32 x: where x * 2^shift
/// would overflow int32 (CMSIS-NN and TFLite wrap) the result saturates.
int32_t requantize(int32_t x, int32_t multiplier, int32_t shift);


/// arm_nn_requantize_s64: reduced = multiplier < 0x7FFF0000 ? (multiplier +
/// 2^15) >> 16 : 0x7FFF; r = int32(acc * reduced >> (14 - shift)) (shift
/// clamped so the shift count lies in [0, 63]; the product wraps); then
/// (r + 1) >> 1, computed in 64 bits.
inline int32_t requantize_s64(int64_t acc, int32_t multiplier, int32_t shift) {
  const int64_t reduced = multiplier < 0x7FFF0000 ? (int64_t(multiplier) + (1 << 15)) >> 16 : 0x7FFF;
  const int32_t total = 14 - (shift < -49 ? -49 : shift > 14 ? 14 : shift);
  const int64_t prod = int64_t(uint64_t(acc) * uint64_t(reduced));
  const int32_t r = int32_t(uint32_t(uint64_t(prod >> total)));
  return int32_t((int64_t(r) + 1) >> 1);
}

/// v clamped to [lo, hi], as an int16 (the a16w8 kernels' outputs).
inline int16_t clamp16(int32_t v, int32_t lo, int32_t hi) {
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
  return static_cast<int16_t>(v);
}

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_COMMON_REQUANTIZE_H_
