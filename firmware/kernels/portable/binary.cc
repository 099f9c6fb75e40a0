#include "portable_f32.h"

namespace torchmcu {
namespace portable {
namespace {

struct AddOp {
  float operator()(float x, float y) const { return x + y; }
};
struct MulOp {
  float operator()(float x, float y) const { return x * y; }
};
// NaN propagates, as torch.maximum / torch.minimum.
struct MaxOp {
  float operator()(float x, float y) const { return x != x ? x : (x > y ? x : y); }
};
struct MinOp {
  float operator()(float x, float y) const { return x != x ? x : (x < y ? x : y); }
};

template <typename Op>
inline float apply(Op op, float x, float y, ActRange act) {
  float v = op(x, y);
  v = v < act.min ? act.min : v;
  return v > act.max ? act.max : v;
}

// Element strides are 0 on broadcast axes. Axes are coalesced first (size-1
// axes dropped, neighbours with the same broadcast pattern merged), so the
// common cases collapse to one flat loop and the odometer runs rarely.
template <typename Op>
void broadcast_binary(const float* a, const int32_t* a_dims, const float* b,
                      const int32_t* b_dims, float* out,
                      const int32_t* out_dims, int32_t rank, ActRange act,
                      Op op) {
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
    if (r > 0 && (as == 0) == (sa[r - 1] == 0) &&
        (bs == 0) == (sb[r - 1] == 0)) {
      n[r - 1] *= extent;
    } else {
      n[r] = extent;
      sa[r] = as;
      sb[r] = bs;
      ++r;
    }
  }
  if (r == 0) {
    *out = apply(op, *a, *b, act);
    return;
  }

  int32_t idx[kMaxRank] = {};
  const int32_t inner = n[0];
  // After coalescing the innermost strides are 1 (present) or 0 (broadcast).
  const bool a_vec = sa[0] != 0;
  const bool b_vec = sb[0] != 0;
  for (;;) {
    if (a_vec && b_vec) {
      for (int32_t i = 0; i < inner; ++i) out[i] = apply(op, a[i], b[i], act);
    } else if (a_vec) {
      const float y = *b;
      for (int32_t i = 0; i < inner; ++i) out[i] = apply(op, a[i], y, act);
    } else if (b_vec) {
      const float x = *a;
      for (int32_t i = 0; i < inner; ++i) out[i] = apply(op, x, b[i], act);
    } else {
      const float v = apply(op, *a, *b, act);
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

}  // namespace

void add_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, act, AddOp());
}

void mul_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, act, MulOp());
}

void maximum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, act, MaxOp());
}

void minimum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, act, MinOp());
}

}  // namespace portable
}  // namespace torchmcu
