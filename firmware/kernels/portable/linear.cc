#include "portable_f32.h"

namespace torchmcu {
namespace portable {

void linear_f32(const float* in, const float* w, const float* bias, float* out,
                int32_t batch, int32_t in_features, int32_t out_features,
                ActRange act) {
  for (int32_t b = 0; b < batch; ++b) {
    const float* row_w = w;
    for (int32_t o = 0; o < out_features; ++o) {
      float acc = bias ? bias[o] : 0.0f;
      const float* x = in;
      const float* const x_end = in + in_features;
      // Both operands are contiguous: one pointer walk, no index math.
      while (x != x_end) acc += *x++ * *row_w++;
      acc = acc < act.min ? act.min : acc;
      *out++ = acc > act.max ? act.max : acc;
    }
    in += in_features;
  }
}

}  // namespace portable
}  // namespace torchmcu
