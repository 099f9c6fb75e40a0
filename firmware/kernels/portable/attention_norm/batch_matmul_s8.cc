#include "kernels/portable/attention_norm/attention_norm.h"
#include "kernels/portable/common/requantize.h"

namespace torchmcu {
namespace portable {

void batch_matmul_s8(const int8_t* a, const int8_t* bm, int8_t* out, int32_t batch, int32_t m,
                     int32_t k, int32_t n, const QuantBatchMatmulParams& p) {
  const s8::OutQuant quant(p.output_offset, p.act_min, p.act_max);
  int32_t acc[s8::kAccChunk];
  for (int32_t bt = 0; bt < batch; ++bt) {
    const int8_t* ab = a + size_t(bt) * size_t(m) * size_t(k);
    const int8_t* bb = bm + size_t(bt) * size_t(k) * size_t(n);
    int8_t* ob = out + size_t(bt) * size_t(m) * size_t(n);
    for (int32_t i = 0; i < m; ++i) {
      const int8_t* arow = ab + size_t(i) * size_t(k);
      int8_t* orow = ob + size_t(i) * size_t(n);
      // Columns in chunks of accumulators, so b's rows are read contiguously.
      for (int32_t j0 = 0; j0 < n; j0 += s8::kAccChunk) {
        const int32_t cols = n - j0 < s8::kAccChunk ? n - j0 : s8::kAccChunk;
        for (int32_t j = 0; j < cols; ++j) acc[j] = 0;
        for (int32_t kk = 0; kk < k; ++kk) {
          const int32_t x = arow[kk] + p.lhs_offset;
          const int8_t* brow = bb + size_t(kk) * size_t(n) + size_t(j0);
          for (int32_t j = 0; j < cols; ++j) acc[j] += x * (brow[j] + p.rhs_offset);
        }
        for (int32_t j = 0; j < cols; ++j) {
          orow[j0 + j] = quant(s8::requantize(acc[j], p.output_multiplier, p.output_shift));
        }
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
