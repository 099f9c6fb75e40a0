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

#if TMCU_S8_MVE

#include "kernels/portable/common/fixedpoint.h"

#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// Lanes of elements [c, c + 4) of a row of row_size that take part: in the
// row, unmasked, x >= the row's max + diff_min (lo).
[[gnu::always_inline]] inline mve_pred16_t softmax_valid(int32x4_t x, const uint8_t* m, int32_t c, int32_t lo,
                                                        mve_pred16_t in_row) {
  mve_pred16_t p = vcmpgeq_m_n_s32(x, lo, in_row);
  if (m) p = vcmpeqq_m_n_u32(vldrbq_z_u32(m + c, p), 0, p);
  return p;
}

}  // namespace

// softmax_rows_s8 (portable/reduce/reduce.h) with an exp table whose
// entries for d >= diff_min are all non-negative (the compiler's are in
// (0, 2^31)); false otherwise.
[[gnu::noinline]] inline bool softmax_rows_s8(const int8_t* in, int32_t num_rows, int32_t row_size, int32_t diff_min,
                                              const uint8_t* mask, int32_t mask_rows, int8_t* out,
                                              const int32_t* exp_table) {
  if (exp_table == nullptr) return false;
  int32_t low = 0;
  for (int32_t d = diff_min > -255 ? diff_min : -255; d <= 0; ++d) low |= exp_table[d + 255];
  if (low < 0) return false;
  const uint32_t* table = reinterpret_cast<const uint32_t*>(exp_table);
  for (int32_t r = 0; r < num_rows; ++r, in += row_size, out += row_size) {
    const uint8_t* m = mask ? mask + int64_t(r % mask_rows) * row_size : nullptr;
    // The maximum over the unmasked entries (-128 when none: the sum is then 0).
    int8_t max = -128;
    for (int32_t c = 0; c < row_size; c += 16) {
      mve_pred16_t p = vctp8q(static_cast<uint32_t>(row_size - c));
      if (m) p = vcmpeqq_m_n_u8(vldrbq_z_u8(m + c, p), 0, p);
      max = vmaxvq_p_s8(max, vldrbq_z_s8(in + c, p), p);
    }
    const int32_t lo = max + (diff_min > -256 ? diff_min : -256);  // x >= lo: d >= diff_min (d >= -255)
    const uint32_t to_index = static_cast<uint32_t>(255 - max);  // x + to_index = d + 255, in [0, 255]
    uint32_t sum = 0;
    for (int32_t c = 0; c < row_size; c += 4) {
      const mve_pred16_t in_row = vctp32q(static_cast<uint32_t>(row_size - c));
      const int32x4_t x = vldrbq_z_s32(in + c, in_row);
      const mve_pred16_t p = softmax_valid(x, m, c, lo, in_row);
      const uint32x4_t e = vldrwq_gather_shifted_offset_z_u32(
          table, vaddq_n_u32(vreinterpretq_u32_s32(x), to_index), p);
      sum = vaddvaq_u32(sum, vrshrq_n_u32(e, 12));
    }
    const int32_t headroom = fp::clz32(sum);
    const int32_t bits_over_unit = 12 - headroom + 23;
    if (sum == 0 || bits_over_unit > 31) {
      for (int32_t c = 0; c < row_size; c += 16) {
        vstrbq_p_s8(out + c, vdupq_n_s8(-128), vctp8q(static_cast<uint32_t>(row_size - c)));
      }
      continue;
    }
    const int32_t scale = fp::one_over_one_plus_x(static_cast<int32_t>((sum << headroom) - 0x80000000u));
    const int32x4_t floor = vdupq_n_s32(-128);
    for (int32_t c = 0; c < row_size; c += 4) {
      const mve_pred16_t in_row = vctp32q(static_cast<uint32_t>(row_size - c));
      const int32x4_t x = vldrbq_z_s32(in + c, in_row);
      const mve_pred16_t p = softmax_valid(x, m, c, lo, in_row);
      const int32x4_t e = vreinterpretq_s32_u32(vldrwq_gather_shifted_offset_z_u32(
          table, vaddq_n_u32(vreinterpretq_u32_s32(x), to_index), p));
      const int32x4_t y = vminq_s32(vaddq_n_s32(vrshlq_n_s32(vqrdmulhq_n_s32(e, scale), -bits_over_unit), -128),
                                    vdupq_n_s32(127));
      vstrbq_p_s32(out + c, vpselq_s32(y, floor, p), in_row);
    }
  }
  return true;
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_MVE

#endif  // TORCHMCU_KERNELS_FAST_REDUCE_SOFTMAX_S8_H_
