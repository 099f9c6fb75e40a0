// Internal to the portable kernels: the broadcasting loop shared by the float
// and int8 element-wise binary ops.
#ifndef TORCHMCU_KERNELS_PORTABLE_BROADCAST_H_
#define TORCHMCU_KERNELS_PORTABLE_BROADCAST_H_

#include <cstdint>

#include "kernels/portable/common/types.h"

namespace torchmcu {
namespace portable {

// out = op.combine(op.lhs(a), op.rhs(b)) over broadcast shapes (dims as
// add_f32: all three at `rank`, a and b 1 or out's extent per axis). lhs/rhs
// map each operand on its own, so a broadcast operand is mapped once per
// inner run. Element strides are 0 on broadcast axes; axes are coalesced
// first (size-1 axes dropped, neighbours with the same broadcast pattern
// merged), so the common cases are one flat loop and the odometer runs rarely.
// a and b may be of different element types (PRELU_S16: int16 x, int8 alpha).
template <typename TA, typename TB, typename Out, typename Op>
void broadcast_binary(const TA* a, const int32_t* a_dims, const TB* b, const int32_t* b_dims,
                      Out* out, const int32_t* out_dims, int32_t rank, const Op& op) {
  // Index 0 is the innermost axis after coalescing.
  int32_t n[kMaxRank];
  int32_t sa[kMaxRank];
  int32_t sb[kMaxRank];
  int32_t r = 0;
  int32_t ca = 1, cb = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    const int32_t extent = out_dims[d];
    const int32_t as = a_dims[d] == 1 ? 0 : ca;
    const int32_t bs = b_dims[d] == 1 ? 0 : cb;
    ca *= a_dims[d];
    cb *= b_dims[d];
    if (extent == 1) continue;
    // A kept outer axis's stride equals inner stride * inner extent, so a
    // run of axes with the same pattern is one axis.
    if (r > 0 && (as == 0) == (sa[r - 1] == 0) && (bs == 0) == (sb[r - 1] == 0)) {
      n[r - 1] *= extent;
    } else {
      n[r] = extent;
      sa[r] = as;
      sb[r] = bs;
      ++r;
    }
  }
  if (r == 0) {
    *out = op.combine(op.lhs(*a), op.rhs(*b));
    return;
  }
  int32_t idx[kMaxRank] = {};
  const int32_t inner = n[0];
  // After coalescing the innermost strides are 1 (present) or 0 (broadcast).
  const bool a_vec = sa[0] != 0;
  const bool b_vec = sb[0] != 0;
  for (;;) {
    if (a_vec && b_vec) {
      for (int32_t i = 0; i < inner; ++i) out[i] = op.combine(op.lhs(a[i]), op.rhs(b[i]));
    } else if (a_vec) {
      const auto y = op.rhs(*b);
      for (int32_t i = 0; i < inner; ++i) out[i] = op.combine(op.lhs(a[i]), y);
    } else if (b_vec) {
      const auto x = op.lhs(*a);
      for (int32_t i = 0; i < inner; ++i) out[i] = op.combine(x, op.rhs(b[i]));
    } else {
      const Out v = op.combine(op.lhs(*a), op.rhs(*b));
      for (int32_t i = 0; i < inner; ++i) out[i] = v;
    }
    out += inner;
    // Odometer over the outer axes; out is dense so it only ever advances.
    int32_t d = 1;
    for (; d < r; ++d) {
      a += sa[d];
      b += sb[d];
      if (++idx[d] < n[d]) break;
      idx[d] = 0;
      a -= sa[d] * n[d];
      b -= sb[d] * n[d];
    }
    if (d == r) return;
  }
}

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_BROADCAST_H_
