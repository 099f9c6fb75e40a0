#include "kernels/portable/attention_norm/attention_norm.h"

namespace torchmcu {
namespace portable {

void batch_matmul_f32(const float* a, const float* bm, float* out, int32_t batch,
                      int32_t m, int32_t k, int32_t n) {
  for (int32_t bt = 0; bt < batch; ++bt) {
    const float* ab = a + size_t(bt) * size_t(m) * size_t(k);
    const float* bb = bm + size_t(bt) * size_t(k) * size_t(n);
    float* ob = out + size_t(bt) * size_t(m) * size_t(n);
    for (int32_t i = 0; i < m; ++i) {
      float* row = ob + size_t(i) * size_t(n);
      for (int32_t j = 0; j < n; ++j) row[j] = 0.0f;
      // Row of a times the rows of b: b is read contiguously.
      for (int32_t kk = 0; kk < k; ++kk) {
        const float x = ab[size_t(i) * size_t(k) + size_t(kk)];
        const float* brow = bb + size_t(kk) * size_t(n);
        for (int32_t j = 0; j < n; ++j) row[j] += x * brow[j];
      }
    }
  }
}

}  // namespace portable
}  // namespace torchmcu
