// MASKED_FILL (float32, int8, int16: one template) and COMPARE (float32,
// int32 and U8 operands), broadcasting as add_f32 (common/broadcast.h).
#include "kernels/portable/common/broadcast.h"
#include "kernels/portable/elementwise/elementwise.h"

namespace torchmcu {
namespace portable {
namespace {

template <typename T>
struct Fill {
  T value;
  T lhs(T x) const { return x; }
  uint8_t rhs(uint8_t m) const { return m; }
  T combine(T x, uint8_t m) const { return m != 0 ? value : x; }
};

template <typename T>
struct Cmp {
  int32_t op;
  T lhs(T a) const { return a; }
  T rhs(T b) const { return b; }
  uint8_t combine(T a, T b) const {
    switch (op) {
      case kCompareLt: return a < b;
      case kCompareLe: return a <= b;
      case kCompareGt: return a > b;
      case kCompareGe: return a >= b;
      case kCompareEq: return a == b;
      default: return a != b;
    }
  }
};

}  // namespace

template <typename T>
void masked_fill(const T* x, const int32_t* x_dims, const uint8_t* mask, const int32_t* mask_dims, T value, T* out,
                 const int32_t* out_dims, int32_t rank) {
  broadcast_binary(x, x_dims, mask, mask_dims, out, out_dims, rank, Fill<T>{value});
}

template <typename T>
void compare(const T* a, const int32_t* a_dims, const T* b, const int32_t* b_dims, int32_t op, uint8_t* out,
             const int32_t* out_dims, int32_t rank) {
  broadcast_binary(a, a_dims, b, b_dims, out, out_dims, rank, Cmp<T>{op});
}

template void masked_fill<float>(const float*, const int32_t*, const uint8_t*, const int32_t*, float, float*,
                                 const int32_t*, int32_t);
template void masked_fill<int8_t>(const int8_t*, const int32_t*, const uint8_t*, const int32_t*, int8_t, int8_t*,
                                  const int32_t*, int32_t);
template void masked_fill<int16_t>(const int16_t*, const int32_t*, const uint8_t*, const int32_t*, int16_t,
                                   int16_t*, const int32_t*, int32_t);
template void compare<float>(const float*, const int32_t*, const float*, const int32_t*, int32_t, uint8_t*,
                             const int32_t*, int32_t);
template void compare<int32_t>(const int32_t*, const int32_t*, const int32_t*, const int32_t*, int32_t, uint8_t*,
                               const int32_t*, int32_t);
template void compare<uint8_t>(const uint8_t*, const int32_t*, const uint8_t*, const int32_t*, int32_t, uint8_t*,
                               const int32_t*, int32_t);

}  // namespace portable
}  // namespace torchmcu
