#include "kernels/portable/reduce/reduce.h"

namespace torchmcu {
namespace portable {

void mean_f32(const float* in, const int32_t* dims, int32_t rank,
              uint32_t axis_mask, float* out) {
  // Coalesce: size-1 axes vanish and neighbouring axes that are both reduced
  // or both kept merge, so e.g. NHWC -> NC becomes [N][HW][C]. Index 0 is
  // innermost. Kept axes step through out densely; reduced ones step by 0.
  int32_t n[kMaxRank];
  size_t out_stride[kMaxRank];
  bool reduced[kMaxRank];
  int32_t r = 0;
  size_t out_count = 1, red_count = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    const int32_t e = dims[d];
    const bool red = (axis_mask >> d) & 1u;
    const size_t s = red ? 0 : out_count;
    if (red) {
      red_count *= static_cast<size_t>(e);
    } else {
      out_count *= static_cast<size_t>(e);
    }
    if (e == 1) continue;
    if (r > 0 && reduced[r - 1] == red) {
      n[r - 1] *= e;
    } else {
      n[r] = e;
      out_stride[r] = s;
      reduced[r] = red;
      ++r;
    }
  }
  for (size_t i = 0; i < out_count; ++i) out[i] = 0.0f;
  const float scale = 1.0f / static_cast<float>(red_count);
  if (r == 0) {
    out[0] = in[0] * scale;
    return;
  }

  const int32_t inner = n[0];
  const bool inner_reduced = reduced[0];
  int32_t idx[kMaxRank] = {};
  float* o = out;
  for (;;) {
    if (inner_reduced) {
      float acc = 0.0f;
      for (int32_t i = 0; i < inner; ++i) acc += in[i];
      *o += acc;
    } else {
      for (int32_t i = 0; i < inner; ++i) o[i] += in[i];
    }
    in += inner;
    int32_t d = 1;
    for (; d < r; ++d) {
      o += out_stride[d];
      if (++idx[d] < n[d]) break;
      idx[d] = 0;
      o -= out_stride[d] * static_cast<size_t>(n[d]);
    }
    if (d == r) break;
  }
  for (size_t i = 0; i < out_count; ++i) out[i] *= scale;
}

}  // namespace portable
}  // namespace torchmcu
