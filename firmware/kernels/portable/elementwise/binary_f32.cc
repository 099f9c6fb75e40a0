#include "kernels/portable/common/broadcast.h"
#include "kernels/portable/elementwise/elementwise.h"

namespace torchmcu {
namespace portable {
namespace {

struct AddOp {
  float operator()(float x, float y) const { return x + y; }
};
struct SubOp {
  float operator()(float x, float y) const { return x - y; }
};
struct MulOp {
  float operator()(float x, float y) const { return x * y; }
};
struct DivOp {
  float operator()(float x, float y) const { return x / y; }
};
// NaN propagates, as torch.maximum / torch.minimum.
struct MaxOp {
  float operator()(float x, float y) const { return x != x ? x : (x > y ? x : y); }
};
struct MinOp {
  float operator()(float x, float y) const { return x != x ? x : (x < y ? x : y); }
};

// The float ops in broadcast_binary's terms: operands pass through; the
// result is clamped to the fused activation range.
template <typename Fn>
struct Clamped {
  Fn fn;
  ActRange act;
  float lhs(float x) const { return x; }
  float rhs(float y) const { return y; }
  float combine(float x, float y) const {
    float v = fn(x, y);
    v = v < act.min ? act.min : v;
    return v > act.max ? act.max : v;
  }
};

template <typename Fn>
Clamped<Fn> clamped(Fn fn, ActRange act) {
  return Clamped<Fn>{fn, act};
}

}  // namespace

void add_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, clamped(AddOp(), act));
}

void sub_f32(const float* a, const int32_t* a_dims, const float* b, const int32_t* b_dims, float* out,
             const int32_t* out_dims, int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, clamped(SubOp(), act));
}

void div_f32(const float* a, const int32_t* a_dims, const float* b, const int32_t* b_dims, float* out,
             const int32_t* out_dims, int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, clamped(DivOp(), act));
}

void mul_f32(const float* a, const int32_t* a_dims, const float* b,
             const int32_t* b_dims, float* out, const int32_t* out_dims,
             int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, clamped(MulOp(), act));
}

void maximum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, clamped(MaxOp(), act));
}

void minimum_f32(const float* a, const int32_t* a_dims, const float* b,
                 const int32_t* b_dims, float* out, const int32_t* out_dims,
                 int32_t rank, ActRange act) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, clamped(MinOp(), act));
}

}  // namespace portable
}  // namespace torchmcu
