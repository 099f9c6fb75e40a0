#include <cmath>
#include <limits>

#include "kernels/portable/reduce/reduce.h"

namespace torchmcu {
namespace portable {

void softmax_f32(const float* in, float* out, int32_t outer, int32_t axis,
                 int32_t inner) {
  const size_t step = static_cast<size_t>(inner);
  const size_t span = step * static_cast<size_t>(axis);
  for (int32_t o = 0; o < outer; ++o) {
    for (int32_t i = 0; i < inner; ++i) {
      const float* x = in + i;
      float* y = out + i;
      const float* const x_end = x + span;
      // Subtracting the max keeps every exponent <= 0: no overflow, and the
      // largest term is exactly 1 so the sum is never 0.
      float m = -std::numeric_limits<float>::infinity();
      for (const float* p = x; p != x_end; p += step) m = *p > m ? *p : m;
      float sum = 0.0f;
      float* q = y;
      for (const float* p = x; p != x_end; p += step, q += step) {
        const float e = expf(*p - m);
        *q = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
      float* const y_end = y + span;
      for (q = y; q != y_end; q += step) *q *= inv;
    }
    in += span;
    out += span;
  }
}

}  // namespace portable
}  // namespace torchmcu
