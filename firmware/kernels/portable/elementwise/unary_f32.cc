#include <cmath>

#include "kernels/portable/elementwise/elementwise.h"

namespace torchmcu {
namespace portable {

void clamp_f32(const float* in, float* out, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; ++i) {
    float v = in[i];
    v = v < lo ? lo : v;
    out[i] = v > hi ? hi : v;
  }
}

void sigmoid_f32(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = in[i];
    // expf only ever sees a non-positive argument, so it cannot overflow and
    // the tiny tail for very negative x keeps its precision (no 1 - 1 ~ 0).
    const float e = expf(-fabsf(x));
    const float r = 1.0f / (1.0f + e);
    out[i] = x >= 0.0f ? r : e * r;
  }
}

void tanh_f32(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = tanhf(in[i]);
}

void hardswish_f32(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float x = in[i];
    float r = x + 3.0f;
    r = r < 0.0f ? 0.0f : r;
    r = r > 6.0f ? 6.0f : r;
    out[i] = x * r / 6.0f;  // as PyTorch: the product, then the division
  }
}

}  // namespace portable
}  // namespace torchmcu
