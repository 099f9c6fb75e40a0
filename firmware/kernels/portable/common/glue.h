// The op glue every family's ops_<family>.cc shares: the executor's side of
// the kernels (load-time checks of operands and arguments, run functions that
// hand the arguments, read in place, to the family's math). Each Kernel is
// its own const object in its family's ops_<family>.cc, so the generated
// kernel table names only the ones a model uses and --gc-sections drops the
// rest.
//
// QType<T> is an integer activation dtype as the checks see it (int8: TFLite's
// asymmetric offsets; int16: symmetric, every zero point and offset 0), so
// one template checks and runs both where the arithmetic is shared.
#ifndef TORCHMCU_KERNELS_PORTABLE_COMMON_GLUE_H_
#define TORCHMCU_KERNELS_PORTABLE_COMMON_GLUE_H_

#include <cstdint>

#include "kernels/check.h"
#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

// The program format's names every ops_<family>.cc uses.
using schema::DType;
using schema::OpParams;
using schema::Operand;

/// The NHWC shape of 4 dims as the program's arguments hold them.
TMCU_INLINE Shape4 shape4(const int32_t* d) { return Shape4{d[0], d[1], d[2], d[3]}; }

/// A requantization shift the math takes.
TMCU_INLINE bool shift_ok(int32_t s) { return s >= -31 && s <= 30; }

/// lo <= hi within [min, max].
TMCU_INLINE bool range_ok(int32_t lo, int32_t hi, int32_t min, int32_t max) {
  return min <= lo && lo <= hi && hi <= max;
}

template <typename T>
struct QType;

template <>
struct QType<int8_t> {
  static constexpr DType kDType = DType::I8;
  static constexpr int32_t kMin = -128, kMax = 127;
  using Bias = int32_t;  // conv, linear and recurrent biases
  static constexpr DType kBias = DType::I32;
  // Offsets are negated input zero points and output zero points.
  static constexpr bool input_offset_ok(int32_t v) { return v >= -127 && v <= 128; }
  static constexpr bool output_offset_ok(int32_t v) { return v >= -128 && v <= 127; }
  static constexpr bool zero_point_ok(int32_t zp) { return zp >= -128 && zp <= 127; }
  // Windows of at most 2^24 taps: the int32 sum of int8 values stays in range.
  static constexpr int64_t kPoolMaxTaps = int64_t(1) << 24;
  static constexpr int32_t kAddMaxLeftShift = 22;
};

template <>
struct QType<int16_t> {
  static constexpr DType kDType = DType::I16;
  static constexpr int32_t kMin = -32768, kMax = 32767;
  using Bias = int64_t;  // accumulated in int64 (requantize_s64)
  static constexpr DType kBias = DType::I64;
  static constexpr bool input_offset_ok(int32_t v) { return v == 0; }
  static constexpr bool output_offset_ok(int32_t v) { return v == 0; }
  static constexpr bool zero_point_ok(int32_t zp) { return zp == 0; }
  // More than 2^16 taps could overflow the int32 sum of int16 values.
  static constexpr int64_t kPoolMaxTaps = 65536;
  // |x| <= 2^15 shifted left by at most 15 stays below 2^31.
  static constexpr int32_t kAddMaxLeftShift = 15;
};

/// An operand of T's dtype (any rank, or `rank` dims).
template <typename T>
TMCU_INLINE bool is_q(const Operand& o) {
  return check::is(o, QType<T>::kDType);
}
template <typename T>
TMCU_INLINE bool is_q(const Operand& o, uint32_t rank) {
  return check::is(o, QType<T>::kDType, rank);
}

/// An activation range of T's values.
template <typename T>
TMCU_INLINE bool act_ok(int32_t lo, int32_t hi) {
  return range_ok(lo, hi, QType<T>::kMin, QType<T>::kMax);
}

/// Inputs and the output of one (known) dtype.
TMCU_INLINE bool same_dtype(const OpContext& ctx) {
  const DType t = ctx.input(0).dtype;
  for (uint32_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!check::is(ctx.input(i), t)) return false;
  }
  return ctx.output(0).dtype == t;
}

/// The op's planned scratch operand, input i, when the program gives one in
/// an arena (never a constant: the fast paths write it); null otherwise,
/// and the kernel runs its generic loop.
TMCU_INLINE int8_t* scratch_operand(const OpContext& ctx, uint32_t i, int32_t* bytes) {
  if (ctx.num_inputs() <= i || ctx.input(i).location < kLocArena0) return nullptr;
  *bytes = static_cast<int32_t>(ctx.input(i).nbytes);
  return ctx.in<int8_t>(i);
}

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_COMMON_GLUE_H_
