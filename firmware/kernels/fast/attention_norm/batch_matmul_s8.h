// Fast path of matmul_t_s8 (see fast.h), included by
// portable/attention_norm/attention_norm.cc only.
//
// A product with b given transposed, [n][k], is a fully connected layer per
// row of a, bt its weights, the two offsets folded into its bias:
//   sum_k (a_ik + lo)(b_jk + ro) = sum_k a_ik b_jk + (lo B_j + k lo ro) + ro A_i
// with B_j, A_i the row sums of bt and a. The column terms are computed once
// per block of kBmmCols columns, the row term added per row, and
// linear_s8 (its own fast path: conv/linear_s8.h, 4 rows per VMLADAVA input
// load on MVE, SMLAD over expanded pairs on DSP) does the dot products,
// the per-tensor requantization and the clamp. The sums wrap in 32 bits:
// the exact accumulator fits int32 (the glue's bmm_depth_ok), so the
// wrapped sum of the same terms in another order is that value.
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

// Columns per block: two int32 [kBmmCols] on the stack.
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

// matmul_t_s8 (portable/attention_norm/attention_norm.h): always applies.
[[gnu::noinline]] inline bool matmul_t_s8(const int8_t* a, const int8_t* bt, int8_t* out, int32_t m, int32_t k,
                                          int32_t n, const QuantBatchMatmulParams& p) {
  const uint32_t lo = static_cast<uint32_t>(p.lhs_offset), ro = static_cast<uint32_t>(p.rhs_offset);
  const uint32_t both = static_cast<uint32_t>(k) * lo * ro;
  uint32_t col[kBmmCols];
  int32_t bias[kBmmCols];
  for (int32_t j0 = 0; j0 < n; j0 += kBmmCols) {
    const int32_t cols = n - j0 < kBmmCols ? n - j0 : kBmmCols;
    const int8_t* w = bt + int64_t(j0) * k;
    for (int32_t j = 0; j < cols; ++j) col[j] = lo * bmm_row_sum(w + int64_t(j) * k, k) + both;
    for (int32_t i = 0; i < m; ++i) {
      const int8_t* x = a + int64_t(i) * k;
      const uint32_t row = ro * bmm_row_sum(x, k);
      for (int32_t j = 0; j < cols; ++j) bias[j] = static_cast<int32_t>(col[j] + row);
      linear_s8(x, w, bias, &p.output_multiplier, &p.output_shift, 1, out + int64_t(i) * n + j0, 1, k, cols,
                p.output_offset, p.act_min, p.act_max);
    }
  }
  return true;
}

}  // namespace fast
}  // namespace portable
}  // namespace torchmcu

#pragma GCC pop_options

#endif  // TMCU_S8_FAST

#endif  // TORCHMCU_KERNELS_FAST_ATTENTION_NORM_BATCH_MATMUL_S8_H_
