#include "kernels/portable/conv/conv.h"

namespace torchmcu {
namespace portable {

namespace {

// Four partial sums: long dot products (640 terms in the MLPerf autoencoder)
// lose accuracy in one float accumulator, and independent sums also let the
// FPU pipeline overlap the multiply-adds.
float dot(const float* x, const float* w, int32_t n) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i] * w[i];
    s1 += x[i + 1] * w[i + 1];
    s2 += x[i + 2] * w[i + 2];
    s3 += x[i + 3] * w[i + 3];
  }
  for (; i < n; ++i) s0 += x[i] * w[i];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

void linear_f32(const float* in, const float* w, const float* bias, float* out,
                int32_t batch, int32_t in_features, int32_t out_features,
                ActRange act) {
  for (int32_t b = 0; b < batch; ++b) {
    const float* row_w = w;
    for (int32_t o = 0; o < out_features; ++o) {
      float acc = dot(in, row_w, in_features) + (bias ? bias[o] : 0.0f);
      row_w += in_features;
      acc = acc < act.min ? act.min : acc;
      *out++ = acc > act.max ? act.max : acc;
    }
    in += in_features;
  }
}

}  // namespace portable
}  // namespace torchmcu
