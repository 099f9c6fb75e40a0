// Fast path of matmul_t_s8 (see fast.h), included by
// portable/attention_norm/attention_norm.cc only.
//
// A product with b given transposed, [n][k], is a fully connected layer per
// row of a, bt its weights, the two offsets folded into the sums:
//   sum_k (a_ik + lo)(b_jk + ro) = sum_k a_ik b_jk + (lo B_j + k lo ro) + ro A_i
// with B_j, A_i the row sums of bt and a.
// - MVE: blocks of 4 columns: their terms once, then every row of a, 4
//   VMLADAVA and A_i's VADDVA per 16 inputs, requantized as one vector
//   (fast.h's requant_v); ~0.7 instructions per MAC at k = 16 (QEMU).
// - DSP: the column terms per block of kBmmCols columns, the row term added
//   per row, and linear_s8 (conv/linear_s8.h: SMLAD over the expanded row)
//   does the dot products, the requantization and the clamp.
// The sums wrap in 32 bits: the exact accumulator fits int32 (the glue's
// bmm_depth_ok), so the wrapped sum of the same terms in another order is
// that value.
#ifndef TORCHMCU_KERNELS_FAST_ATTENTION_NORM_BATCH_MATMUL_S8_H_
#define TORCHMCU_KERNELS_FAST_ATTENTION_NORM_BATCH_MATMUL_S8_H_

#include "kernels/fast/fast.h"

#if TMCU_S8_FAST

#include "kernels/portable/attention_norm/attention_norm.h"
#include "kernels/portable/conv/conv.h"

#if !TMCU_S8_MVE
#include <arm_acle.h>
#endif

#pragma GCC push_options
#pragma GCC optimize("O2")

namespace torchmcu {
namespace portable {
namespace fast {
namespace {

// DSP: columns per block, an int32 [kBmmCols] on the stack.
constexpr int32_t kBmmCols = 32;

// sum of k int8s (wrapping). MVE: VADDVA over 16 lanes, the tail
// predicated; DSP: USADA8 of the bytes as offset binary (x + 128), 4 per word.
inline uint32_t bmm_row_sum(const int8_t* x, int32_t k) {
#if TMCU_S8_MVE
  int32_t s = 0;
  for (int32_t c = 0; c < k; c += 16) {
    const mve_pred16_t p = vctp8q(static_cast<uint32_t>(k - c));
    s = vaddvaq_p_s8(s, vldrbq_z_s8(x + c, p), p);
  }
  return static_cast<uint32_t>(s);
#else
  uint32_t s = 0;
  int32_t c = 0;
  for (; c + 4 <= k; c += 4) {
    uint32_t v;
    __builtin_memcpy(&v, x + c, 4);
    s = __usada8(v ^ 0x80808080u, 0, s);
  }
  s -= static_cast<uint32_t>(c) * 128u;
  for (; c < k; ++c) s += static_cast<uint32_t>(int32_t{x[c]});
  return s;
#endif
}

}  // namespace

// matmul_t_s8 (portable/attention_norm/attention_norm.h). MVE: blocks of 4
// columns (bt rows), every row of a against them: 4 VMLADAVA dot products
// and the row's sum (VADDVA) per 16 inputs, the k % 16 tail predicated (its
// zero lanes add 0); false when requant_v is not requantize() for the
// output's multiplier (fast.h). DSP: linear_s8 per row of a, always.
[[gnu::noinline]] inline bool matmul_t_s8(const int8_t* a, const int8_t* bt, int8_t* out, int32_t m, int32_t k,
                                          int32_t n, const QuantBatchMatmulParams& p) {
  const uint32_t lo = static_cast<uint32_t>(p.lhs_offset), ro = static_cast<uint32_t>(p.rhs_offset);
  const uint32_t both = static_cast<uint32_t>(k) * lo * ro;
#if TMCU_S8_MVE
  if (!requant_vector_ok(&p.output_multiplier, &p.output_shift, 1)) return false;
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  const int32_t m0 = p.output_multiplier, s0 = p.output_shift;
  const int32_t up = s0 > 0 ? s0 : 0, down = s0 < 0 ? s0 : 0, neg = s0 < 0 ? 1 : 0;
  const int32_t n16 = k >> 4;
  const mve_pred16_t tail = vctp8q(static_cast<uint32_t>(k & 15));
  for (int32_t j = 0; j < n; j += 4) {
    const int32_t live = n - j < 4 ? n - j : 4;
    const int8_t* w0 = bt + int64_t(j) * k;
    const int8_t* w1 = live > 1 ? w0 + k : w0;  // columns past n: row j again, not stored
    const int8_t* w2 = live > 2 ? w0 + 2 * k : w0;
    const int8_t* w3 = live > 3 ? w0 + 3 * k : w0;
    int32x4_t cols = vdupq_n_s32(0);
    cols = vsetq_lane_s32(static_cast<int32_t>(lo * bmm_row_sum(w0, k) + both), cols, 0);
    cols = vsetq_lane_s32(static_cast<int32_t>(lo * bmm_row_sum(w1, k) + both), cols, 1);
    cols = vsetq_lane_s32(static_cast<int32_t>(lo * bmm_row_sum(w2, k) + both), cols, 2);
    cols = vsetq_lane_s32(static_cast<int32_t>(lo * bmm_row_sum(w3, k) + both), cols, 3);
    const mve_pred16_t store = vctp32q(static_cast<uint32_t>(live));
    const int8_t* x = a;
    int8_t* y = out + j;
    for (int32_t i = 0; i < m; ++i, y += n) {
      int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, sx = 0;
      int32_t c = 0;
      for (int32_t t = n16; t > 0; --t, c += 16) {
        const int8x16_t xv = vldrbq_s8(x + c);
        sx = vaddvaq_s8(sx, xv);
        a0 = vmladavaq_s8(a0, xv, vldrbq_s8(w0 + c));
        a1 = vmladavaq_s8(a1, xv, vldrbq_s8(w1 + c));
        a2 = vmladavaq_s8(a2, xv, vldrbq_s8(w2 + c));
        a3 = vmladavaq_s8(a3, xv, vldrbq_s8(w3 + c));
      }
      if (k & 15) {
        const int8x16_t xv = vldrbq_z_s8(x + c, tail);
        sx = vaddvaq_s8(sx, xv);
        a0 = vmladavaq_s8(a0, xv, vldrbq_z_s8(w0 + c, tail));
        a1 = vmladavaq_s8(a1, xv, vldrbq_z_s8(w1 + c, tail));
        a2 = vmladavaq_s8(a2, xv, vldrbq_z_s8(w2 + c, tail));
        a3 = vmladavaq_s8(a3, xv, vldrbq_z_s8(w3 + c, tail));
      }
      x += k;
      int32x4_t v = vsetq_lane_s32(a0, cols, 0);  // the lanes' dots, then the column terms added
      v = vsetq_lane_s32(a1, v, 1);
      v = vsetq_lane_s32(a2, v, 2);
      v = vsetq_lane_s32(a3, v, 3);
      v = vaddq_s32(v, cols);
      v = vaddq_n_s32(v, static_cast<int32_t>(ro * static_cast<uint32_t>(sx)));
      const int32x4_t h = vqrdmulhq_n_s32(vqshlq_r_s32(v, up), m0);
      v = vrshlq_n_s32(vmlaq_n_s32(h, vshrq_n_s32(h, 31), neg), down);
      v = vaddq_n_s32(vminq_s32(vmaxq_s32(v, vdupq_n_s32(quant.lo)), vdupq_n_s32(quant.hi)), quant.offset);
      vstrbq_p_s32(y, v, store);
    }
  }
#else
  uint32_t bias[kBmmCols];  // the column terms plus the current row's: each row adds its change
  for (int32_t j0 = 0; j0 < n; j0 += kBmmCols) {
    const int32_t cols = n - j0 < kBmmCols ? n - j0 : kBmmCols;
    const int8_t* w = bt + int64_t(j0) * k;
    for (int32_t j = 0; j < cols; ++j) bias[j] = lo * bmm_row_sum(w + int64_t(j) * k, k) + both;
    uint32_t last = 0;
    for (int32_t i = 0; i < m; ++i) {
      const int8_t* x = a + int64_t(i) * k;
      const uint32_t row = ro * bmm_row_sum(x, k);
      for (int32_t j = 0; j < cols; ++j) bias[j] += row - last;
      last = row;
      linear_s8(x, w, reinterpret_cast<const int32_t*>(bias), &p.output_multiplier, &p.output_shift, 1, out + int64_t(i) * n + j0, 1, k, cols,
                p.output_offset, p.act_min, p.act_max);
    }
  }
#endif
  return true;
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_ATTENTION_NORM_BATCH_MATMUL_S8_H_
