// Fast path of softmax_rows_s8 (see fast.h), included by
// portable/reduce/softmax_s8.cc only. MVE: 4 elements per step, in three
// passes over a row: its maximum (VMAXV over 16 lanes), the sum of the
// exponentials (the table's entries by one gather of 4, VRSHR by 12 as
// div_pow2: the entries are checked non-negative once per call), and the
// outputs (VQRDMULH is mul_sat, VRSHL of a non-negative value div_pow2).
// Masked entries, entries below diff_min and the tail lanes are kept out by
// predicates (the gather reads no entry for them). About 5 instructions per
// element where the portable kernel takes over 100 (QEMU counts).
// Without the table (the compiler always gives one) the generic kernel runs.
#ifndef TORCHMCU_KERNELS_FAST_REDUCE_SOFTMAX_S8_H_
#define TORCHMCU_KERNELS_FAST_REDUCE_SOFTMAX_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include "kernels/portable/common/fixedpoint.h"
#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

#if TMCU_S8_MVE

// The table as the passes below need it: entries for d >= diff_min
// non-negative, the others 0 (the compiler's: softmax_exp_table), so that an
// entry below diff_min adds 0 to the sum and outputs -128 unselected.
inline bool softmax_table_ok(const int32_t* table, int32_t diff_min) {
  const int32_t first = diff_min + 255;  // index of d = diff_min
  mve_pred16_t bad = 0;
  int32x4_t index = vreinterpretq_s32_u32(vidupq_n_u32(0, 1));  // 0, 1, 2, 3
  for (int32_t i = 0; i < 256; i += 4, index = vaddq_n_s32(index, 4)) {
    const int32x4_t v = vldrwq_s32(table + i);
    const mve_pred16_t below = vcmpltq_n_s32(index, first);
    bad |= vcmpneq_m_n_s32(v, 0, below) | vcmpltq_m_n_s32(v, 0, static_cast<mve_pred16_t>(~below));
  }
  return bad == 0;
}

// fp::one_over_one_plus_x of val >= 0 in one lane: VQRDMULH is mul_sat,
// VQSHL by 2 and 1 mul_pow2 (saturating), the adds wrap as gemmlowp's raw
// ones; the half denominator (val + INT32_MAX + 1) / 2. ~20 instructions
// where the scalar one takes ~200 (seven 64-bit products through calls).
inline int32_t softmax_reciprocal(int32_t val) {
  const int32x4_t half = vdupq_n_s32(static_cast<int32_t>((static_cast<uint32_t>(val) >> 1) + 0x40000000u));
  int32x4_t x = vaddq_n_s32(vqrdmulhq_n_s32(half, -1010580540), 1515870810);
  for (int32_t i = 0; i < 3; ++i) {
    const int32x4_t t = vsubq_s32(vdupq_n_s32(1 << 29), vqrdmulhq_s32(half, x));
    x = vaddq_s32(x, vqshlq_n_s32(vqrdmulhq_s32(x, t), 2));
  }
  return vgetq_lane_s32(vqshlq_n_s32(x, 1), 0);
}

// 4 elements from c: the table's entries (0 for masked lanes and those
// outside in_row: no entry read), x + to_index = d + 255 in [0, 255].
template <bool kMasked, bool kTail>
[[gnu::always_inline]] inline uint32x4_t softmax_exp4(const int8_t* in, const uint8_t* m, int32_t c,
                                                      const uint32_t* table, uint32_t to_index, mve_pred16_t in_row) {
  const int32x4_t x = kTail ? vldrbq_z_s32(in + c, in_row) : vldrbq_s32(in + c);
  const uint32x4_t index = vaddq_n_u32(vreinterpretq_u32_s32(x), to_index);
  if (!kMasked && !kTail) return vldrwq_gather_shifted_offset_u32(table, index);
  const mve_pred16_t p = kMasked ? vcmpeqq_m_n_u32(vldrbq_z_u32(m + c, in_row), 0, in_row) : in_row;
  return vldrwq_gather_shifted_offset_z_u32(table, index, p);
}

template <bool kMasked>
void softmax_rows(const int8_t* in, int32_t num_rows, int32_t row_size, const uint8_t* mask, int32_t mask_rows,
                  int8_t* out, const int32_t* exp_table) {
  const uint32_t* table = reinterpret_cast<const uint32_t*>(exp_table);
  // Whole vectors unpredicated without a mask; with one (rarer), every step
  // predicated (less code).
  const int32_t full = kMasked ? 0 : row_size & ~3;
  for (int32_t r = 0; r < num_rows; ++r, in += row_size, out += row_size) {
    const uint8_t* m = kMasked ? mask + int64_t(r % mask_rows) * row_size : nullptr;
    // The maximum over the unmasked entries (-128 when none: the sum is then 0).
    int8_t max = -128;
    for (int32_t c = 0; c < row_size; c += 16) {
      mve_pred16_t p = vctp8q(static_cast<uint32_t>(row_size - c));
      if (kMasked) p = vcmpeqq_m_n_u8(vldrbq_z_u8(m + c, p), 0, p);
      max = vmaxvq_p_s8(max, vldrbq_z_s8(in + c, p), p);
    }
    const uint32_t to_index = static_cast<uint32_t>(255 - max);
    uint32_t sum = 0;
    int32_t c = 0;
    for (; c < full; c += 4) {
      const uint32x4_t e = softmax_exp4<false, false>(in, m, c, table, to_index, 0);
      sum = vaddvaq_u32(sum, vrshrq_n_u32(e, 12));
    }
    for (; c < row_size; c += 4) {
      const uint32x4_t e = softmax_exp4<kMasked, true>(in, m, c, table, to_index, vctp32q(uint32_t(row_size - c)));
      sum = vaddvaq_u32(sum, vrshrq_n_u32(e, 12));
    }
    const int32_t headroom = fp::clz32(sum);
    const int32_t bits_over_unit = 12 - headroom + 23;
    if (sum == 0 || bits_over_unit > 31) {
      for (c = 0; c < row_size; c += 16) {
        vstrbq_p_s8(out + c, vdupq_n_s8(-128), vctp8q(static_cast<uint32_t>(row_size - c)));
      }
      continue;
    }
    const int32_t scale = softmax_reciprocal(static_cast<int32_t>((sum << headroom) - 0x80000000u));
    // e = 0 (masked, below diff_min) gives 0 - 128.
    auto y = [&](uint32x4_t e) {
      return vminq_s32(vaddq_n_s32(vrshlq_n_s32(vqrdmulhq_n_s32(vreinterpretq_s32_u32(e), scale), -bits_over_unit),
                                   -128),
                       vdupq_n_s32(127));
    };
    for (c = 0; c < full; c += 4) vstrbq_s32(out + c, y(softmax_exp4<false, false>(in, m, c, table, to_index, 0)));
    for (; c < row_size; c += 4) {
      const mve_pred16_t in_row = vctp32q(static_cast<uint32_t>(row_size - c));
      vstrbq_p_s32(out + c, y(softmax_exp4<kMasked, true>(in, m, c, table, to_index, in_row)), in_row);
    }
  }
}

}  // namespace

// softmax_rows_s8 (portable/reduce/reduce.h) with an exp table as
// softmax_table_ok's; false otherwise.
[[gnu::noinline]] inline bool softmax_rows_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t diff_min,
                                              const uint8_t* mask, int32_t mask_rows, int8_t* out,
                                              const int32_t* exp_table) {
  if (exp_table == nullptr || !softmax_table_ok(exp_table, diff_min)) return false;
  if (mask) {
    softmax_rows<true>(in, num_rows, row_size, mask, mask_rows, out, exp_table);
  } else {
    softmax_rows<false>(in, num_rows, row_size, nullptr, 1, out, exp_table);
  }
  return true;
}

#else  // DSP

}  // namespace

// softmax_rows_s8 (portable/reduce/reduce.h) with an exp table whose
// entries below diff_min are 0 and the others non-negative (the
// compiler's); false otherwise. The table is indexed from the row's maximum
// (tr[x] = the entry of x - max); an entry below diff_min adds 0 and outputs
// -128 unselected; mul_sat of two non-negative values is one SMULL and its
// rounding, the rounding shift of a non-negative value ((v >> (e - 1)) +
// 1) >> 1, the clamp SSAT.
[[gnu::noinline]] inline bool softmax_rows_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t diff_min,
                                              const uint8_t* mask, int32_t mask_rows, int8_t* out,
                                              const int32_t* exp_table) {
  if (exp_table == nullptr) return false;
  for (int32_t i = 0; i < 256; ++i) {
    if (i < diff_min + 255 ? exp_table[i] != 0 : exp_table[i] < 0) return false;
  }
  for (int32_t r = 0; r < num_rows; ++r, in += row_size, out += row_size) {
    const uint8_t* m = mask ? mask + int64_t(r % mask_rows) * row_size : nullptr;
    int32_t max = -128;  // over the unmasked entries (-128 when none: the sum is then 0)
    for (int32_t c = 0; c < row_size; ++c) {
      if (!(m && m[c]) && in[c] > max) max = in[c];
    }
    const uint32_t* tr = reinterpret_cast<const uint32_t*>(exp_table) + (255 - max);
    uint32_t sum = 0;
    if (m) {
      for (int32_t c = 0; c < row_size; ++c) sum += m[c] ? 0u : (tr[in[c]] + 2048u) >> 12;
    } else {
      for (int32_t c = 0; c < row_size; ++c) sum += (tr[in[c]] + 2048u) >> 12;
    }
    const int32_t headroom = fp::clz32(sum);
    const int32_t bits_over_unit = 12 - headroom + 23;
    if (sum == 0 || bits_over_unit > 31) {
      for (int32_t c = 0; c < row_size; ++c) out[c] = -128;
      continue;
    }
    const int64_t scale = fp::one_over_one_plus_x(static_cast<int32_t>((sum << headroom) - 0x80000000u));
    const int32_t e1 = bits_over_unit - 1;  // >= 3
    for (int32_t c = 0; c < row_size; ++c) {
      const int64_t e = m && m[c] ? 0 : tr[in[c]];
      const int32_t v = static_cast<int32_t>((scale * e + (int64_t{1} << 30)) >> 31);
      out[c] = static_cast<int8_t>(__ssat((((v >> e1) + 1) >> 1) - 128, 8));
    }
  }
  return true;
}

#endif

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_REDUCE_SOFTMAX_S8_H_
